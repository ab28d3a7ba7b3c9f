"""memory-ledger: event-sourced memory for AI agents, with provable forgetting.

The public API is importable from here (`from memory_ledger import MemoryService,
Principal, NotFound`) and is loaded on first use (PEP 562): `import memory_ledger` costs
only this module, so a command line, a `--version` or a `--help` never pays for the
service stack (SQLAlchemy, numpy, eventsourcing, the embedder) it does not use.
"""

from __future__ import annotations

import logging
from importlib import import_module
from typing import TYPE_CHECKING, Any

from memory_ledger import _source_tree

_source_tree.register()

# A library never prints on its own: applications decide where audit logs go.
logging.getLogger("memory_ledger").addHandler(logging.NullHandler())

#: Every public name, and the module that defines it.
_EXPORTS: dict[str, str] = {
    # opening a store, and a principal's view of it
    "MemoryService": "memory_ledger.api",
    "MemoryLedger": "memory_ledger.api",
    "open_memory": "memory_ledger.api",
    "Principal": "memory_ledger.principal",
    "Settings": "memory_ledger.config",
    # what reads and writes give back
    "Remembered": "memory_ledger.views",
    "Added": "memory_ledger.views",
    "Memory": "memory_ledger.views",
    "ItemState": "memory_ledger.views",
    "Summary": "memory_ledger.views",
    "RecallPage": "memory_ledger.views",
    "Context": "memory_ledger.retrieval.context",
    "ContextItem": "memory_ledger.retrieval.context",
    "RequestReport": "memory_ledger.forgetting.requests",
    "ForgetPlan": "memory_ledger.forgetting.planning",
    "PlanOutcome": "memory_ledger.forgetting.planning",
    "Receipt": "memory_ledger.stores",
    "Evidence": "memory_ledger.stores",
    # the errors (memory_ledger/errors.py): each has an exit code the CLI exits with
    "MemoryLedgerError": "memory_ledger.errors",
    "InvalidWrite": "memory_ledger.errors",
    "ConfigurationError": "memory_ledger.errors",
    "BackendUnavailable": "memory_ledger.errors",
    "StoreNotFound": "memory_ledger.errors",
    "WrongMasterKey": "memory_ledger.errors",
    "CorruptKeyEntry": "memory_ledger.errors",
    "MissingKey": "memory_ledger.errors",
    "NotFound": "memory_ledger.errors",
    "InvalidTransition": "memory_ledger.errors",
    "StaleDerivation": "memory_ledger.errors",
    "IndexMismatch": "memory_ledger.errors",
    "IntegrityError": "memory_ledger.errors",
    "KeyCheckMissing": "memory_ledger.errors",
    "LedgerMissing": "memory_ledger.errors",
    "ProjectionsDamaged": "memory_ledger.errors",
    "ProjectionMismatch": "memory_ledger.errors",
    "CursorGone": "memory_ledger.errors",
    "Unauthenticated": "memory_ledger.errors",
    "Forbidden": "memory_ledger.errors",
}

# Written out (not built from _EXPORTS) so that tools read it; a test holds the two equal.
__all__ = [
    "Added",
    "BackendUnavailable",
    "ConfigurationError",
    "Context",
    "ContextItem",
    "CorruptKeyEntry",
    "CursorGone",
    "Evidence",
    "Forbidden",
    "ForgetPlan",
    "IndexMismatch",
    "IntegrityError",
    "InvalidTransition",
    "InvalidWrite",
    "ItemState",
    "KeyCheckMissing",
    "LedgerMissing",
    "Memory",
    "MemoryLedger",
    "MemoryLedgerError",
    "MemoryService",
    "MissingKey",
    "NotFound",
    "PlanOutcome",
    "Principal",
    "ProjectionMismatch",
    "ProjectionsDamaged",
    "RecallPage",
    "Receipt",
    "Remembered",
    "RequestReport",
    "Settings",
    "StaleDerivation",
    "StoreNotFound",
    "Summary",
    "Unauthenticated",
    "WrongMasterKey",
    "__version__",
    "open_memory",
]

if TYPE_CHECKING:  # what type checkers and editors see; at run time, __getattr__ below
    from memory_ledger.api import MemoryLedger, MemoryService, open_memory
    from memory_ledger.config import Settings
    from memory_ledger.errors import (
        BackendUnavailable,
        ConfigurationError,
        CorruptKeyEntry,
        CursorGone,
        Forbidden,
        IndexMismatch,
        IntegrityError,
        InvalidTransition,
        InvalidWrite,
        KeyCheckMissing,
        LedgerMissing,
        MemoryLedgerError,
        MissingKey,
        NotFound,
        ProjectionMismatch,
        ProjectionsDamaged,
        StaleDerivation,
        StoreNotFound,
        Unauthenticated,
        WrongMasterKey,
    )
    from memory_ledger.forgetting.planning import ForgetPlan, PlanOutcome
    from memory_ledger.forgetting.requests import RequestReport
    from memory_ledger.principal import Principal
    from memory_ledger.retrieval.context import Context, ContextItem
    from memory_ledger.stores import Evidence, Receipt
    from memory_ledger.views import Added, ItemState, Memory, RecallPage, Remembered, Summary

    __version__: str


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
    elif name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _version() -> str:
    """The installed distribution's version; from a source tree that is not installed,
    the version in its pyproject.toml; else `0+unknown`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memory-ledger")
    except PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    try:
        with (Path(__file__).resolve().parent.parent / "pyproject.toml").open("rb") as handle:
            project = tomllib.load(handle).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "0+unknown"
    found = project.get("version") if project.get("name") == "memory-ledger" else None
    return found if isinstance(found, str) else "0+unknown"
