"""The vector index on disk: segments of sealed rows, a small sidecar per segment saying
whose row is whose, a manifest written last, one lock.

Why this shape. A vector is personal data (an embedding can be inverted to approximate
text), so no file here holds one in clear: each row of a segment is the row's float32
vector and the digest of the text it embeds, sealed with `crypto.seal_bytes` under its
item's data key (purpose b"vector", bound to the item and key generation). Destroying
the item's key makes every copy unreadable at once: the live segment, a replaced one
still in free blocks, a backup. So an erasure only has to stop serving the row (list it
dead, below) and needs no byte scan on its path, and a rebuild reads the stored rows
back (`VectorIndex.rebuild`) instead of embedding every item again.

Rows have one size (`row_bytes`), so a segment is a plain row-major byte matrix: a
compaction copies the ciphertext of the rows it keeps, without opening them. The
sidecars hold only clear columns (ids, namespaces, kinds, predicates, versions, key
generations), never text or vectors.

Why a sidecar per segment rather than one manifest holding every row: a commit then
writes only what it changed (the rewritten segments, their sidecars, and a manifest of
a few hundred bytes per segment), not the metadata of every row in the index.

An erasure does not rewrite a segment: it lists the erased rows as dead in the manifest
(`SegmentEntry.dead`, covered by the manifest's checksum), one manifest write. Every
reader skips a dead row. Its ciphertext stays in the segment until a compaction
rewrites it without the row, but it was sealed under the item's data key, which the
key store destroyed before the row was listed: nobody can open it. Compaction (a job,
the scheduled verification scan, `rebuild`) removes the bytes and proves it with a
byte scan of the index's files (`vector_erasure.prove_gone`).

Crash safety comes from copy-on-write: a changed segment and its sidecar are written
under new names, the manifest that names them (with both checksums) is renamed into
place last, and only then are the files they replaced removed. A crash at any point
leaves the previous manifest and its files intact; leftovers (temp files, replaced
segments) are removed by the next writer. Either way a leftover holds only ciphertext.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

#: 2: per-segment sidecars. 3: sealed rows, key generations in the sidecars. A sidecar
#: or manifest of another format is discarded and rebuilt (format 2 files, clear
#: float32, shredded).
FORMAT_VERSION = 3
#: The manifest's format. 4: segments may list dead rows. A format-3 manifest (no dead
#: rows) is read as it is; a process of format 3 discards a format-4 one and rebuilds.
MANIFEST_FORMAT = 4
_MANIFEST_FORMATS = (FORMAT_VERSION, MANIFEST_FORMAT)
MANIFEST = "manifest.json"
LOCK = ".lock"
#: Why files of the index were discarded since the last full `rebuild` (file names and
#: checks only, never content), so that `status` in any later process still says it:
#: the process that found the damage may have been a `context` that printed nothing
#: else. Not a file of the index: a discard or a sweep leaves it, a rebuild clears it.
DISCARDS = ".discarded.json"
#: At most this many reasons are kept (the newest), however often the files are damaged.
MAX_DISCARDS = 20
TMP_PREFIX = ".tmp-"
_ZEROS = bytes(1 << 20)
_COLUMNS = ("item_ids", "namespaces", "kinds", "predicates", "versions", "generations")
#: A sealed row: nonce, the float32 vector and the text's digest (encrypted), GCM tag.
NONCE_BYTES, DIGEST_BYTES, TAG_BYTES = 12, 32, 16


class BadIndexFiles(Exception):
    """Internal: files that must not be served. The message names files and checks only."""


def segment_names(number: int) -> tuple[str, str]:
    """A segment's sealed rows and its sidecar: new names for every write, never reused."""
    return f"seg-{number}.sealed", f"seg-{number}.json"


def row_bytes(dimension: int) -> int:
    """The size of one sealed row of a `dimension`-dimensional index."""
    return NONCE_BYTES + 4 * dimension + DIGEST_BYTES + TAG_BYTES


#: Segments of format 2 held float32 vectors in clear: removed by overwriting them.
_CLEAR_SEGMENT = re.compile(r"seg-[0-9]+\.f32")


