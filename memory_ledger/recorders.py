"""Event recorders that also keep the key store, in the same transaction.

The `eventsourcing` library passes keyword arguments of `Application.save()` down to
the recorder (that is how it stores tracking records atomically); we use the same seam
to insert new data keys and destroy old ones together with the events that need them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore
from psycopg.sql import SQL

from memory_ledger.keystore import KEYS_TABLE, META_TABLE, KeyDestruction, KeySQL, NewKey


class SQLiteMemoryRecorder(SQLiteApplicationRecorder):
    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"):
        # WITHOUT ROWID: one B-tree instead of a table plus its primary-key index, so
        # each save writes fewer pages.
        self.key_sql = KeySQL("?", "BLOB", KEYS_TABLE, META_TABLE, " WITHOUT ROWID")
        super().__init__(datastore, events_table_name)

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *self.key_sql.create]

    def _insert_events(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        _apply_keys(self.key_sql, c, kwargs, secure_delete_pragma=True)
        return super()._insert_events(c, stored_events, **kwargs)


class PostgresMemoryRecorder(PostgresApplicationRecorder):
    def __init__(
        self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"
    ) -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema = datastore.schema
        self.key_sql = KeySQL("%s", "BYTEA", f"{schema}.{KEYS_TABLE}", f"{schema}.{META_TABLE}")
        self.sql_create_statements.extend(SQL(s) for s in self.key_sql.create)  # type: ignore[arg-type]

    def _insert_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        _apply_keys(self.key_sql, curs, kwargs, secure_delete_pragma=False)
        super()._insert_events(curs, stored_events, **kwargs)


def _apply_keys(
    key_sql: KeySQL, cursor: Any, kwargs: dict[str, Any], *, secure_delete_pragma: bool
) -> None:
    new_keys: Sequence[NewKey] = kwargs.get("data_keys") or ()
    destroyed: Sequence[KeyDestruction] = kwargs.get("destroy_keys") or ()
    if new_keys:
        key_sql.insert_keys(cursor, new_keys)
    if destroyed:
        if secure_delete_pragma:
            # Zero freed cell space on this connection so the wrapped bytes do not linger.
            cursor.execute("PRAGMA secure_delete = ON")
        key_sql.destroy_keys(cursor, destroyed)
