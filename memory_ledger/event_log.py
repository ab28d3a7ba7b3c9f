"""The event-sourced memory log: an `eventsourcing` Application plus its key store.

This is the only writer of events and keys. It seals personal fields before an event
exists, and it reads them back through the key store, answering ERASED (never an
exception) when a key has been destroyed, so replays and rebuilds keep working.

A key that is missing is another matter: rows of the key store are never deleted, so an
item that was never erased and has no key is an integrity problem. Reading that item
(`read`, `seal_existing`) raises MissingKey instead of passing it off as erased; replays
still treat its content as unreadable, so rebuilds keep working, and the consistency
check (`memory_ledger.consistency`) reports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from enum import Enum
from typing import Any, Final, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.domain import CanMutateProtocol
from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.utils import get_topic

from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey, new_data_key, seal, unseal
from memory_ledger.domain import USE_RECORDS, MemoryItem
from memory_ledger.errors import (
    BackendUnavailable,
    CorruptKeyEntry,
    InvalidTransition,
    KeyCheckMissing,
    KeyRotationInProgress,
    MissingKey,
    NotFound,
    WrongMasterKey,
)
from memory_ledger.keystore import (
    FORMAT_VERSION,
    ROTATION,
    KeyDestruction,
    KeyedRecorder,
    KeyRing,
    KeySQL,
    NewKey,
    values,
)
from memory_ledger.residue import checkpoint_evidence


class _Erased(Enum):
    """Marker returned in place of content whose key was destroyed. A one-member enum,
    so `fields is ERASED` narrows `Fields | _Erased` for the type checker (a plain
    singleton object would not)."""

    ERASED = "ERASED"

    def __repr__(self) -> str:
        return "ERASED"

    __str__ = __repr__


ERASED: Final = _Erased.ERASED
Fields = dict[str, str]
ERASED_TOPIC = get_topic(MemoryItem.Erased)  # type: ignore[attr-defined]
USE_TOPICS = tuple(get_topic(getattr(MemoryItem, name)) for name in USE_RECORDS)
#: How many live wrapped keys a master key must open before a lost check of it is
#: written again (`repair_key_check`): each is an AES-GCM authentication under the key.
KEY_PROOF_SAMPLE = 64


class MemoryLog(Application[UUID]):
    name = "memory_ledger"


class EventLog:
    """The memory log with sealing, key creation and key destruction wired together."""

    def __init__(
        self,
        settings: Settings,
        master: MasterKey,
        *,
        repair_key_check: bool = False,
        rotating: bool = False,
    ) -> None:
        """`repair_key_check`: if the master-key check row is gone from a store that
        holds data, prove the key against the stored wrapped keys and write the check
        again (`memory-ledger doctor --repair-key-check`); without it, such a store is
        refused with KeyCheckMissing. Sets `key_check_repaired` to what was done.
        `rotating`: opened by a master-key rotation (memory_ledger/key_rotation.py),
        which checks the keys itself; every other open is refused while one runs."""
        self.settings = settings
        self.key_check_repaired: str | None = None
        self.master = master
        try:
            self.app = MemoryLog(env=settings.event_store_env())
        except Exception as exc:  # the library wraps driver errors in many types
            raise BackendUnavailable(
                f"cannot open the event store at {settings.describe()}: {exc}"
            ) from None
        recorder = self.app.recorder
        if not isinstance(recorder, KeyedRecorder):
            raise TypeError(f"{type(recorder).__name__} is not a memory_ledger recorder")
        self.recorder: Any = recorder
        self.key_sql: KeySQL = recorder.key_sql
        try:
            if not rotating:
                self._check_master_key(repair_key_check)
                self.key_sql.expected_check = self.master.check_value()
        except Exception:
            self.app.close()
            raise

    def close(self) -> None:
        self.app.close()

    # -- master key --------------------------------------------------------------------

    def _check_master_key(self, repair: bool = False) -> None:
        table, p = self.key_sql.meta_table, self.key_sql.param
        with self.recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(f"SELECT name, value FROM {table}")
            meta = dict(values(row) for row in cursor.fetchall())
            if ROTATION in meta:
                raise KeyRotationInProgress(
                    f"a master-key rotation of the store at {self.settings.describe()} has "
                    "started and not finished: its data keys are wrapped partly under the "
                    "old key and partly under the new one, so it serves nothing until the "
                    "rotation finishes; run `memory-ledger keys rotate` again to finish it. "
                    "Nothing was read or changed"
                )
            if "key_check" not in meta:
                holds_data = bool(meta) or self._holds_data(cursor)
                if holds_data and not repair:
                    raise KeyCheckMissing(
                        f"the master-key check row (key_check in {table}) is missing from "
                        f"the store at {self.settings.describe()}, which holds data: the "
                        "offered master key cannot be checked, so it is not accepted; "
                        "nothing was read or changed. Restore the row from a backup of the "
                        "event store, or run `memory-ledger doctor --repair-key-check` "
                        "with the right key (it must open the stored keys first)",
                        code="key_check_missing",
                        repair="memory-ledger doctor --repair-key-check",
                    )
                if holds_data:
                    self.key_check_repaired = self._prove_master_key(cursor)
                rows = [("key_check", self.master.check_value())]
                if "format_version" not in meta:
                    rows.append(("format_version", FORMAT_VERSION))
                for name, value in rows:  # two processes may create a new store at once
                    cursor.execute(
                        f"INSERT INTO {table} (name, value) VALUES ({p}, {p}) "
                        "ON CONFLICT (name) DO NOTHING",
                        (name, value),
                    )
                cursor.execute(f"SELECT value FROM {table} WHERE name = {p}", ("key_check",))
                meta["key_check"] = values(cursor.fetchall()[0])[0]
        self.master.verify(meta["key_check"])

    def _holds_data(self, cursor: Any) -> bool:
        for table in (self.events_table, self.key_sql.keys_table):
            cursor.execute(f"SELECT 1 FROM {table} LIMIT 1")
            if cursor.fetchall():
                return True
        return False

    def _prove_master_key(self, cursor: Any) -> str:
        """Open live wrapped keys with the offered master key: it is the store's key only
        if every one of them authenticates under it. Returns what was proven."""
        rows = self.key_sql.some_live_keys(cursor, KEY_PROOF_SAMPLE)
        if not rows:
            return (
                "no live key to prove the master key against: nothing in the store is "
                "readable under any key, so the check was written for the key offered"
            )
        ring = KeyRing(self.master, rows)
        try:
            for item_id, generation, _ in rows:
                ring.data_key(str(item_id), int(generation))
        except CorruptKeyEntry:
            raise WrongMasterKey(
                f"the master key from {self.master.source} does not open the stored keys: "
                "it is not this store's key, so the check was not written; nothing was changed"
            ) from None
        return f"the master key opened {len(rows)} stored key(s); the check was written again"

    @property
    def events_table(self) -> str:
        """The events table's name as SQL can use it (schema-qualified on PostgreSQL)."""
        name = str(self.recorder.events_table_name)
        schema = getattr(self.recorder.datastore, "schema", None)
        return f"{schema}.{name}" if self.settings.postgres is not None and schema else name

    # -- writing -----------------------------------------------------------------------

    def seal_new(self, item_id: UUID, generation: int, fields: Fields) -> tuple[str, NewKey]:
        data_key = new_data_key()
        sealed = seal(data_key, str(item_id), generation, _encode(fields))
        wrapped = self.master.wrap(str(item_id), generation, data_key)
        return sealed, NewKey(str(item_id), generation, wrapped)

    def seal_existing(self, item_id: UUID, generation: int, fields: Fields) -> str:
        keys = self.keys_for([str(item_id)])
        key = keys.data_key(str(item_id), generation)
        if key is None:
            item = self.get(item_id)
            if item.erased or item.key_generation != generation:
                raise InvalidTransition(f"item {item_id} has no live key; it was erased")
            raise _missing_key(item_id, generation, keys.has_row(str(item_id), generation))
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

    def tombstone(
        self,
        item_ids: Sequence[str],
        reason: str,
        *,
        missing_ok: bool = False,
        also_destroy: Sequence[KeyDestruction] = (),
        request_id: str | None = None,
    ) -> dict[str, int]:
        """Append an `Erased` event to each live item and destroy its keys (and the keys
        `also_destroy` names), in one transaction; items already erased are skipped
        (and, with `missing_ok`, items the log does not hold: a restore's copy lacks
        what was written after it). Returns the new tombstones' log positions. Every
        erasure's first step (a forget's, a restore's replay)."""
        wanted = [UUID(i) for i in item_ids]
        found = self._last_versions(wanted)
        missing = [i for i in wanted if i not in found]
        if missing and not missing_ok:
            raise NotFound(f"no memory item {missing[0]}")
        # The tombstones are made as the aggregate would make them (`MemoryItem.erase`),
        # without rebuilding each item from its events: an erasure of thousands of
        # items decoded every event of each only to learn its version.
        stamp = MemoryItem.Event.create_timestamp()
        pending = [
            MemoryItem.Erased(  # type: ignore[attr-defined]
                originator_id=item_id,
                originator_version=version + 1,
                timestamp=stamp,
                reason=reason,
                request_id=request_id,
            )
            for item_id, (version, erased) in found.items()
            if not erased
        ]
        if not pending and not also_destroy:
            return {}
        destroy = [KeyDestruction(str(e.originator_id), None) for e in pending]
        # The event store's own `put`, as `Application.save` ends in: `save` checks each
        # object against a runtime Protocol first, a third of a bulk erasure's cost. (No
        # aggregate cache and no automatic snapshots are configured, so `save` would do
        # nothing more.)
        recordings = self.app.events.put(pending, destroy_keys=[*destroy, *also_destroy])
        return {str(r.domain_event.originator_id): r.notification.id for r in recordings}

    def _last_versions(self, item_ids: Sequence[UUID]) -> dict[UUID, tuple[int, bool]]:
        """Each item's last version and whether it is erased; items the log does not
        hold are absent."""
        p = self.key_sql.param
        rows = self._rows_of(
            item_ids,
            "SELECT originator_id, MAX(originator_version), "
            f"SUM(CASE WHEN topic = {p} THEN 1 ELSE 0 END) FROM {self.events_table} "
            "WHERE originator_id IN ({ids}) GROUP BY originator_id",
            (ERASED_TOPIC,),
        )
        return {UUID(_uuid_text(i)): (int(version), bool(erased)) for i, version, erased in rows}

    def last_changes(self, item_ids: Sequence[UUID]) -> dict[UUID, int]:
        """Each item's last change: the log position of its last event that is not a
        record of its use (USE_RECORDS). Whatever changes an item in place (a redaction
        of fields, spans or mentions, a shredded history, a suppression, an archiving, a
        new value, a tombstone) is an event of its own, so this is where a drill learns
        that an item changed after a restore point. Items the log does not hold are
        absent."""
        p = self.key_sql.param
        position = "rowid" if self.settings.postgres is None else "notification_id"
        rows = self._rows_of(
            item_ids,
            f"SELECT originator_id, MAX({position}) FROM {self.events_table} "
            f"WHERE topic NOT IN ({', '.join([p] * len(USE_TOPICS))}) "
            "AND originator_id IN ({ids}) GROUP BY originator_id",
            USE_TOPICS,
        )
        return {UUID(_uuid_text(i)): int(last) for i, last in rows}

    def _rows_of(
        self, item_ids: Sequence[UUID], sql: str, leading: tuple[Any, ...] = ()
    ) -> Iterator[tuple[Any, ...]]:
        """Rows of `sql` over the items, one statement per 500 ids: `{ids}` in `sql`
        becomes the chunk's placeholders, bound after the `leading` parameters."""
        p = self.key_sql.param
        sqlite = self.settings.postgres is None
        with self.recorder.datastore.transaction(commit=False) as cursor:
            for start in range(0, len(item_ids), 500):
                chunk = item_ids[start : start + 500]
                cursor.execute(
                    sql.replace("{ids}", ", ".join([p] * len(chunk))),
                    (*leading, *(i.hex if sqlite else i for i in chunk)),
                )
                yield from (values(row) for row in cursor.fetchall())

    # -- reading -----------------------------------------------------------------------

    def get(self, item_id: UUID) -> MemoryItem:
        try:
            return self.app.repository.get(item_id)  # type: ignore[no-any-return]
        except AggregateNotFoundError:
            raise NotFound(f"no memory item {item_id}") from None

    def get_many(
        self, item_ids: Sequence[UUID], events: dict[UUID, list[Any]] | None = None
    ) -> dict[UUID, MemoryItem]:
        """Several items, each rebuilt from its events read in one query per 500 ids (a
        `get` per item is two queries: its snapshot, then its events, so a restore's
        replay of thousands of tombstones paid thousands of round trips). Items the log
        does not hold are absent from the answer. `events`, if given, receives each
        item's decoded events, so an erasure that also reads their sealed versions
        (`forgetting.requests.plaintext_copies`) decodes them once."""
        stored: dict[UUID, list[StoredEvent]] = {}
        for event in self._stored_events(item_ids, first_only=False):
            stored.setdefault(_originator(event), []).append(event)
        out: dict[UUID, MemoryItem] = {}
        mapper = self.app.mapper
        for item_id, raw in stored.items():
            # Every event of a MemoryItem mutates one; the mapper is typed for any domain
            # event, and the library's projector proves it with a runtime Protocol check
            # per event, a third of the cost: so a cast, once per item.
            decoded = cast(
                "list[CanMutateProtocol[MemoryItem]]", [mapper.to_domain_event(e) for e in raw]
            )
            item: MemoryItem | None = None
            for domain_event in decoded:
                item = domain_event.mutate(item)
            if isinstance(item, MemoryItem):
                out[item_id] = item
                if events is not None:
                    events[item_id] = decoded
        return out

    def first_events(self, item_ids: Sequence[UUID]) -> dict[UUID, Any]:
        """Each item's `Recorded` event, decoded (its namespace and kind never change);
        items the log does not hold are absent."""
        return {
            _originator(e): self.app.mapper.to_domain_event(e)
            for e in self._stored_events(item_ids, first_only=True)
        }

    def _stored_events(self, item_ids: Sequence[UUID], *, first_only: bool) -> list[StoredEvent]:
        """The items' stored events (or only their first), in item and version order."""
        first = "originator_version = 1 AND " if first_only else ""
        rows = self._rows_of(
            item_ids,
            "SELECT originator_id, originator_version, topic, state "
            f"FROM {self.events_table} WHERE {first}originator_id IN ({{ids}}) "
            "ORDER BY originator_id, originator_version",
        )
        return [
            StoredEvent(UUID(_uuid_text(ident)), int(version), str(topic), bytes(state))
            for ident, version, topic, state in rows
        ]

    def meta(self, name: str) -> str | None:
        """A row of the store's meta table (the key check, the feed's epoch, cursors)."""
        table, p = self.key_sql.meta_table, self.key_sql.param
        with self.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(f"SELECT value FROM {table} WHERE name = {p}", (name,))
            rows = cursor.fetchall()
        return str(values(rows[0])[0]) if rows else None

    def set_meta(self, rows: dict[str, str], *, replace: bool = True) -> None:
        """Write meta rows in one transaction; with `replace=False`, only missing ones."""
        table, p = self.key_sql.meta_table, self.key_sql.param
        action = "UPDATE SET value = excluded.value" if replace else "NOTHING"
        with self.recorder.datastore.transaction(commit=True) as cursor:
            for name, value in rows.items():
                cursor.execute(
                    f"INSERT INTO {table} (name, value) VALUES ({p}, {p}) "
                    f"ON CONFLICT (name) DO {action}",
                    (name, value),
                )

    def events_of(self, item_id: UUID) -> list[Any]:
        """Every event of one item, decoded (sealed fields stay sealed)."""
        return [self.app.mapper.to_domain_event(s) for s in self.recorder.select_events(item_id)]

    def events_of_many(self, item_ids: Sequence[UUID]) -> dict[UUID, list[Any]]:
        """Every event of each item, decoded, in version order: one query per 500 ids,
        where `events_of` per item is a round trip each (an erasure of a thousand
        items reads them all). Items the log does not hold are absent."""
        out: dict[UUID, list[Any]] = {}
        mapper = self.app.mapper
        for stored in self._stored_events(list(item_ids), first_only=False):
            out.setdefault(_originator(stored), []).append(mapper.to_domain_event(stored))
        return out

    def keys_for(self, item_ids: Sequence[str]) -> KeyRing:
        rows: list[tuple[Any, ...]] = []
        with self.recorder.datastore.transaction(commit=False) as cursor:
            for start in range(0, len(item_ids), 500):
                rows.extend(self.key_sql.select_keys(cursor, item_ids[start : start + 500]))
        return KeyRing(self.master, rows)

    def derived_key(self, ident: str, *, create: bool) -> tuple[int, bytes] | None:
        """The live key of a derived artifact (a namespace's keyword index, a summary): a
        key-store row of its own that no event needs, so destroying it (a whole-user
        forget, a rebuilt summary) makes every sealed copy of the artifact unreadable,
        wherever the bytes still lie. With `create`, a first (or, after a destruction,
        next) generation is made when none is live; two processes racing to make it
        both end up with the one that was committed first."""
        keys = self.keys_for([ident])
        latest = keys.latest(ident)
        if latest is not None or not create:
            return latest
        known = keys.generations(ident)
        generation = known[-1] + 1 if known else 0
        data_key = new_data_key()
        wrapped = self.master.wrap(ident, generation, data_key)
        try:
            self.save([], new_keys=[NewKey(ident, generation, wrapped)])
        except Exception:
            latest = self.keys_for([ident]).latest(ident)
            if latest is None:
                raise
            return latest
        return generation, data_key

    def rotate_derived_key(self, ident: str) -> tuple[int, bytes]:
        """A new generation of a derived key, with every older one destroyed in the same
        transaction: what a rebuilt artifact is sealed under, so that its earlier text,
        wherever its bytes lie, can no longer be opened."""
        known = self.keys_for([ident]).generations(ident)
        generation = known[-1] + 1 if known else 0
        data_key = new_data_key()
        wrapped = self.master.wrap(ident, generation, data_key)
        retired = [KeyDestruction(ident, tuple(known))] if known else []
        self.save([], new_keys=[NewKey(ident, generation, wrapped)], destroy=retired)
        return generation, data_key

    def destroy_derived_keys(self, idents: Sequence[str]) -> None:
        """Destroy every generation of the named derived keys, in one transaction."""
        if idents:
            self.save([], destroy=[KeyDestruction(i, None) for i in idents])

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
        """The item's current content, or ERASED if it was erased. An item that was never
        erased and has no live key raises MissingKey: that is damage, not an erasure."""
        ident = str(item.id)
        keys = self.keys_for([ident])
        fields = self.open_fields(keys, ident, item.key_generation, item.sealed)
        if fields is not ERASED or item.erased or item.sealed is None:
            return fields
        # `item` may predate a forget (or a redaction) that committed since it was loaded.
        fresh = self.get(item.id)
        if fresh.erased or fresh.key_generation != item.key_generation:
            return self.read(fresh)
        raise _missing_key(item.id, item.key_generation, keys.has_row(ident, item.key_generation))

    def rewrite_file(self) -> None:
        """Rebuild the SQLite event store file (VACUUM, then truncate the WAL), so that
        only live rows remain in its pages: for when a page was found holding bytes that
        should be gone. Nothing to do on PostgreSQL (compact VACUUMs the key table)."""
        if self.settings.postgres is not None:
            return
        with self.recorder.datastore.get_connection(commit=True) as conn:
            cursor = conn.cursor()
            cursor.execute("VACUUM")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")

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

    # -- integrity: whole-store passes for the consistency check -------------------------

    def item_tombstones(self) -> dict[str, int | None]:
        """Every item in the log, with its tombstone's log position (None: not erased),
        ids in their canonical text form. Two scans in one read transaction: the ids from
        the primary-key index alone, then the tombstones (a grouped query would look up
        every event row through the index: three times slower on SQLite)."""
        p = self.key_sql.param
        if self.settings.postgres is None:
            ident, position = "originator_id", "rowid"  # SQLite stores 32 hex digits
        else:
            ident, position = "originator_id::text", "notification_id"
        table = self.events_table
        with self.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(f"SELECT DISTINCT {ident} AS item_id FROM {table}")
            found: dict[str, int | None] = {
                _uuid_text(values(row)[0]): None for row in cursor.fetchall()
            }
            cursor.execute(
                f"SELECT {ident} AS item_id, {position} AS erased_at FROM {table} "
                f"WHERE topic = {p}",
                (ERASED_TOPIC,),
            )
            for row in cursor.fetchall():
                item_id, erased_at = values(row)
                found[_uuid_text(item_id)] = int(erased_at)
        return found

    def has_tombstones(self) -> bool:
        p = self.key_sql.param
        sql = f"SELECT 1 FROM {self.events_table} WHERE topic = {p} LIMIT 1"
        with self.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(sql, (ERASED_TOPIC,))
            return bool(cursor.fetchall())

    def key_states(self) -> dict[str, tuple[int, int]]:
        """Every id in the key store: (live generations, all generations)."""
        with self.recorder.datastore.transaction(commit=False) as cursor:
            return self.key_sql.key_states(cursor)

    def key_rows(self) -> list[tuple[Any, ...]]:
        """Every key-store row as stored (ids, generations, wrapped bytes): for audits."""
        with self.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(f"SELECT * FROM {self.key_sql.keys_table}")
            return [values(row) for row in cursor.fetchall()]

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