@dataclass(frozen=True)
class SegmentEntry:
    """What the manifest says about one segment: its two files and their checksums, and
    its dead rows: (row, when it was erased, Unix seconds), listed by an erasure and
    skipped by every reader until a compaction rewrites the segment without them."""

    file: str
    rows: int
    sha256: str
    meta_file: str
    meta_sha256: str
    dead: tuple[tuple[int, int], ...] = ()

    @property
    def files(self) -> tuple[str, str]:
        return (self.file, self.meta_file)

    @property
    def dead_rows(self) -> frozenset[int]:
        return frozenset(row for row, _ in self.dead)

    def with_dead(self, rows: dict[int, int]) -> SegmentEntry:
        """This entry with more rows listed dead (row -> erased at); earlier ones kept."""
        merged = dict(self.dead)
        for row, at in rows.items():
            merged.setdefault(row, at)
        return replace(self, dead=tuple(sorted(merged.items())))


@dataclass(frozen=True)
class SegmentMeta:
    """A segment's sidecar: row by row, whose vector each row is."""

    item_ids: tuple[str, ...]
    namespaces: tuple[str, ...]
    kinds: tuple[str, ...]
    #: Kept so an update can be re-embedded as "<predicate>: <value>" without a log read.
    predicates: tuple[str, ...]
    versions: tuple[int, ...]
    #: The key generation each row is sealed under.
    generations: tuple[int, ...]

    def to_bytes(self, segment: str) -> bytes:
        # Plain tuples (json writes them as lists): `asdict` would deep-copy every id.
        body = {"format": FORMAT_VERSION, "segment": segment}
        body.update({name: getattr(self, name) for name in _COLUMNS})
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")

    @classmethod
    def from_bytes(cls, raw: bytes, entry: SegmentEntry) -> SegmentMeta:
        """Checked against the manifest's entry: its checksum, segment name and row count."""
        if digest(raw) != entry.meta_sha256:
            raise BadIndexFiles(f"segment metadata {entry.meta_file} checksum mismatch")
        try:
            body = json.loads(raw)
            meta = cls(
                item_ids=tuple(str(i) for i in body["item_ids"]),
                namespaces=tuple(str(n) for n in body["namespaces"]),
                kinds=tuple(str(k) for k in body["kinds"]),
                predicates=tuple(str(p) for p in body["predicates"]),
                versions=tuple(int(v) for v in body["versions"]),
                generations=tuple(int(g) for g in body["generations"]),
            )
            consistent = body["format"] == FORMAT_VERSION and body["segment"] == entry.file
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BadIndexFiles(
                f"segment metadata {entry.meta_file} unreadable ({type(exc).__name__})"
            ) from None
        columns = [getattr(meta, name) for name in _COLUMNS]
        if not consistent or any(len(c) != entry.rows for c in columns):
            raise BadIndexFiles(f"segment metadata {entry.meta_file} does not match the manifest")
        return meta


