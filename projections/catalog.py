"""The catalog: every live item's clear attributes, for resolving forget requests.

Erasure requests are resolved by scope (predicate, source, category, time range, whole
namespace) without decrypting anything, so this projection holds identifiers only: no
value, no content. It is still a store, because identifiers such as subject and
predicate describe a person, and an erased item's row is purged like any other.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from sqlalchemy import Boolean, Column, Index, Integer, Table, Text

from projections.base import Batch, Projection, iso, metadata
from projections.events import ProjectedEvent

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
    Column("version", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Index("ix_catalog_scope", "namespace", "subject", "predicate"),
    Index("ix_catalog_source", "namespace", "turn_id"),
)


class CatalogProjection(Projection):
    name: ClassVar[str] = "catalog"
    kind: ClassVar[str] = "*"
    table = catalog
    primary_key = ("item_id",)
    holds = "clear attributes of every live item (no content), for resolving requests"

    def wants(self, event: ProjectedEvent) -> bool:
        return True

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
                    "version": event.version,
                    "position": event.position,
                }
            )
            return
        row = self.item_row(event, batch)  # keeps version and suppression current
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
