"""Background consolidation: inferred facts and observed preferences from new turns.

This is where agent memory systems usually write deleted data back: a job reads a turn,
the user deletes it, and the job's result lands afterwards. Here every proposal pins
the versions of the turns it read, and the append refuses it at commit if one of them
has since been erased, suppressed or changed (StaleDerivation). Each turn is read once
(`consolidated_turns`), so a conclusion the user erased is not derived again from it,
and a conclusion the user suppressed is not derived again from anything.

One pass over a namespace, `read` then `commit`:

1. **Extract.** The turns not read yet go through the extractor (extractors.py: the
   structured candidates the writing agent attached, plus phrase patterns; a plug-in
   can replace it). Every candidate is validated at the write boundary's rules.
2. **Gate.** A candidate about someone other than the user (`about = third_party`, or a
   subject other than `user`) is not written into the user's memory unless the job is
   told to (`MEMORY_LEDGER_CONSOLIDATE_THIRD_PARTY=1`): counted `skipped_third_party`.
3. **Group** by canonical key (namespace, kind, subject, predicate, normalised value;
   canonical.py). A fact needs one turn. An observed preference needs evidence from
   `promote_after` distinct turns (`MEMORY_LEDGER_PROMOTION_EVIDENCE`, default 2):
   until then its turns wait in `consolidation_pending` (ids only) and are read again
   on later runs, the newest PENDING_WINDOW of a namespace; older evidence lapses.
4. **Merge, idempotently.** A key whose conclusion is already live is not written again:
   if every evidence turn is already cited, nothing happens (`duplicates`); if the live
   item is the job's own, the new turns are recorded as evidence by a new item citing
   the old item's turns and the new ones, after which the old item is suppressed with
   reason `merged` (`reinforced`); a conclusion the user (or another writer) stated is
   left alone (`known`). A suppressed conclusion blocks its key (`skipped_suppressed`).
5. **Commit** through `remember_many` (the write gate, the cardinality policy, the
   pinned-version check at commit), in batches; a refused batch is retried one write at
   a time, so one stale turn does not hold up the others.

Every written item cites all its evidence turns in `derived_from` (pinned versions), so
its evidence count is `len(derived_from)` and forgetting any of them cascades to it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from pydantic import ValidationError
from sqlalchemy import Column, Index, Table, Text, delete, select

from memory_ledger.config import Settings
from memory_ledger.errors import (
    ConfigurationError,
    InvalidTransition,
    InvalidWrite,
    StaleDerivation,
)
from memory_ledger.event_log import ERASED
from memory_ledger.forgetting.mentions import REPLACEMENT as FORGOTTEN
from memory_ledger.forgetting.redaction import REDACTED
from memory_ledger.jobs.consolidation.canonical import CanonicalKey
from memory_ledger.jobs.consolidation.extractors import (
    EXTRACTOR_ENV,
    Extractor,
    Turn,
    load_extractor,
)
from memory_ledger.jobs.context import JobContext, NamespaceLedger
from memory_ledger.policy.retention import inherited_retention
from memory_ledger.projections.base import metadata
from memory_ledger.projections.catalog import catalog, unexpired
from memory_ledger.projections.facts import LIVE_STATUSES, facts
from memory_ledger.projections.preferences import preferences
from memory_ledger.projections.transcripts import transcripts
from memory_ledger.write_policy import (
    MAX_DERIVED_FROM,
    USER_SUBJECT,
    TurnCandidate,
    canonical_time,
    decode_candidates,
)

__all__ = [
    "EXTRACTOR_ENV",
    "PROMOTION_ENV",
    "THIRD_PARTY_ENV",
    "Consolidator",
    "Proposal",
    "Reading",
    "consolidate_all",
    "consolidated",
    "pending",
]

log = logging.getLogger("memory_ledger.consolidation")

PROMOTION_ENV = "MEMORY_LEDGER_PROMOTION_EVIDENCE"
THIRD_PARTY_ENV = "MEMORY_LEDGER_CONSOLIDATE_THIRD_PARTY"
DEFAULT_PROMOTE_AFTER = 2
MAX_PROMOTE_AFTER = 32
#: Turns one `read` takes; `run_once` reads batch after batch until none is left.
DEFAULT_BATCH = 1_000
MAX_BATCH = 10_000
#: Turns of one namespace whose preference evidence waits for promotion, newest first:
#: each run reads them again, so their number is bounded; older evidence lapses.
PENDING_WINDOW = 1_000
#: Candidates one turn may yield (attached and extracted together); the rest are dropped.
MAX_CANDIDATES_PER_TURN = 64
#: Writes per `remember_many` call at commit.
COMMIT_BATCH = 100
CONFIDENCE = 0.6  # what the job's inferences are worth: less than a statement
WRITER = "consolidation"
MERGED = "merged"  # the suppression reason of an item a newer one merged
_SENSITIVITY_ORDER = ("public", "internal", "personal", "restricted")
_MARKERS = (REDACTED, FORGOTTEN)

consolidated = Table(
    "consolidated_turns",
    metadata,
    Column("item_id", Text, primary_key=True),  # ids only: which turns were read
)
pending = Table(
    "consolidation_pending",
    metadata,
    # ids only: turns read that hold preference evidence not promoted yet
    Column("item_id", Text, primary_key=True),
    Column("namespace", Text, nullable=False),
    Index("ix_consolidation_pending_ns", "namespace"),
)

COUNTS = (
    "turns_read",
    "written",
    "refused",
    "reinforced",
    "duplicates",
    "known",
    "pending",
    "skipped_third_party",
    "skipped_suppressed",
    "skipped_redacted",
    "invalid",
    "failed",
)


@dataclass(frozen=True)
class Proposal:
    """A derived memory and the exact versions of the turns it was read from.

    `turn_id` is the newest evidence turn, `turn_ids` all of them (as cited), and
    `merges` the live items (id, version) the write replaces: they are suppressed with
    reason `merged` once it is stored."""

    write: dict[str, Any]
    turn_id: str
    turn_ids: tuple[str, ...] = ()
    merges: tuple[tuple[str, int], ...] = ()


class Reading(list[Proposal]):
    """What `read` found: its proposals (a list, as before) and what `commit` records
    besides them: the turns read, and the namespace's pending evidence."""

    def __init__(
        self,
        proposals: Iterable[Proposal] = (),
        *,
        namespace: str = "",
        turns_read: Sequence[str] = (),
        pending_seen: Iterable[str] = (),
        pending_after: Iterable[str] = (),
        counts: Mapping[str, int] | None = None,
        full: bool = False,
    ) -> None:
        super().__init__(proposals)
        self.namespace = namespace
        self.turns_read = list(turns_read)
        self.pending_seen = set(pending_seen)
        self.pending_after = set(pending_after)
        self.counts: Counter[str] = Counter(counts or {})
        #: The batch was full: more unread turns may be waiting.
        self.full = full


