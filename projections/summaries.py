"""Summaries: one readable profile per namespace, derived from its live facts and preferences.

A summary is derived text that mixes many items, so forgetting one of them cannot be a
row delete: the summary must be recomposed from the inputs that remain. That is why
each summary records exactly which inputs it was built from (`summary_inputs`: item id
and the item's version). Whenever an input is erased, suppressed, redacted or
superseded, every summary that used it is recomposed, so out-of-scope facts stay in the
text and the target's value does not; a namespace with nothing left has no summary.
A forget request's evidence for this store is the number of input rows that still
reference the targets.

A profile holds the newest MAX_INPUTS live, readable inputs of its namespace by log
position. Recomposing it reads what changed, never every live input (issue 27): beside
its text, each summary keeps its inputs themselves (ids, versions, clear attributes and
values) as its *state*, sealed under the summary's own key like the text, so a batch
re-reads only the items it names (and the facts that share a key with them, whose
status a newcomer may have changed); the values of inputs it leaves alone are taken
from the state, not decrypted again from their cells; and only when an input leaves a
full profile are the next newest live items looked up, by log position, below the
oldest input kept. A namespace without a state (a rebuild, a first summary, a lost
key) is composed from the newest live items, by the same selection, so the incremental
view equals the rebuilt one. Every recomposition that changes the summary rotates its
key: the text and state it replaced can no longer be opened anywhere.

The projection never resolves facts itself: the runner applies it after the facts,
preferences and catalog projections in the same transaction, so it reads their tables
as they are after the batch (the catalog gives each item's current version). A summary
is recomposed in the very batch that erases, suppresses or redacts one of its inputs;
additions wait for the last batch of the catch-up (`settle`, with the items they
named kept in `summary_pending`), so a rebuild composes each summary once rather than
once per batch.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BindParameter,
    Column,
    Connection,
    Index,
    Integer,
    Select,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
)

from memory_ledger.crypto import seal, unseal
from memory_ledger.event_log import EventLog
from memory_ledger.keystore import KeyRing
from memory_ledger.policy.retention import RetentionPolicy
from memory_ledger.projections.base import Batch, Projection, Row, metadata
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.cells import Cells, Opened
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.facts import LIVE_STATUSES, facts
from memory_ledger.projections.preferences import preferences
from memory_ledger.projections.summarizers import (
    Summarizer,
    SummaryInput,
    load_summarizer,
    summary_order,
)
from memory_ledger.views import Summary

PROFILE = "profile"
#: A profile summarises at most this many live inputs, the most recently written: a
#: readable profile, and a recomposition whose cost does not follow a heavy user's
#: memory. Chosen by log position, so a rebuild chooses the same ones.
MAX_INPUTS = 200
SUMMARY = b"summary"  # the seal's purpose
STATE = b"summary-state"  # the purpose of the sealed inputs kept beside the text
CHUNK = 500
#: A pending row with this item id: compose the namespace from scratch (it has no state).
WHOLE = ""

summaries = Table(
    "summaries",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("summary_id", Text, primary_key=True),
    # The text, sealed under the summary's own key (`summary_key_ident`), which every
    # recomposition replaces: the text it replaced can no longer be opened anywhere.
    Column("sealed", Text, nullable=False),
    # The inputs the text was composed from, values included, sealed under the same key
    # and generation: what lets the next recomposition read only what changed.
    Column("sealed_state", Text, nullable=False),
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

# What a catch-up still in progress has to settle (see `apply`): the items named by its
# additions, per namespace, or WHOLE for a namespace that has no summary yet.
summary_pending = Table(
    "summary_pending",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("item_id", Text, primary_key=True),
)

#: Events that withdraw content from use: their summaries are recomposed in the batch
#: that applies them. Anything else only adds or updates, and waits for the catch-up's
#: last batch, so that a rebuild composes each summary once instead of once per batch.
WITHDRAWING = ("Erased", "Suppressed", "Redacted")
#: Withdrawals that only take an item away (no new version): they matter to a summary
#: only if it shows the item.
REMOVING = ("Erased", "Suppressed")

#: What a recomposition is told per namespace: the items to look at again, or None to
#: compose it from scratch.
Work = dict[str, set[str] | None]
#: An input ready to use, or a live row whose value has yet to be opened.
Candidate = SummaryInput | Row


class SummariesProjection(Projection):
    name: ClassVar[str] = "summaries"
    table = summaries
    primary_key = ("namespace", "summary_id")
    holds = (
        "profile text of live facts and preferences, and the inputs it was composed from, "
        "sealed under the summary's own key, with input ids and versions"
    )

    def __init__(self, log: EventLog | None = None, summarizer: Summarizer | None = None) -> None:
        self.log = log
        self.summarizer = summarizer or load_summarizer()
        # The read path's lapse check, built once for the policy it was built for.
        self._lapsed_for: tuple[RetentionPolicy, tuple[Select[Any], Select[Any]]] | None = None

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
        return True  # narrowed to items we hold by `_touched`

    def apply(self, conn: Connection, events: Sequence[ProjectedEvent]) -> None:
        """Recompose at once every summary an erasure, suppression or redaction touched,
        so no committed batch leaves withdrawn content in one (with the additions this
        batch and earlier ones of the catch-up made to it); defer the rest to `settle`,
        in the same catch-up, remembering which items they named."""
        relevant = [e for e in events if self.wants(e)]
        if not relevant:
            return
        now = self._inputs_among(conn, [e for e in relevant if e.name in REMOVING])
        # A redaction writes a new version, which may enter a summary: looked up as any.
        for namespace, ids in self._touched(
            conn, [e for e in relevant if e.name in WITHDRAWING and e.name not in REMOVING]
        ).items():
            now.setdefault(namespace, set()).update(ids)
        later = self._touched(conn, [e for e in relevant if e.name not in WITHDRAWING])
        if now:
            work: Work = {ns: ids | later.pop(ns, set()) for ns, ids in now.items()}
            for namespace, pending in self._take_pending(conn, sorted(work)).items():
                held = work[namespace]
                work[namespace] = None if pending is None or held is None else held | pending
            self._recompose(conn, work)
        if later:
            self._defer(conn, later)

    def settle(self, conn: Connection, opened: Opened | None = None) -> None:
        """Recompose what `apply` deferred. `opened` is not used: a profile opens at most
        MAX_INPUTS values per namespace, few against the catch-up's own opening."""
        pending = self._take_pending(conn, None)
        if pending:
            self._recompose(conn, pending)

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        raise NotImplementedError("summaries recompose whole namespaces in `apply`")

    def _touched(self, conn: Connection, events: Sequence[ProjectedEvent]) -> dict[str, set[str]]:
        """The items these events name, by namespace. A Recorded event names its
        namespace; any later event's item is found in the facts or preferences tables,
        or, once erased (its row already purged), in `summary_inputs`. An erased item
        that was no input changes no summary."""
        found: dict[str, set[str]] = {}
        for e in events:
            if e.name == "Recorded":
                found.setdefault(e.attrs["namespace"], set()).add(e.item_id)
        recorded = {e.item_id for e in events if e.name == "Recorded"}
        later = sorted({e.item_id for e in events if e.name != "Recorded"} - recorded)
        for chunk in _chunks(later):
            for table in (facts, preferences, summary_inputs):
                query = select(table.c.namespace, table.c.item_id).where(table.c.item_id.in_(chunk))
                for namespace, item_id in conn.execute(query):
                    found.setdefault(namespace, set()).add(item_id)
        return found

    def _inputs_among(
        self, conn: Connection, events: Sequence[ProjectedEvent]
    ) -> dict[str, set[str]]:
        """The items withdrawn by these events that a summary shows, by namespace. Taking
        an item away cannot change a summary that does not show it (a profile holds the
        newest live inputs; one more withdrawn item below them frees no place), so a
        forget of an item no summary uses recomposes nothing."""
        found: dict[str, set[str]] = {}
        for chunk in _chunks(sorted({e.item_id for e in events})):
            query = select(summary_inputs.c.namespace, summary_inputs.c.item_id).where(
                summary_inputs.c.item_id.in_(chunk)
            )
            for namespace, item_id in conn.execute(query):
                found.setdefault(namespace, set()).add(item_id)
        return found

    def _defer(self, conn: Connection, touched: Mapping[str, set[str]]) -> None:
        """Note what `settle` must look at: the named items of a namespace that has a
        summary, or the whole of one that has none (composed from scratch, once)."""
        namespaces = sorted(touched)
        has_summary: set[str] = set()
        held: set[tuple[str, str]] = set()
        for chunk in _chunks(namespaces):
            query = select(summaries.c.namespace).where(summaries.c.namespace.in_(chunk))
            has_summary.update(conn.execute(query).scalars())
            query = select(summary_pending.c.namespace, summary_pending.c.item_id).where(
                summary_pending.c.namespace.in_(chunk)
            )
            held.update((str(ns), str(item)) for ns, item in conn.execute(query))
        whole = {ns for ns, item in held if item == WHOLE}
        rows: list[Row] = []
        for namespace in namespaces:
            if namespace in whole:
                continue  # composed from scratch anyway
            if namespace not in has_summary:
                rows.append({"namespace": namespace, "item_id": WHOLE})
                continue
            rows.extend(
                {"namespace": namespace, "item_id": item}
                for item in sorted(touched[namespace])
                if (namespace, item) not in held
            )
        if rows:
            conn.execute(summary_pending.insert(), rows)

    def _take_pending(self, conn: Connection, namespaces: Sequence[str] | None) -> Work:
        """The deferred work of these namespaces (all, with None), removed from the table."""
        query = select(summary_pending.c.namespace, summary_pending.c.item_id)
        if namespaces is not None:
            if not namespaces:
                return {}
            query = query.where(summary_pending.c.namespace.in_(list(namespaces)))
        work: Work = {}
        for namespace, item_id in conn.execute(query):
            if item_id == WHOLE or work.get(namespace, set()) is None:
                work[namespace] = None
            else:
                work.setdefault(namespace, set()).add(item_id)  # type: ignore[union-attr]
        if work:
            if namespaces is None:
                conn.execute(delete(summary_pending))
            else:
                for chunk in _chunks(sorted(work)):
                    conn.execute(
                        delete(summary_pending).where(summary_pending.c.namespace.in_(chunk))
                    )
        return work

    # -- recomposing -----------------------------------------------------------------

    def _recompose(
        self, conn: Connection, work: Work, exclude: frozenset[str] = frozenset()
    ) -> None:
        """Recompose each namespace's profile from its state and the items named (or from
        scratch), leaving out `exclude`; rewrite it, under a new key, only if it changed.
        Rows are written a chunk of namespaces at a time: a rebuild composes thousands."""
        for chunk in _chunks(sorted(work)):
            query = select(summaries).where(
                summaries.c.namespace.in_(chunk), summaries.c.summary_id == PROFILE
            )
            stored = {r["namespace"]: r for r in conn.execute(query).mappings()}
            keys = self._log.keys_for([summary_key_ident(ns, PROFILE) for ns in sorted(stored)])
            olds = {ns: self._state(ns, stored[ns], keys) if ns in stored else None for ns in chunk}
            scratch = [ns for ns in chunk if olds[ns] is None or work[ns] is None]
            fresh = self._compose_from_scratch(conn, scratch, exclude)
            emptied: list[str] = []
            rows: list[Row] = []
            inputs: list[Row] = []
            for namespace in chunk:
                old, named = olds[namespace], work[namespace]
                if old is None or named is None:
                    new = fresh.get(namespace, [])
                else:
                    new = self._revise(conn, namespace, old, named, exclude)
                if namespace in stored and new == old:
                    continue  # nothing it shows changed: no new key, no write
                if namespace in stored:
                    conn.execute(
                        delete(summaries).where(
                            summaries.c.namespace == namespace, summaries.c.summary_id == PROFILE
                        )
                    )
                inputs.extend(self._write_inputs(conn, namespace, old, new, namespace in stored))
                if not new:
                    emptied.append(summary_key_ident(namespace, PROFILE))
                    continue  # nothing left to summarise: no summary at all
                rows.append(self._sealed_row(namespace, new))
            if rows:
                conn.execute(summaries.insert(), rows)
            if inputs:
                conn.execute(summary_inputs.insert(), inputs)
            self._log.destroy_derived_keys(emptied)

    def _sealed_row(self, namespace: str, inputs: Sequence[SummaryInput]) -> Row:
        ident = summary_key_ident(namespace, PROFILE)
        generation, key = self._log.rotate_derived_key(ident)
        text = self.summarizer.summarize(inputs).encode("utf-8")
        state = json.dumps([_encode(i) for i in inputs], ensure_ascii=False).encode("utf-8")
        return {
            "namespace": namespace,
            "summary_id": PROFILE,
            "sealed": seal(key, ident, generation, text, purpose=SUMMARY),
            "sealed_state": seal(key, ident, generation, state, purpose=STATE),
            "key_generation": generation,
            "summarizer": self.summarizer.name,
            "input_count": len(inputs),
            "built_position": max(i.position for i in inputs),
        }

    def _write_inputs(
        self,
        conn: Connection,
        namespace: str,
        old: Sequence[SummaryInput] | None,
        new: Sequence[SummaryInput],
        stored: bool,
    ) -> list[Row]:
        """Bring `summary_inputs` from the old inputs to the new ones, touching only the
        rows that differ (all of a stored summary's when its old state could not be
        read): deletes here, and the rows to insert returned, for one insert per chunk."""
        where = and_(
            summary_inputs.c.namespace == namespace, summary_inputs.c.summary_id == PROFILE
        )
        wanted = {i.item_id: i.version for i in new}
        had: dict[str, int] = {}
        if old is None and stored:
            conn.execute(delete(summary_inputs).where(where))
        elif old is not None:
            had = {i.item_id: i.version for i in old}
        gone = sorted(item for item, version in had.items() if wanted.get(item) != version)
        for chunk in _chunks(gone):
            conn.execute(delete(summary_inputs).where(where, summary_inputs.c.item_id.in_(chunk)))
        return [
            {"namespace": namespace, "summary_id": PROFILE, "item_id": item, "version": version}
            for item, version in sorted(wanted.items())
            if had.get(item) != version
        ]

    def _compose_from_scratch(
        self, conn: Connection, namespaces: Sequence[str], exclude: frozenset[str]
    ) -> dict[str, list[SummaryInput]]:
        """The newest MAX_INPUTS live, readable inputs of each namespace: what any state
        must equal. For namespaces without a state (a rebuild, a first summary, a lost
        key), which have no inputs to start from: their live rows are read together, a
        chunk of namespaces per statement, and the chosen values opened in one pass."""
        if not namespaces:
            return {}
        by_namespace: dict[str, list[Row]] = {}
        for table, kind in ((facts, "fact"), (preferences, "preference")):
            query = _live_rows(table, kind).where(table.c.namespace.in_(list(namespaces)))
            for r in conn.execute(query).mappings():
                if r["item_id"] not in exclude:
                    by_namespace.setdefault(r["namespace"], []).append({**r, "kind": kind})
        ordered = {
            ns: list(_newest_live_rows(rows, ns).values()) for ns, rows in by_namespace.items()
        }
        heads = [row for rows in ordered.values() for row in rows[:MAX_INPUTS]]
        if heads:
            self.cells.fill(heads, "value", "value")
        out: dict[str, list[SummaryInput]] = {}
        for namespace, rows in ordered.items():
            opened = [_input(r["kind"], r) for r in rows[:MAX_INPUTS] if r["value"] is not None]
            rest: list[Candidate] = list(rows[MAX_INPUTS:])
            # An unreadable one among the newest (its key gone): the next ones stand in.
            chosen = self._take(_chain(opened, rest))
            if chosen:
                out[namespace] = chosen
        return out

    def _revise(
        self,
        conn: Connection,
        namespace: str,
        old: Sequence[SummaryInput],
        named: set[str],
        exclude: frozenset[str],
    ) -> list[SummaryInput]:
        """The profile after a change to the named items, from the previous inputs.

        Only the named items are read again, with the live facts of the inputs that share
        a subject and predicate with one of them (a newcomer may have superseded them or
        put them in conflict). Every other input is kept as it was, value included. The
        previous inputs were the newest MAX_INPUTS live, readable items, so when the
        profile was full, nothing unnamed below its oldest input can be in it unless
        named items left it: only then are the next newest looked up, below that input.
        """
        held = {i.item_id: i for i in old}
        look = (set(named) | (exclude & held.keys())) - exclude
        full = len(old) >= MAX_INPUTS
        floor = min(i.position for i in old) if full else None
        # A named item that is no input can enter a full profile only with a row at or
        # above its floor (a new record or a new version is the newest in the log); below
        # it, it matters only to a refill, which reads the tables. So a forget's many
        # targets are not materialised here, only those the profile holds.
        rows = self._rows_of(conn, look & held.keys())
        rows.extend(self._rows_of(conn, look - held.keys(), since=floor))
        keys = {(r["subject"], r["predicate"]) for r in rows if r["kind"] == "fact"}
        rivals = {
            i.item_id
            for i in old
            if i.kind == "fact" and (i.subject, i.predicate) in keys and i.item_id not in look
        }
        if rivals:
            rows.extend(self._rows_of(conn, rivals))
            look |= rivals
        changed = look | (exclude & held.keys())
        candidates: list[Candidate] = [i for i in old if i.item_id not in changed]
        for row in _newest_live_rows(rows, namespace).values():
            before = held.get(row["item_id"])
            if before is not None and _same_but_value(before, row):
                candidates.append(before)  # unchanged: its value is in the state already
            else:
                candidates.append(row)
        candidates.sort(key=lambda c: -_position(c))
        if floor is None:
            # Every live, readable item was an input: what is live now is here.
            return self._take(iter(candidates))
        above = [c for c in candidates if _position(c) >= floor]
        # Read below the floor only if `above` does not fill the profile (a generator:
        # no query is made unless `_take` gets that far).
        below = self._newest(conn, namespace, floor, exclude | {_item_id(c) for c in above})
        return self._take(_chain(above, below))

    def _take(self, candidates: Iterator[Candidate]) -> list[SummaryInput]:
        """The first MAX_INPUTS readable candidates (newest first), opening the values of
        those not yet open a few at a time, in summarizer order."""
        chosen: list[SummaryInput] = []
        while len(chosen) < MAX_INPUTS:
            step = [c for _, c in zip(range(MAX_INPUTS - len(chosen)), candidates, strict=False)]
            if not step:
                break
            closed = [c for c in step if not isinstance(c, SummaryInput)]
            if closed:
                self.cells.fill(closed, "value", "value")
            for c in step:
                if isinstance(c, SummaryInput):
                    chosen.append(c)
                elif c["value"] is not None:  # its key is gone: nothing readable
                    chosen.append(_input(c["kind"], c))
        return sorted(chosen, key=summary_order)

    def _newest(
        self, conn: Connection, namespace: str, below: int | None, skip: frozenset[str] | set[str]
    ) -> Iterator[Row]:
        """The namespace's live facts and preferences, newest first by log position (each
        item once, at its newest live row), below `below` if given, leaving out `skip`:
        read a page at a time from both tables, so a caller that needs a few reads a few."""
        seen = set(skip)
        cursor = below
        while True:
            pages: list[list[Row]] = []
            bound: int | None = None
            for table, kind in ((facts, "fact"), (preferences, "preference")):
                query = _live_rows(table, kind).where(table.c.namespace == namespace)
                if cursor is not None:
                    query = query.where(table.c.position < cursor)
                query = query.order_by(table.c.position.desc()).limit(MAX_INPUTS)
                page = [{**r, "kind": kind} for r in conn.execute(query).mappings()]
                pages.append(page)
                if len(page) == MAX_INPUTS:  # a full page: more may lie below its last row
                    last = int(page[-1]["position"])
                    bound = last if bound is None else max(bound, last)
            merged = heapq.merge(*pages, key=lambda r: -int(r["position"]))
            for row in merged:
                if bound is not None and int(row["position"]) < bound:
                    break  # the other table may hold newer rows below this page
                if row["item_id"] not in seen:
                    seen.add(row["item_id"])
                    yield row
            if bound is None:
                return
            cursor = bound

    def _rows_of(
        self, conn: Connection, item_ids: Iterable[str], since: int | None = None
    ) -> list[Row]:
        """Every fact and preference row of these items, live or not (at log position
        `since` or later, if given), with the clear columns and the sealed cell an input
        needs."""
        out: list[Row] = []
        for chunk in _chunks(sorted(set(item_ids))):
            for table, kind in ((facts, "fact"), (preferences, "preference")):
                query = _input_columns(table, kind).where(table.c.item_id.in_(chunk))
                if since is not None:
                    query = query.where(table.c.position >= since)
                out.extend({**r, "kind": kind} for r in conn.execute(query).mappings())
        return out

    def _state(self, namespace: str, stored: Any, keys: KeyRing) -> list[SummaryInput] | None:
        """The inputs a stored summary was composed from, or None if its key is gone."""
        ident = summary_key_ident(namespace, PROFILE)
        generation = int(stored["key_generation"])
        key = keys.data_key(ident, generation)
        if key is None:
            return None
        raw = unseal(key, ident, generation, stored["sealed_state"], STATE)
        return [_decode(entry) for entry in json.loads(raw)]

    def live_inputs(
        self,
        conn: Connection,
        namespaces: Sequence[str],
        *,
        now: datetime,
        retention: RetentionPolicy,
    ) -> dict[str, list[SummaryInput]]:
        """What a profile would hold as of `now`: the newest MAX_INPUTS live, readable
        inputs that are also still valid under the read-time predicates (expiry, the
        archived tier, end of validity), which the projection itself never applies, so
        that a rebuild does not depend on when it runs. Read only when a stored
        summary's inputs have lapsed."""
        params = retention.cutoffs(now)
        out: dict[str, list[SummaryInput]] = {}
        for namespace in namespaces:
            rows: list[Row] = []
            for table, kind in ((facts, "fact"), (preferences, "preference")):
                query = (
                    _live_rows(table, kind)
                    .where(table.c.namespace == namespace, ~_lapsed(retention))
                    .order_by(table.c.position.desc())
                )
                if table is facts:
                    at: BindParameter[str] = bindparam("now")  # canonical_time text
                    query = query.where(or_(facts.c.valid_to.is_(None), facts.c.valid_to > at))
                rows.extend({**r, "kind": kind} for r in conn.execute(query, params).mappings())
            rows.sort(key=lambda r: -int(r["position"]))
            found = self._take(iter(_newest_live_rows(rows, namespace).values()))
            if found:
                out[namespace] = found
        return out

    # -- the store protocol (see memory_ledger.stores.ProjectionStore) ---------------

    def purge(self, conn: Connection, item_ids: Sequence[str]) -> None:
        """Recompose every summary that used any of these items, without them (even
        while the facts or preferences tables still hold them)."""
        ids = frozenset(item_ids)
        work: Work = {}
        for chunk in _chunks(sorted(ids)):
            query = select(summary_inputs.c.namespace).where(summary_inputs.c.item_id.in_(chunk))
            work.update((ns, set()) for ns in conn.execute(query.distinct()).scalars())
        self._recompose(conn, work, exclude=ids)

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
        idents = [summary_key_ident(r["namespace"], r["summary_id"]) for r in rows]
        keys = self._log.keys_for(idents)
        for row in rows:
            # The text and state, not their ciphertext: each sealing draws a fresh nonce
            # and key.
            row["text"] = self._open(row["namespace"], row)
            state = self._state(row["namespace"], row, keys)
            row["state"] = None if state is None else [_encode(i) for i in state]
            del row["sealed"], row["sealed_state"], row["key_generation"]
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
        if text is not None and not self._any_lapsed(conn, namespace, now, retention):
            return Summary(namespace, text, inputs, stored["summarizer"])
        valid = self.live_inputs(conn, [namespace], now=now, retention=retention)
        found = valid.get(namespace, [])
        if not found:
            return None
        pairs = tuple(sorted((i.item_id, i.version) for i in found))
        return Summary(namespace, self.summarizer.summarize(found), pairs, self.summarizer.name)

    def _any_lapsed(
        self, conn: Connection, namespace: str, now: datetime, retention: RetentionPolicy
    ) -> bool:
        """Whether an input of the namespace's profile has lapsed as of `now`."""
        if self._lapsed_for is None or self._lapsed_for[0] is not retention:
            self._lapsed_for = (retention, _lapsed_queries(retention))
        params = {**retention.cutoffs(now), "namespace": namespace}
        return any(conn.execute(q, params).first() is not None for q in self._lapsed_for[1])

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


