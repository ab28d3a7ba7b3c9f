"""A pytest plugin that runs the frameworks' own store and session tests against our
adapters: loaded with `-p benchmarks.framework_swap` by `benchmarks/framework_suites.py`
(read that module's docstring first), never by our own test suite.

The frameworks' tests build their stores and sessions from classes their modules
import: LangGraph's `InMemoryStore`, `SqliteStore` and `AsyncSqliteStore`, the Agents
SDK's `SQLiteSession` and `AsyncSQLiteSession`. Once the tests are collected, this
plugin rebinds those names, in each collected test module, to classes that make our
adapters instead (`MemoryLedgerStore`, `MemoryLedgerSession`) over a fresh ledger in a
temporary directory; the tests themselves run unchanged, fixtures included (a fixture
looks its classes up in its module when it runs).

What a stand-in adds is only what the backend it replaces needs of its callers and ours
does not: `setup()` (the SQL stores' migrations: there is no schema to create) and
`close()` (a connection to close). A file path names one ledger for the whole test, so
two sessions opened on the same file share their history as SQLite's do; `:memory:`
is a new ledger each time. The principal is a fixed test one: the frameworks address
items inside it, never across principals.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from memory_ledger.agents.langgraph_store import MemoryLedgerStore
from memory_ledger.agents.openai_session import MemoryLedgerSession
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.embedders import EMBEDDER_ENV
from memory_ledger.principal import Principal

PRINCIPAL = Principal("suite", "user")


def pytest_configure(config: pytest.Config) -> None:
    """The deterministic embedder (no model to load) for the ledgers of the run; a
    suite's own `embed` is used where its index config gives one."""
    os.environ.setdefault(EMBEDDER_ENV, "hashing")


class _Ledgers:
    """The ledgers one test opened, each on a directory of its own, closed after it."""

    def __init__(self) -> None:
        self._open: list[tuple[MemoryService, str]] = []
        self._by_path: dict[str, MemoryLedger] = {}

    def new(self) -> MemoryLedger:
        directory = tempfile.mkdtemp(prefix="ml-framework-suite-")
        service = MemoryService.open(directory)
        self._open.append((service, directory))
        return service.for_principal(PRINCIPAL)

    def for_path(self, path: Any) -> MemoryLedger:
        """One ledger per database file named in the test; `:memory:` is always new."""
        if str(path) == ":memory:":
            return self.new()
        key = str(Path(path).resolve())
        if key not in self._by_path:
            self._by_path[key] = self.new()
        return self._by_path[key]

    def close_all(self) -> None:
        for service, directory in self._open:
            service.close()
            shutil.rmtree(directory, ignore_errors=True)
        self._open.clear()
        self._by_path.clear()


LEDGERS = _Ledgers()


# -- LangGraph ---------------------------------------------------------------------------


class SuiteStore(MemoryLedgerStore):
    """`InMemoryStore(index=...)`, and what the SQLite stand-ins yield."""

    def __init__(self, *, index: Any = None, **_: Any) -> None:
        super().__init__(LEDGERS.new(), index=index)

    def setup(self) -> None:
        """The SQL stores create their tables here; a ledger needs nothing."""


class AsyncSuiteStore(MemoryLedgerStore):
    """What the `AsyncSqliteStore` stand-in yields: `setup` is awaited there."""

    def __init__(self, *, index: Any = None, **_: Any) -> None:
        super().__init__(LEDGERS.new(), index=index)

    async def setup(self) -> None:
        """The SQL stores create their tables here; a ledger needs nothing."""


class SqliteStoreStandIn:
    """`SqliteStore.from_conn_string(conn, index=...)`."""

    @staticmethod
    @contextmanager
    def from_conn_string(conn_string: str, *, index: Any = None, **_: Any) -> Iterator[SuiteStore]:
        yield SuiteStore(index=index)


class AsyncSqliteStoreStandIn:
    """`AsyncSqliteStore.from_conn_string(conn, index=...)`, an async context."""

    @staticmethod
    @asynccontextmanager
    async def from_conn_string(
        conn_string: str, *, index: Any = None, **_: Any
    ) -> AsyncIterator[AsyncSuiteStore]:
        yield AsyncSuiteStore(index=index)


# -- the OpenAI Agents SDK ---------------------------------------------------------------


class SuiteSession(MemoryLedgerSession):
    """`SQLiteSession(session_id, db_path, ..., session_settings=...)`."""

    def __init__(
        self,
        session_id: str,
        db_path: Any = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Any = None,
        **_: Any,
    ) -> None:
        super().__init__(session_id, LEDGERS.for_path(db_path), session_settings=session_settings)

    def close(self) -> None:
        """SQLite's closes its connections; the ledger is closed after the test."""


class AsyncSuiteSession(SuiteSession):
    """`AsyncSQLiteSession`, whose `close` is awaited."""

    async def close(self) -> None:  # type: ignore[override]
        await asyncio.sleep(0)


STAND_INS: dict[str, Any] = {
    "InMemoryStore": SuiteStore,
    "SqliteStore": SqliteStoreStandIn,
    "AsyncSqliteStore": AsyncSqliteStoreStandIn,
    "SQLiteSession": SuiteSession,
    "AsyncSQLiteSession": AsyncSuiteSession,
}


#: The tests that do not apply (node ids without parameters, one a line), from
#: benchmarks/data/framework_suites.toml: deselected, every parametrisation.
NOT_APPLICABLE_ENV = "ML_SUITE_NOT_APPLICABLE"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests that do not apply, then rebind the frameworks' classes to the
    stand-ins in every collected test module."""
    skipped = set(filter(None, os.environ.get(NOT_APPLICABLE_ENV, "").splitlines()))
    dropped = [item for item in items if item.nodeid.split("[")[0] in skipped]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]
    modules = {id(item.module): item.module for item in items if getattr(item, "module", None)}
    for module in modules.values():
        for name, stand_in in STAND_INS.items():
            if name in vars(module):
                setattr(module, name, stand_in)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """After the test's own fixtures are torn down: its ledgers are closed and removed."""
    LEDGERS.close_all()
