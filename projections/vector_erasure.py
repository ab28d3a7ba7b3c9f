"""How a vector index erasure checks its own work: by reading back what it wrote.

After an erasure's commit, the only files that can still hold a removed vector are the
ones that commit wrote (see `VectorIndex.erase` for why). They are small: a segment, its
sidecar, the manifest. Each is read once, and those bytes serve both checks: that the
file matches the manifest just committed (checksum, size, rows named), and that none of
the removed vectors' bytes is in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memory_ledger.forgetting.residue import scan
from projections.vector_files import (
    MANIFEST,
    BadIndexFiles,
    Manifest,
    SegmentMeta,
    check_segment,
    stray_files,
)
from projections.vector_rows import IndexState, Segment, VectorAbsence

#: Needles times bytes up to which the files read back are searched here, with `in`.
#: Above it the residue scanner (one Hyperscan pass for all needles, on every core) is
#: faster; below it, its set-up (a thread pool, compiling the needles) costs more than
#: the search: milliseconds, for the single-item forget that must take a few.
DIRECT_SEARCH_BYTES = 8 << 20


@dataclass(frozen=True)
class ReadBack:
    check: VectorAbsence
    #: Positions, in the caller's list, of the needles found in the files read back.
    found: set[int]
    files_searched: int


def read_back(
    directory: Path,
    state: IndexState,
    written: Sequence[Segment],
    wanted: set[str],
    needles: Sequence[bytes],
) -> ReadBack:
    """Under the exclusive lock, right after a commit (`state` is what it committed).

    The manifest on disk must be the one committed, and each written segment and sidecar
    must match it and name no target. The segments not written are the files loaded
    (and checked against their checksums) before, never changed since: the in-memory
    copy answers for them, and `verify_absent` rereads them when asked."""
    in_memory = sum(1 for i in wanted if state.locate(i))
    strays = len(stray_files(directory, [n for s in state.segments for n in s.entry.files]))
    contents: dict[Path, bytes] = {}
    manifest_valid = _manifest_matches(directory, state, contents)
    rows = invalid = 0
    for seg in written:
        entry = seg.entry
        sidecar = _read(directory / entry.meta_file, contents)
        vectors = _read(directory / entry.file, contents)
        try:
            if sidecar is None or vectors is None:
                raise BadIndexFiles(f"segment {entry.file} or its metadata is missing")
            meta = SegmentMeta.from_bytes(sidecar, entry)
            check_segment(vectors, entry, state.manifest.dimension)
        except BadIndexFiles:
            invalid += 1
            continue
        rows += sum(1 for i in meta.item_ids if i in wanted)
    check = VectorAbsence(rows, in_memory, manifest_valid, len(written), invalid, strays)
    if not needles:
        return ReadBack(check, set(), 0)
    return ReadBack(check, _search(contents, needles), len(contents))


def held_by(segments: Iterable[Segment], needle: bytes) -> bool:
    """Whether a remaining row has exactly these bytes (another item with the same text)."""
    target = np.frombuffer(needle, dtype=np.float32)
    return any(bool((seg.matrix == target).all(axis=1).any()) for seg in segments)


def _manifest_matches(directory: Path, state: IndexState, contents: dict[Path, bytes]) -> bool:
    raw = _read(directory / MANIFEST, contents)
    if raw is None:
        return not state.segments  # nothing committed yet, so nothing to disagree with
    try:
        # Another manifest means someone wrote without the lock: not ours to vouch for.
        return Manifest.from_bytes(raw) == state.manifest
    except BadIndexFiles:
        return False


def _read(path: Path, contents: dict[Path, bytes]) -> bytes | None:
    try:
        contents[path] = raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return raw


def _search(contents: dict[Path, bytes], needles: Sequence[bytes]) -> set[int]:
    if sum(map(len, contents.values())) * len(needles) <= DIRECT_SEARCH_BYTES:
        return {i for i, n in enumerate(needles) if any(n in raw for raw in contents.values())}
    return {finding.needle_index for finding in scan(list(contents), needles)}