def _input_columns(table: Table, kind: str) -> Select[Any]:
    """What an input needs from a facts or preferences row, with the item's version."""
    columns = [
        table.c.item_id,
        table.c.namespace,
        table.c.subject,
        table.c.predicate,
        table.c.sealed,
        table.c.key_generation,
        table.c.value_state,
        table.c.suppressed,
        table.c.category,
        table.c.origin,
        table.c.position,
        (facts.c.status if kind == "fact" else preferences.c.scope),
        catalog.c.version.label("item_version"),
    ]
    return select(*columns).join(catalog, catalog.c.item_id == table.c.item_id)


def _live_rows(table: Table, kind: str) -> Select[Any]:
    """Rows that can be inputs: not suppressed, readable, and (facts) current or in
    conflict. `_is_live` says the same of a row in hand."""
    query = _input_columns(table, kind).where(
        table.c.suppressed.is_(False), table.c.value_state == "live"
    )
    if kind == "fact":
        query = query.where(facts.c.status.in_(LIVE_STATUSES))
    return query


def _is_live(row: Row) -> bool:
    return (
        not row["suppressed"]
        and row["value_state"] == "live"
        and (row["kind"] != "fact" or row["status"] in LIVE_STATUSES)
    )


def _newest_live_rows(rows: Iterable[Row], namespace: str) -> dict[str, Row]:
    """Each item's newest live row (one input per item: a duplicate would break the
    inputs' primary key and stall every later catch-up), newest items first."""
    best: dict[str, Row] = {}
    for row in rows:
        if row["namespace"] != namespace or not _is_live(row):
            continue
        known = best.get(row["item_id"])
        if known is None or int(known["position"]) < int(row["position"]):
            best[row["item_id"]] = row
    return dict(sorted(best.items(), key=lambda kv: -int(kv[1]["position"])))


