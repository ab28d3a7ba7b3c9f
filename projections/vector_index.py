"""The vector index: a projection of the log that forgets as well as it remembers.

It holds one vector per live, unsuppressed fact, preference and turn, and answers exact
cosine searches within one namespace. Exact, because at our scale (tens to thousands of
items per namespace) a brute-force matmul takes microseconds, and because approximate
indexes keep deleted vectors in their files (see docs/operations.md, "why not HNSW").

Like the SQL projections it is rebuilt from the log and tracks its log position, but in
its manifest: it lives in files under `<data_dir>/vectors/`, on PostgreSQL deployments
too. Embedding happens in `catch_up`, one `embed` call per batch, outside the lock, so a
forget never waits for pending items to be embedded; the commit re-checks under the lock
that every key it embedded with is still alive, so an item erased meanwhile is dropped.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from memory_ledger.errors import ConfigurationError, IndexMismatch
from memory_ledger.event_log import EventLog
from memory_ledger.retrieval.embedders import Embedder
from projections.events import Progress, decode_batch
from projections.vector_erasure import held_by, read_back
from projections.vector_files import (
    MANIFEST,
    BadIndexFiles,
    Manifest,
    SegmentEntry,
    fsync_dir,
    index_files,
    locked,
    manifest_token,
    read_manifest,
    read_meta,
    read_segment,
    shred,
    stray_files,
    write_atomic,
    write_segment,
)
from projections.vector_rows import (
    NOTHING_CHECKED,
    IndexedRow,
    IndexState,
    Layout,
    Ops,
    Segment,
    VectorAbsence,
    VectorErasure,
    layout,
    plan_batch,
    still_readable,
)

log = logging.getLogger("memory_ledger.vectors")

VECTORS_DIR = "vectors"
#: Rows per segment (1 MiB at 512 dimensions). A commit rewrites whole segments (the
#: last one to append, the holder of a removed row to erase), and an erasure scans what
#: it wrote, so their cost grows with this; a search gathers one namespace's rows from
#: every segment holding some, so its cost grows with the number of segments. Measured
#: at 100,000 rows: 512 keeps a one-row erase near the floor set by its fsyncs while a
#: search stays well under a millisecond.
SEGMENT_ROWS = 512
DEFAULT_BATCH = 500


class VectorIndex:
    """Exact cosine search over float32 segments, kept in step with the log.

    The configured embedder wins: files written by another embedder (name or dimension)
    are discarded and rebuilt, because their vectors cannot be compared with new queries.
    """

    def __init__(
        self,
        log: EventLog,
        directory: Path,
        embedder: Embedder,
        *,
        batch_size: int = DEFAULT_BATCH,
        segment_rows: int = SEGMENT_ROWS,
    ) -> None:
        self.log = log
        self.directory = directory
        self.embedder = embedder
        self.batch_size = batch_size
        self.segment_rows = segment_rows
        self._state: IndexState | None = None  # loaded on first use: most commands never search
        self._state_lock = threading.RLock()
        self._catch_up_lock = threading.Lock()
        #: Why this process discarded the index's files (file names and checks only, no
        #: content), oldest first: `status` and `rebuild` show it, not only the log.
        self.discarded: list[str] = []

    @property
    def embedder_name(self) -> str:
        return str(self.embedder.name)

    @property
    def dimension(self) -> int:
        return int(self.embedder.dimension)

    def close(self) -> None:
        self._state = None

    # -- reading ---------------------------------------------------------------------------

    def search(
        self,
        namespace: str,
        vector: np.ndarray,
        k: int,
        allowed: set[str] | None = None,
        *,
        embedder_name: str | None = None,
    ) -> list[tuple[str, float]]:
        """The k rows of `namespace` (and of `allowed`, if given) most similar to `vector`,
        best first. Pass `embedder_name` when the vector came from elsewhere: a vector of
        another embedder or dimension raises IndexMismatch instead of ranking nonsense."""
        query = self._query(vector, embedder_name)
        entry = self._current().namespace(namespace)
        if k < 1 or entry is None:
            return []
        parts, ids = entry
        scores = np.concatenate([_part_scores(matrix, rows, query) for matrix, rows in parts])
        # `allowed` is applied to the best rows first, widening only when it removes
        # too many: no per-row Python pass over a large namespace.
        want = k
        while True:
            order = _best(scores, want + (0 if allowed is None else 16 + 3 * want))
            found = [(ids[i], float(scores[i])) for i in order]
            if allowed is not None:
                found = [hit for hit in found if hit[0] in allowed]
            if len(found) >= k or len(order) == len(scores):
                return found[:k]
            want *= 4

    def embed_query(self, text: str) -> np.ndarray:
        return self._embed([text])[0]

    def _query(self, vector: np.ndarray, embedder_name: str | None) -> np.ndarray:
        if embedder_name is not None and embedder_name != self.embedder_name:
            raise IndexMismatch(
                f"the query was embedded by {embedder_name!r}, but the vector index holds "
                f"vectors of {self.embedder_name!r}: embed the query with the configured one"
            )
        query = np.asarray(vector, dtype=np.float32)
        if query.ndim == 2 and query.shape[0] == 1:
            query = query[0]
        if query.shape != (self.dimension,):
            raise IndexMismatch(
                f"the query vector has shape {tuple(query.shape)}, but the vector index holds "
                f"{self.dimension}-dimensional vectors of {self.embedder_name!r}"
            )
        return query

    def snapshot(self) -> list[IndexedRow]:
        """Every row, by item id: to compare a rebuilt index with an incremental one."""
        rows = [
            IndexedRow(item, m.namespaces[r], m.kinds[r], m.versions[r], seg.matrix[r].copy())
            for seg in self._current().segments
            for m in (seg.meta,)
            for r, item in enumerate(m.item_ids)
        ]
        return sorted(rows, key=lambda row: row.item_id)

    def status(self) -> dict[str, Any]:
        state = self._current()
        return {
            "embedder": self.embedder_name,
            "dimension": self.dimension,
            "position": state.manifest.position,
            "rows": sum(s.rows for s in state.segments),
            "segments": len(state.segments),
            "discarded": list(self.discarded),
        }

    # -- loading ---------------------------------------------------------------------------

    def _current(self) -> IndexState:
        """The in-memory view, reloaded only when another writer replaced the manifest
        (one stat per call), so a search never rereads the segments."""
        state = self._state
        if state is not None and state.token == manifest_token(self.directory):
            return state
        with self._state_lock:
            try:
                with locked(self.directory, exclusive=False):
                    return self._load()
            except BadIndexFiles:
                pass  # repaired below, under the exclusive lock
            with locked(self.directory, exclusive=True):
                return self._load_or_discard()

    def _load(self) -> IndexState:
        token = manifest_token(self.directory)
        old = self._state
        if old is not None and old.token == token:
            return old
        manifest = read_manifest(self.directory)
        if manifest is None:
            state = IndexState.of(self._empty_manifest(), (), None)
        else:
            if (manifest.embedder_name, manifest.dimension) != (self.embedder_name, self.dimension):
                raise BadIndexFiles(
                    f"built by embedder {manifest.embedder_name} ({manifest.dimension} "
                    f"dimensions) but {self.embedder_name} ({self.dimension}) is configured"
                )
            known = {s.entry: s for s in old.segments} if old is not None else {}
            # A segment file is written once, never changed: one already loaded is reused.
            segments = []
            for entry in manifest.segments:
                segment = known.get(entry)
                if segment is None:
                    meta = read_meta(self.directory, entry)
                    matrix = read_segment(self.directory, entry, manifest.dimension)
                    segment = Segment.of(entry, meta, matrix)
                segments.append(segment)
            if old is not None:  # keeps the search cache of the namespaces not changed
                state = old.after(manifest, segments, token)
            else:
                state = IndexState.of(manifest, segments, token)
        self._state = state
        return state

    def _load_or_discard(self) -> IndexState:
        """Under the exclusive lock: load, or discard files that must not be served."""
        try:
            return self._load()
        except BadIndexFiles as exc:
            self._note_discarded(str(exc))
            log.warning(
                "vector index at %s not served: %s; its files were discarded and it is "
                "rebuilt from the log at the next catch-up",
                self.directory,
                exc,
            )
            return self._reset()

    def _note_discarded(self, reason: str) -> None:
        self.discarded.append(reason)

    def _empty_manifest(self) -> Manifest:
        epoch = secrets.token_hex(8)
        return Manifest(self.embedder_name, self.dimension, epoch, 0, 0, 0, ())

    def _reset(self) -> IndexState:
        """Under the exclusive lock: shred every file, start again at log position 0."""
        for path in index_files(self.directory):
            shred(path)
        manifest = self._empty_manifest()
        write_atomic(self.directory, MANIFEST, manifest.to_bytes())
        fsync_dir(self.directory)
        self._state = IndexState.of(manifest, (), manifest_token(self.directory))
        return self._state

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        with self._state_lock, locked(self.directory, exclusive=True):
            yield

    @contextlib.contextmanager
    def _writing(self) -> Iterator[IndexState]:
        with self._exclusive():
            yield self._load_or_discard()

    # -- catching up -----------------------------------------------------------------------

    def catch_up(self) -> int:
        """Apply every event after the index's position; returns notifications read."""
        with self._catch_up_lock:
            return self._catch_up()

    def rebuild(self, progress: Progress | None = None) -> int:
        """Discard every file and replay the whole log, re-embedding everything. Files
        that fail their checks are named in `discarded` first, so a rebuild says that it
        replaced a damaged index, not only that it replaced one."""
        with self._catch_up_lock:
            with self._exclusive():
                self._state = None  # read and check every file again, not the memory copy
                try:
                    self._load()
                except BadIndexFiles as exc:
                    self._note_discarded(str(exc))
                self._reset()
            return self._catch_up(progress)

    def _catch_up(self, progress: Progress | None = None) -> int:
        applied = 0
        while True:
            state = self._current()
            start, epoch = state.manifest.position, state.manifest.epoch
            head = self.log.max_position()
            if start > head:  # ahead of its log: the log was replaced; never serve it
                with self._writing() as current:
                    if current.manifest.position > head:
                        self._note_discarded(
                            f"at log position {current.manifest.position}, ahead of its log "
                            f"(which ends at {head}): the log was replaced"
                        )
                        log.warning("vector index %s is ahead of its log; rebuilt", self.directory)
                        self._reset()
                continue
            if start == head:
                return applied
            batch = self.log.notifications(start, self.batch_size)
            if not batch:
                return applied
            ops = plan_batch(self.log, state, decode_batch(self.log, batch))
            vectors = self._embed([op.text for op in ops.values() if op is not None])
            with self._writing() as current:
                if (current.manifest.epoch, current.manifest.position) != (epoch, start):
                    continue  # another writer moved the index on: plan again from there
                ops, vectors = still_readable(self.log, ops, vectors)
                self._commit(current, ops, vectors, batch[-1].id)
            applied += len(batch)
            if progress is not None:
                progress("vector_index", batch[-1].id, head)
            if batch[-1].id >= head:
                return applied

    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = np.ascontiguousarray(self.embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.dimension):
            raise ConfigurationError(
                f"embedder {self.embedder_name!r} returned shape {vectors.shape} for "
                f"{len(texts)} texts; expected {self.dimension} columns"
            )
        return vectors

    # -- writing ---------------------------------------------------------------------------

    def _commit(
        self, state: IndexState, ops: Ops, vectors: np.ndarray, position: int
    ) -> tuple[Layout, list[Segment]]:
        """Under the exclusive lock: write changed segments and their sidecars under new
        names, then the manifest, then remove the files they replaced. Only what changed
        is written: the manifest holds no per-row data. Returns the layout applied and
        the segments written."""
        plan = layout(state, ops, vectors, self.segment_rows)
        number = state.manifest.next_segment
        segments: list[Segment] = []
        written: list[Segment] = []
        for draft in plan.entries:
            if isinstance(draft, Segment):
                segments.append(draft)
                continue
            matrix, meta = draft.sealed()
            entry = write_segment(self.directory, number, matrix, meta)
            number += 1
            written.append(Segment.of(entry, meta, matrix))
            segments.append(written[-1])
        manifest = Manifest(
            self.embedder_name,
            self.dimension,
            state.manifest.epoch,
            state.manifest.generation + 1,
            position,
            number,
            tuple(s.entry for s in segments),
        )
        fsync_dir(self.directory)  # the segments' renames are durable before the manifest's
        write_atomic(self.directory, MANIFEST, manifest.to_bytes())
        fsync_dir(self.directory)
        self._state = state.after(manifest, segments, manifest_token(self.directory))
        lost = {name for e in plan.lost_rows for name in e.files}
        self._sweep(unlink_only={name for e in plan.appended for name in e.files} - lost)
        return plan, written

    def _sweep(self, unlink_only: set[str] | None = None) -> None:
        """Remove every file the manifest does not name. Files a commit replaced by
        appending are just unlinked (all their rows live on); anything else, removed rows
        or a crashed writer's leftovers, is overwritten with zeros first."""
        assert self._state is not None
        named = [name for s in self._state.segments for name in s.entry.files]
        strays = stray_files(self.directory, named)
        for path in strays:
            if path.name in (unlink_only or set()):
                path.unlink(missing_ok=True)
            else:
                shred(path)
        if strays:
            fsync_dir(self.directory)

    # -- erasure ---------------------------------------------------------------------------

    def erase(self, item_ids: Iterable[str]) -> VectorErasure:
        """Remove the items' rows now, without catching up first: a forget must not wait
        for pending items to be embedded, and an item not indexed yet never will be (its
        key is gone). Then scan the files this erasure wrote for the removed vectors'
        bytes, and read the manifest and those files back (`VectorErasure.check`).

        Why scanning only the written files is enough. Under the exclusive lock, the
        loaded state matches the manifest on disk, and every file it names was checked
        against its checksum when it was loaded; segment files are never changed after
        they are written. A row lives in exactly one segment. So before this erasure,
        the removed rows' bytes were in the segments that held them, and possibly in a
        crashed writer's leftovers. The commit writes those segments' replacements
        without the rows, switches the manifest, then overwrites the replaced files with
        zeros and unlinks them, and does the same to every file the manifest does not
        name (leftovers included). What is left is the manifest, the files just written,
        and segments that never held the rows. Scanning the written files therefore
        covers every file that can hold the bytes, at a cost set by one segment's size
        rather than the index's. A segment damaged on disk since it was loaded is not
        this erasure's to find: `verify_absent` reads and checks every file.
        """
        wanted = set(item_ids)
        if not wanted:  # e.g. a mention redaction that rewrote nothing
            return VectorErasure(0, 0, 0, 0, 0, 0)
        with self._writing() as state:
            held = [(s, s.row_of[i]) for s in state.segments for i in wanted if i in s.row_of]
            needles = [seg.matrix[row].tobytes() for seg, row in held]  # memory only
            rewritten = removed = 0
            written: list[Segment] = []
            if held:
                empty = np.zeros((0, self.dimension), dtype=np.float32)
                ops: Ops = dict.fromkeys(wanted)
                plan, written = self._commit(state, ops, empty, state.manifest.position)
                rewritten, removed = len(plan.lost_rows) - plan.emptied, plan.emptied
            else:
                self._sweep()  # a crashed writer's leftovers may still hold the rows
            assert self._state is not None
            back = read_back(self.directory, self._state, written, wanted, needles)
            shared = {i for i in back.found if held_by(written, needles[i])}
        return VectorErasure(
            rows_removed=len(held),
            segments_rewritten=rewritten,
            segments_removed=removed,
            files_scanned=back.files_searched,
            vector_bytes_found=len(back.found - shared),
            vectors_shared_with_live_items=len(shared),
            check=back.check,
        )

    def _check_segments(
        self, wanted: set[str], entries: Iterable[SegmentEntry], manifest: Manifest
    ) -> tuple[int, int]:
        """Read segments and sidecars from disk: (target rows they name, invalid ones)."""
        rows = invalid = 0
        for entry in entries:
            try:
                meta = read_meta(self.directory, entry)
                read_segment(self.directory, entry, manifest.dimension)
            except BadIndexFiles:
                invalid += 1
                continue
            rows += sum(1 for i in meta.item_ids if i in wanted)
        return rows, invalid

    def repair(self) -> None:
        """Reload every file from disk, checking each, and discard them all if any fails:
        for when verification finds a file that no longer matches its manifest."""
        with self._exclusive():
            self._state = None
            self._load_or_discard()

    def verify_absent(self, item_ids: Iterable[str]) -> VectorAbsence:
        """Reads the manifest, every sidecar and every segment from disk again (not this
        object's idea of what it erased), and checks the in-memory copy too. Reads the
        whole index: for `verify`, not for the request path."""
        wanted = set(item_ids)
        memory = self._state
        in_memory = sum(1 for i in wanted if memory is not None and memory.locate(i))
        if not self.directory.exists():
            return replace(NOTHING_CHECKED, rows_in_memory=in_memory)
        with self._state_lock, locked(self.directory, exclusive=False):
            try:
                manifest = read_manifest(self.directory)
            except BadIndexFiles:
                return VectorAbsence(0, in_memory, False, 0, 0, 0)
            if manifest is None:
                return replace(NOTHING_CHECKED, rows_in_memory=in_memory)
            entries = manifest.segments
            rows, invalid = self._check_segments(wanted, entries, manifest)
            named = [name for e in entries for name in e.files]
            return VectorAbsence(
                rows_in_manifest=rows,
                rows_in_memory=in_memory,
                manifest_valid=True,
                segments_checked=len(entries),
                segments_invalid=invalid,
                stray_files=len(stray_files(self.directory, named)),
            )


def _part_scores(matrix: np.ndarray, rows: Any, query: np.ndarray) -> np.ndarray:
    """Similarity of a segment's rows of one namespace to the query, without copying
    them: a run of rows is a view; scattered rows that are most of the segment are
    scored with the whole segment and picked after; a few scattered rows are gathered."""
    if not isinstance(rows, slice) and len(rows) * 4 >= len(matrix):
        return (matrix @ query)[rows]
    return matrix[rows] @ query


def _best(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the n highest scores, best first; equal scores by position."""
    if n < len(scores):
        top = np.sort(np.argpartition(-scores, n - 1)[:n])
        return top[np.argsort(-scores[top], kind="stable")]
    return np.argsort(-scores, kind="stable")
