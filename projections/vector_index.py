"""The vector index: a projection of the log that forgets as well as it remembers.

It holds one vector per live, unsuppressed fact, preference and turn, and answers cosine
searches within one namespace. Like the SQL projections it is rebuilt from the log and
tracks its log position, but in its manifest: it lives in files under
`<data_dir>/vectors/`, on PostgreSQL deployments too.

Sealed on disk, open only in memory. Each row is sealed under its item's data key
(`vector_seal`): the files hold ciphertext and clear ids only, so destroying an item's
key erases its vector everywhere. An erasure of a row whose key is destroyed lists it
dead in the manifest (one write, no segment rewritten, no byte scan); `compact` later
rewrites the segments without their dead rows and proves the bytes gone (a job, the
scheduled verification scan, `rebuild`: jobs/vector_compaction.py).
A namespace's rows are opened on its first search in this process and kept in memory
(`vector_search.NamespaceView`) until a commit changes that namespace; every search
checks the manifest (one stat) for another process's commits, and the keys of the rows
it returns, so a row whose key was destroyed is never served. A large namespace's
search codes are kept sealed beside the index (`vector_codes`, `<data_dir>/vector-codes/`):
a fresh process builds its view from them and opens only the rows a search scores; every
erasure removes those files.

Stored once. Embedding happens in `catch_up`, one `embed` call per batch, outside the
lock, so a forget never waits for pending items to be embedded; the commit re-checks
under the lock that every key it embedded with is still alive, so an item erased
meanwhile is dropped. A sealed row carries the digest of the text it embeds, and
`rebuild` takes a row's stored vector back whenever the item, its key generation and the
text are the same: it embeds only what changed (or everything, for another embedder).

Search is exact for a namespace of up to a few thousand rows; above that a compact code
per row picks the candidates, which are scored exactly (`vector_search`).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from memory_ledger.embedders import Embedder
from memory_ledger.errors import ConfigurationError, IndexMismatch
from memory_ledger.event_log import EventLog
from memory_ledger.keystore import KeyRing
from memory_ledger.projections.events import Progress, ProjectedEvent, decode_batch
from memory_ledger.projections.vector_codes import CODES_DIR, CodeFiles
from memory_ledger.projections.vector_erasure import (
    check_segments,
    in_memory,
    prove_gone,
    read_back,
)
from memory_ledger.projections.vector_files import (
    MANIFEST,
    BadIndexFiles,
    Manifest,
    clear_discards,
    fsync_dir,
    index_files,
    locked,
    manifest_token,
    note_discard,
    read_discards,
    read_manifest,
    read_meta,
    read_segment,
    remove,
    row_bytes,
    stray_files,
    write_atomic,
    write_segment,
)
from memory_ledger.projections.vector_rows import (
    NOTHING_CHECKED,
    NOTHING_COMPACTED,
    IndexedRow,
    IndexState,
    Layout,
    Ops,
    Put,
    Segment,
    VectorAbsence,
    VectorCompaction,
    VectorErasure,
    compacted,
    fragments,
    layout,
    mark_dead,
    plan_batch,
    still_readable,
)
from memory_ledger.projections.vector_seal import open_rows, seal_rows, text_digest
from memory_ledger.projections.vector_search import CODE_BITS, NamespaceView

log = logging.getLogger("memory_ledger.vectors")

VECTORS_DIR = "vectors"
#: Rows per segment (about 1 MiB at 512 dimensions). A commit rewrites whole segments
#: (the last one to append, the holder of a row removed with its key alive, one being
#: compacted), so its cost grows with this; opening a namespace gathers its rows from
#: every segment holding some.
#: Measured at 100,000 rows: 512 keeps a one-row erase near the floor set by its fsyncs.
SEGMENT_ROWS = 512
DEFAULT_BATCH = 500
#: A segment whose dead rows are more than this share of it is rewritten by the
#: compaction job (`compact`); the verification scan compacts older ones whatever share.
DEAD_SHARE = 0.2


class VectorIndex:
    """Cosine search over sealed segments, kept in step with the log.

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
        #: Large namespaces' search codes, sealed beside the index (`vector_codes`).
        self.codes = CodeFiles(
            directory.parent / CODES_DIR, log.master, self.embedder_name, CODE_BITS
        )
        self._state_lock = threading.RLock()
        self._catch_up_lock = threading.Lock()
        #: Why this process discarded the index's files (file names and checks only, no
        #: content), oldest first. Each is also noted on disk (`DISCARDS`), so `status`
        #: shows it in every process until a full rebuild clears the note.
        self.discarded: list[str] = []
        self._reported = 0  # how many of `discarded` new_discards() has handed out
        self._unnoted: list[str] = []  # discards the note could not be written for
        #: What the last `clear_discards` (after a full rebuild) cleared.
        self.cleared: list[str] = []
        #: What the last `rebuild` did with the stored vectors (counts only).
        self.last_rebuild: dict[str, int] = {}

    @property
    def embedder_name(self) -> str:
        return str(self.embedder.name)

    @property
    def dimension(self) -> int:
        return int(self.embedder.dimension)

    def close(self) -> None:
        self._state = None  # the opened vectors go with it

    # -- reading ---------------------------------------------------------------------------

    def search(
        self,
        namespace: str,
        vector: np.ndarray,
        k: int,
        allowed: set[str] | None = None,
        *,
        embedder_name: str | None = None,
        accept: Callable[[str], bool] | None = None,
        verify_keys: bool = True,
    ) -> list[tuple[str, float]]:
        """The k rows of `namespace` (and of `allowed`, and those `accept` takes, if given)
        most similar to `vector`, best first. Pass `embedder_name` when the vector came
        from elsewhere: a vector of another embedder or dimension raises IndexMismatch
        instead of ranking nonsense. `accept` is recall's read-time filter: judged on the
        best rows first, widening only while it removes too many (`NamespaceView.search`),
        so the caller never asks again for more.

        The keys of the rows returned are checked (one key-store read): a row whose key
        was destroyed since its namespace was opened (by another process, whose erasure
        of the row has not committed yet) is dropped from memory and never served.
        `verify_keys=False` leaves that check to a caller that opens what it serves with
        the items' keys anyway (recall: memory_ledger/retrieval/context.py), so a read
        pays one key-store read, not two."""
        query = self._query(vector, embedder_name)
        if k < 1:
            return []
        view = self._current().namespace(namespace, self._open, self.codes)
        if view is None:
            return []
        dead = view.dead

        def accepted(item_id: str) -> bool:
            return (
                item_id not in dead
                and (allowed is None or item_id in allowed)
                and (accept is None or accept(item_id))
            )

        while True:  # a filter widens the search: only when there is something to filter
            filtered = bool(dead) or allowed is not None or accept is not None
            hits = view.search(query, k, accepted if filtered else None)
            gone = self._destroyed(view, [row for row, _ in hits]) if verify_keys else set()
            if not gone:
                return [(view.ids[row], score) for row, score in hits]
            dead.update(gone)

    def similarities(
        self, namespace: str, vector: np.ndarray, item_ids: Iterable[str]
    ) -> dict[str, float]:
        """The exact similarity to `vector` of each of `item_ids` that has a live row in
        `namespace` (absent: no row). Numbers only, for ranking: what is shown is read
        and opened with its key, so an erased item is never served from here."""
        query = self._query(vector, None)
        view = self._current().namespace(namespace, self._open)
        return {} if view is None else view.similarities(query, item_ids)

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

    def _open(
        self, item_ids: list[str], generations: list[int], sealed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Open sealed rows with their items' keys (one key-store read per 500 items)."""
        keys = self.log.keys_for(sorted(set(item_ids)))
        vectors, _, opened = open_rows(keys, item_ids, generations, sealed, self.dimension)
        return vectors, opened

    def _destroyed(self, view: NamespaceView, rows: list[int]) -> set[str]:
        if not rows:
            return set()
        ids = [view.ids[r] for r in rows]
        keys = self.log.keys_for(ids)
        return {
            item
            for item, row in zip(ids, rows, strict=True)
            if keys.data_key(item, view.generations[row]) is None
        }

    def snapshot(self) -> list[IndexedRow]:
        """Every row whose key is alive, opened, by item id: to compare a rebuilt index
        with an incremental one."""
        state = self._current()
        rows = []
        for seg in state.segments:
            m, live = seg.meta, seg.live_rows()
            ids, generations = [m.item_ids[r] for r in live], [m.generations[r] for r in live]
            vectors, opened = self._open(ids, generations, seg.sealed[live])
            for n, r in enumerate(live):
                if opened[n]:
                    rows.append(
                        IndexedRow(m.item_ids[r], m.namespaces[r], m.kinds[r], m.versions[r],
                                   vectors[n])
                    )  # fmt: skip
        return sorted(rows, key=lambda row: row.item_id)

    def status(self) -> dict[str, Any]:
        state = self._current()
        return {
            "embedder": self.embedder_name,
            "dimension": self.dimension,
            "position": state.manifest.position,
            "rows": sum(s.rows - len(s.dead) for s in state.segments),
            # listed dead by erasures: never served; their bytes go at the next compaction
            "dead_rows": sum(len(s.dead) for s in state.segments),
            "segments": len(state.segments),
            "namespaces_open": len(state.opened()),
            "discarded": self.noted_discards(),
        }

    def noted_discards(self) -> list[str]:
        """Why the index's files were discarded since the last full rebuild, by any
        process (the note on disk), oldest first."""
        return [*read_discards(self.directory), *self._unnoted]

    def new_discards(self) -> list[str]:
        """The discards of this process not handed out by an earlier call: for a command
        to warn about once, whatever it was doing when it found them."""
        new = self.discarded[self._reported :]
        self._reported = len(self.discarded)
        return new

    def clear_discards(self) -> list[str]:
        """After a full rebuild: the noted discards (by any process, the rebuild's own
        included), which the note then no longer holds."""
        with self._exclusive():
            self.cleared = [*clear_discards(self.directory), *self._unnoted]
        self._unnoted = []
        return self.cleared

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
            known = {s.entry.file: s for s in old.segments} if old is not None else {}
            # A segment file is written once, never changed: one already loaded is reused
            # (under the manifest's entry, which may list more of its rows dead).
            segments = []
            for entry in manifest.segments:
                segment = known.get(entry.file)
                if segment is not None and segment.entry != entry:
                    same = replace(segment.entry, dead=entry.dead) == entry
                    segment = segment.with_entry(entry) if same else None
                if segment is None:
                    meta = read_meta(self.directory, entry)
                    sealed = read_segment(self.directory, entry, manifest.dimension)
                    segment = Segment.of(entry, meta, sealed)
                segments.append(segment)
            if old is not None:  # keeps the opened namespaces, updated
                state = old.after(manifest, segments, token, self._open)
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
        """Under the exclusive lock: remember why files were discarded, here and on disk."""
        self.discarded.append(reason)
        try:
            note_discard(self.directory, reason)
        except OSError as exc:  # the discard stands; this process still reports it
            log.warning("could not note the discard in %s: %s", self.directory, exc)
            self._unnoted.append(reason)

    def _empty_manifest(self, next_segment: int = 0) -> Manifest:
        epoch = secrets.token_hex(8)
        return Manifest(self.embedder_name, self.dimension, epoch, 0, 0, next_segment, ())

    def _reset(self) -> IndexState:
        """Under the exclusive lock: remove every file, start again at log position 0."""
        self.codes.remove_all()
        for path in index_files(self.directory):
            remove(path)
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

    def replay(self) -> Replay:
        """A plan of a rebuild for another replay of the log to feed (`Replay`)."""
        return Replay(self.log, IndexState.of(self._empty_manifest(), (), None))

    def rebuild(self, progress: Progress | None = None, replay: Replay | None = None) -> int:
        """Replay the whole log into a new index, taking each row's stored vector back
        when its item, key generation and text are unchanged, embedding the rest. Files
        that fail their checks are named in `discarded` first (and nothing of them is
        reused), so a rebuild says that it replaced a damaged index.

        `replay`: the log as another replay (the projection runner's rebuild) already
        read, decoded and opened it, batch by batch from position 0; when it is whole
        (`Replay.whole`), the index is planned from it and the log is not read again
        here, only from where it stopped. Otherwise the log is read here.

        Crash-safe: the new index is committed in one manifest switch at the end; until
        then the old one stays as it was. Returns notifications read."""
        self.codes.remove_all()  # written again from the rebuilt rows, when searched
        with self._catch_up_lock:
            with self._exclusive():
                self._state = None  # read and check every file again, not the memory copy
                try:
                    old: IndexState | None = self._load()
                except BadIndexFiles as exc:  # nothing of damaged files is reused
                    self._note_discarded(str(exc))
                    self._reset()
                    old = None
            empty = IndexState.of(self._empty_manifest(), (), None)
            ops: Ops = {}
            head = self.log.max_position()
            position = read = 0
            if replay is not None and replay.whole:
                ops, position, read = replay.ops, replay.position, replay.read
                if progress is not None:  # its phase is done: planned from the replay
                    progress("vector_index", position, head)
            while position < head:
                batch = self.log.notifications(position, self.batch_size)
                if not batch:
                    break
                plan_batch(self.log, empty, decode_batch(self.log, batch), ops)
                position, read = batch[-1].id, read + len(batch)
                if progress is not None:
                    progress("vector_index", position, head)
            puts = [(item, op) for item, op in ops.items() if op is not None]
            taken = _taken_rows(old, puts)
            stored = _stored_rows(self, old, [(i, op) for i, op in puts if i not in taken])
            fresh = [(item, op) for item, op in puts if item not in stored and item not in taken]
            vectors = np.zeros((len(puts), self.dimension), dtype=np.float32)
            at = {item: row for row, (item, _) in enumerate(puts)}
            if progress is not None:  # its own phase: the embedding is the long one
                progress("vector_embedding", 0, len(fresh))
            for start in range(0, len(fresh), self.batch_size):
                chunk = fresh[start : start + self.batch_size]
                vectors[[at[i] for i, _ in chunk]] = self._embed([op.text for _, op in chunk])
                if progress is not None:
                    progress("vector_embedding", start + len(chunk), len(fresh))
            for item, vector in stored.items():
                vectors[at[item]] = vector
            reused = len(stored) + len(taken)
            self.last_rebuild = {"rows": len(puts), "reused": reused, "embedded": len(fresh)}
            with self._writing() as current:
                sealed = self._seal_rebuilt(ops, vectors, taken)
                base = IndexState.of(self._empty_manifest(current.manifest.next_segment), (), None)
                needles = _dead_fragments(current.segments)
                self._commit(base, ops, sealed, position)
                # The old segments (dead rows and all) are unlinked: prove their bytes gone.
                _, holding = prove_gone(self.directory, needles)
            if needles:  # the rows erasures listed dead are gone with the old segments
                self.last_rebuild["dead_rows_dropped"] = len(needles) // 2
                self.last_rebuild["dead_rows_files_holding"] = holding
            return read + self._catch_up(progress)

    def _seal_rebuilt(
        self, ops: Ops, vectors: np.ndarray, taken: dict[str, tuple[Segment, int]]
    ) -> np.ndarray:
        """Under the exclusive lock: the rebuilt rows sealed, in the order of `ops`' puts,
        after dropping (setting to None in `ops`) those whose key was destroyed while the
        rebuild ran. A row in `taken` is the old index's sealed row of the same item, key
        generation and version, copied as it is (the same key, the same bound item,
        generation and purpose: neither opened nor sealed again); only the others are
        sealed, each under its item's key. `vectors` has one row per put, in that order."""
        puts = [(item, op) for item, op in ops.items() if op is not None]
        keys = self.log.keys_for([item for item, _ in puts])
        kept: list[int] = []
        for row, (item, op) in enumerate(puts):
            if keys.is_live(item, op.generation):
                kept.append(row)
            else:  # erased meanwhile: an erasure that ran found nothing to remove
                ops[item] = None
        sealed = np.zeros((len(kept), row_bytes(self.dimension)), dtype=np.uint8)
        fresh = [at for at, row in enumerate(kept) if puts[row][0] not in taken]
        if fresh:
            chosen = [puts[kept[at]] for at in fresh]
            sealed[fresh] = seal_rows(
                keys,
                [item for item, _ in chosen],
                [op.generation for _, op in chosen],
                vectors[[kept[at] for at in fresh]],
                [text_digest(op.text) for _, op in chosen],
            )
        by_segment: dict[int, tuple[Segment, list[int], list[int]]] = {}
        for at, row in enumerate(kept):
            found = taken.get(puts[row][0])
            if found is not None:
                seg, old_row = found
                entry = by_segment.setdefault(id(seg), (seg, [], []))
                entry[1].append(at)
                entry[2].append(old_row)
        for seg, ats, old_rows in by_segment.values():  # one copy per old segment
            sealed[ats] = seg.sealed[old_rows]
        return sealed

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
                ops, vectors, keys = still_readable(self.log, ops, vectors)
                self._commit(current, ops, self._seal(keys, ops, vectors), batch[-1].id)
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

    def _seal(self, keys: KeyRing | None, ops: Ops, vectors: np.ndarray) -> np.ndarray:
        """The puts' rows sealed under their items' keys, in the order of `ops`."""
        puts = [(item, op) for item, op in ops.items() if op is not None]
        if keys is None or not puts:
            return np.zeros((0, 0), dtype=np.uint8)
        return seal_rows(
            keys,
            [item for item, _ in puts],
            [op.generation for _, op in puts],
            vectors,
            [text_digest(op.text) for _, op in puts],
        )

    # -- writing ---------------------------------------------------------------------------

    def _commit(
        self,
        state: IndexState,
        ops: Ops,
        sealed: np.ndarray,
        position: int,
        segments: Sequence[Segment] | None = None,
    ) -> tuple[Layout, list[Segment]]:
        """Under the exclusive lock: write changed segments and their sidecars under new
        names, then the manifest, then remove the files they replaced. Only what changed
        is written: the manifest holds no per-row data but dead-row lists. `segments`:
        the state's segments as an erasure left them (more rows dead), if not the
        state's own. Returns the layout applied and the segments written."""
        current = state.segments if segments is None else segments
        plan = layout(current, ops, sealed, self.segment_rows)
        return plan, self._apply(state, plan, position)

    def _apply(self, state: IndexState, plan: Layout, position: int) -> list[Segment]:
        number = state.manifest.next_segment
        segments: list[Segment] = []
        written: list[Segment] = []
        for draft in plan.entries:
            if isinstance(draft, Segment):
                segments.append(draft)
                continue
            rows, meta = draft.sealed()
            entry = write_segment(self.directory, number, rows, meta)
            number += 1
            written.append(Segment.of(entry, meta, rows))
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
        if written:  # the segments' renames are durable before the manifest's
            fsync_dir(self.directory)
        write_atomic(self.directory, MANIFEST, manifest.to_bytes())
        fsync_dir(self.directory)
        self._state = state.after(manifest, segments, manifest_token(self.directory), self._open)
        self._sweep()
        return written

    def _sweep(self) -> None:
        """Remove every file the manifest does not name: replaced segments, a crashed
        writer's leftovers. They hold ciphertext only, so unlinking them is enough."""
        assert self._state is not None
        named = [name for s in self._state.segments for name in s.entry.files]
        strays = stray_files(self.directory, named)
        for path in strays:
            remove(path)
        if strays:
            fsync_dir(self.directory)

    # -- erasure ---------------------------------------------------------------------------

    def erase(self, item_ids: Iterable[str], *, now: float | None = None) -> VectorErasure:
        """Stop serving the items' rows now, from the files and from memory, without
        catching up first: a forget must not wait for pending items to be embedded, and
        an item not indexed yet never will be (its key is gone). Then read the manifest
        (and any file this erasure wrote) back (`read_back`).

        A row whose key is already destroyed (a forget destroys it before this runs) is
        listed dead in the manifest (erased at `now`, Unix seconds, default the clock):
        one manifest write, no segment rewritten. Its ciphertext stays in its segment,
        unreadable, until a compaction (`compact`) removes it. A row whose key is still
        alive is removed from its segment at once (the segment is rewritten), as is any
        segment left with no live row (its files are unlinked)."""
        wanted = set(item_ids)
        if not wanted:  # e.g. a mention redaction that rewrote nothing
            return VectorErasure(0, 0, 0)
        self.codes.remove_all()  # whichever namespace's codes held them: none keeps them
        with self._writing() as state:
            found = {i: at for i in wanted if (at := state.locate(i)) is not None}
            rewritten = removed = dead = 0
            written: list[Segment] = []
            if found:
                keys = self.log.keys_for(sorted(found))
                shredded = {
                    i: (seg, row)
                    for i, (seg, row) in found.items()
                    if keys.data_key(i, seg.meta.generations[row]) is None
                }
                when = int(time.time() if now is None else now)
                segments, removed = mark_dead(state.segments, shredded, when)
                live: Ops = {i: None for i in found if i not in shredded}
                empty = np.zeros((0, 0), dtype=np.uint8)
                plan, written = self._commit(state, live, empty, state.manifest.position, segments)
                rewritten = len(plan.lost_rows) - plan.emptied
                removed += plan.emptied
                dead = len(shredded)
            else:
                self._sweep()  # a crashed writer's leftovers go too
            assert self._state is not None
            check = read_back(self.directory, self._state, written, wanted)
        self.codes.remove_all()  # and any a search wrote meanwhile from the older state
        return VectorErasure(len(found), rewritten, removed, check, dead)

    def compact(
        self,
        *,
        older_than: float | None = None,
        share: float = DEAD_SHARE,
        everything: bool = False,
    ) -> VectorCompaction:
        """Rewrite the segments whose dead rows are more than `share` of them, or hold a
        row erased at or before `older_than` (Unix seconds), or (`everything`) any dead
        row, without those rows; then prove their bytes gone: the rewritten files read
        back against the manifest, and every file of the index searched for the dropped
        rows' ciphertext (`prove_gone`). Copy-on-write like every commit: killed at any
        point, the previous manifest (its dead lists included) still stands, and the
        next compaction does it again."""
        with self._writing() as state:
            picked = {
                seg
                for seg in state.segments
                if seg.dead and (everything or _due(seg, share, older_than))
            }
            if not picked:
                self._sweep()
                return NOTHING_COMPACTED
            needles = _dead_fragments(picked)
            plan = compacted(state.segments, picked)
            written = self._apply(state, plan, state.manifest.position)
            assert self._state is not None
            check = check_segments(
                self.directory, set(), [s.entry for s in written], self._state.manifest
            )
            scanned, holding = prove_gone(self.directory, needles)
            if check.invalid:  # never trusted or served: discarded, rebuilt from the log
                self._state = None
                self._load_or_discard()
        done = VectorCompaction(
            len(plan.lost_rows) - plan.emptied,
            plan.emptied,
            len(needles) // 2,
            scanned,
            holding,
            check.invalid,
        )
        if not done.proved:
            log.warning(
                "vector index compaction at %s: %d file(s) still hold a dropped row's bytes, "
                "%d rewritten segment(s) did not read back",
                self.directory,
                holding,
                check.invalid,
            )
        return done

    def repair(self) -> None:
        """Reload every file from disk, checking each, and discard them all if any fails:
        for when verification finds a file that no longer matches its manifest."""
        with self._exclusive():
            self._state = None
            self._load_or_discard()

    def verify_absent(self, item_ids: Iterable[str]) -> VectorAbsence:
        """Reads the manifest, every sidecar and every segment from disk again (not this
        object's idea of what it erased), and checks the in-memory copy too (segments
        and opened namespaces). Reads the whole index: for `verify`, not for the
        request path. No byte scan: the segments hold only sealed rows."""
        wanted = set(item_ids)
        memory = in_memory(self._state, wanted)
        if not self.directory.exists():
            return replace(NOTHING_CHECKED, rows_in_memory=memory)
        with self._state_lock, locked(self.directory, exclusive=False):
            try:
                manifest = read_manifest(self.directory)
            except BadIndexFiles:
                return VectorAbsence(0, memory, False, 0, 0, 0)
            if manifest is None:
                return replace(NOTHING_CHECKED, rows_in_memory=memory)
            entries = manifest.segments
            found = check_segments(self.directory, wanted, entries, manifest)
            named = [name for e in entries for name in e.files]
            strays = len(stray_files(self.directory, named))
        keys = self.log.keys_for(sorted({item for item, _ in found.dead}))
        alive = sum(1 for item, gen in found.dead if keys.data_key(item, gen) is not None)
        return VectorAbsence(
            rows_in_manifest=found.rows,
            rows_in_memory=memory,
            manifest_valid=True,
            segments_checked=len(entries),
            segments_invalid=found.invalid,
            stray_files=strays,
            rows_dead=len(found.dead),
            rows_dead_key_alive=alive,
        )


def _due(seg: Segment, share: float, older_than: float | None) -> bool:
    """Whether a segment's dead rows are due for compaction: too large a share of it,
    or one erased at or before `older_than`."""
    if len(seg.dead) > share * seg.rows:
        return True
    return older_than is not None and min(at for _, at in seg.entry.dead) <= older_than


def _dead_fragments(segments: Iterable[Segment]) -> list[bytes]:
    """The ciphertext fragments of the segments' dead rows (two per row)."""
    out: list[bytes] = []
    for seg in segments:
        if seg.dead:
            out.extend(fragments(seg.sealed[sorted(seg.dead)]))
    return out


def _taken_rows(
    old: IndexState | None, puts: list[tuple[str, Put]]
) -> dict[str, tuple[Segment, int]]:
    """The old index's sealed rows a rebuild takes over as they are: same item, key
    generation and version, so the same event's text, embedded by this embedder (files
    of another are never loaded), sealed under the same key. Their checksummed files
    were read and checked by `_load`; nothing is opened. Each found as (segment, row)."""
    if old is None or not puts:
        return {}
    wanted = {item: (put.generation, put.version) for item, put in puts}
    out: dict[str, tuple[Segment, int]] = {}
    for seg in old.segments:
        generations, versions = seg.meta.generations, seg.meta.versions
        for item, row in seg.row_of.items():
            if wanted.get(item) == (generations[row], versions[row]):
                out[item] = (seg, row)
    return out


def _stored_rows(
    index: VectorIndex, old: IndexState | None, puts: list[tuple[str, Put]]
) -> dict[str, np.ndarray]:
    """The stored vectors a rebuild can take back: rows of the old index with the same
    item, key generation and text digest (so the same text, embedded by this embedder:
    files of another are never loaded). Opened in memory, batch by batch."""
    if old is None or not puts:
        return {}
    where = {item: (seg, row) for seg in old.segments for item, row in seg.row_of.items()}
    wanted = []
    for item, put in puts:
        found = where.get(item)
        if found is not None and found[0].meta.generations[found[1]] == put.generation:
            wanted.append((item, put, found))
    out: dict[str, np.ndarray] = {}
    for start in range(0, len(wanted), 5000):
        chunk = wanted[start : start + 5000]
        ids = [item for item, _, _ in chunk]
        gens = [put.generation for _, put, _ in chunk]
        sealed = np.stack([seg.sealed[row] for _, _, (seg, row) in chunk])
        keys = index.log.keys_for(ids)
        vectors, digests, opened = open_rows(keys, ids, gens, sealed, index.dimension)
        for r, (item, put, _) in enumerate(chunk):
            if opened[r] and digests[r] == text_digest(put.text):
                out[item] = vectors[r]
    return out


class Replay:
    """The vector index's plan of a rebuild, fed by another replay of the log (the
    projection runner's, `ProjectionRunner.rebuild(..., also=replay.feed)`) with each
    batch it has decoded and opened: the log is read and every event opened once for
    both. Batches must come in log order from position 0 without a gap; a batch that
    does not follow the last one (another runner moved the positions in between) ends
    the feeding, and `VectorIndex.rebuild` reads the log itself instead (`whole`)."""

    def __init__(self, log: EventLog, empty: IndexState) -> None:
        self.log = log
        self.ops: Ops = {}
        self.position = 0
        self.read = 0
        self.whole = True
        self._empty = empty

    def feed(self, after: int, events: list[ProjectedEvent], last: int) -> None:
        """The batch read after log position `after`, up to `last`, decoded and opened."""
        if not self.whole:
            return
        if after != self.position:
            self.whole = False  # a gap: planned from the log instead
            self.ops = {}
            return
        plan_batch(self.log, self._empty, events, self.ops)
        self.position, self.read = last, self.read + len(events)
