"""The `memory-ledger` command line. It acts as a local operator: `--namespace` names
whose memory a command touches (the Python API and HTTP service take it from the
principal instead). Human tables by default, `--json` for machines.

The commands are grouped by concern in cli_memories, cli_forget and cli_ops; importing
them registers them on the one `app`."""

from __future__ import annotations

import importlib

from memory_ledger.cli_common import app

# This order is the order of `--help`.
for _module in ("cli_memories", "cli_forget", "cli_ops"):
    importlib.import_module(f"memory_ledger.{_module}")

__all__ = ["app"]

if __name__ == "__main__":
    app()
