"""The eventsourcing library's own application-recorder test suite, run unchanged against
both of our recorders (memory_ledger/recorders.py, memory_ledger/postgres_recorder.py):
they override the library's private `_insert_events` (to keep the key store in the same
transaction and check versions first), so the library's contract is checked on them, as
the library checks its own recorders."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from eventsourcing.tests.persistence import ApplicationRecorderTestCase
from psycopg.conninfo import conninfo_to_dict

from memory_ledger.postgres_recorder import PostgresMemoryRecorder
from memory_ledger.recorders import SQLiteMemoryRecorder


class TestSQLiteMemoryRecorder(ApplicationRecorderTestCase[SQLiteMemoryRecorder]):
    def setUp(self) -> None:
        super().setUp()
        self.directory = Path(tempfile.mkdtemp(prefix="ml-recorder-"))

    def tearDown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        super().tearDown()

    def create_recorder(self) -> SQLiteMemoryRecorder:
        # a file, as the product's store is: the concurrency cases use several connections
        datastore = SQLiteDatastore(str(self.directory / f"{uuid.uuid4().hex}.db"))
        recorder = SQLiteMemoryRecorder(datastore)
        recorder.create_table()
        return recorder


@pytest.mark.postgres
class TestPostgresMemoryRecorder(ApplicationRecorderTestCase[PostgresMemoryRecorder]):
    """In a database of its own per test (`pg_url`: conftest.py's, skipped or failed as the
    other PostgreSQL tests are when the server is unreachable)."""

    @pytest.fixture(autouse=True)
    def _database(self, pg_url: str) -> Iterator[None]:
        self.server = conninfo_to_dict(pg_url)
        self.datastores: list[PostgresDatastore] = []
        yield
        for datastore in self.datastores:
            datastore.close()

    def create_recorder(self) -> PostgresMemoryRecorder:
        server = self.server
        datastore = PostgresDatastore(
            str(server["dbname"]),
            str(server.get("host", "127.0.0.1")),
            str(server.get("port", 5432)),
            str(server.get("user", "postgres")),
            str(server.get("password", "")),
            pool_size=4,
            max_overflow=4,
        )
        self.datastores.append(datastore)
        recorder = PostgresMemoryRecorder(datastore)
        recorder.create_table()
        return recorder
