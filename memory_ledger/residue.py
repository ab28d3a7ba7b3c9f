"""Byte-level residue scan: does erased plaintext survive anywhere in our files?

A row can be gone from every query and still sit in a free page, a WAL frame or an old
index page. This scan reads the raw bytes of every file under the data directory. The
needles are held only in memory for the duration of the scan and never reported: a
finding names the file and the needle's position in the caller's list, nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MIN_NEEDLE_BYTES = 4
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ResidueFinding:
    path: str
    needle_index: int


def needles_for(texts: Iterable[str]) -> list[bytes]:
    """UTF-8 forms of texts long enough that a match means something."""
    out = []
    for text in texts:
        raw = text.encode("utf-8")
        if len(raw) >= MIN_NEEDLE_BYTES and raw not in out:
            out.append(raw)
    return out


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def scan(paths: Sequence[Path], needles: Sequence[bytes]) -> list[ResidueFinding]:
    findings: list[ResidueFinding] = []
    if not needles:
        return findings
    overlap = max(len(n) for n in needles) - 1
    for path in paths:
        found: set[int] = set()
        try:
            with path.open("rb") as handle:
                tail = b""
                while chunk := handle.read(_CHUNK):
                    window = tail + chunk
                    for index, needle in enumerate(needles):
                        if index not in found and needle in window:
                            found.add(index)
                    tail = window[-overlap:] if overlap else b""
        except FileNotFoundError:
            continue  # a -wal or -journal file can vanish between listing and reading
        findings.extend(ResidueFinding(str(path), i) for i in sorted(found))
    return findings


def checkpoint_evidence(what: str, busy: int) -> str:
    """How a WAL checkpoint ended, as a line of evidence for an erasure report."""
    if busy:
        return f"{what}: WAL checkpoint blocked by a reader; residue may remain until it ends"
    return f"{what}: WAL checkpointed and truncated"
