"""How the command line reads to a person who mistypes it or asks for `--help`.

typer's defaults misled newcomers twice. An unknown option was matched to the others
by difflib's ratio, which favours shared letters over their order: `--querry` got
"Possible options: --url". Here the suggestion is the option nearest by edit distance
(a typo is a letter or two away), none when nothing is near, and when the word is a
positional argument's name, a note that it is given without `--`. And `--help` showed
every flag (`--json`, `--help`) with a `<bool>` type, as if it took a value: a flag
shows no type.

`Commands` is the top-level group (`typer.Typer(cls=Commands)`): it sees every usage
error of every subcommand, and holds the whole command tree when it is built."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import typer
from typer._click.exceptions import NoSuchOption  # typer's own click: not re-exported
from typer.core import TyperArgument, TyperGroup, TyperOption

#: How many edits a typo may be from an option to be suggested, per letter of the typo.
EDITS_PER_LETTER = 1 / 3


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance with adjacent transpositions counted as one edit (`--qeury`
    is one typo of `--query`, not two)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            best = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, previous2[j - 2] + 1)
            current.append(best)
        previous2, previous = previous, current
    return previous[-1]


def nearest(typo: str, names: list[str]) -> list[str]:
    """The names closest to `typo` by edit distance (ties all kept), if close enough to
    be a typo of it: at most a third of its letters, and at least one, edited."""
    word = typo.lstrip("-")
    limit = max(1, int(len(word) * EDITS_PER_LETTER))
    distances = {name: edit_distance(word, name.lstrip("-")) for name in set(names)}
    best = min(distances.values(), default=limit + 1)
    if best > limit:
        return []
    return sorted(name for name, d in distances.items() if d == best)


def _long_options(command: Any, ctx: Any) -> list[str]:
    return [
        name
        for param in command.get_params(ctx)
        if isinstance(param, TyperOption)
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    ]


def _arguments(command: Any, ctx: Any) -> list[str]:
    return [p.name for p in command.get_params(ctx) if isinstance(p, TyperArgument) and p.name]


def explain_unknown_option(exc: NoSuchOption) -> None:
    """Replace difflib's suggestions on a NoSuchOption with the nearest options, or a
    note that the word names a positional argument."""
    ctx = exc.ctx
    if ctx is None or not exc.option_name.startswith("--"):
        return
    command = ctx.command
    exc.possibilities = nearest(exc.option_name, _long_options(command, ctx))
    if exc.possibilities:
        return
    argument = nearest(exc.option_name, _arguments(command, ctx))
    if argument:
        exc.message += f" ({argument[0]} is an argument: give its value without a flag)"


def _tree(command: Any) -> Iterator[Any]:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _tree(sub)


def show_flags_as_flags(command: Any) -> None:
    """A flag takes no value: its type column in `--help` stays empty (typer's rich help
    prints the metavar when one is set, and `<bool>` when none is)."""
    help_option = command.get_help_option(typer.Context(command))
    for param in [*command.params, *([help_option] if help_option else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class Commands(TyperGroup):
    """The `memory-ledger` group: flags shown as flags in every command's help, and
    typos of options answered with the nearest option."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for command in _tree(self):
            show_flags_as_flags(command)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except NoSuchOption as exc:
            explain_unknown_option(exc)
            raise
