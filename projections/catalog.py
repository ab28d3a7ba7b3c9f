"""The catalog: every live item's clear attributes, for resolving forget requests.

Erasure requests are resolved by scope (predicate, source, category, time range, whole
namespace) without decrypting anything, so this projection holds identifiers only: no
value, no content. It is still a store, because identifiers such as subject and
predicate describe a person, and an erased item's row is purged like any other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    Table,
    Text,
    select,
    text,
)

from memory_ledger.policy.retention import RetentionPolicy
from memory_ledger.projections.base import Batch, Projection, Row, iso, metadata
from memory_ledger.projections.events import ProjectedEvent

#: Rows that name inputs: the partial index's condition, and the query's (the same text,
#: so the planner knows the index holds exactly those rows).
DERIVED = "derived_from != '[]'"

catalog = Table(
    "catalog",
    metadata,
    Column("item_id", Text, primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("predicate", Text, nullable=False),
    Column("category", Text, nullable=False),
    Column("sensitivity", Text, nullable=False),
    Column("origin", Text, nullable=False),
    Column("turn_id", Text),
    Column("session_id", Text),
    Column("tool_call_id", Text),
    Column("written_at", Text, nullable=False),
    Column("valid_from", Text, nullable=False),
    Column("derived_from", Text, nullable=False),
    # Every version's source and time, oldest first: [[session, turn, tool_call, at], ...].
    Column("versions", Text, nullable=False),
    Column("suppressed", Boolean, nullable=False),
    # Codes decided at write time from the content, comma-separated (`instruction_like`).
    Column("flags", Text, nullable=False),
    # Retention and decay (memory_ledger/policy/retention.py): what the policy decides on.
    Column("basis", Text, nullable=False),
    Column("expires_at", Text),  # the item's own expiry, if it set one
    Column("recorded_at", Text, nullable=False),  # when the store recorded it: TTLs count from here
    Column("policy_version", Integer),  # the retention policy it was written under
    Column("strength", Float, nullable=False),  # as written
    Column("reinforced_at", Text),  # last served in a context
    Column("reinforcements", Integer, nullable=False),
    Column("tier", Text, nullable=False),  # active | archived
    Column("version", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Index("ix_catalog_scope", "namespace", "subject", "predicate"),
    Index("ix_catalog_source", "namespace", "turn_id"),
    # The few items derived from others (summaries, inferences), so a forget's cascade
    # reads them, not every item of the namespace (forgetting/scope.py `derived_from`).
    Index(
        "ix_catalog_derived",
        "namespace",
        "item_id",
        "derived_from",
        sqlite_where=text(DERIVED),
        postgresql_where=text(DERIVED),
    ),
)


class CatalogProjection(Projection):
    name: ClassVar[str] = "catalog"
    kind: ClassVar[str] = "*"
    table = catalog
    primary_key = ("item_id",)
    holds = "clear attributes of every live item (no content), for resolving requests"

    def wants(self, event: ProjectedEvent) -> bool:
        return True

    def load(self, conn: Connection, events: Sequence[ProjectedEvent]) -> list[Row]:
        """The events' items, and the items a served context reinforces."""
        ids = {e.item_id for e in events if e.name != "Recorded"}
        for event in events:
            if event.name == "ContextServed":
                ids.update(s["item_id"] for s in event.attrs.get("items") or [])
        return self.rows_of_items(conn, ids)

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        a = event.attrs
        if event.name == "Recorded":
            prov = a["provenance"]
            batch.add(
                {
                    "item_id": event.item_id,
                    "namespace": a["namespace"],
                    "kind": a["kind"],
                    "subject": a["subject"],
                    "predicate": a["predicate"],
                    "category": a["category"],
                    "sensitivity": a["sensitivity"],
                    "origin": a["origin"],
                    "turn_id": prov.get("turn_id"),
                    "session_id": prov.get("session_id"),
                    "tool_call_id": prov.get("tool_call_id"),
                    "written_at": iso(prov["written_at"]),
                    "valid_from": iso(a["valid_from"]),
                    "derived_from": json.dumps(
                        sorted(ref["item_id"] for ref in a.get("derived_from") or [])
                    ),
                    "versions": json.dumps([_source_of(prov)]),
                    "suppressed": False,
                    "flags": ",".join(a.get("flags") or []),
                    "basis": a["retention"].get("basis") or "indefinite",
                    "expires_at": iso(a["retention"].get("expires_at")),
                    "recorded_at": event.timestamp,
                    "policy_version": a.get("policy_version"),
                    "strength": float(a.get("strength", 1.0)),
                    "reinforced_at": None,
                    "reinforcements": 0,
                    "tier": "active",
                    "version": event.version,
                    "position": event.position,
                }
            )
            return
        if event.name == "ContextServed":  # reinforces what it served, not the turn
            for served in a.get("items") or []:
                for served_row in batch.of_item(served["item_id"]):
                    served_row["reinforced_at"] = event.timestamp
                    served_row["reinforcements"] += 1
        row = self.item_row(event, batch)  # keeps version and suppression current
        if row is not None and event.name == "Viewed":  # a memory file's last read
            row["reinforced_at"] = a["at"]
        if row is not None and event.name in ("Archived", "Unarchived"):
            row["tier"] = "archived" if event.name == "Archived" else "active"
        if row is not None and event.name == "Superseded":
            row["versions"] = json.dumps(
                [*json.loads(row["versions"]), _source_of(a["provenance"])]
            )
            row["flags"] = ",".join(a.get("flags") or [])


def _source_of(provenance: dict[str, Any]) -> list[str | None]:
    return [
        provenance.get("session_id"),
        provenance.get("turn_id"),
        provenance.get("tool_call_id"),
        iso(provenance["written_at"]),
    ]


def unexpired(policy: RetentionPolicy, item_id: Any) -> Any:
    """A condition: `item_id` names no item expired under the retention policy (the
    statement is run with `policy.cutoffs(now)`). For readers of other tables that must
    apply the one definition of expiry without joining the catalog themselves."""
    return item_id.not_in(select(catalog.c.item_id).where(policy.expired_clause(catalog.c)))
