"""Event recorders that also keep the key store, in the same transaction.

The `eventsourcing` library passes keyword arguments of `Application.save()` down to
the recorder (that is how it stores tracking records atomically); we use the same seam
to insert new data keys and destroy old ones together with the events that need them.

The PostgreSQL recorder is in `postgres_recorder`: psycopg and the library's PostgreSQL
module cost a SQLite store's every command about 0.2 s to import (issue 37).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from memory_ledger.errors import StaleDerivation
from memory_ledger.keystore import (
    KEYS_TABLE,
    META_TABLE,
    KeyDestruction,
    KeySQL,
    NewKey,
    values,
)


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
        # The key writes come first: they take SQLite's write lock, so the version check
        # below sees every commit that could race with this one.
        _apply_keys(self.key_sql, c, kwargs, secure_delete_pragma=True)
        _check_versions(c, self.events_table_name, "?", kwargs, hex_ids=True)
        if len(stored_events) < 2:
            return super()._insert_events(c, stored_events, **kwargs)
        # One statement for the batch (the library executes one per event, to read each
        # row id): the write lock is held from the first insert on, so the batch's row
        # ids, which are the notification ids, are the consecutive ones ending at the
        # last inserted (the events table never loses a row).
        c.executemany(
            self.insert_events_statement,
            [
                (
                    s.originator_id.hex if isinstance(s.originator_id, UUID) else s.originator_id,
                    s.originator_version,
                    s.topic,
                    s.state,
                )
                for s in stored_events
            ],
        )
        c.execute("SELECT last_insert_rowid()")
        last = int(c.fetchone()[0])
        return list(range(last - len(stored_events) + 1, last + 1))


def _apply_keys(
    key_sql: KeySQL, cursor: Any, kwargs: dict[str, Any], *, secure_delete_pragma: bool
) -> None:
    new_keys: Sequence[NewKey] = kwargs.get("data_keys") or ()
    destroyed: Sequence[KeyDestruction] = kwargs.get("destroy_keys") or ()
    if secure_delete_pragma and (new_keys or destroyed):
        # Zero freed cell space on this connection before ANY key write, inserts too: an
        # insert that splits a page moves live keys to a new page, and without it their
        # old copies stay behind in the old page's free space, where the key proof of a
        # later forget finds them after those keys are destroyed.
        cursor.execute("PRAGMA secure_delete = ON")
    if new_keys:
        key_sql.insert_keys(cursor, new_keys)
    if destroyed:
        key_sql.destroy_keys(cursor, destroyed)


def _check_versions(
    cursor: Any, table: str, param: str, kwargs: dict[str, Any], *, hex_ids: bool
) -> None:
    """Refuse a derived write whose inputs changed after they were read.

    Any later event of an input (an update, a suppression, a tombstone) raises its
    version, so comparing versions inside the append's transaction is enough to keep
    background work from writing erased or suppressed content back.
    """
    expected: Sequence[tuple[UUID, int]] = kwargs.get("expect_versions") or ()
    if not expected:
        return
    ids = [i.hex if hex_ids else i for i, _ in expected]
    cursor.execute(
        f"SELECT originator_id, MAX(originator_version) FROM {table} "
        f"WHERE originator_id IN ({', '.join([param] * len(ids))}) GROUP BY originator_id",
        tuple(ids),
    )
    current = {
        str(values(row)[0]).replace("-", ""): int(values(row)[1]) for row in cursor.fetchall()
    }
    for item_id, version in expected:
        now = current.get(item_id.hex)
        if now != version:
            raise StaleDerivation(
                f"derived write refused at commit: input {item_id} was read at version "
                f"{version} and is now at version {now}; nothing was stored"
            )