@dataclass(frozen=True)
class Manifest:
    """What the index is: its embedder, its log position and its segments. Per-row
    metadata lives in the sidecars, so this stays small however many rows there are."""

    embedder_name: str
    dimension: int
    #: Changes when the index is discarded or rebuilt: a writer that planned against an
    #: older epoch must not commit into the new one.
    epoch: str
    generation: int
    #: The log position (notification id) the index reflects.
    position: int
    next_segment: int
    segments: tuple[SegmentEntry, ...]

    def to_bytes(self) -> bytes:
        body = _body(self)
        body["checksum"] = _checksum(body)
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")

    @classmethod
    def from_bytes(cls, raw: bytes) -> Manifest:
        try:
            body = json.loads(raw)
            stated = body.pop("checksum")
            if stated != _checksum(body):
                raise BadIndexFiles("manifest checksum mismatch")
            if body["format"] not in _MANIFEST_FORMATS:
                raise BadIndexFiles(f"manifest format {body['format']!r} is not {MANIFEST_FORMAT}")
            segments = tuple(
                SegmentEntry(
                    file=str(s["file"]),
                    rows=int(s["rows"]),
                    sha256=str(s["sha256"]),
                    meta_file=str(s["meta_file"]),
                    meta_sha256=str(s["meta_sha256"]),
                    dead=tuple((int(row), int(at)) for row, at in s.get("dead", ())),
                )
                for s in body["segments"]
            )
            manifest = cls(
                embedder_name=str(body["embedder"]["name"]),
                dimension=int(body["embedder"]["dimension"]),
                epoch=str(body["epoch"]),
                generation=int(body["generation"]),
                position=int(body["position"]),
                next_segment=int(body["next_segment"]),
                segments=segments,
            )
        except BadIndexFiles:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BadIndexFiles(f"manifest unreadable ({type(exc).__name__})") from None
        names = [name for s in manifest.segments for name in s.files]
        for s in manifest.segments:
            bad_name = any("/" in n or n.startswith(".") or n == MANIFEST for n in s.files)
            dead = [row for row, _ in s.dead]
            bad_dead = len(set(dead)) != len(dead) or any(not 0 <= r < s.rows for r in dead)
            if s.rows < 1 or bad_name or s.file == s.meta_file or bad_dead:
                raise BadIndexFiles(f"manifest entry for {s.file!r} is inconsistent")
        if len(set(names)) != len(names):
            raise BadIndexFiles("manifest names a file twice")
        return manifest


def _entry(s: SegmentEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "file": s.file,
        "rows": s.rows,
        "sha256": s.sha256,
        "meta_file": s.meta_file,
        "meta_sha256": s.meta_sha256,
    }
    if s.dead:  # most segments have none: the manifest stays a few hundred bytes each
        out["dead"] = [list(pair) for pair in s.dead]
    return out


def _body(manifest: Manifest) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "embedder": {"name": manifest.embedder_name, "dimension": manifest.dimension},
        "epoch": manifest.epoch,
        "generation": manifest.generation,
        "position": manifest.position,
        "next_segment": manifest.next_segment,
        "segments": [_entry(s) for s in manifest.segments],
    }


def _checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_token(directory: Path) -> tuple[int, int, int] | None:
    """What identifies the manifest on disk. Every write renames a new file into place,
    so the inode changes even when two writes land within one mtime tick."""
    try:
        st = (directory / MANIFEST).stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read_manifest(directory: Path) -> Manifest | None:
    try:
        raw = (directory / MANIFEST).read_bytes()
    except FileNotFoundError:
        return None
    return Manifest.from_bytes(raw)


def read_meta(directory: Path, entry: SegmentEntry) -> SegmentMeta:
    """The segment's sidecar, only if it matches the manifest's entry."""
    try:
        raw = (directory / entry.meta_file).read_bytes()
    except FileNotFoundError:
        raise BadIndexFiles(f"segment metadata {entry.meta_file} is missing") from None
    return SegmentMeta.from_bytes(raw, entry)


def read_segment(directory: Path, entry: SegmentEntry, dimension: int) -> np.ndarray:
    """The segment's sealed rows (uint8, one row per line), only if their size and
    checksum match the manifest. Opened only when a namespace is first searched."""
    try:
        raw = (directory / entry.file).read_bytes()
    except FileNotFoundError:
        raise BadIndexFiles(f"segment {entry.file} is missing") from None
    check_segment(raw, entry, dimension)
    return np.frombuffer(raw, dtype=np.uint8).reshape(entry.rows, row_bytes(dimension))


def check_segment(raw: bytes, entry: SegmentEntry, dimension: int) -> None:
    if len(raw) != entry.rows * row_bytes(dimension):
        raise BadIndexFiles(f"segment {entry.file} has the wrong size for {dimension} dimensions")
    if digest(raw) != entry.sha256:
        raise BadIndexFiles(f"segment {entry.file} checksum mismatch")


def write_segment(
    directory: Path, number: int, sealed: np.ndarray, meta: SegmentMeta
) -> SegmentEntry:
    """Write a segment (sealed rows) and its sidecar under new names (each atomically);
    the caller fsyncs the directory and then names them in a manifest."""
    name, meta_name = segment_names(number)
    raw = np.ascontiguousarray(sealed, dtype=np.uint8).tobytes()
    sidecar = meta.to_bytes(name)
    write_atomic(directory, name, raw)
    write_atomic(directory, meta_name, sidecar)
    return SegmentEntry(name, sealed.shape[0], digest(raw), meta_name, digest(sidecar))


