"""Files the operations write for a person or an operator: an export is written whole or
not at all (a reader of the file never sees half of what is held about someone)."""

from __future__ import annotations

from pathlib import Path

from memory_ledger.projections.vector_files import write_atomic


def write_export(path: Path, text: str) -> None:
    """Write an export to `path` atomically (temp file, fsync, rename)."""
    write_atomic(path.parent, path.name, text.encode("utf-8"))
