"""The key store: wrapped data keys, in their own erasable table beside the event log.

Keys are written and destroyed in the same database transaction as the events that
need them (see `recorders`), so there is never an event whose key was not stored, nor a
tombstone whose key survived. Destroying a key overwrites the wrapped bytes with NULL;
SQLite's secure_delete and a WAL checkpoint (or PostgreSQL's VACUUM) then remove the
old bytes from the files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memory_ledger.crypto import MasterKey
from memory_ledger.times import now_text

KEYS_TABLE = "memory_keys"
META_TABLE = "memory_ledger_meta"
FORMAT_VERSION = "1"
#: The meta row naming the store's master key (a keyed fingerprint of it).
KEY_CHECK = "key_check"
#: The meta row a master-key rotation keeps while it runs (memory_ledger/key_rotation.py):
#: its progress, and the store refuses to serve while it is there.
ROTATION = "key_rotation"


@dataclass(frozen=True)
class NewKey:
    item_id: str
    generation: int
    wrapped: bytes


@dataclass(frozen=True)
class KeyDestruction:
    item_id: str
    generations: tuple[int, ...] | None  # None: every generation of the item


class Cursorish(Protocol):
    def execute(self, *args: Any, **kwargs: Any) -> Any: ...
    def executemany(self, *args: Any, **kwargs: Any) -> Any: ...
    def fetchall(self) -> Any: ...


class KeySQL:
    """The few statements the key store needs, in the backend's parameter style."""

    def __init__(
        self, param: str, blob_type: str, keys_table: str, meta_table: str, table_options: str = ""
    ) -> None:
        self.param = param
        self.keys_table = keys_table
        self.meta_table = meta_table
        #: The check value of the master key this process wraps new keys under, once the
        #: store has accepted it (EventLog): new keys are refused when the store's key
        #: has changed or is being rotated since (`insert_keys`).
        self.expected_check: str | None = None
        self.create = [
            f"CREATE TABLE IF NOT EXISTS {keys_table} ("
            "item_id TEXT NOT NULL, generation INTEGER NOT NULL, "
            f"wrapped {blob_type}, created_at TEXT NOT NULL, destroyed_at TEXT, "
            f"PRIMARY KEY (item_id, generation)){table_options}",
            f"CREATE TABLE IF NOT EXISTS {meta_table} (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ]

    def insert_keys(self, cursor: Cursorish, keys: Sequence[NewKey]) -> None:
        """Store new wrapped keys, in the transaction of the events that need them. A
        process that opened the store before its master key was rotated (or while the
        rotation runs) would wrap them under a key the store no longer has, whose
        material the rotation destroys: such a write is refused, nothing stored."""
        p = self.param
        if self.expected_check is not None:
            self._check_current_key(cursor)
        now = now_text()
        cursor.executemany(
            f"INSERT INTO {self.keys_table} (item_id, generation, wrapped, created_at) "
            f"VALUES ({p}, {p}, {p}, {p})",
            [(key.item_id, key.generation, key.wrapped, now) for key in keys],
        )

    def _check_current_key(self, cursor: Cursorish) -> None:
        from memory_ledger.errors import KeyRotated

        meta = self.read_meta(cursor, (KEY_CHECK, ROTATION))
        if ROTATION in meta or meta.get(KEY_CHECK) != self.expected_check:
            raise KeyRotated(
                "the store's master key was rotated (or is being rotated) since this "
                "process opened it: new data keys cannot be wrapped under the old key, so "
                "nothing was stored. Restart the process with the store's new master key"
            )

    def read_meta(self, cursor: Cursorish, names: Sequence[str]) -> dict[str, str]:
        """The named meta rows that exist, by name."""
        marks = ", ".join([self.param] * len(names))
        cursor.execute(
            f"SELECT name, value FROM {self.meta_table} WHERE name IN ({marks})", tuple(names)
        )
        return {str(n): str(v) for n, v in (values(row) for row in cursor.fetchall())}

    def write_meta(self, cursor: Cursorish, name: str, value: str | None) -> None:
        """Set a meta row (insert or replace), or remove it with None."""
        p = self.param
        if value is None:
            cursor.execute(f"DELETE FROM {self.meta_table} WHERE name = {p}", (name,))
            return
        cursor.execute(
            f"INSERT INTO {self.meta_table} (name, value) VALUES ({p}, {p}) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (name, value),
        )

    def live_keys_after(
        self, cursor: Cursorish, after: tuple[str, int] | None, limit: int | None
    ) -> list[tuple[str, int, bytes]]:
        """Live (item id, generation, wrapped) rows in key order, after `after` (all from
        the start with None), at most `limit` (all with None): a rotation's chunks."""
        p = self.param
        where = "wrapped IS NOT NULL"
        args: tuple[str | int, ...] = ()
        if after is not None:
            where += f" AND (item_id > {p} OR (item_id = {p} AND generation > {p}))"
            args = (after[0], after[0], after[1])
        cursor.execute(
            f"SELECT item_id, generation, wrapped FROM {self.keys_table} WHERE {where} "
            "ORDER BY item_id, generation" + (f" LIMIT {int(limit)}" if limit else ""),
            args,
        )
        return [(str(i), int(g), bytes(w)) for i, g, w in (values(r) for r in cursor.fetchall())]

    def replace_wrapped(self, cursor: Cursorish, rows: Sequence[tuple[str, int, bytes]]) -> None:
        """Write live keys' wrapped bytes again (a rotation's rewrap): a key destroyed
        meanwhile stays destroyed (`wrapped IS NOT NULL`)."""
        p = self.param
        cursor.executemany(
            f"UPDATE {self.keys_table} SET wrapped = {p} "
            f"WHERE item_id = {p} AND generation = {p} AND wrapped IS NOT NULL",
            [(wrapped, item_id, generation) for item_id, generation, wrapped in rows],
        )

    def destroy_keys(self, cursor: Cursorish, destructions: Sequence[KeyDestruction]) -> None:
        """Overwrite the wrapped bytes of the named keys with NULL. Whole items' keys go
        in one statement per 500 items (an erasure of ten thousand items was ten
        thousand statements); named generations one statement per item."""
        p = self.param
        now = now_text()
        update = (
            f"UPDATE {self.keys_table} SET wrapped = NULL, destroyed_at = {p} "
            "WHERE wrapped IS NOT NULL AND item_id "
        )
        whole = list(dict.fromkeys(d.item_id for d in destructions if d.generations is None))
        for start in range(0, len(whole), 500):
            chunk = whole[start : start + 500]
            cursor.execute(f"{update}IN ({', '.join([p] * len(chunk))})", (now, *chunk))
        for d in destructions:
            if d.generations is not None and d.generations:
                marks = ", ".join([p] * len(d.generations))
                cursor.execute(
                    f"{update}= {p} AND generation IN ({marks})", (now, d.item_id, *d.generations)
                )

    def select_keys(self, cursor: Cursorish, item_ids: Sequence[str]) -> list[tuple[Any, ...]]:
        if not item_ids:
            return []
        marks = ", ".join([self.param] * len(item_ids))
        cursor.execute(
            f"SELECT item_id, generation, wrapped FROM {self.keys_table} "
            f"WHERE item_id IN ({marks})",
            tuple(item_ids),
        )
        return [values(row) for row in cursor.fetchall()]

    def key_states(self, cursor: Cursorish) -> dict[str, tuple[int, int]]:
        """Every id in the key store with (live generations, all generations): one pass
        over the table, for the consistency check."""
        cursor.execute(
            f"SELECT item_id, count(wrapped) AS live, count(*) AS total FROM {self.keys_table} "
            "GROUP BY item_id"
        )
        out: dict[str, tuple[int, int]] = {}
        for row in cursor.fetchall():
            ident, live, total = values(row)
            out[str(ident)] = (int(live), int(total))
        return out

    def some_live_keys(self, cursor: Cursorish, limit: int) -> list[tuple[Any, ...]]:
        """Up to `limit` live (item id, generation, wrapped) rows: what a master key is
        proven against when the stored check of it is gone."""
        cursor.execute(
            f"SELECT item_id, generation, wrapped FROM {self.keys_table} "
            f"WHERE wrapped IS NOT NULL LIMIT {int(limit)}"
        )
        return [values(row) for row in cursor.fetchall()]

    def count_keys(self, cursor: Cursorish) -> tuple[int, int]:
        """(live, destroyed) key generations: a cheap health figure for `status`."""
        cursor.execute(f"SELECT count(wrapped), count(*) - count(wrapped) FROM {self.keys_table}")
        live, destroyed = values(cursor.fetchall()[0])
        return int(live), int(destroyed)


@runtime_checkable
class KeyedRecorder(Protocol):
    """An event recorder that also carries the key store's statements
    (memory_ledger/recorders.py, postgres_recorder.py). The event store library builds
    its recorder from a class named in the environment, so only a check at runtime can
    say that the one it built is ours."""

    key_sql: KeySQL


def values(row: Any) -> tuple[Any, ...]:
    """Row values in column order: psycopg gives dict rows here, sqlite3 sequence rows."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


class KeyRing:
    """Read access to data keys for a batch of items, unwrapped with the master key.

    Destroyed keys come back as None so readers can show ERASED; a key that exists but
    fails authentication raises CorruptKeyEntry instead of being hidden. A key whose row
    is not there at all also comes back as None, but `has_row` tells it apart from a
    destroyed one: rows are never deleted, so a missing row is an integrity problem.
    """

    def __init__(self, master: MasterKey, rows: Iterable[tuple[Any, ...]]) -> None:
        self._master = master
        self._wrapped: dict[tuple[str, int], bytes | None] = {}
        self._open: dict[tuple[str, int], bytes] = {}
        #: item id -> its generations, so per-item questions do not scan every row
        #: (a ring for a 10,000-item request is asked 10,000 of them).
        self._by_item: dict[str, list[int]] = {}
        for item_id, generation, wrapped in rows:
            ident = (str(item_id), int(generation))
            self._wrapped[ident] = bytes(wrapped) if wrapped is not None else None
            self._by_item.setdefault(ident[0], []).append(ident[1])

    def data_key(self, item_id: str, generation: int) -> bytes | None:
        ident = (item_id, generation)
        if ident in self._open:
            return self._open[ident]
        wrapped = self._wrapped.get(ident)
        if wrapped is None:
            return None
        key = self._master.unwrap(item_id, generation, wrapped)
        self._open[ident] = key
        return key

    def has_row(self, item_id: str, generation: int) -> bool:
        """Whether the key store holds a row (live or destroyed) for this generation."""
        return (item_id, generation) in self._wrapped

    def rows_of(self, item_id: str) -> int:
        """How many key rows (live or destroyed) the item has."""
        return len(self._by_item.get(item_id, ()))

    def live_rows(self) -> list[tuple[str, int, bytes]]:
        """(item id, generation, wrapped bytes as stored) of every live key of the ring:
        what a forget's key proof searches the key store's pages for once they are
        destroyed (memory only)."""
        return [(i, g, w) for (i, g), w in self._wrapped.items() if w is not None]

    def is_live(self, item_id: str, generation: int) -> bool:
        return self._wrapped.get((item_id, generation)) is not None

    def generations(self, item_id: str) -> list[int]:
        """Every generation (live or destroyed) the item has a row for, ascending."""
        return sorted(self._by_item.get(item_id, ()))

    def latest(self, item_id: str) -> tuple[int, bytes] | None:
        """The newest live generation of an item's key, and the key."""
        live = [g for g in self._by_item.get(item_id, ()) if self.is_live(item_id, g)]
        if not live:
            return None
        key = self.data_key(item_id, max(live))
        return (max(live), key) if key is not None else None

    def is_destroyed(self, item_id: str) -> bool:
        """Whether the item has no live key: every row destroyed, or (an integrity
        problem the consistency check reports, but a key nonetheless gone) no row."""
        return not any(self.is_live(item_id, g) for g in self._by_item.get(item_id, ()))
