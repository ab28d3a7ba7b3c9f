"""How the vector index checks that erased rows are absent: by reading its files back.

No byte scan for the erased vectors is needed, here or in the residue scan: every row on
disk is sealed under its item's data key (`vector_seal`), so once the key store has
destroyed the key, every copy of the row is ciphertext nobody can open, wherever it lies
(a replaced segment in free blocks, a backup). What is left to check is that the index
no longer names the rows: the manifest on disk is the one committed, the files it names
match their checksums, their sidecars name no target, and memory holds none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from memory_ledger.projections.vector_files import (
    MANIFEST,
    BadIndexFiles,
    Manifest,
    SegmentEntry,
    SegmentMeta,
    read_meta,
    read_segment,
    stray_files,
)
from memory_ledger.projections.vector_rows import IndexState, Segment, VectorAbsence


def in_memory(state: IndexState | None, wanted: set[str]) -> int:
    """Target rows the in-memory state still has: in a segment, or opened."""
    if state is None:
        return 0
    rows = sum(1 for i in wanted if state.locate(i))
    opened = state.opened().values()
    return rows + sum(1 for view in opened for i in wanted if view.holds(i))


def read_back(
    directory: Path, state: IndexState, written: Sequence[Segment], wanted: set[str]
) -> VectorAbsence:
    """Under the exclusive lock, right after a commit (`state` is what it committed).

    The manifest on disk must be the one committed, and each written segment and sidecar
    must match it and name no target. The segments not written are the files loaded
    (and checked against their checksums) before, never changed since: the in-memory
    copy answers for them, and `verify_absent` rereads them when asked."""
    strays = len(stray_files(directory, [n for s in state.segments for n in s.entry.files]))
    manifest_valid = _manifest_matches(directory, state)
    rows, invalid = check_segments(directory, wanted, [s.entry for s in written], state.manifest)
    return VectorAbsence(
        rows, in_memory(state, wanted), manifest_valid, len(written), invalid, strays
    )


def check_segments(
    directory: Path, wanted: set[str], entries: Iterable[SegmentEntry], manifest: Manifest
) -> tuple[int, int]:
    """Read segments and sidecars from disk: (target rows they name, invalid ones)."""
    rows = invalid = 0
    for entry in entries:
        try:
            meta: SegmentMeta = read_meta(directory, entry)
            read_segment(directory, entry, manifest.dimension)
        except BadIndexFiles:
            invalid += 1
            continue
        rows += sum(1 for i in meta.item_ids if i in wanted)
    return rows, invalid


def _manifest_matches(directory: Path, state: IndexState) -> bool:
    try:
        raw = (directory / MANIFEST).read_bytes()
    except FileNotFoundError:
        return not state.segments  # nothing committed yet, so nothing to disagree with
    try:
        # Another manifest means someone wrote without the lock: not ours to vouch for.
        return Manifest.from_bytes(raw) == state.manifest
    except BadIndexFiles:
        return False
