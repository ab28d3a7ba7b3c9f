"""Byte-level residue scan: does erased plaintext survive anywhere in our files?

A row can be gone from every query and still sit in a free page, a WAL frame or an old
index page. This scan reads the raw bytes of every file under the data directory. The
needles are held only in memory for the duration of the scan and never reported: a
finding names the file and the needle's position in the caller's list, nothing more.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:  # x86-64 Linux; see `scan`
    import hyperscan
except ImportError:  # pragma: no cover - other platforms use the slower path
    HYPERSCAN = False
else:
    HYPERSCAN = True  # a flag, not `hyperscan = None`: the module keeps its stub's types

MIN_NEEDLE_BYTES = 4


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
    return [Path(p) for p in file_paths_under(root)]


def file_paths_under(root: Path) -> list[str]:
    """Regular files below root, symlinks not followed, as sorted strings. `os.scandir`
    and no Path objects: the listing is on every verification scan's path, and at 100,000 items the
    vector index's few hundred files took `Path.rglob`, its stat calls and Path sorting
    24 ms."""
    found: list[str] = []
    pending = [str(root)]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                found.append(entry.path)
    return sorted(found)


def scan(paths: Sequence[str | Path], needles: Sequence[bytes]) -> list[ResidueFinding]:
    """One pass over the files for all needles at once, on every core.

    The scan reads a whole store (the scheduled verification scan, `verify`, the
    acceptance harness), and a store of 100,000 items is a few hundred megabytes, so it
    must not cost one pass per needle: with Hyperscan (a dependency on x86-64 Linux) all
    needles are matched together in one pass. Files are cut into pieces that threads
    read and scan in parallel (both release the GIL).
    Elsewhere each needle is searched with `in`: correct, slower.
    """
    if not needles:
        return []
    search = _hyperscan_search(needles) if HYPERSCAN else _find_search(needles)
    overlap = max(len(n) for n in needles) - 1
    tasks = _tasks(paths)

    def scan_task(task: list[Piece]) -> list[set[int]]:
        return [_scan_piece(path, a, b, overlap, search) for path, a, b in task]

    with ThreadPoolExecutor(max_workers=min(len(tasks), os.cpu_count() or 1) or 1) as pool:
        results = list(pool.map(scan_task, tasks))
    found = {
        (piece[0], i)
        for task, hits in zip(tasks, results, strict=True)
        for piece, piece_hits in zip(task, hits, strict=True)
        for i in piece_hits
    }
    return [ResidueFinding(path, i) for path, i in sorted(found)]


_PIECE = 32 << 20  # what one thread takes at a time: files are shared between cores
Piece = tuple[str, int, int]


def _tasks(paths: Sequence[str | Path]) -> list[list[Piece]]:
    """Large files cut into pieces of _PIECE bytes, small ones packed together up to that
    size: a task per small file (a store has hundreds of vector sidecars) cost more in
    thread-pool hand-offs than in reading."""
    tasks: list[list[Piece]] = []
    packed: list[Piece] = []
    packed_bytes = 0
    for path in (os.fspath(p) for p in paths):
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            continue  # a -wal or -journal file can vanish between listing and reading
        if size >= _PIECE:
            tasks.extend([(path, a, min(size, a + _PIECE))] for a in range(0, size, _PIECE))
            continue
        if packed and packed_bytes + size > _PIECE:
            tasks.append(packed)
            packed, packed_bytes = [], 0
        packed.append((path, 0, size))
        packed_bytes += size
    if packed:
        tasks.append(packed)
    return tasks


#: What one read brings in, into a buffer reused per thread. Small enough that the
#: search finds the chunk still in the core's L2 cache after the read put it there: at
#: 100,000 items 1 MiB scanned the store in 34 ms where 4 MiB took 40-50 ms (1 MiB L2
#: per core); much smaller chunks cost more in reads than they save.
_CHUNK = 1 << 20
_buffers = threading.local()


def _scan_piece(
    path: str, start: int, stop: int, overlap: int, search: Callable[[memoryview], set[int]]
) -> set[int]:
    """Read [start, stop) in chunks, each with `overlap` bytes of the next, so a match
    that straddles a boundary is seen whole in one chunk. Plain reads, not a memory
    map: a file another process truncates mid-scan (a WAL checkpoint) gives a short
    read here, where a mapping would kill the process with SIGBUS."""
    size = _CHUNK + overlap
    if len(getattr(_buffers, "data", b"")) < size:
        _buffers.data = bytearray(size)
    view = memoryview(_buffers.data)
    found: set[int] = set()
    try:
        with open(path, "rb", buffering=0) as handle:
            for offset in range(start, stop, _CHUNK):
                handle.seek(offset)
                count = handle.readinto(view[: min(_CHUNK, stop - offset) + overlap])
                if not count:
                    break
                found |= search(view[:count])
    except FileNotFoundError:
        pass  # vanished after it was listed: nothing left in it to find
    return found


#: Bytes times needles below which `find` per needle beats compiling a database: about
#: 10 ms of memchr-speed searching.
FIND_BUDGET = 64 * 1024 * 1024


def search_bytes(data: bytes, needles: Sequence[bytes]) -> set[int]:
    """Indexes of the needles found in one buffer: all needles in one pass (hyperscan),
    or, for a small buffer (a request's few key pages), one `find` per needle, which
    costs less than compiling a hyperscan database (0.2 ms a needle)."""
    if not needles:
        return set()
    small = len(data) * len(needles) <= FIND_BUDGET
    search = _hyperscan_search(needles) if HYPERSCAN and not small else _find_search(needles)
    return search(memoryview(data))


def _hyperscan_search(needles: Sequence[bytes]) -> Callable[[memoryview], set[int]]:
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(
        # Every byte escaped: the binding's literal mode stops at a NUL byte.
        expressions=["".join(f"\\x{b:02x}" for b in n).encode() for n in needles],
        ids=list(range(len(needles))),
        flags=hyperscan.HS_FLAG_SINGLEMATCH,
    )
    scratches = threading.local()  # a scratch space serves one scan at a time

    def search(data: memoryview) -> set[int]:
        found: set[int] = set()

        def on_match(index: int, first: int, last: int, flags: int, context: object) -> bool:
            found.add(index)
            return len(found) == len(needles)  # True stops the scan: everything is found

        if not hasattr(scratches, "scratch"):
            scratches.scratch = hyperscan.Scratch(database)
        # ScanTerminated: every needle was found, the rest of the chunk cannot add any.
        with contextlib.suppress(hyperscan.ScanTerminated):
            # The stub says `AnyStr`; the extension takes any buffer, and a memoryview
            # of the reused read buffer spares a copy of every chunk.
            database.scan(data, on_match, scratch=scratches.scratch)  # type: ignore[type-var]
        return found

    return search


def _find_search(needles: Sequence[bytes]) -> Callable[[memoryview], set[int]]:
    def search(data: memoryview) -> set[int]:
        chunk = data.tobytes()
        return {i for i, needle in enumerate(needles) if needle in chunk}

    return search


def checkpoint_evidence(what: str, busy: int) -> str:
    """How a WAL checkpoint ended, as a line of evidence for an erasure report."""
    if busy:
        return f"{what}: WAL checkpoint blocked by a reader; residue may remain until it ends"
    return f"{what}: WAL checkpointed and truncated"


# -- keyed fingerprints, so `verify` can scan again after the content is gone ----------
#
# At erasure time the plaintext is in memory and the scan above looks for it directly.
# Later, `verify REQUEST_ID` has no plaintext, and must not have any. It gets keyed
# fingerprints instead: for each needle its length, a keyed hash of its first bytes (to
# find candidate positions quickly) and an HMAC of the whole needle (to confirm them).
# The key is random per request and kept, sealed, in the erasable key store; when the
# verification window closes it is destroyed, and the fingerprints become meaningless.

PREFIX_BYTES = 8
_SCAN_CHUNK = 16 << 20


@dataclass(frozen=True)
class Fingerprints:
    key: bytes
    entries: tuple[tuple[int, int, int, str], ...]  # (length, prefix length, prefix hash, mac)

    def to_bytes(self) -> bytes:
        return json.dumps({"key": self.key.hex(), "entries": self.entries}).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Fingerprints:
        data = json.loads(raw)
        entries = tuple((int(a), int(b), int(c), str(d)) for a, b, c, d in data["entries"])
        return cls(bytes.fromhex(data["key"]), entries)


def _weights(key: bytes) -> list[int]:
    return [
        int.from_bytes(hmac.new(key, f"w{j}".encode(), hashlib.sha256).digest()[:8], "big") | 1
        for j in range(PREFIX_BYTES)
    ]


def _prefix_hash(raw: bytes, weights: list[int]) -> int:
    return sum(b * w for b, w in zip(raw, weights, strict=False)) % (1 << 64)


def fingerprint(needles: Sequence[bytes], key: bytes | None = None) -> Fingerprints:
    key = key or secrets.token_bytes(32)
    weights = _weights(key)
    entries = tuple(
        (
            len(n),
            min(len(n), PREFIX_BYTES),
            _prefix_hash(n[:PREFIX_BYTES], weights),
            hmac.new(key, n, hashlib.sha256).hexdigest(),
        )
        for n in needles
    )
    return Fingerprints(key, entries)


def scan_fingerprints(paths: Sequence[str | Path], prints: Fingerprints) -> list[ResidueFinding]:
    """Find files holding any fingerprinted needle, without knowing the needles."""
    if not prints.entries:
        return []
    weights = np.array(_weights(prints.key), dtype=np.uint64)
    by_prefix: dict[int, dict[int, list[tuple[int, str, int]]]] = {}
    for index, (length, k, prefix, mac) in enumerate(prints.entries):
        by_prefix.setdefault(k, {}).setdefault(prefix, []).append((length, mac, index))
    overlap = max(e[0] for e in prints.entries) - 1
    findings: list[ResidueFinding] = []
    for path in paths:
        found: set[int] = set()
        try:
            with open(path, "rb") as handle:
                tail = b""
                while chunk := handle.read(_SCAN_CHUNK):
                    window = tail + chunk
                    found |= _scan_window(window, weights, by_prefix, prints.key)
                    tail = window[-overlap:] if overlap else b""
        except FileNotFoundError:
            continue
        findings.extend(ResidueFinding(str(path), i) for i in sorted(found))
    return findings


def scan_fingerprint_bytes(data: bytes, prints: Fingerprints) -> list[ResidueFinding]:
    """`scan_fingerprints` over one buffer (named "" in the findings)."""
    if not prints.entries or not data:
        return []
    weights = np.array(_weights(prints.key), dtype=np.uint64)
    by_prefix: dict[int, dict[int, list[tuple[int, str, int]]]] = {}
    for index, (length, k, prefix, mac) in enumerate(prints.entries):
        by_prefix.setdefault(k, {}).setdefault(prefix, []).append((length, mac, index))
    found = _scan_window(data, weights, by_prefix, prints.key)
    return [ResidueFinding("", i) for i in sorted(found)]


def _scan_window(
    window: bytes,
    weights: np.ndarray,
    by_prefix: dict[int, dict[int, list[tuple[int, str, int]]]],
    key: bytes,
) -> set[int]:
    data = np.frombuffer(window, dtype=np.uint8).astype(np.uint64)
    found: set[int] = set()
    for k, prefixes in by_prefix.items():
        n = len(data) - k + 1
        if n <= 0:
            continue
        hashes = np.zeros(n, dtype=np.uint64)
        for j in range(k):  # uint64 arithmetic wraps: the sum is taken mod 2**64
            hashes += data[j : j + n] * weights[j]
        wanted = np.fromiter(prefixes, dtype=np.uint64)
        for position in np.nonzero(np.isin(hashes, wanted))[0]:
            for length, mac, index in prefixes[int(hashes[position])]:
                candidate = window[int(position) : int(position) + length]
                if hmac.compare_digest(hmac.new(key, candidate, hashlib.sha256).hexdigest(), mac):
                    found.add(index)
    return found
