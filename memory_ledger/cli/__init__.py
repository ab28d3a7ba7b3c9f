"""The `memory-ledger` command line. It acts as a local operator: `--namespace` names
whose memory a command touches (the Python API and HTTP service take it from the
principal instead). Human tables by default, `--json` for machines.

The commands are grouped by concern in `memories`, `forget`, `ops` and `jobs` (what
they share is in `common`); importing them registers them on the one `app`."""

from __future__ import annotations

import importlib

from memory_ledger.cli.common import app

# This order is the order of `--help`.
for _module in (
    "memories",
    "forget",
    "audit",
    "lifecycle",
    "backups",
    "feed",
    "ops",
    "jobs",
    "agent_state",
    "agents",
    "access",
    "serve",
):
    importlib.import_module(f"memory_ledger.cli.{_module}")

__all__ = ["app"]
