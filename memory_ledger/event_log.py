"""The event-sourced memory log: an `eventsourcing` Application plus its key store.

This is the only writer of events and keys. It seals personal fields before an event
exists, and it reads them back through the key store, answering ERASED (never an
exception) when a key has been destroyed, so replays and rebuilds keep working.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import Notification

from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey, new_data_key, seal, unseal
from memory_ledger.domain import MemoryItem
from memory_ledger.errors import BackendUnavailable, InvalidTransition, NotFound
from memory_ledger.keystore import (
    FORMAT_VERSION,
    KeyDestruction,
    KeyRing,
    KeySQL,
    NewKey,
    values,
)
from memory_ledger.residue import checkpoint_evidence


class _Erased:
    """Marker returned in place of content whose key was destroyed."""

    _instance: _Erased | None = None

    def __new__(cls) -> _Erased:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ERASED"

    __str__ = __repr__


ERASED = _Erased()
Fields = dict[str, str]


class MemoryLog(Application[UUID]):
    name = "memory_ledger"


class EventLog:
    """The memory log with sealing, key creation and key destruction wired together."""

    def __init__(self, settings: Settings, master: MasterKey) -> None:
        self.settings = settings
        self.master = master
        try:
            self.app = MemoryLog(env=settings.event_store_env())
        except Exception as exc:  # the library wraps driver errors in many types
            raise BackendUnavailable(
                f"cannot open the event store at {settings.describe()}: {exc}"
            ) from None
        self.recorder: Any = self.app.recorder
        self.key_sql: KeySQL = self.recorder.key_sql
        try:
            self._check_master_key()
        except Exception:
            self.app.close()
            raise

    def close(self) -> None:
        self.app.close()

    # -- master key --------------------------------------------------------------------

    def _check_master_key(self) -> None:
        table, p = self.key_sql.meta_table, self.key_sql.param
        with self.recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(f"SELECT name, value FROM {table}")
            meta = dict(values(row) for row in cursor.fetchall())
            if "key_check" not in meta:
                cursor.execute(
                    f"INSERT INTO {table} (name, value) VALUES ({p}, {p}), ({p}, {p})",
                    ("key_check", self.master.check_value(), "format_version", FORMAT_VERSION),
                )
                return
        self.master.verify(meta["key_check"])

    # -- writing -----------------------------------------------------------------------

    def seal_new(self, item_id: UUID, generation: int, fields: Fields) -> tuple[str, NewKey]:
        data_key = new_data_key()
        sealed = seal(data_key, str(item_id), generation, _encode(fields))
        wrapped = self.master.wrap(str(item_id), generation, data_key)
        return sealed, NewKey(str(item_id), generation, wrapped)

    def seal_existing(self, item_id: UUID, generation: int, fields: Fields) -> str:
        key = self.keys_for([str(item_id)]).data_key(str(item_id), generation)
        if key is None:
            raise InvalidTransition(f"item {item_id} has no live key; it was erased")
        return seal(key, str(item_id), generation, _encode(fields))

    def save(
        self,
        items: Sequence[MemoryItem],
        new_keys: Sequence[NewKey] = (),
        destroy: Sequence[KeyDestruction] = (),
        expect_versions: Sequence[tuple[UUID, int]] = (),
    ) -> int:
        """Append the items' pending events with key changes in one transaction.

        `expect_versions` pins the inputs a derived write read: if any moved on, the
        whole transaction is refused with StaleDerivation.
        """
        positions = self.save_positions(items, new_keys, destroy, expect_versions)
        return max(positions.values()) if positions else self.max_position()

    def save_positions(
        self,
        items: Sequence[MemoryItem],
        new_keys: Sequence[NewKey] = (),
        destroy: Sequence[KeyDestruction] = (),
        expect_versions: Sequence[tuple[UUID, int]] = (),
    ) -> dict[str, int]:
        """Like `save`, answering each item's last log position (a tombstone's place,
        which the ledger records so a restore can replay it)."""
        recordings = self.app.save(
            *items,
            data_keys=list(new_keys),
            destroy_keys=list(destroy),
            expect_versions=list(expect_versions),
        )
        return {str(r.domain_event.originator_id): r.notification.id for r in recordings}

    # -- reading -----------------------------------------------------------------------

    def get(self, item_id: UUID) -> MemoryItem:
        try:
            return self.app.repository.get(item_id)  # type: ignore[no-any-return]
        except AggregateNotFoundError:
            raise NotFound(f"no memory item {item_id}") from None

    def events_of(self, item_id: UUID) -> list[Any]:
        """Every event of one item, decoded (sealed fields stay sealed)."""
        return [self.app.mapper.to_domain_event(s) for s in self.recorder.select_events(item_id)]

    def keys_for(self, item_ids: Sequence[str]) -> KeyRing:
        rows: list[tuple[Any, ...]] = []
        with self.recorder.datastore.transaction(commit=False) as cursor:
            for start in range(0, len(item_ids), 500):
                rows.extend(self.key_sql.select_keys(cursor, item_ids[start : start + 500]))
        return KeyRing(self.master, rows)

    def open_fields(
        self, keys: KeyRing, item_id: str, generation: int, sealed: str | None
    ) -> Fields | _Erased:
        if sealed is None:
            return ERASED
        key = keys.data_key(item_id, generation)
        if key is None:
            return ERASED
        return _decode(unseal(key, item_id, generation, sealed))

    def read(self, item: MemoryItem) -> Fields | _Erased:
        keys = self.keys_for([str(item.id)])
        return self.open_fields(keys, str(item.id), item.key_generation, item.sealed)

    def compact(self) -> list[str]:
        """Remove destroyed key bytes from the files: a WAL checkpoint that truncates the
        WAL on SQLite (secure_delete already zeroed the pages), VACUUM on PostgreSQL."""
        if self.settings.postgres is None:
            with self.recorder.datastore.get_connection(commit=True) as conn:
                cursor = conn.cursor()
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                busy = int(values(cursor.fetchall()[0])[0])
            return [checkpoint_evidence("event store", busy)]
        with self.recorder.datastore.get_connection() as conn:
            conn.execute(f"VACUUM (PARALLEL 0) {self.key_sql.keys_table}")
        return [f"event store: VACUUM {self.key_sql.keys_table}"]

    def key_counts(self) -> tuple[int, int]:
        with self.recorder.datastore.transaction(commit=False) as cursor:
            return self.key_sql.count_keys(cursor)

    def max_position(self) -> int:
        return int(self.recorder.max_notification_id() or 0)

    def notifications(self, after: int, limit: int) -> Sequence[Notification]:
        return self.recorder.select_notifications(  # type: ignore[no-any-return]
            start=after + 1, limit=limit
        )

    def decode(self, notification: Notification) -> Any:
        return self.app.mapper.to_domain_event(notification)


def _encode(fields: Fields) -> bytes:
    return json.dumps(fields, ensure_ascii=False, sort_keys=True).encode("utf-8")


def _decode(raw: bytes) -> Fields:
    value = json.loads(raw.decode("utf-8"))
    return {str(k): str(v) for k, v in value.items()}
