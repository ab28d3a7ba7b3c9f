"""Facts: versioned, with validity intervals, and conflicts kept as conflicts.

Resolution between items about the same (namespace, subject, predicate) uses only clear
attributes (origin and valid_from), never the values: erased values cannot be read during
a rebuild, so a rule that compared values would rebuild to a different view.

A newcomer is compared with every live (current or conflict) fact of its key:
- it supersedes those it outranks: a less authoritative origin (explicit > observed >
  inferred), or equal authority and an earlier valid_from;
- equal authority and equal valid_from cannot be decided: both become `conflict`;
- if a fact of equal authority is later, the newcomer is history (superseded);
- otherwise, if a more authoritative fact exists, the newcomer is a `conflict`.
This is the rule for a predicate with one current value: the newcomer's event says
`cardinality: "one"`, or nothing (events written before cardinality existed).

A newcomer of a many-valued predicate (`cardinality: "many"`) is a member of a set: it
is current, it supersedes exactly the live facts its event `replaces` names (ids decided
at write time, memory_ledger/policy/cardinality.py), and it leaves every other fact of its key
as it is. Nothing about it is looked up in the policy: a rebuild after a policy change
equals the view before it.

Each pair's outcome depends only on the pair, so the result is independent of the order
in which rows are visited.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sqlalchemy import Boolean, Column, Connection, Float, Index, Integer, Table, Text, select

from memory_ledger.projections.base import (
    Batch,
    Projection,
    Row,
    iso,
    keys_in,
    metadata,
    provenance_json,
)
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.transcripts import sealed_content

AUTHORITY = {"explicit": 3, "observed": 2, "inferred": 1}

facts = Table(
    "facts",
    metadata,
    Column("item_id", Text, primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("predicate", Text, nullable=False),
    Column("sealed", Text),  # this version's value, sealed (projections/cells.py)
    Column("key_generation", Integer),
    Column("value_state", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("valid_from", Text, nullable=False),
    Column("valid_to", Text),
    Column("origin", Text, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("category", Text, nullable=False),
    Column("sensitivity", Text, nullable=False),
    Column("suppressed", Boolean, nullable=False),
    Column("expires_at", Text),
    Column("redacted_fields", Text, nullable=False),
    Column("provenance", Text, nullable=False),
    Column("recorded_at", Text, nullable=False),
    Column("position", Integer, nullable=False),
    Index("ix_facts_key", "namespace", "subject", "predicate", "status"),
)

KEY_COLUMNS = ("namespace", "subject", "predicate")
LIVE_STATUSES = ("current", "conflict")


class FactsProjection(Projection):
    name: ClassVar[str] = "facts"
    kind: ClassVar[str] = "fact"
    table = facts
    primary_key = ("item_id", "version")
    sealed_field = "value"
    holds = "fact values, every version, sealed under each item's data key, with validity"

    def load(self, conn: Connection, events: Sequence[ProjectedEvent]) -> list[Row]:
        rows = super().load(conn, events)
        keys = sorted(
            {tuple(e.attrs[c] for c in KEY_COLUMNS) for e in events if e.name == "Recorded"}
        )
        seen = {(r["item_id"], r["version"]) for r in rows}
        for start in range(0, len(keys), 300):
            query = select(facts).where(
                keys_in(facts, KEY_COLUMNS, keys[start : start + 300]),
                facts.c.status.in_(LIVE_STATUSES),
            )
            for r in conn.execute(query).mappings():
                if (r["item_id"], r["version"]) not in seen:
                    rows.append(dict(r))
        return rows

    def prepare(self, batch: Batch) -> None:
        self._by_key: dict[tuple[str, ...], list[Row]] = {}
        for row in batch.rows.values():
            self._by_key.setdefault(_key(row), []).append(row)

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        if event.name == "Recorded":
            self._record(event, batch)
            return
        versions = sorted(batch.of_item(event.item_id), key=lambda r: r["version"])
        if not versions:
            return
        a = event.attrs
        if event.name == "Superseded":
            previous = versions[-1]
            new = dict(previous)
            valid_from = iso(a["valid_from"])
            new.update(sealed_content(event, "value"))
            new.update(
                version=event.version,
                confidence=a["confidence"],
                valid_from=valid_from,
                provenance=provenance_json(a),
                recorded_at=event.timestamp,
                position=event.position,
            )
            previous["status"], previous["valid_to"] = "superseded", valid_from
            batch.add(new)
            self._by_key.setdefault(_key(new), []).append(new)
        elif event.name in ("Suppressed", "Unsuppressed"):
            for row in versions:
                row["suppressed"] = event.name == "Suppressed"
        elif event.name == "Redacted":
            # Earlier generations' keys are destroyed: older versions become unreadable.
            fields = ",".join(sorted(set(a["fields"])))
            for row in versions[:-1]:
                row.update(sealed=None, key_generation=None, value_state="erased")
                row["redacted_fields"] = fields
            latest = versions[-1]
            latest.update(sealed_content(event, "value"))
            latest["redacted_fields"] = fields

    def _record(self, event: ProjectedEvent, batch: Batch) -> None:
        a = event.attrs
        new: Row = {
            "item_id": event.item_id,
            "version": event.version,
            "namespace": a["namespace"],
            "subject": a["subject"],
            "predicate": a["predicate"],
            **sealed_content(event, "value"),
            "status": "current",
            "valid_from": iso(a["valid_from"]),
            "valid_to": iso(a.get("valid_to")),
            "origin": a["origin"],
            "confidence": a["confidence"],
            "category": a["category"],
            "sensitivity": a["sensitivity"],
            "suppressed": False,
            "expires_at": iso(a["retention"].get("expires_at")),
            "redacted_fields": "",
            "provenance": provenance_json(a),
            "recorded_at": event.timestamp,
            "position": event.position,
        }
        rank, since = AUTHORITY[new["origin"]], new["valid_from"]
        same_key = self._by_key.setdefault(_key(new), [])
        rivals = [
            r for r in same_key if r["status"] in LIVE_STATUSES and r["item_id"] not in batch.purged
        ]
        if a.get("cardinality") == "many":  # a set member: replaces only what it names
            replaced = set(a.get("replaces") or ())
            for other in rivals:
                if other["item_id"] in replaced:
                    other["status"] = "superseded"
                    other["valid_to"] = max(since, other["valid_from"])
            batch.add(new)
            same_key.append(new)
            return
        later_peers = []
        for other in rivals:
            other_rank = AUTHORITY[other["origin"]]
            if rank > other_rank or (rank == other_rank and since > other["valid_from"]):
                # An earlier but more authoritative fact closes the other at its own start.
                other["status"], other["valid_to"] = "superseded", max(since, other["valid_from"])
            elif rank == other_rank and since == other["valid_from"]:
                other["status"] = new["status"] = "conflict"
            elif rank == other_rank:
                later_peers.append(other["valid_from"])
            else:
                new["status"] = "conflict"
        if later_peers:  # history that was already overtaken by a later statement
            new["status"], new["valid_to"] = "superseded", min(later_peers)
        batch.add(new)
        same_key.append(new)


def _key(row: Row) -> tuple[str, ...]:
    return (row["namespace"], row["subject"], row["predicate"])