@contextlib.contextmanager
def locked(directory: Path, *, exclusive: bool) -> Iterator[None]:
    """A cross-process lock (flock). Writers take it exclusively; readers take it shared
    while they load, so they never see a manifest whose files are being replaced.
    Separate opens conflict even within one process, so threads are serialised too."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def write_atomic(directory: Path, name: str, data: bytes | memoryview) -> None:
    """Temp file, flush and fsync, rename: a reader sees the old file or the new one.
    The caller fsyncs the directory once for all the renames of a commit."""
    fd, temp = tempfile.mkstemp(dir=directory, prefix=TMP_PREFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, directory / name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove(path: Path) -> None:
    """Unlink a file of the index. Its rows are ciphertext under the items' keys, so the
    bytes left in freed blocks are as unreadable as the key store makes them; only a
    format-2 segment (float32 in clear, from before the rows were sealed) is overwritten
    with zeros first."""
    if _CLEAR_SEGMENT.fullmatch(path.name) is not None:
        shred(path)
    else:
        path.unlink(missing_ok=True)


def shred(path: Path) -> None:
    """Overwrite a file with zeros, fsync, then unlink it (for clear format-2 segments).
    Copy-on-write file systems and SSD firmware may still keep old blocks."""
    try:
        with path.open("r+b", buffering=0) as handle:
            remaining = os.fstat(handle.fileno()).st_size
            while remaining > 0:
                remaining -= handle.write(_ZEROS[: min(remaining, len(_ZEROS))])
            os.fsync(handle.fileno())
        path.unlink()
    except FileNotFoundError:
        pass


def read_discards(directory: Path) -> list[str]:
    """The reasons noted in DISCARDS, oldest first ([] if there is no note). A note that
    cannot be read is itself reported, never ignored."""
    try:
        raw = (directory / DISCARDS).read_bytes()
    except FileNotFoundError:
        return []
    try:
        reasons = json.loads(raw)["discarded"]
        if isinstance(reasons, list) and all(isinstance(r, str) for r in reasons):
            return reasons[-MAX_DISCARDS:]
    except (ValueError, KeyError, TypeError):
        pass
    return [f"the note of discarded files {DISCARDS} is unreadable"]


def note_discard(directory: Path, reason: str) -> None:
    """Add a reason to DISCARDS (under the exclusive lock, like every write here)."""
    reasons = [*read_discards(directory), reason][-MAX_DISCARDS:]
    body = json.dumps({"discarded": reasons}, ensure_ascii=True, separators=(",", ":"))
    write_atomic(directory, DISCARDS, body.encode("ascii"))
    fsync_dir(directory)


def clear_discards(directory: Path) -> list[str]:
    """Remove DISCARDS; returns the reasons it held."""
    reasons = read_discards(directory)
    (directory / DISCARDS).unlink(missing_ok=True)
    return reasons


def index_files(directory: Path) -> list[Path]:
    """Every file of the index except the lock and the note of discards (which never
    hold data)."""
    return [directory / name for name in _file_names(directory)]


def stray_files(directory: Path, referenced: Sequence[str]) -> list[Path]:
    """Files no manifest names: temp files and replaced segments left by a writer that
    crashed. Only meaningful under the exclusive lock (a writer's temp file is not stray)."""
    keep = {MANIFEST, *referenced}
    return [directory / name for name in _file_names(directory) if name not in keep]


def _file_names(directory: Path) -> list[str]:
    """Relative names of every file but the lock, sorted. Compared as strings, without
    a Path or a stat per file: every commit lists the directory (hundreds of segments)
    to sweep it, and Path objects made that cost more than the commit's own writes."""
    out: list[str] = []
    pending = [("", str(directory))]
    while pending:
        prefix, path = pending.pop()
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((f"{prefix}{entry.name}/", entry.path))
                    elif entry.is_file() and entry.name not in (LOCK, DISCARDS):
                        out.append(prefix + entry.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(out)