def _same_but_value(held: SummaryInput, row: Row) -> bool:
    """Whether a live row would make the same input as one held, value aside: the
    item's version moves with every event on it, so the value is the same too."""
    return (
        held.version == int(row["item_version"])
        and held.kind == row["kind"]
        and held.position == int(row["position"])
        and held.status == (row["status"] if row["kind"] == "fact" else "current")
        and held.scope == (row["scope"] if row["kind"] == "preference" else None)
        and (held.subject, held.predicate, held.category, held.origin)
        == (row["subject"], row["predicate"], row["category"], row["origin"])
    )


def _position(candidate: Candidate) -> int:
    if isinstance(candidate, SummaryInput):
        return candidate.position
    return int(candidate["position"])


def _item_id(candidate: Candidate) -> str:
    if isinstance(candidate, SummaryInput):
        return candidate.item_id
    return str(candidate["item_id"])


def _chain(first: Iterable[Candidate], then: Iterable[Candidate]) -> Iterator[Candidate]:
    yield from first
    yield from then


#: The order of an input's fields in a sealed state entry: SummaryInput's own (checked
#: by tests/test_summary_incremental.py).
_FIELDS = (
    "item_id",
    "version",
    "kind",
    "subject",
    "predicate",
    "value",
    "category",
    "origin",
    "status",
    "scope",
    "position",
)


