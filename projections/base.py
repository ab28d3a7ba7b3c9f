"""What every projection shares: its tables, batched apply, and erasure purge.

A projection applies a whole batch of events in memory and then writes the changed
rows, so a rebuild costs a few statements per batch instead of several per event. The
runner commits the rows together with the projection's tracking position, which is why
`apply` receives a connection inside the runner's transaction and never commits itself.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from sqlalchemy import (
    Connection,
    MetaData,
    Table,
    and_,
    bindparam,
    delete,
    false,
    func,
    inspect,
    or_,
    select,
)
from sqlalchemy.sql.expression import Executable

from memory_ledger.projections.cells import Cells, Opened
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.id_sets import among, among_bound
from memory_ledger.write_policy import canonical_time

metadata = MetaData()
Row = dict[str, Any]


def iso(value: Any) -> str | None:
    """Times are stored as UTC ISO-8601 text: portable, and ordered as strings."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return canonical_time(value)


def provenance_json(attrs: dict[str, Any]) -> str:
    return json.dumps(attrs.get("provenance") or {}, sort_keys=True, default=str)


class Projection(ABC):
    """A read model built only from the log, droppable and rebuildable at any time."""

    name: ClassVar[str]
    table: ClassVar[Table]
    primary_key: ClassVar[tuple[str, ...]]
    #: The event field its `sealed` / `key_generation` columns keep ("value", "content"),
    #: or None: no row holds an item's content. No projection holds personal content in
    #: clear (projections/cells.py); this is how readers find the sealed copy.
    sealed_field: ClassVar[str | None] = None
    #: What the store holds, for the data map (`memory-ledger stores`).
    holds: ClassVar[str]
    #: Whether `settle` opens the cells of its source rows: a catch-up then opens each
    #: event once and hands the fields over (`Opened`), else it leaves them sealed.
    reads_cells: ClassVar[bool] = False

    @property
    def tables(self) -> tuple[Table, ...]:
        """Every table the projection owns: the runner creates, drops, rebuilds and
        vacuums them together, so a projection's side tables never outlive its rows."""
        return (self.table,)

    def is_outdated(self, conn: Connection) -> bool:
        """Whether the stored tables must be dropped and replayed from the log: one is
        missing, or was created by an older version of this code (other columns, or an
        index it lacks: projections are derived, never migrated)."""
        inspector = inspect(conn)
        for table in self.tables:
            if not inspector.has_table(table.name):
                return True
            columns = {c["name"] for c in inspector.get_columns(table.name)}
            if columns != {c.name for c in table.columns}:
                return True
            indexes = {i["name"] for i in inspector.get_indexes(table.name)}
            if not {str(i.name) for i in table.indexes} <= indexes:
                return True  # an index added since: replayed with it
        return False

    def apply(self, conn: Connection, events: Sequence[ProjectedEvent]) -> None:
        relevant = [e for e in events if self.wants(e)]
        if not relevant:
            return
        # An item whose only event here is its tombstone (a forget's batch) is purged
        # by id: reading its rows first, only to drop them, was most of the batch.
        names: dict[str, set[str]] = {}
        for e in relevant:
            names.setdefault(e.item_id, set()).add(e.name)
        only_erased = {i for i, n in names.items() if n == {"Erased"}}
        loaded = [e for e in relevant if e.item_id not in only_erased]
        batch = Batch(self.primary_key, self.load(conn, loaded) if loaded else [])
        self.prepare(batch)
        for event in relevant:
            if event.name == "Erased":
                batch.purge(event.item_id)
            else:
                self.handle(event, batch)
        self._flush(conn, batch)

    def settle(self, conn: Connection, opened: Opened | None = None) -> None:  # noqa: B027
        """Hook: work deferred to the end of a catch-up, run in the transaction of the
        batch that reaches the head of the log. For views recomputed from many rows,
        which would otherwise be recomputed once per batch during a rebuild. `opened`:
        the events the catch-up has opened, for reading cells back without opening
        them again (projections/cells.py)."""

    def prepare(self, batch: Batch) -> None:  # noqa: B027 - an optional hook
        """Hook: build any per-batch index a projection needs before handling events."""

    def wants(self, event: ProjectedEvent) -> bool:
        """Recorded events of our kind, and every later event of items we hold."""
        if event.name == "Recorded":
            return event.attrs["kind"] == self.kind
        return True

    kind: ClassVar[str]

    def pk(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[c] for c in self.primary_key)

    def rows_of_items(self, conn: Connection, item_ids: Iterable[str]) -> list[Row]:
        ids = sorted(set(item_ids))
        out: list[Row] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            query = select(self.table).where(among(self.table.c.item_id, chunk))
            out.extend(dict(r) for r in conn.execute(query).mappings())
        return out

    def load(self, conn: Connection, events: Sequence[ProjectedEvent]) -> list[Row]:
        return self.rows_of_items(conn, {e.item_id for e in events if e.name != "Recorded"})

    @abstractmethod
    def handle(self, event: ProjectedEvent, batch: Batch) -> None: ...

    @staticmethod
    def item_row(event: ProjectedEvent, batch: Batch) -> Row | None:
        """For one-row-per-item projections: the item's row, with the event's version and
        any suppression already applied; None if this projection does not hold the item."""
        found = batch.of_item(event.item_id)
        if not found:
            return None
        row = found[0]
        row["version"] = event.version
        if event.name in ("Suppressed", "Unsuppressed"):
            row["suppressed"] = event.name == "Suppressed"
        return row

    def _flush(self, conn: Connection, batch: Batch) -> None:
        table = self.table
        rows, original, purged = batch.rows, batch.original, batch.purged
        if purged:
            self.purge(conn, sorted(purged))
        changed = {k for k, r in rows.items() if k in original and original[k] != r}
        if changed:
            cols = [table.c[c] for c in self.primary_key]
            names = [f"b_{c}" for c in self.primary_key]
            condition = and_(*(col == bindparam(n) for col, n in zip(cols, names, strict=True)))
            conn.execute(
                delete(table).where(condition),
                [dict(zip(names, k, strict=True)) for k in changed],
            )
        inserts = [r for k, r in rows.items() if k not in original or k in changed]
        if inserts:
            # Straight to the driver's executemany: SQLAlchemy's per-row parameter
            # processing would cost more than the insert itself during a rebuild.
            names = [c.name for c in table.columns]
            mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
            sql = (
                f"INSERT INTO {table.name} ({', '.join(names)}) "
                f"VALUES ({', '.join([mark] * len(names))})"
            )
            conn.exec_driver_sql(sql, [tuple(r[n] for n in names) for r in inserts])

    def purge(self, conn: Connection, item_ids: Sequence[str]) -> None:
        ids = list(item_ids)
        for start in range(0, len(ids), 500):
            conn.execute(self._purge_statement, {"ids": ids[start : start + 500]})

    def count_rows(self, conn: Connection, item_ids: Sequence[str]) -> int:
        return int(conn.execute(self._count_statement, {"ids": list(item_ids)}).scalar_one())

    # Built once per projection, bound per call: a forget counts and purges every
    # projection, and building the expression cost more than running it.
    @functools.cached_property
    def _purge_statement(self) -> Executable:
        return delete(self.table).where(among_bound(self.table.c.item_id, "ids"))

    @functools.cached_property
    def _count_statement(self) -> Executable:
        return (
            select(func.count())
            .select_from(self.table)
            .where(among_bound(self.table.c.item_id, "ids"))
        )

    def unattributed_rows(self, conn: Connection) -> int:
        """Rows that `count_rows` cannot attribute to any item, whose check must read the
        whole projection: run by `verify`, not on the forget path. None by default."""
        return 0

    def texts_of(self, conn: Connection, cells: Cells, item_ids: Sequence[str]) -> list[str]:
        """The readable content its rows of these items keep sealed (every version)."""
        if self.sealed_field is None or not item_ids:
            return []
        t = self.table
        query = select(t.c.item_id, t.c.key_generation, t.c.sealed).where(
            among(t.c.item_id, list(item_ids))
        )
        found = cells.open([tuple(r) for r in conn.execute(query)], self.sealed_field)
        return [text for text in found if text is not None]

    def snapshot(self, conn: Connection) -> list[Row]:
        """Every row, ordered: used to prove a rebuild equals the incremental view."""
        order = [self.table.c[c] for c in self.primary_key]
        return [dict(r) for r in conn.execute(select(self.table).order_by(*order)).mappings()]


