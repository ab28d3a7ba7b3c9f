"""Summaries: one readable profile per namespace, derived from its live facts and preferences.

A summary is derived text that mixes many items, so forgetting one of them cannot be a
row delete: the summary must be recomposed from the inputs that remain. That is why
each summary records exactly which inputs it was built from (`summary_inputs`: item id
and the item's version). Whenever an input is erased, suppressed, redacted or
superseded, every summary that used it is recomposed, so out-of-scope facts stay in the
text and the target's value does not; a namespace with nothing left has no summary.
A forget request's evidence for this store is the number of input rows that still
reference the targets.

The projection never resolves facts itself: the runner applies it after the facts,
preferences and catalog projections in the same transaction, so it reads their tables
as they are after the batch (the catalog gives each item's current version). Recomposing
from those tables, rather than editing text per event, is what makes a rebuild equal the
incremental view. A summary is recomposed in the very batch that erases, suppresses or
redacts one of its inputs; additions wait for the last batch of the catch-up (`settle`),
so a rebuild composes each summary once rather than once per batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    Column,
    Connection,
    Index,
    Integer,
    Table,
    Text,
    bindparam,
    delete,
    func,
    or_,
    select,
)

from memory_ledger.crypto import seal, unseal
from memory_ledger.event_log import EventLog
from memory_ledger.policy.retention import RetentionPolicy
from memory_ledger.views import Summary
from projections.base import Batch, Projection, Row, metadata
from projections.catalog import catalog
from projections.cells import Cells
from projections.events import ProjectedEvent
from projections.facts import LIVE_STATUSES, facts
from projections.preferences import preferences
from projections.summarizers import Summarizer, SummaryInput, load_summarizer, summary_order

PROFILE = "profile"
#: A profile summarises at most this many live inputs, the most recently written: a
#: readable profile, and a recomposition whose cost does not follow a heavy user's
#: memory. Chosen by log position, so a rebuild chooses the same ones.
MAX_INPUTS = 200
SUMMARY = b"summary"  # the seal's purpose
CHUNK = 500

summaries = Table(
    "summaries",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("summary_id", Text, primary_key=True),
    # The text, sealed under the summary's own key (`summary_key_ident`), which every
    # recomposition replaces: the text it replaced can no longer be opened anywhere.
    Column("sealed", Text, nullable=False),
    Column("key_generation", Integer, nullable=False),
    Column("summarizer", Text, nullable=False),
    Column("input_count", Integer, nullable=False),
    # The newest log position among the inputs' values. Not the position of the batch
    # that built it: batch boundaries differ between catch-up and rebuild, this does not.
    Column("built_position", Integer, nullable=False),
)

summary_inputs = Table(
    "summary_inputs",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("summary_id", Text, primary_key=True),
    Column("item_id", Text, primary_key=True),
    Column("version", Integer, nullable=False),
    Index("ix_summary_inputs_item", "item_id"),
)

# Namespaces that gained inputs during a catch-up still in progress (see `apply`).
summary_pending = Table(
    "summary_pending",
    metadata,
    Column("namespace", Text, primary_key=True),
)

#: Events that withdraw content from use: their summaries are recomposed in the batch
#: that applies them. Anything else only adds or updates, and waits for the catch-up's
#: last batch, so that a rebuild composes each summary once instead of once per batch.
WITHDRAWING = ("Erased", "Suppressed", "Redacted")


class SummariesProjection(Projection):
    name: ClassVar[str] = "summaries"
    table = summaries
    primary_key = ("namespace", "summary_id")
    holds = (
        "profile text of live facts and preferences, sealed under the summary's own key, "
        "with input ids and versions"
    )

    def __init__(self, log: EventLog | None = None, summarizer: Summarizer | None = None) -> None:
        self.log = log
        self.summarizer = summarizer or load_summarizer()

    @property
    def cells(self) -> Cells:
        if self.log is None:
            raise RuntimeError("this summaries projection was made without the log")
        return Cells(self.log)

    @property
    def tables(self) -> tuple[Table, ...]:
        return (summaries, summary_inputs, summary_pending)

    def is_outdated(self, conn: Connection) -> bool:
        """Summaries written by another summarizer are replayed, never served or mixed."""
        if super().is_outdated(conn):
            return True
        names = conn.execute(select(summaries.c.summarizer).distinct()).scalars()
        return any(name != self.summarizer.name for name in names)

    # -- applying events -------------------------------------------------------------

    def wants(self, event: ProjectedEvent) -> bool:
        if event.name == "Recorded":
            return event.attrs["kind"] in ("fact", "preference")
        return True  # narrowed to items we hold by `_namespaces_of`

    def apply(self, conn: Connection, events: Sequence[ProjectedEvent]) -> None:
        """Recompose at once every summary an erasure, suppression or redaction touched,
        so no committed batch leaves withdrawn content in one; defer the rest to
        `settle`, in the same catch-up."""
        relevant = [e for e in events if self.wants(e)]
        if not relevant:
            return
        now = self._namespaces_of(conn, [e for e in relevant if e.name in WITHDRAWING])
        later = self._namespaces_of(conn, [e for e in relevant if e.name not in WITHDRAWING])
        self._recompose(conn, now)
        pending = set(conn.execute(select(summary_pending.c.namespace)).scalars())
        new = sorted(later - now - pending)
        if new:
            conn.execute(summary_pending.insert(), [{"namespace": ns} for ns in new])

    def settle(self, conn: Connection) -> None:
        pending = list(conn.execute(select(summary_pending.c.namespace)).scalars())
        if pending:
            self._recompose(conn, pending)

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        raise NotImplementedError("summaries recompose whole namespaces in `apply`")

    def _namespaces_of(self, conn: Connection, events: Sequence[ProjectedEvent]) -> set[str]:
        """A Recorded event names its namespace; any later event's item is found in the
        facts or preferences tables, or, once erased (its row already purged), in
        `summary_inputs`. An erased item that was no input changes no summary."""
        found = {e.attrs["namespace"] for e in events if e.name == "Recorded"}
        recorded = {e.item_id for e in events if e.name == "Recorded"}
        later = sorted({e.item_id for e in events if e.name != "Recorded"} - recorded)
        for chunk in _chunks(later):
            for table in (facts, preferences, summary_inputs):
                query = select(table.c.namespace).where(table.c.item_id.in_(chunk)).distinct()
                found.update(conn.execute(query).scalars())
        return found

    def _recompose(
        self, conn: Connection, namespaces: Iterable[str], exclude: frozenset[str] = frozenset()
    ) -> None:
        for chunk in _chunks(sorted(set(namespaces))):
            live = self.live_inputs(conn, chunk, exclude=exclude)
            for table in (summary_inputs, summaries):
                conn.execute(
                    delete(table).where(table.c.namespace.in_(chunk), table.c.summary_id == PROFILE)
                )
            emptied = [summary_key_ident(ns, PROFILE) for ns in chunk if not live.get(ns)]
            self._log.destroy_derived_keys(emptied)
            conn.execute(delete(summary_pending).where(summary_pending.c.namespace.in_(chunk)))
            rows: list[Row] = []
            inputs: list[Row] = []
            for namespace in chunk:
                items = live.get(namespace)
                if not items:
                    continue  # nothing left to summarise: no summary at all
                ident = summary_key_ident(namespace, PROFILE)
                generation, key = self._log.rotate_derived_key(ident)
                text = self.summarizer.summarize(items).encode("utf-8")
                rows.append(
                    {
                        "namespace": namespace,
                        "summary_id": PROFILE,
                        "sealed": seal(key, ident, generation, text, purpose=SUMMARY),
                        "key_generation": generation,
                        "summarizer": self.summarizer.name,
                        "input_count": len(items),
                        "built_position": max(i.position for i in items),
                    }
                )
                inputs.extend(
                    {
                        "namespace": namespace,
                        "summary_id": PROFILE,
                        "item_id": i.item_id,
                        "version": i.version,
                    }
                    for i in items
                )
            if rows:
                conn.execute(summaries.insert(), rows)
                conn.execute(summary_inputs.insert(), inputs)

    def live_inputs(
        self,
        conn: Connection,
        namespaces: Sequence[str],
        *,
        exclude: frozenset[str] = frozenset(),
        now: datetime | None = None,
        retention: RetentionPolicy | None = None,
    ) -> dict[str, list[SummaryInput]]:
        """Live facts (current or conflict) and preferences, not suppressed and readable,
        by namespace, the newest MAX_INPUTS of each, in summarizer order. `now` (with the
        retention policy) also applies the read-time predicates (expiry, the archived
        tier, end of validity); the projection itself never does, so that a rebuild does
        not depend on when it runs."""
        params = {} if now is None or retention is None else retention.cutoffs(now)
        newest: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
        for table, kind in ((facts, "fact"), (preferences, "preference")):
            query = (
                select(table, catalog.c.version.label("item_version"))
                .join(catalog, catalog.c.item_id == table.c.item_id)
                .where(
                    table.c.namespace.in_(list(namespaces)),
                    table.c.suppressed.is_(False),
                    table.c.value_state == "live",
                )
            )
            if table is facts:
                query = query.where(facts.c.status.in_(LIVE_STATUSES))
            if params and retention is not None:
                query = query.where(~_lapsed(retention))
                if table is facts:
                    at = bindparam("now")
                    query = query.where(or_(facts.c.valid_to.is_(None), facts.c.valid_to > at))
            for r in conn.execute(query, params).mappings():
                if r["item_id"] in exclude:
                    continue
                held = newest.setdefault(r["namespace"], {})
                # One input per item: its latest live version (a duplicate would break
                # the inputs' primary key and stall every later catch-up).
                known = held.get(r["item_id"])
                if known is None or known[1]["position"] < r["position"]:
                    held[r["item_id"]] = (kind, dict(r))
        out: dict[str, dict[str, SummaryInput]] = {}
        for namespace, held in newest.items():
            # The newest MAX_INPUTS by log position, chosen on clear columns: only those
            # are opened, so a heavy user's recomposition does not decrypt every fact.
            chosen = sorted(held.values(), key=lambda kr: -int(kr[1]["position"]))[:MAX_INPUTS]
            self.cells.fill([row for _, row in chosen], "value", "value")
            for kind, row in chosen:
                if row["value"] is not None:  # its key is gone: nothing readable
                    out.setdefault(namespace, {})[row["item_id"]] = _input(kind, row)
        return {ns: sorted(items.values(), key=summary_order) for ns, items in out.items()}

    # -- the store protocol (see memory_ledger.stores.ProjectionStore) ---------------

    def purge(self, conn: Connection, item_ids: Sequence[str]) -> None:
        """Recompose every summary that used any of these items, without them (even
        while the facts or preferences tables still hold them)."""
        ids = frozenset(item_ids)
        namespaces: set[str] = set()
        for chunk in _chunks(sorted(ids)):
            query = select(summary_inputs.c.namespace).where(summary_inputs.c.item_id.in_(chunk))
            namespaces.update(conn.execute(query.distinct()).scalars())
        self._recompose(conn, namespaces, exclude=ids)

    def count_rows(self, conn: Connection, item_ids: Sequence[str]) -> int:
        """Input rows that still reference the items: 0 proves no summary uses them."""
        total = 0
        for chunk in _chunks(sorted(set(item_ids))):
            query = (
                select(func.count())
                .select_from(summary_inputs)
                .where(summary_inputs.c.item_id.in_(chunk))
            )
            total += int(conn.execute(query).scalar_one())
        return total

    def snapshot(self, conn: Connection) -> list[Row]:
        inputs: dict[tuple[str, str], list[tuple[str, int]]] = {}
        query = select(summary_inputs).order_by(*summary_inputs.primary_key.columns)
        for r in conn.execute(query).mappings():
            inputs.setdefault((r["namespace"], r["summary_id"]), []).append(
                (r["item_id"], r["version"])
            )
        rows = super().snapshot(conn)
        for row in rows:
            # The text, not its ciphertext: each sealing draws a fresh nonce and key.
            row["text"] = self._open(row["namespace"], row)
            del row["sealed"], row["key_generation"]
            row["inputs"] = inputs.pop((row["namespace"], row["summary_id"]), [])
        if inputs:  # inputs without a summary would be a bug worth seeing in a diff
            rows.append({"orphan_inputs": sorted(inputs.items())})
        pending = sorted(conn.execute(select(summary_pending.c.namespace)).scalars())
        if pending:  # so would work left unsettled after a catch-up
            rows.append({"pending": pending})
        return rows

    # -- reading ---------------------------------------------------------------------

    def read(
        self, conn: Connection, namespace: str, now: datetime, retention: RetentionPolicy
    ) -> Summary | None:
        """The stored summary, exactly as the projection holds it; but if one of its
        inputs has expired or left its validity since it was built (read-time predicates,
        never baked into the projection), the summary composed now from what is still
        valid, which is not stored."""
        query = select(summaries).where(
            summaries.c.namespace == namespace, summaries.c.summary_id == PROFILE
        )
        stored = conn.execute(query).mappings().first()
        if stored is None:
            return None
        query = select(summary_inputs.c.item_id, summary_inputs.c.version).where(
            summary_inputs.c.namespace == namespace, summary_inputs.c.summary_id == PROFILE
        )
        inputs = tuple(sorted((r[0], int(r[1])) for r in conn.execute(query)))
        text = self._open(namespace, stored)
        ids = [item_id for item_id, _ in inputs]
        if text is not None and not _any_lapsed(conn, ids, now, retention):
            return Summary(namespace, text, inputs, stored["summarizer"])
        valid = self.live_inputs(conn, [namespace], now=now, retention=retention)
        valid = valid.get(namespace, [])
        if not valid:
            return None
        pairs = tuple(sorted((i.item_id, i.version) for i in valid))
        return Summary(namespace, self.summarizer.summarize(valid), pairs, self.summarizer.name)

    def _open(self, namespace: str, stored: Any) -> str | None:
        """The stored text, or None if its key is gone (a recomposition whose projection
        transaction did not commit): then the summary is composed from its inputs."""
        ident = summary_key_ident(namespace, stored["summary_id"])
        key = self._log.keys_for([ident]).data_key(ident, int(stored["key_generation"]))
        if key is None:
            return None
        return unseal(key, ident, int(stored["key_generation"]), stored["sealed"], SUMMARY).decode()

    @property
    def _log(self) -> EventLog:
        if self.log is None:
            raise RuntimeError("this summaries projection was made without the log")
        return self.log


def summary_key_ident(namespace: str, summary_id: str) -> str:
    """The key-store row a summary's text is sealed under."""
    return f"summary:{namespace}:{summary_id}"


