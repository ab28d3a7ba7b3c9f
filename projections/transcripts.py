"""Transcripts: the turns of each session, bound to the namespace that wrote them."""

from __future__ import annotations

from typing import ClassVar

from sqlalchemy import Boolean, Column, Index, Integer, Table, Text

from projections.base import Batch, Projection, iso, metadata, provenance_json
from projections.events import ProjectedEvent

transcripts = Table(
    "transcripts",
    metadata,
    Column("item_id", Text, primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("turn_id", Text, nullable=False),
    Column("speaker", Text, nullable=False),
    Column("content", Text),
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


def content_of(event: ProjectedEvent, name: str) -> tuple[str | None, str]:
    text = event.text(name)
    return (text, "live") if text is not None else (None, "erased")


class TranscriptsProjection(Projection):
    name: ClassVar[str] = "transcripts"
    kind: ClassVar[str] = "turn"
    table = transcripts
    primary_key = ("item_id",)
    plaintext_columns = ("content",)
    holds = "decrypted transcript turns by session"

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        a = event.attrs
        if event.name == "Recorded":
            content, state = content_of(event, "content")
            prov = a["provenance"]
            batch.add(
                {
                    "item_id": event.item_id,
                    "namespace": a["namespace"],
                    "session_id": prov["session_id"],
                    "turn_id": prov["turn_id"],
                    "speaker": a["subject"],
                    "content": content,
                    "content_state": state,
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
            row["content"], row["content_state"] = content_of(event, "content")
            row["redacted_fields"] = ",".join(sorted(set(a["fields"])))
