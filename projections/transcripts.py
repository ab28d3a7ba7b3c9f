"""Transcripts: the turns of each session, bound to the namespace that wrote them."""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import Boolean, Column, Index, Integer, Table, Text

from memory_ledger.projections.base import Batch, Projection, iso, metadata, provenance_json
from memory_ledger.projections.events import ProjectedEvent

transcripts = Table(
    "transcripts",
    metadata,
    Column("item_id", Text, primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("speaker", Text, nullable=False),
    # The turn's text, sealed: the ciphertext of the event that carried it, under the
    # item's data key of `key_generation` (projections/cells.py). Never the text itself.
    Column("sealed", Text),
    Column("key_generation", Integer),
    Column("content_state", Text, nullable=False),
    Column("category", Text, nullable=False),
    Column("sensitivity", Text, nullable=False),
    Column("origin", Text, nullable=False),
    Column("suppressed", Boolean, nullable=False),
    Column("expires_at", Text),
    Column("written_at", Text, nullable=False),
    Column("redacted_fields", Text, nullable=False),
    Column("provenance", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Index("ix_transcripts_session", "namespace", "session_id", "written_at"),
)


def sealed_content(event: ProjectedEvent, name: str) -> dict[str, Any]:
    """The columns that keep an event's field `name`: its sealed blob and key generation
    when its key was live as the event was applied, else nothing and `erased`. (Every
    event that carries content seals all its fields, `name` among them.)"""
    if not event.readable:
        return {"sealed": None, "key_generation": None, f"{STATE[name]}": "erased"}
    return {"sealed": event.sealed, "key_generation": event.key_generation, STATE[name]: "live"}


#: The state column beside each sealed field.
STATE = {"value": "value_state", "content": "content_state"}


class TranscriptsProjection(Projection):
    name: ClassVar[str] = "transcripts"
    kind: ClassVar[str] = "turn"
    table = transcripts
    primary_key = ("item_id",)
    sealed_field = "content"
    holds = "transcript turns by session, sealed under each turn's data key"

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        a = event.attrs
        if event.name == "Recorded":
            prov = a["provenance"]
            batch.add(
                {
                    "item_id": event.item_id,
                    "namespace": a["namespace"],
                    "session_id": prov["session_id"],
                    "turn_id": prov["turn_id"],
                    "speaker": a["subject"],
                    **sealed_content(event, "content"),
                    "category": a["category"],
                    "sensitivity": a["sensitivity"],
                    "origin": a["origin"],
                    "suppressed": False,
                    "expires_at": iso(a["retention"].get("expires_at")),
                    "written_at": iso(prov["written_at"]),
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
        if event.name == "Redacted":
            row.update(sealed_content(event, "content"))
            row["redacted_fields"] = ",".join(sorted(set(a["fields"])))