class Batch:
    """The rows one batch touches, indexed by item, with what they were when loaded."""

    def __init__(self, primary_key: tuple[str, ...], loaded: Iterable[Row]) -> None:
        self.primary_key = primary_key
        self.rows: dict[tuple[Any, ...], Row] = {}
        self.by_item: dict[str, list[tuple[Any, ...]]] = {}
        self.purged: set[str] = set()
        for row in loaded:
            self.add(row)
        self.original = {k: dict(v) for k, v in self.rows.items()}

    def add(self, row: Row) -> None:
        key = tuple(row[c] for c in self.primary_key)
        if key not in self.rows:
            self.by_item.setdefault(row["item_id"], []).append(key)
        self.rows[key] = row

    def of_item(self, item_id: str) -> list[Row]:
        return [self.rows[k] for k in self.by_item.get(item_id, ())]

    def purge(self, item_id: str) -> None:
        self.purged.add(item_id)
        for key in self.by_item.pop(item_id, ()):
            del self.rows[key]


def keys_in(table: Table, columns: Sequence[str], keys: Sequence[tuple[Any, ...]]) -> Any:
    """Rows whose `columns` equal one of `keys`, in a form an index on those columns
    serves: one `c1 = ? AND ... AND cn IN (...)` per distinct prefix, ORed. (A row-value
    `(c1, ..., cn) IN (...)` is a full scan on SQLite, which made every projection batch
    cost as much as the table: rebuilds grew with the square of the data.)"""
    *prefix, last = (table.c[c] for c in columns)
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for key in keys:
        groups.setdefault(tuple(key[:-1]), []).append(key[-1])
    if not groups:
        return false()
    return or_(
        *(
            and_(*(c == v for c, v in zip(prefix, values, strict=True)), among(last, lasts))
            for values, lasts in groups.items()
        )
    )