def _missing_key(item_id: UUID, generation: int, row_present: bool) -> MissingKey:
    what = (
        "was destroyed although the item has no tombstone"
        if row_present
        else "is missing from the key store"
    )
    return MissingKey(
        f"item {item_id} was never erased, but its data key (generation {generation}) "
        f"{what}: its content cannot be read. This is an integrity problem, not an "
        "erasure; nothing was changed. Run `memory-ledger doctor` for the repair"
    )


def _uuid_text(value: Any) -> str:
    """The canonical text of an id SQLite stores as 32 lowercase hex digits (what the
    library writes); anything else is parsed. Slicing: 100k UUID() calls cost ~1 s."""
    text = str(value)
    if len(text) == 32:
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
    return text if len(text) == 36 else str(UUID(text))


def _originator(stored: StoredEvent) -> UUID:
    """A stored event's item id as a UUID. The library allows text ids too; this log's
    are UUIDs (`_stored_events` makes them), so this only narrows the type."""
    ident = stored.originator_id
    return ident if isinstance(ident, UUID) else UUID(ident)


def _encode(fields: Fields) -> bytes:
    return json.dumps(fields, ensure_ascii=False, sort_keys=True).encode("utf-8")


def _decode(raw: bytes) -> Fields:
    value = json.loads(raw.decode("utf-8"))
    return {str(k): str(v) for k, v in value.items()}