def _lapsed(retention: RetentionPolicy) -> Any:
    """Expired under the retention policy, or archived by decay (catalog columns)."""
    return or_(retention.expired_clause(catalog.c), catalog.c.tier != "active")


def _any_lapsed(
    conn: Connection, item_ids: Sequence[str], now: datetime, retention: RetentionPolicy
) -> bool:
    """Whether any of these live items has expired or been archived, or (a fact) reached
    its valid_to."""
    params = retention.cutoffs(now)
    for chunk in _chunks(sorted(item_ids)):
        found = (
            select(func.count())
            .select_from(catalog)
            .where(catalog.c.item_id.in_(chunk), _lapsed(retention))
        )
        if conn.execute(found, params).scalar_one():
            return True
        ended = (
            select(func.count())
            .select_from(facts)
            .where(
                facts.c.item_id.in_(chunk),
                facts.c.status.in_(LIVE_STATUSES),
                facts.c.valid_to <= params["now"],
            )
        )
        if conn.execute(ended).scalar_one():
            return True
    return False


def _input(kind: str, row: Any) -> SummaryInput:
    return SummaryInput(
        item_id=row["item_id"],
        version=int(row["item_version"]),
        kind=kind,
        subject=row["subject"],
        predicate=row["predicate"],
        value=row["value"],
        category=row["category"],
        origin=row["origin"],
        status=row["status"] if kind == "fact" else "current",
        scope=row["scope"] if kind == "preference" else None,
        position=int(row["position"]),
    )


def _chunks(values: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(values), CHUNK):
        yield list(values[start : start + CHUNK])