@dataclass
class _Row:
    """A turn as read from the transcripts projection, opened."""

    item_id: str
    version: int
    speaker: str
    session_id: str
    turn_id: str
    sensitivity: str
    expires_at: str | None
    position: int
    text: str
    candidates: tuple[TurnCandidate, ...]


@dataclass
class _Evidence:
    """Every turn that supports one canonical key, and the newest wording of it."""

    candidate: TurnCandidate
    turns: dict[str, _Row] = field(default_factory=dict)

    def add(self, row: _Row, candidate: TurnCandidate) -> None:
        newest = max(self.turns.values(), key=lambda r: r.position, default=None)
        if newest is None or row.position >= newest.position:
            self.candidate = candidate
        self.turns[row.item_id] = row


@dataclass(frozen=True)
class _Held:
    """A fact or preference already in the namespace, with its canonical key."""

    item_id: str
    version: int
    suppressed: bool
    writer: str | None
    cited: frozenset[str]
    value: str


class Consolidator:
    """The consolidation job for one store. Settings are read once, here, and a bad
    one fails here with a ConfigurationError, before anything is read."""

    def __init__(
        self,
        context: JobContext,
        *,
        extractor: Extractor | None = None,
        promote_after: int | None = None,
        allow_third_party: bool | None = None,
        batch_size: int = DEFAULT_BATCH,
        now: datetime | None = None,
    ) -> None:
        self.context = context
        settings = context.settings
        self.extractor = extractor if extractor is not None else load_extractor(settings.extractor)
        self.promote_after = _promote_after(promote_after, settings)
        self.allow_third_party = (
            settings.flag(THIRD_PARTY_ENV) if allow_third_party is None else allow_third_party
        )
        if isinstance(batch_size, bool) or not 1 <= batch_size <= MAX_BATCH:
            raise ConfigurationError(f"batch_size must be from 1 to {MAX_BATCH}")
        self.batch_size = batch_size
        self.now = now
        #: Every count since this job was made (see COUNTS).
        self.counts: Counter[str] = Counter()
        metadata.create_all(context.engine, tables=[consolidated, pending])

    # -- reading -----------------------------------------------------------------------

    def read(self, ledger: NamespaceLedger) -> Reading:
        """Proposals from turns not read yet (one batch), with the namespace's pending
        evidence. Nothing is written here."""
        self.context.runner.catch_up()
        now = canonical_time(self.now or datetime.now(UTC))
        namespace = ledger.namespace
        counts: Counter[str] = Counter()
        with self.context.engine.connect() as conn:
            new_rows = self._turn_rows(conn, namespace, now, new=True)
            pending_rows = self._turn_rows(conn, namespace, now, new=False)
            pending_seen = set(
                conn.execute(select(pending.c.item_id).where(pending.c.namespace == namespace))
                .scalars()
                .all()
            )
        opened = self._open(new_rows + pending_rows, counts)
        evidence: dict[CanonicalKey, _Evidence] = {}
        turns_read: list[str] = []
        keep_pending: set[str] = set()
        for n, row in enumerate(opened):
            if row is None:
                continue  # erased since the projection was read: nothing to read
            is_new = n < len(new_rows)
            found = self._extract(row, counts)
            if found is None:  # the extractor failed: read it again next time
                if not is_new:
                    keep_pending.add(row.item_id)
                continue
            if is_new:
                turns_read.append(row.item_id)
            for candidate in found:
                if not is_new and candidate.kind != "preference":
                    continue  # the facts of a pending turn were proposed when it was read
                if not self._admitted(candidate, counts if is_new else None):
                    continue
                key = CanonicalKey.of(
                    namespace,
                    candidate.kind,
                    candidate.subject,
                    candidate.predicate,
                    candidate.value,
                )
                evidence.setdefault(key, _Evidence(candidate)).add(row, candidate)
        counts["turns_read"] += len(turns_read)
        held = self._held(namespace, now, evidence)
        proposals, waiting = self._decide(evidence, held, counts)
        return Reading(
            proposals,
            namespace=namespace,
            turns_read=turns_read,
            pending_seen=pending_seen,
            pending_after=waiting | keep_pending,
            counts=counts,
            full=len(new_rows) >= self.batch_size,
        )

    def _turn_rows(self, conn: Any, namespace: str, now: str, *, new: bool) -> list[Any]:
        t = transcripts.c
        columns = (
            t.item_id,
            t.version,
            t.speaker,
            t.session_id,
            t.turn_id,
            t.sensitivity,
            t.expires_at,
            t.position,
            t.key_generation,
            t.sealed,
        )
        live = (
            t.namespace == namespace,
            t.suppressed.is_(False),
            t.sealed.is_not(None),
            unexpired(self.context.retention(), t.item_id),
        )
        if new:
            query = (
                select(*columns)
                .select_from(
                    transcripts.outerjoin(consolidated, consolidated.c.item_id == t.item_id)
                )
                .where(*live, consolidated.c.item_id.is_(None))
                .order_by(t.position)
                .limit(self.batch_size)
            )
        else:
            query = (
                select(*columns)
                .select_from(transcripts.join(pending, pending.c.item_id == t.item_id))
                .where(*live)
                .order_by(t.position.desc())
                .limit(PENDING_WINDOW)
            )
        return list(conn.execute(query, self._times()).all())

    def _times(self) -> dict[str, str]:
        """The retention policy's parameters at the job's `now` (see `unexpired`)."""
        return self.context.retention().cutoffs(self.now or datetime.now(UTC))

    def _open(self, rows: list[Any], counts: Counter[str]) -> list[_Row | None]:
        """Decrypt the turns' content and candidates (one key-store query for all), in
        order; None for a turn whose key is gone."""
        log_ = self.context.log
        keys = log_.keys_for(sorted({r.item_id for r in rows}))
        out: list[_Row | None] = []
        for r in rows:
            fields = log_.open_fields(keys, r.item_id, r.key_generation, r.sealed)
            if fields is ERASED or not isinstance(fields, dict) or "content" not in fields:
                out.append(None)
                continue
            attached, bad = decode_candidates(fields.get("candidates"))
            counts["invalid"] += bad
            out.append(
                _Row(
                    r.item_id,
                    r.version,
                    r.speaker,
                    r.session_id,
                    r.turn_id,
                    r.sensitivity,
                    r.expires_at,
                    r.position,
                    fields["content"],
                    tuple(attached),
                )
            )
        return out

    def _extract(self, row: _Row, counts: Counter[str]) -> list[TurnCandidate] | None:
        turn = Turn(
            row.item_id,
            row.version,
            row.speaker,
            row.text,
            row.candidates,
            row.session_id,
            row.turn_id,
        )
        try:
            raw = list(self.extractor.extract(turn))
        except Exception as exc:  # a plug-in's failure: never its message (it may quote)
            counts["failed"] += 1
            log.warning(
                "extractor %s failed on a turn: %s", self.extractor.name, type(exc).__name__
            )
            return None
        found: list[TurnCandidate] = []
        for item in raw[:MAX_CANDIDATES_PER_TURN]:
            try:
                found.append(
                    item if isinstance(item, TurnCandidate) else TurnCandidate.model_validate(item)
                )
            except (ValidationError, ValueError, TypeError):
                counts["invalid"] += 1
        counts["invalid"] += max(0, len(raw) - MAX_CANDIDATES_PER_TURN)
        return found

    def _admitted(self, candidate: TurnCandidate, counts: Counter[str] | None) -> bool:
        """The third-party rule and the redaction marker check. `counts` is None for a
        pending turn read again: it was counted when it was first read."""
        reason = None
        if not self.allow_third_party and (
            candidate.about != "user" or candidate.subject != USER_SUBJECT
        ):
            reason = "skipped_third_party"
        elif any(marker in candidate.value for marker in _MARKERS):
            reason = "skipped_redacted"  # a redacted or forgotten span is not a value
        if reason is not None and counts is not None:
            counts[reason] += 1
        return reason is None

    def _held(
        self, namespace: str, now: str, evidence: Mapping[CanonicalKey, _Evidence]
    ) -> dict[CanonicalKey, list[_Held]]:
        """The facts and preferences (live or suppressed) that already hold the keys."""
        wanted = {(k.kind, k.subject, k.predicate) for k in evidence}
        if not wanted:
            return {}
        predicates = sorted({p for _, _, p in wanted})
        f, p, c = facts.c, preferences.c, catalog.c
        queries = [
            (
                "fact",
                select(
                    f.item_id,
                    f.version,
                    f.subject,
                    f.predicate,
                    f.suppressed,
                    f.provenance,
                    f.key_generation,
                    f.sealed,
                ).where(
                    f.namespace == namespace,
                    f.predicate.in_(predicates),
                    f.status.in_(LIVE_STATUSES),
                    unexpired(self.context.retention(), f.item_id),
                ),
            ),
            (
                "preference",
                select(
                    p.item_id,
                    p.version,
                    p.subject,
                    p.predicate,
                    p.suppressed,
                    p.provenance,
                    p.key_generation,
                    p.sealed,
                ).where(
                    p.namespace == namespace,
                    p.predicate.in_(predicates),
                    unexpired(self.context.retention(), p.item_id),
                ),
            ),
        ]
        rows: list[tuple[str, Any]] = []
        with self.context.engine.connect() as conn:
            for kind, query in queries:
                rows.extend(
                    (kind, r)
                    for r in conn.execute(query, self._times()).all()
                    if (kind, r.subject, r.predicate) in wanted
                )
            ids = [r.item_id for _, r in rows]
            cited: dict[str, frozenset[str]] = {}
            for start in range(0, len(ids), 500):
                for item_id, raw in conn.execute(
                    select(c.item_id, c.derived_from).where(c.item_id.in_(ids[start : start + 500]))
                ):
                    cited[item_id] = frozenset(json.loads(raw))
        log_ = self.context.log
        keys = log_.keys_for(sorted(set(ids)))
        held: dict[CanonicalKey, list[_Held]] = {}
        for kind, r in rows:
            fields = log_.open_fields(keys, r.item_id, r.key_generation, r.sealed)
            if fields is ERASED or not isinstance(fields, dict) or "value" not in fields:
                continue
            key = CanonicalKey.of(namespace, kind, r.subject, r.predicate, fields["value"])
            if key not in evidence:
                continue
            writer = (json.loads(r.provenance) or {}).get("writer")
            held.setdefault(key, []).append(
                _Held(
                    r.item_id,
                    r.version,
                    bool(r.suppressed),
                    writer,
                    cited.get(r.item_id, frozenset()),
                    fields["value"],
                )
            )
        return held

    def _decide(
        self,
        evidence: Mapping[CanonicalKey, _Evidence],
        held: Mapping[CanonicalKey, list[_Held]],
        counts: Counter[str],
    ) -> tuple[list[Proposal], set[str]]:
        """Per key: write, reinforce, wait for more evidence, or leave it (see the module)."""
        proposals: list[Proposal] = []
        waiting: set[str] = set()
        for key, found in evidence.items():
            items = held.get(key, [])
            if any(h.suppressed for h in items):
                counts["skipped_suppressed"] += 1  # the user stopped this conclusion
                continue
            live = [h for h in items if not h.suppressed]
            turns = sorted(found.turns.values(), key=lambda r: r.position)
            if live:
                new_turns = [t for t in turns if not any(t.item_id in h.cited for h in live)]
                if not new_turns:
                    counts["duplicates"] += 1
                    continue
                own = [h for h in live if h.writer == WRITER and h.cited]
                if not own:
                    counts["known"] += 1  # stated by the user or another writer
                    continue
                proposal = self._reinforce(found, own[-1], new_turns)
                if proposal is None:
                    counts["known"] += 1  # held, and not the job's to extend
                else:
                    counts["reinforced"] += 1
                    proposals.append(proposal)
                continue
            needed = 1 if key.kind == "fact" else self.promote_after
            if len(turns) < needed:
                counts["pending"] += 1
                waiting.update(t.item_id for t in turns)
                continue
            turns = turns[-MAX_DERIVED_FROM:]
            refs = [(t.item_id, t.version) for t in turns]
            write = self._write(found.candidate, turns, refs)
            proposals.append(Proposal(write, turns[-1].item_id, tuple(i for i, _ in refs)))
        return proposals, waiting

    def _reinforce(
        self, found: _Evidence, existing: _Held, new_turns: list[_Row]
    ) -> Proposal | None:
        """A new item citing the existing item's turns and the new ones, which replaces
        it: the evidence grows, and forgetting any of the turns still cascades."""
        log_ = self.context.log
        item = log_.get(UUID(existing.item_id))
        old = [(str(r["item_id"]), int(r["version"])) for r in item.derived_from]
        for item_id, version in old:
            source = log_.get(UUID(item_id))
            if source.erased or source.suppressed or source.version != version:
                return None  # an old input is no longer usable: leave the item as it is
        refs = old + [(t.item_id, t.version) for t in new_turns]
        if len(refs) > MAX_DERIVED_FROM:
            return None  # evidence enough: the item stays as it is (`known`)
        write = self._write(found.candidate, new_turns, refs, value=existing.value)
        # What the old item was bound by binds the new one too.
        write["sensitivity"] = max(
            write["sensitivity"], item.sensitivity, key=_SENSITIVITY_ORDER.index
        )
        expires = item.retention.get("expires_at")
        if expires is not None and expires < write.get("retention", {}).get("expires_at", "~"):
            write["retention"] = {"basis": item.retention["basis"], "expires_at": expires}
        return Proposal(
            write,
            new_turns[-1].item_id,
            tuple(i for i, _ in refs),
            ((existing.item_id, existing.version),),
        )

    def _write(
        self,
        candidate: TurnCandidate,
        turns: list[_Row],
        refs: list[tuple[str, int]],
        value: str | None = None,
    ) -> dict[str, Any]:
        newest = turns[-1]
        sensitivity = max(
            ["personal", *(t.sensitivity for t in turns)], key=_SENSITIVITY_ORDER.index
        )
        write: dict[str, Any] = {
            "kind": candidate.kind,
            "subject": candidate.subject,
            "predicate": candidate.predicate,
            "value": value if value is not None else candidate.value,
            "category": candidate.category,
            "origin": "observed" if candidate.kind == "preference" else "inferred",
            "confidence": CONFIDENCE,
            "sensitivity": sensitivity,
            "provenance": {
                "writer": WRITER,
                "written_at": canonical_time(self.now or datetime.now(UTC)),
                "turn_id": newest.turn_id,
                "session_id": newest.session_id,
            },
            "derived_from": [{"item_id": i, "version": v} for i, v in refs],
        }
        retention = self._retention(turns)
        if retention is not None:
            write["retention"] = retention
        return write

    def _retention(self, turns: list[_Row]) -> dict[str, Any] | None:
        """A conclusion never outlives the turns it came from (`inherited_retention`,
        from their catalog rows: the policy in force decides their expiry). None when
        no turn expires and all are of basis `indefinite`: the write's default."""
        ids = [t.item_id for t in turns]
        with self.context.engine.connect() as conn:
            rows = conn.execute(select(catalog).where(catalog.c.item_id.in_(ids))).mappings()
            found = inherited_retention(self.context.retention(), [dict(r) for r in rows])
        if found is None or found == {"basis": "indefinite"}:
            return None
        return found

    # -- committing --------------------------------------------------------------------

    def commit(
        self, ledger: NamespaceLedger, proposals: Reading | Sequence[Proposal]
    ) -> tuple[int, int]:
        """Write what is still valid; returns (written, refused). The turns read are
        recorded as read, and the pending evidence as it now stands."""
        if isinstance(proposals, Reading):
            reading = proposals
        else:  # proposals picked from a reading: their turns count as read
            turns = list(dict.fromkeys(t for p in proposals for t in p.turn_ids))
            reading = Reading(proposals, turns_read=turns)
        counts = reading.counts
        refused_turns: set[str] = set()
        written: list[Proposal] = []
        for start in range(0, len(reading), COMMIT_BATCH):
            chunk = reading[start : start + COMMIT_BATCH]
            try:
                ledger.remember_many([p.write for p in chunk])
                written.extend(chunk)
                continue
            except (StaleDerivation, InvalidWrite):
                pass  # one of them: find which, one at a time
            for proposal in chunk:
                try:
                    ledger.remember(proposal.write)
                    written.append(proposal)
                except StaleDerivation:
                    counts["refused"] += 1  # a turn changed or was erased after we read it
                    refused_turns.update(proposal.turn_ids)
                    log.info("consolidation refused a proposal from a changed turn")
                except InvalidWrite as exc:  # the gate said no (its message has no content)
                    counts["invalid"] += 1
                    log.info("consolidation dropped a proposal the write gate refused: %s", exc)
        counts["written"] += len(written)
        for proposal in written:
            self._suppress_merged(ledger, proposal)
        self._record(reading, refused_turns)
        self.counts.update(counts)
        return counts["written"], counts["refused"]

    def _suppress_merged(self, ledger: NamespaceLedger, proposal: Proposal) -> None:
        """Stop using what the new item replaced, if it is still as it was read. An item
        erased or changed meanwhile is left alone (the dedupe job finds any pair left)."""
        for item_id, version in proposal.merges:
            try:
                if ledger.get(item_id).version == version:
                    ledger.suppress(item_id, reason=MERGED)
            except InvalidTransition:
                pass  # erased meanwhile: nothing to stop using

    def _record(self, reading: Reading, refused_turns: set[str]) -> None:
        """One transaction: the turns read, and the namespace's pending evidence."""
        after = reading.pending_after | (refused_turns - {""})
        with self.context.engine.begin() as conn:
            read = reading.turns_read
            known: set[str] = set()
            for start in range(0, len(read), 500):
                known.update(
                    conn.execute(
                        select(consolidated.c.item_id).where(
                            consolidated.c.item_id.in_(read[start : start + 500])
                        )
                    ).scalars()
                )
            new = [{"item_id": t} for t in sorted(set(read) - known)]
            if new:
                conn.execute(consolidated.insert(), new)
            if not reading.namespace:
                return
            stale = sorted(reading.pending_seen | after)
            for start in range(0, len(stale), 500):
                conn.execute(
                    delete(pending).where(pending.c.item_id.in_(stale[start : start + 500]))
                )
            rows = [{"item_id": t, "namespace": reading.namespace} for t in sorted(after)]
            if rows:
                conn.execute(pending.insert(), rows)

    # -- running -----------------------------------------------------------------------

    def consolidate(self, ledger: NamespaceLedger) -> dict[str, int]:
        """Every unread turn of the namespace, batch after batch; the counts."""
        total: Counter[str] = Counter()
        while True:
            reading = self.read(ledger)
            self.commit(ledger, reading)
            total.update(reading.counts)
            if not (reading.full and reading.turns_read):
                break
        return {name: total[name] for name in COUNTS}

    def run_once(self, ledger: NamespaceLedger) -> tuple[int, int]:
        counts = self.consolidate(ledger)
        return counts["written"], counts["refused"]

    def consolidate_all(self) -> dict[str, int]:
        """One pass over every namespace that has turns; the counts summed."""
        self.context.runner.catch_up()
        with self.context.engine.connect() as conn:
            namespaces = sorted(set(conn.execute(select(transcripts.c.namespace)).scalars()))
        total: Counter[str] = Counter()
        for namespace in namespaces:
            ledger = self.context.ledger_for(namespace)
            total.update(self.consolidate(ledger))
        return {name: total[name] for name in COUNTS}

    def run_all(self) -> tuple[int, int]:
        """One pass over every namespace (the scheduled job): (written, refused)."""
        counts = self.consolidate_all()
        return counts["written"], counts["refused"]


def consolidate_all(context: JobContext, now: datetime | None = None) -> dict[str, int]:
    """The scheduled job: one pass over every namespace, with the counts (COUNTS)."""
    return Consolidator(context, now=now).consolidate_all()


def _promote_after(value: int | None, settings: Settings) -> int:
    if value is None:
        raw = settings.text(PROMOTION_ENV)
        if not raw:
            return DEFAULT_PROMOTE_AFTER
        if not raw.isdigit():
            raise ConfigurationError(
                f"{PROMOTION_ENV}: a whole number of turns from 1 to {MAX_PROMOTE_AFTER}"
            )
        value = int(raw)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PROMOTE_AFTER:
        raise ConfigurationError(
            f"{PROMOTION_ENV}: a whole number of turns from 1 to {MAX_PROMOTE_AFTER}"
        )
    return value
