"""The PostgreSQL event recorder that also keeps the key store (see `recorders`), in a
module of its own: only a PostgreSQL store imports psycopg and `eventsourcing.postgres`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg.sql import SQL, Composed

from memory_ledger.keystore import KEYS_TABLE, META_TABLE, KeySQL
from memory_ledger.recorders import _apply_keys, _check_versions


class PostgresMemoryRecorder(PostgresApplicationRecorder):
    def __init__(
        self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"
    ) -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema = datastore.schema
        self.key_sql = KeySQL("%s", "BYTEA", f"{schema}.{KEYS_TABLE}", f"{schema}.{META_TABLE}")
        # The library keeps Composed statements (its own are SQL(...).format(...)); ours
        # are plain text, so each is a Composed of one SQL part.
        self.sql_create_statements.extend(Composed([SQL(s)]) for s in self.key_sql.create)

    def _insert_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        if kwargs.get("expect_versions"):
            # The library takes this lock before inserting; taking it before the check
            # serialises the check with every other append.
            self._lock_table(curs)
            table = f"{self.datastore.schema}.{self.events_table_name}"
            _check_versions(curs, table, "%s", kwargs, hex_ids=False)
        _apply_keys(self.key_sql, curs, kwargs, secure_delete_pragma=False)
        super()._insert_events(curs, stored_events, **kwargs)
