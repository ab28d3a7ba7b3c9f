"""The near-duplicate merge: live memories that say the same thing become one.

Within a namespace, live facts (current or in conflict, valid now) and live preferences
with the same kind, subject and predicate (and the same `valid_to` for facts, the same
scope for preferences) whose values are equal after normalisation (NFKC, case folding,
whitespace and punctuation ignored; jobs/consolidation/canonical.py) are one memory told
several times: "Peanuts", "peanuts." and "PEANUTS" are merged, "peanut" is not.

A merge is a derived write, done through the public write path like any other, so the
resurrection guard applies to it:

1. `read`: the groups, each member pinned at the version read (from the projections,
   values decrypted in memory only); the members' attributes are then read from the log.
2. `commit`: one new item per group, `derived_from` = every member (pinned), so its
   evidence count is `len(derived_from)` and forgetting any member cascades to it. A
   member erased, suppressed or changed since it was read refuses the write at commit
   (StaleDerivation): nothing of that group is merged. Then each member, if still at the
   version read, is suppressed with reason `merged` (a `Suppressed` event: the data
   stays, as with any suppression, until the user or retention erases it).

The merged item keeps what binds its members: the newest member's wording, category,
sources and valid_from; the strongest origin (explicit > observed > inferred) and the
highest confidence and strength; the most restrictive sensitivity; the earliest expiry
(and, when none expires, the narrowest basis). It is never less protected, nor kept
longer, than any of its members.

Run twice, the second run finds one live item per memory and writes nothing. A run
interrupted between the write and the suppressions leaves the members live beside the
merged item; the next run merges them into it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import select

from memory_ledger.domain import MemoryItem
from memory_ledger.errors import InvalidTransition, InvalidWrite, StaleDerivation
from memory_ledger.event_log import ERASED
from memory_ledger.jobs.consolidation.canonical import normalise_value
from memory_ledger.jobs.context import JobContext, NamespaceLedger
from memory_ledger.policy.retention import attributes_of, inherited_retention
from memory_ledger.projections.catalog import catalog, unexpired
from memory_ledger.projections.facts import LIVE_STATUSES, facts
from memory_ledger.projections.preferences import preferences
from memory_ledger.write_policy import MAX_DERIVED_FROM, canonical_time

log = logging.getLogger("memory_ledger.dedupe")

WRITER = "dedupe"
MERGED = "merged"  # the suppression reason of a merged member
#: Groups merged per `remember_many` call.
COMMIT_BATCH = 50
COUNTS = ("groups", "merged", "inputs", "refused", "invalid", "kept_changed")
_ORIGIN = ("inferred", "observed", "explicit")  # weakest first
_SENSITIVITY = ("public", "internal", "personal", "restricted")


@dataclass(frozen=True)
class Member:
    """One live item of a group, pinned at the version read."""

    item_id: str
    version: int
    position: int
    value: str


@dataclass(frozen=True)
class Group:
    """Items that say the same thing. `repr` shows no value (it is personal content)."""

    kind: str
    subject: str
    predicate: str
    members: tuple[Member, ...]

    def __repr__(self) -> str:
        return f"Group({self.kind}, {self.subject}, {self.predicate}, {len(self.members)} items)"


class Deduper:
    """The merge job for one store; `now` decides what is live (expiry, validity)."""

    def __init__(self, context: JobContext, now: datetime | None = None) -> None:
        self.context = context
        self.now = now

    def _now(self) -> datetime:
        return self.now or datetime.now(UTC)

    # -- reading -----------------------------------------------------------------------

    def read(self, ledger: NamespaceLedger) -> list[Group]:
        """The namespace's groups of two or more live items that say the same thing."""
        self.context.runner.catch_up()
        now = canonical_time(self._now())
        namespace = ledger.namespace
        f, p = facts.c, preferences.c
        # Decay's archived tier is left as it is: a merge would lift it back.
        archived = select(catalog.c.item_id).where(catalog.c.tier != "active")
        times = self.context.retention().cutoffs(self._now())
        fact_query = select(
            f.item_id, f.version, f.position, f.subject, f.predicate, f.valid_to,
            f.key_generation, f.sealed,
        ).where(
            f.namespace == namespace,
            f.status.in_(LIVE_STATUSES),
            f.suppressed.is_(False),
            unexpired(self.context.retention(), f.item_id),
            f.item_id.not_in(archived),
            f.valid_to.is_(None) | (f.valid_to > now),
            f.sealed.is_not(None),
        )  # fmt: skip
        pref_query = select(
            p.item_id, p.version, p.position, p.subject, p.predicate, p.scope,
            p.key_generation, p.sealed,
        ).where(
            p.namespace == namespace,
            p.suppressed.is_(False),
            unexpired(self.context.retention(), p.item_id),
            p.item_id.not_in(archived),
            p.sealed.is_not(None),
        )  # fmt: skip
        # Clear attributes first: only rows that share them are decrypted.
        by_clear: dict[tuple[str, ...], dict[str, Any]] = {}
        with self.context.engine.connect() as conn:
            for row in conn.execute(fact_query, times):
                clear = ("fact", row.subject, row.predicate, row.valid_to or "")
                _newest(by_clear.setdefault(clear, {}), row)
            for row in conn.execute(pref_query, times):
                clear = ("preference", row.subject, row.predicate, row.scope)
                _newest(by_clear.setdefault(clear, {}), row)
        shared = {k: rows for k, rows in by_clear.items() if len(rows) > 1}
        ids = sorted({i for rows in shared.values() for i in rows})
        log_ = self.context.log
        keys = log_.keys_for(ids)
        groups: list[Group] = []
        for clear, rows in sorted(shared.items()):
            by_value: dict[str, list[Member]] = {}
            for row in rows.values():
                fields = log_.open_fields(keys, row.item_id, row.key_generation, row.sealed)
                if fields is ERASED or not isinstance(fields, dict) or "value" not in fields:
                    continue
                member = Member(row.item_id, row.version, row.position, fields["value"])
                by_value.setdefault(normalise_value(fields["value"]), []).append(member)
            for members in by_value.values():
                if len(members) > 1:
                    members.sort(key=lambda m: m.position)
                    # The newest MAX_DERIVED_FROM; the next run merges the rest into it.
                    kept = tuple(members[-MAX_DERIVED_FROM:])
                    groups.append(Group(clear[0], clear[1], clear[2], kept))
        return groups

    # -- committing --------------------------------------------------------------------

    def commit(self, ledger: NamespaceLedger, groups: Sequence[Group]) -> dict[str, int]:
        """Merge each group still as it was read; the counts (COUNTS)."""
        counts: Counter[str] = Counter(groups=len(groups))
        planned: list[tuple[Group, dict[str, Any]]] = []
        for group in groups:
            write = self._write(ledger, group)
            if write is None:
                counts["refused"] += 1  # a member was erased since it was read
            else:
                planned.append((group, write))
        merged: list[Group] = []
        for start in range(0, len(planned), COMMIT_BATCH):
            chunk = planned[start : start + COMMIT_BATCH]
            try:
                ledger.remember_many([w for _, w in chunk])
                merged.extend(g for g, _ in chunk)
                continue
            except (StaleDerivation, InvalidWrite):
                pass  # one of them: find which, one at a time
            for group, write in chunk:
                try:
                    ledger.remember(write)
                    merged.append(group)
                except StaleDerivation:
                    counts["refused"] += 1
                    log.info("dedupe refused a merge: an input changed after it was read")
                except InvalidWrite as exc:
                    counts["invalid"] += 1
                    log.info("dedupe dropped a merge the write gate refused: %s", exc)
        for group in merged:
            counts["merged"] += 1
            for member in group.members:
                try:
                    if ledger.get(member.item_id).version != member.version:
                        counts["kept_changed"] += 1  # changed since: not what was merged
                        continue
                    ledger.suppress(member.item_id, reason=MERGED)
                    counts["inputs"] += 1
                except InvalidTransition:
                    counts["kept_changed"] += 1  # erased meanwhile (the cascade follows)
        return {name: counts[name] for name in COUNTS}

    def _write(self, ledger: NamespaceLedger, group: Group) -> dict[str, Any] | None:
        """The merged item, from the members as the log has them now."""
        items: list[MemoryItem] = []
        for member in group.members:
            item = self.context.log.get(UUID(member.item_id))
            if item.erased or item.namespace != ledger.namespace:
                return None
            items.append(item)
        newest, newest_item = group.members[-1], items[-1]
        source = {
            k: newest_item.provenance.get(k)
            for k in ("turn_id", "session_id", "tool_call_id", "consent_ref")
        }
        write: dict[str, Any] = {
            "kind": group.kind,
            "subject": group.subject,
            "predicate": group.predicate,
            "value": newest.value,
            "category": newest_item.category,
            "origin": max((i.origin for i in items), key=_ORIGIN.index),
            "confidence": max(i.confidence for i in items),
            "sensitivity": max((i.sensitivity for i in items), key=_SENSITIVITY.index),
            "provenance": {
                "writer": WRITER,
                "written_at": canonical_time(self._now()),
                **{k: v for k, v in source.items() if v is not None},
            },
            "retention": inherited_retention(
                self.context.retention(), [attributes_of(i) for i in items]
            ),
            "derived_from": [{"item_id": m.item_id, "version": m.version} for m in group.members],
            "valid_from": newest_item.valid_from,
        }
        if group.kind == "preference":
            write["scope"] = newest_item.scope
            write["strength"] = max(i.strength for i in items)
        elif newest_item.valid_to is not None:
            write["valid_to"] = newest_item.valid_to
        return write

    # -- running -----------------------------------------------------------------------

    def run_once(self, ledger: NamespaceLedger) -> dict[str, int]:
        return self.commit(ledger, self.read(ledger))

    def run_all(self) -> dict[str, int]:
        """One pass over every namespace that holds facts or preferences."""
        self.context.runner.catch_up()
        with self.context.engine.connect() as conn:
            namespaces = sorted(
                set(conn.execute(select(facts.c.namespace).distinct()).scalars())
                | set(conn.execute(select(preferences.c.namespace).distinct()).scalars())
            )
        total: Counter[str] = Counter()
        for namespace in namespaces:
            ledger = self.context.ledger_for(namespace)
            total.update(self.run_once(ledger))
        return {name: total[name] for name in COUNTS}


def merge_duplicates(context: JobContext, now: datetime | None = None) -> dict[str, int]:
    """The scheduled job: merge near-duplicates in every namespace; the counts
    (`groups` found, `merged`, `inputs` suppressed, `refused` stale, `invalid`,
    `kept_changed`: members left live because they changed after the merge)."""
    return Deduper(context, now).run_all()


def _newest(rows: dict[str, Any], row: Any) -> None:
    """Keep one row per item: the newest version's (the facts view has a row per version)."""
    held = rows.get(row.item_id)
    if held is None or row.version > held.version:
        rows[row.item_id] = row
