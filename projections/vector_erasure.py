"""How the vector index checks that erased rows are absent: by reading its files back.

No byte scan for the erased vectors is needed on an erasure's path: every row on disk is
sealed under its item's data key (`vector_seal`), so once the key store has destroyed
the key, every copy of the row is ciphertext nobody can open, wherever it lies (a
replaced segment in free blocks, a backup). What is left to check is that the index no
longer serves the rows: the manifest on disk is the one committed, the files it names
match their checksums, their sidecars name no target as a live row (a row the manifest
lists dead is counted apart, with whether its key is destroyed), and memory holds none.

A compaction, which removes dead rows' bytes, is proved by a byte scan (`prove_gone`):
every file of the index, searched for the ciphertext fragments of the rows it dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
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
from memory_ledger.residue import file_paths_under, scan


@dataclass(frozen=True)
class SegmentCheck:
    """What reading segments back found: target rows named live, target rows listed dead
    ((item, key generation) each), and segments that did not match the manifest."""

    rows: int
    dead: list[tuple[str, int]]
    invalid: int


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
    found = check_segments(directory, wanted, [s.entry for s in written], state.manifest)
    dead = sum(1 for seg in state.segments for r in seg.dead if seg.meta.item_ids[r] in wanted)
    return VectorAbsence(
        found.rows,
        in_memory(state, wanted),
        manifest_valid,
        len(written),
        found.invalid,
        strays,
        rows_dead=dead,
    )


def check_segments(
    directory: Path, wanted: set[str], entries: Iterable[SegmentEntry], manifest: Manifest
) -> SegmentCheck:
    """Read segments and sidecars from disk: target rows they name live, target rows
    listed dead, invalid segments."""
    rows = invalid = 0
    dead: list[tuple[str, int]] = []
    for entry in entries:
        try:
            meta: SegmentMeta = read_meta(directory, entry)
            read_segment(directory, entry, manifest.dimension)
        except BadIndexFiles:
            invalid += 1
            continue
        listed = entry.dead_rows
        for row, item in enumerate(meta.item_ids):
            if item in wanted:
                if row in listed:
                    dead.append((item, meta.generations[row]))
                else:
                    rows += 1
    return SegmentCheck(rows, dead, invalid)


def prove_gone(directory: Path, needles: Sequence[bytes]) -> tuple[int, int]:
    """(files read, files holding a needle): every file under the index's directory,
    temp files and strays included, searched in one pass for `needles` (`fragments`
    of the rows a compaction dropped)."""
    paths = file_paths_under(directory)
    if not needles:
        return len(paths), 0
    return len(paths), len({f.path for f in scan(paths, needles)})


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
