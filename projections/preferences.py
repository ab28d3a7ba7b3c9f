"""Preferences: scoped, with strength, and explicit statements kept apart from observations."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import Boolean, Column, Float, Index, Integer, Table, Text

from memory_ledger.projections.base import Batch, Projection, iso, metadata, provenance_json
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.transcripts import sealed_content

preferences = Table(
    "preferences",
    metadata,
    Column("item_id", Text, primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("subject", Text, nullable=False),
    Column("predicate", Text, nullable=False),
    Column("sealed", Text),  # the value, sealed (projections/cells.py)
    Column("key_generation", Integer),
    Column("value_state", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("strength", Float, nullable=False),
    Column("origin", Text, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("category", Text, nullable=False),
    Column("sensitivity", Text, nullable=False),
    Column("suppressed", Boolean, nullable=False),
    Column("expires_at", Text),
    Column("valid_from", Text, nullable=False),
    Column("redacted_fields", Text, nullable=False),
    Column("provenance", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Index("ix_preferences_key", "namespace", "subject", "predicate", "scope"),
)


class PreferencesProjection(Projection):
    name: ClassVar[str] = "preferences"
    kind: ClassVar[str] = "preference"
    table = preferences
    primary_key = ("item_id",)
    sealed_field = "value"
    holds = "preference values, sealed under each item's data key, with scope and strength"

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        a = event.attrs
        if event.name == "Recorded":
            batch.add(
                {
                    "item_id": event.item_id,
                    "namespace": a["namespace"],
                    "subject": a["subject"],
                    "predicate": a["predicate"],
                    **sealed_content(event, "value"),
                    "scope": a["scope"],
                    "strength": a["strength"],
                    "origin": a["origin"],
                    "confidence": a["confidence"],
                    "category": a["category"],
                    "sensitivity": a["sensitivity"],
                    "suppressed": False,
                    "expires_at": iso(a["retention"].get("expires_at")),
                    "valid_from": iso(a["valid_from"]),
                    "redacted_fields": "",
                    "provenance": provenance_json(a),
                    "version": event.version,
                    "position": event.position,
                }
            )
            return
        row = self.item_row(event, batch)
        if row is None:
            return
        if event.name == "Superseded":
            row.update(sealed_content(event, "value"))
            row["confidence"] = a["confidence"]
            row["valid_from"] = iso(a["valid_from"])
            row["provenance"] = provenance_json(a)
        elif event.name == "Redacted":
            row.update(sealed_content(event, "value"))
            row["redacted_fields"] = ",".join(sorted(set(a["fields"])))
