"""Every next command the CLI prints is one that works: a realistic flow (remember, plan
a forget in words, a clarification, its answer, the superseded plan, execution, the
request's status), each hint taken from the output and run as printed, on the same
data directory (named by the environment, as a person's shell would)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.cli import app
from memory_ledger.config import DATA_DIR_ENV

NS = "acme/alice"
HINT = re.compile(r"(?:^|: |`)(memory-ledger [^\n`]+)")


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))

    def invoke(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
        return result.exit_code, result.output

    return invoke


def hints(output: str) -> list[str]:
    return [m.strip() for m in HINT.findall(output)]


def follow(run, output: str, expected: int = 0) -> list[tuple[int, str]]:
    """Run every hint in `output`, as printed; each must exit with `expected`."""
    found = hints(output)
    assert found, output
    results = []
    for command in found:
        words = shlex.split(command)
        assert words[0] == "memory-ledger"
        code, said = run(*words[1:])
        assert code == expected, (command, said)
        results.append((code, said))
    return results


def remember(run, predicate: str, value: str, turn: str) -> str:
    code, output = run(
        "remember", "-n", NS, "--kind", "fact", "--subject", "user", "--predicate", predicate,
        "--value", value, "--turn-id", turn, "--json",
    )  # fmt: skip
    assert code == 0, output
    return str(json.loads(output[output.index("[") :])[0]["item_id"])


def test_every_hint_of_a_forget_in_words_runs(run) -> None:
    for turn, address in enumerate(("18 Haisong Road", "4 Elm Street", "9 Oak Lane")):
        remember(run, "home_address", address, f"t{turn}")
    phone = remember(run, "phone", "138 0000 1111", "t9")

    # a plan: its "to go ahead" executes it, and the outcome's hint shows the request
    code, output = run("forget", "plan", "-n", NS, "delete my phone number")
    assert code == 0 and hints(output) == [
        f"memory-ledger forget execute -n {NS} {_plan_id(output)}"
    ]
    [(_, executed)] = follow(run, output)
    assert "completed" in executed
    [(_, status)] = follow(run, executed)
    assert phone in status and "completed" in status

    # a question: its hint answers it with a candidate, a narrower plan
    code, output = run("forget", "plan", "-n", NS, "forget my old address")
    assert code == 8, output
    asked = _plan_id(output)
    [(_, answered)] = follow(run, output)
    replacement = _plan_id(answered)
    assert replacement != asked and "planned" in answered

    # the question's plan, executed now, names the plan that replaced it, and that hint runs
    code, output = run("forget", "execute", "-n", NS, asked)
    assert code == 6 and replacement in output, output
    assert hints(output) == [f"memory-ledger forget execute -n {NS} {replacement}"]
    [(_, executed)] = follow(run, output)
    follow(run, executed)  # the request's status

    # a plan's status names the plan to execute, or the request it became
    code, output = run("forget", "status", "-n", NS, asked)
    assert code == 0 and replacement in output
    [(_, replaced)] = follow(run, output)  # the plan that answered it
    follow(run, replaced)  # and the request that one became


def test_the_flat_forget_form_still_works(run) -> None:
    item = remember(run, "phone", "138 0000 1111", "t1")
    code, output = run("forget", "-n", NS, "--request", "delete my phone number")
    assert code == 0, output
    code, output = run("forget", "-n", NS, "--plan", _plan_id(output))
    assert code == 0 and "completed" in output, output
    other = remember(run, "phone", "139 0000 2222", "t2")
    code, output = run("forget", "-n", NS, "--memory", other, "--json")
    assert code == 0 and json.loads(output)["status"] == "completed"
    code, output = run("forget", "scope", "-n", NS, item, "--dry-run")
    assert code == 0, output


def test_options_before_a_subcommand_are_refused(run) -> None:
    code, output = run("forget", "--memory", "x", "scope", "-n", NS, "y")
    assert code == 2 and "after the subcommand" in output


def _plan_id(output: str) -> str:
    found = re.search(r"plan (plan-[0-9a-f]{16})", output)
    assert found, output
    return found.group(1)


SOURCE = Path(__file__).resolve().parent.parent / "memory_ledger"
QUOTED = re.compile(r"`(memory-ledger [^`]+)`")


def test_every_quoted_command_in_the_code_names_a_real_command_and_options() -> None:
    """The hints built outside the CLI (errors, the consistency check, doctor): every
    `memory-ledger ...` quoted in a message names a command and options that exist."""
    import typer.main

    root = typer.main.get_command(app)
    checked = 0
    for path in SOURCE.rglob("*.py"):
        # messages are split over adjacent literals: join them before looking
        text = re.sub(r'"\s*\n\s*f?"', "", path.read_text(encoding="utf-8"))
        for command in QUOTED.findall(text):
            words = [
                w for w in command.replace("(", " ").split()[1:] if w not in ("...", "--help")
            ]  # every command and group answers --help
            node = root
            while hasattr(node, "commands") and words and words[0] in node.commands:
                node = node.commands[words.pop(0)]
            assert not hasattr(node, "commands") or not words, (path.name, command)
            names = {n for p in node.params for n in (*p.opts, *p.secondary_opts)}
            for word in words:
                if word.startswith("-"):
                    assert word.split("=")[0] in names, (path.name, command, word)
            checked += 1
    assert checked >= 8


@pytest.mark.slow
def test_a_hint_names_the_store_the_command_was_given(tmp_path: Path) -> None:
    """Given `--data-dir` on the command line (not from the environment), the hints
    carry it: typed as printed from the same folder, in a new process, they open the
    same store (without it, `forget execute` would look for ./.memory-ledger)."""
    import os
    import subprocess
    import sys

    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200")
    env["MEMORY_LEDGER_EMBEDDER"] = "hashing"

    def shell(command: str) -> str:
        done = subprocess.run(
            shlex.split(command), cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        return done.stdout

    shell(
        f"memory-ledger remember -n {NS} --data-dir ./store --kind fact --subject user "
        "--predicate phone --value 206-555-0148 --turn-id t1"
    )
    planned = shell(f'memory-ledger forget plan -n {NS} --data-dir ./store "forget my phone"')
    [go] = [h for h in hints(planned) if " execute " in h]
    assert go.endswith(" --data-dir store")
    executed = shell(go)
    assert "erased from every store" in executed
    for hint_text in hints(executed):
        shell(hint_text)
    assert not (tmp_path / ".memory-ledger").exists()