def _encode(item: SummaryInput) -> list[Any]:
    return [getattr(item, name) for name in _FIELDS]


def _decode(entry: Sequence[Any]) -> SummaryInput:
    return SummaryInput(*entry)  # _FIELDS is SummaryInput's own field order


def _lapsed(retention: RetentionPolicy) -> Any:
    """Expired under the retention policy, or archived by decay (catalog columns)."""
    return or_(retention.expired_clause(catalog.c), catalog.c.tier != "active")


def _lapsed_queries(retention: RetentionPolicy) -> tuple[Select[Any], Select[Any]]:
    """Two statements that find an input of a profile (`:namespace`) that has expired or
    been archived, or (a fact) reached its valid_to. The inputs are named by a subquery,
    not a list of ids, and the times are parameters (`retention.cutoffs`), so the two are
    built once per policy: every read runs them."""
    inputs = select(summary_inputs.c.item_id).where(
        summary_inputs.c.namespace == bindparam("namespace"),
        summary_inputs.c.summary_id == PROFILE,
    )
    found = select(catalog.c.item_id).where(catalog.c.item_id.in_(inputs), _lapsed(retention))
    ended = select(facts.c.item_id).where(
        facts.c.item_id.in_(inputs),
        facts.c.status.in_(LIVE_STATUSES),
        facts.c.valid_to <= bindparam("now"),
    )
    return found.limit(1), ended.limit(1)


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
