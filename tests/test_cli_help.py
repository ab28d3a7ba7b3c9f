"""Every command's `--help` works: the top level in a fresh process (as a person runs it),
then every command and subcommand of the typer tree in this one. A help text is rich
markup, so a bracket in one (`tenant/user[/project]`) must be escaped, or printing the
help crashes with a MarkupError instead of showing it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner
from waits import HUNG

from memory_ledger.cli import app
from memory_ledger.cli.usage import edit_distance, nearest


def _paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every command below `command` (groups included), depth first."""
    if not hasattr(command, "list_commands"):
        return
    context = typer.Context(command)
    for name in command.list_commands(context):
        sub = command.get_command(context, name)
        yield (*path, name)
        yield from _paths(sub, (*path, name))


COMMANDS = list(_paths(typer.main.get_command(app)))


def test_the_tree_is_walked() -> None:
    assert ("remember",) in COMMANDS and ("tokens", "create") in COMMANDS
    assert any(len(p) == 2 for p in COMMANDS)  # the subcommands too, not only groups


@pytest.mark.slow
def test_the_top_level_help_in_a_fresh_process() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    done = subprocess.run(
        [sys.executable, "-m", "memory_ledger.cli", "--help"],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "120"},
        timeout=HUNG,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout and "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_has_a_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "120"})
    output = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 0, output
    assert output.strip() and "Usage" in output
    assert "Traceback" not in output
    assert "<bool>" not in output  # a flag takes no value: it shows no type


def test_a_bracket_in_a_help_text_is_shown_as_written() -> None:
    result = CliRunner().invoke(app, ["tokens", "create", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "tenant/user[/project]" in result.output


@pytest.mark.parametrize(
    ("args", "said", "not_said"),
    [
        (["recall", "--namespce", "a/b"], "(Possible options: --namespace)", "--url"),
        (["tokens", "create", "--rol", "agent"], "(Possible options: --role)", "--url"),
        (["recall", "--querry", "x"], "No such option: --querry", "Possible options"),
        (["context", "--querry", "x"], "query is an argument: give its value without", "--url"),
    ],
)
def test_an_unknown_option_suggests_the_nearest_by_edit_distance(
    args: list[str], said: str, not_said: str
) -> None:
    """difflib suggested `--url` for `--querry` (shared letters, not a typo of it)."""
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert said in result.output and not_said not in result.output, result.output


def test_edit_distance_counts_a_swap_as_one_typo() -> None:
    assert edit_distance("qeury", "query") == 1
    assert edit_distance("querry", "query") == 1
    assert edit_distance("querry", "url") == 4
    assert nearest("--jsno", ["--json", "--help"]) == ["--json"]
