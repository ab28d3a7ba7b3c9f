"""Memory files: one row per file an agent keeps (memory_ledger/agent_state/files.py),
its path and content sealed under the file's data key (projections/cells.py), with
the clear attributes a directory listing and the size limits need."""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import Boolean, Column, Index, Integer, Table, Text

from memory_ledger.projections.base import Batch, Projection, metadata
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.transcripts import sealed_content

#: The clear code a deletion leaves on a file's last version (it stays in history).
DELETED = "file_deleted"

memory_files = Table(
    "memory_files",
    metadata,
    Column("item_id", Text, primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("sealed", Text),  # the path and the content, sealed (projections/cells.py)
    Column("key_generation", Integer),
    Column("content_state", Text, nullable=False),
    Column("size", Integer, nullable=False),  # bytes of content, for the limits
    Column("flags", Text, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("suppressed", Boolean, nullable=False),
    Column("written_at", Text, nullable=False),
    Column("read_at", Text),
    Column("version", Integer, nullable=False),
    Column("position", Integer, nullable=False),
    Index("ix_memory_files_namespace", "namespace", "deleted"),
)


class MemoryFilesProjection(Projection):
    name: ClassVar[str] = "memory_files"
    kind: ClassVar[str] = "file"
    table = memory_files
    primary_key = ("item_id",)
    sealed_field = "content"
    holds = "agents' memory files: path and content sealed under each file's key, sizes"

    def handle(self, event: ProjectedEvent, batch: Batch) -> None:
        a = event.attrs
        if event.name == "Recorded":
            batch.add(
                {
                    "item_id": event.item_id,
                    "namespace": a["namespace"],
                    **sealed_content(event, "content"),
                    **_shape(a),
                    "suppressed": False,
                    "written_at": event.timestamp,
                    "read_at": None,
                    "version": event.version,
                    "position": event.position,
                }
            )
            return
        row = self.item_row(event, batch)
        if row is None:
            return
        if event.name in ("Superseded", "Redacted"):
            row.update(sealed_content(event, "content"))
            if event.name == "Superseded":
                row.update(_shape(a))
                row["written_at"] = event.timestamp
                row["position"] = event.position
        elif event.name == "Viewed":
            row["read_at"] = a["at"]


def _shape(attrs: dict[str, Any]) -> dict[str, object]:
    """Size, flags and deletion from an event's attributes (`ProjectedEvent.attrs`)."""
    flags = [str(f) for f in attrs.get("flags") or []]
    size = next((int(f[5:]) for f in flags if f.startswith("size:")), 0)
    return {"size": size, "flags": ",".join(flags), "deleted": DELETED in flags}
