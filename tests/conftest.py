"""Shared fixtures: every backend-sensitive test runs on SQLite and on PostgreSQL.

PostgreSQL tests create and drop their own scratch database, so runs never see each
other's data. Without a reachable server they are skipped locally, but under CI=true an
unreachable PostgreSQL fails the run: a silently skipped backend would hide regressions.
"""

from __future__ import annotations

import os
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.embedders import EMBEDDER_ENV
from memory_ledger.principal import Principal

PG_ADMIN = os.environ.get("MEMORY_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
# The CLI's rich consoles fix their width from COLUMNS when they are created (at import):
# a caller's COLUMNS=80 would wrap every in-process CLI call's output at 80, whatever
# width the test asks for. Each test that cares sets its own (CliRunner's env, or a
# subprocess's).
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

ALICE = Principal("acme", "alice")
BOB = Principal("acme", "bob")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MEMORY_LEDGER_") and name != "MEMORY_LEDGER_TEST_PG":
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _hashing_embedder(_clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The instant, deterministic embedder everywhere (the USE model takes a second to
    load). It depends on `_clean_env`, which clears MEMORY_LEDGER_*, so it runs after it.
    Tests of the default embedder pass one explicitly or set the variable themselves."""
    monkeypatch.setenv(EMBEDDER_ENV, "hashing")


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=5):
            pass
    except psycopg.Error as exc:
        message = f"PostgreSQL at {PG_ADMIN} is unreachable: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: the PostgreSQL suite must run)", pytrace=False)
        pytest.skip(message)
    return PG_ADMIN


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    name = f"ml_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = pg_admin_url.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def settings(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    data_dir = tmp_path / "data"
    if backend == "sqlite":
        return Settings.resolve(data_dir)
    return Settings.resolve(data_dir, request.getfixturevalue("pg_url"))


@pytest.fixture
def where(settings: Settings) -> list[str]:
    """CLI options that open the test's store."""
    from factories import cli_location

    return cli_location(settings)


@pytest.fixture
def service(settings: Settings) -> Iterator[MemoryService]:
    with MemoryService(settings) as svc:
        yield svc


@pytest.fixture
def alice(service: MemoryService) -> MemoryLedger:
    return service.for_principal(ALICE)


@pytest.fixture
def bob(service: MemoryService) -> MemoryLedger:
    return service.for_principal(BOB)


# Extra stores (MEMORY_LEDGER_EXTRA_STORES) for tests: a subscriber that fails its first
# acknowledgement (`ml_test_plugins:factory`) and one that never returns (`:slow`), to
# kill a process in the middle of a fan-out.
FLAKY_STORE = '''
from memory_ledger.stores import Evidence, Receipt

class FlakyStore:
    """A subscriber that keeps copies and fails its first acknowledgement."""
    name = "flaky_subscriber"
    holds = "copies kept by an external subscriber"

    def __init__(self, log, runner, settings):
        self.marker = settings.data_dir.parent / "flaky-failed-once"

    def erase(self, item_ids):
        if not self.marker.exists():
            self.marker.write_text("x")
            raise ConnectionError("subscriber unreachable")
        return Receipt(self.name, "acknowledged", len(item_ids), "ok", {"acked": len(item_ids)})

    def verify_absent(self, item_ids):
        return Evidence(self.name, self.marker.exists(), {})

    def rebuild(self):
        return 0

    def at_rest(self):
        return iter(())  # its copies are elsewhere: what it shows, it holds sealed

def factory(log, runner, settings):
    return FlakyStore(log, runner, settings)

SLOW_GATE = None

class SlowStore(FlakyStore):
    name = "slow_subscriber"

    def erase(self, item_ids):
        (self.marker.parent / "slow-store-entered").write_text("x")
        import time
        time.sleep(600)

def slow(log, runner, settings):
    return SlowStore(log, runner, settings)
'''


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "ml_test_plugins.py").write_text(textwrap.dedent(FLAKY_STORE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path
