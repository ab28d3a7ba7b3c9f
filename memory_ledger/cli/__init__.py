"""The `memory-ledger` command line. It acts as a local operator: `--namespace` names
whose memory a command touches (the Python API and HTTP service take it from the
principal instead). Human tables by default, `--json` for machines.

The commands are grouped by concern in `memories`, `forget`, `ops` and `jobs` (what
they share is in `common`); importing them registers them on the one `app`. They import
only typer, rich and light modules at the top, and the service stack inside the command
that uses it: `--help`, `--version` and a usage error start in a fraction of a second
(tests/test_cli_start.py, benchmarks/bench_cli_start.py)."""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from memory_ledger.cli.common import app

# This order is the order of `--help`.
for _module in (
    "memories",
    "forget",
    "audit",
    "lifecycle",
    "backups",
    "keys",
    "feed",
    "ops",
    "jobs",
    "agent_state",
    "agents",
    "access",
    "serve",
):
    importlib.import_module(f"memory_ledger.cli.{_module}")


def _print_version(value: bool) -> None:
    if value:
        from memory_ledger import __version__

        print(f"memory-ledger {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """The options before a command."""


__all__ = ["app"]
