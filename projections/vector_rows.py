"""What the vector index holds in memory, and how a batch of events changes it.

Kept apart from the index's locking and file handling (`vector_index`) because these
are the rules a rebuild must reproduce exactly: which items have a row, what text is
embedded for them, and which segments a change rewrites. Segments hold sealed rows
(`vector_seal`); a commit moves their ciphertext without opening it, and only a search
opens a namespace's rows, into memory (`vector_search.NamespaceView`). The reports the
index gives (erasure, absence) are here too: counts only, never a vector or a text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np

from memory_ledger.event_log import ERASED, EventLog
from memory_ledger.keystore import KeyRing
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.vector_codes import CodeFiles, NamespaceCodes
from memory_ledger.projections.vector_files import Manifest, SegmentEntry, SegmentMeta
from memory_ledger.projections.vector_search import (
    CODE_BITS,
    EXACT_ROWS,
    NamespaceView,
    packed_rows,
    sign_codes,
)

KINDS = ("fact", "preference", "turn")


@dataclass(frozen=True, eq=False)
class Segment:
    """A loaded segment with the lookups a search and a commit need, built once.
    Compared by identity: a segment file is written once and never changed."""

    entry: SegmentEntry
    meta: SegmentMeta
    #: The sealed rows as read from the file (uint8, one row per line): never opened here.
    sealed: np.ndarray
    row_of: dict[str, int]
    groups: dict[str, Rows]  # namespace -> its rows

    @property
    def rows(self) -> int:
        return self.entry.rows

    @property
    def dead(self) -> frozenset[int]:
        """Rows listed dead in the manifest: in the file until a compaction, never read."""
        return self.entry.dead_rows

    def live_rows(self) -> list[int]:
        dead = self.dead
        return [r for r in range(self.rows) if r not in dead]

    @classmethod
    def of(cls, entry: SegmentEntry, meta: SegmentMeta, sealed: np.ndarray) -> Segment:
        """Segments are written with their rows ordered by namespace (`Draft.sealed`), so
        each namespace is one slice: a few hundred of them per segment cost next to
        nothing to build and gather as views. Rows in any other order still work,
        through index arrays. Dead rows (`SegmentEntry.dead`) are left out of every
        lookup, so nothing that reads through them (search, a commit, a rebuild) sees
        one."""
        names, count = meta.namespaces, len(meta.namespaces)
        last = {ns: row for row, ns in enumerate(names)}
        first = {ns: row for row, ns in zip(range(count - 1, -1, -1), reversed(names), strict=True)}
        groups: dict[str, Rows]
        if sum(last.values()) - sum(first.values()) + len(first) == count:  # contiguous
            groups = {ns: slice(start, last[ns] + 1) for ns, start in first.items()}
        else:
            groups = _scattered(names)
        dead = entry.dead_rows
        if dead:
            groups = _without(groups, dead, count)
            row_of = {item: r for r, item in enumerate(meta.item_ids) if r not in dead}
        else:
            row_of = {item: r for r, item in enumerate(meta.item_ids)}
        return cls(entry, meta, sealed, row_of, groups)

    def with_entry(self, entry: SegmentEntry) -> Segment:
        """The same file under an entry listing more dead rows (nothing is read again)."""
        return Segment.of(entry, self.meta, self.sealed)

    def ids(self, rows: Rows) -> Iterable[str]:
        ids = self.meta.item_ids
        return ids[rows] if isinstance(rows, slice) else (ids[r] for r in rows)

    def generations(self, rows: Rows) -> Iterable[int]:
        gens = self.meta.generations
        return gens[rows] if isinstance(rows, slice) else (gens[r] for r in rows)


Rows = slice | np.ndarray  # the rows of one namespace in a segment
#: Opens sealed rows: (item ids, key generations, sealed rows) -> (vectors, opened).
Opener = Callable[[list[str], list[int], np.ndarray], tuple[np.ndarray, np.ndarray]]


def _without(groups: dict[str, Rows], dead: frozenset[int], count: int) -> dict[str, Rows]:
    """The namespaces' rows less the dead ones (a namespace left with none is dropped)."""
    out: dict[str, Rows] = {}
    for ns, rows in groups.items():
        picked = range(count)[rows] if isinstance(rows, slice) else rows.tolist()
        if not any(r in dead for r in picked):
            out[ns] = rows
            continue
        kept = [r for r in picked if r not in dead]
        if kept:
            out[ns] = np.asarray(kept, dtype=np.intp)
    return out


def _scattered(namespaces: Sequence[str]) -> dict[str, Rows]:
    rows_by_ns: dict[str, list[int]] = {}
    for row, namespace in enumerate(namespaces):
        rows_by_ns.setdefault(namespace, []).append(row)
    return {ns: np.asarray(rows, dtype=np.intp) for ns, rows in rows_by_ns.items()}


@dataclass(frozen=True, eq=False)
class IndexState:
    """One consistent view: a manifest and its segments' sealed rows. Replaced whole,
    never mutated (but for its cache), so a search reads it without a lock.

    `namespace` opens one namespace's rows (those whose key is alive) into a
    `NamespaceView` on first search and caches it; a commit carries the cache over for
    every namespace it did not touch, and drops the others' opened vectors: an erased
    row's vector leaves memory with the commit that removes it."""

    manifest: Manifest
    segments: tuple[Segment, ...]
    token: tuple[int, int, int] | None
    _namespaces: dict[str, NamespaceView] = field(default_factory=dict)

    @classmethod
    def of(
        cls, manifest: Manifest, segments: Iterable[Segment], token: tuple[int, int, int] | None
    ) -> IndexState:
        return cls(manifest, tuple(segments), token)

    def after(
        self,
        manifest: Manifest,
        segments: Sequence[Segment],
        token: tuple[int, int, int] | None,
        opener: Opener | None = None,
    ) -> IndexState:
        """The state a commit leads to, keeping what is still valid of this one's cache.
        An opened namespace the commit changed is updated (`NamespaceView.changed`): its
        removed rows are dropped from memory, and with `opener` its new rows (only
        those) are opened; without one it is dropped, to be opened again when searched.
        A segment that only gained dead rows (the same file) costs only those rows: they
        are masked in the opened views, nothing is compared or opened again."""
        before = {seg.entry.file: seg for seg in self.segments}
        after = {seg.entry.file: seg.meta for seg in segments}
        died: dict[str, set[str]] = {}
        new_only: set[Segment] = set()
        for seg in segments:
            old = before.get(seg.entry.file)
            if old is seg:
                continue
            if old is not None and old.meta is seg.meta:  # the same file, more rows dead
                m = seg.meta
                for row in seg.dead - old.dead:
                    died.setdefault(m.namespaces[row], set()).add(m.item_ids[row])
                continue
            new_only.add(seg)
        old_only = {seg for seg in self.segments if after.get(seg.entry.file) is not seg.meta}
        changed = {ns for seg in old_only | new_only for ns in seg.groups}
        cached = dict(self._namespaces)  # one C-level copy: searches may add meanwhile
        kept = {ns: v for ns, v in cached.items() if ns not in changed and ns not in died}
        for ns in (changed | died.keys()) & cached.keys():
            view: NamespaceView | None = cached[ns]
            if ns in died:
                assert view is not None
                view = view.without(died[ns])
            if view is not None and ns in changed:
                view = _updated(view, ns, old_only, new_only, opener)
            if view is not None:
                kept[ns] = view
        return IndexState(manifest, tuple(segments), token, kept)

    def namespace(
        self, namespace: str, opener: Opener, codes: CodeFiles | None = None
    ) -> NamespaceView | None:
        """The namespace's view, opened on first use: lazily from its stored codes when
        `codes` has them (a large namespace), else whole (and then its codes stored)."""
        found = self._namespaces.get(namespace)
        epoch = codes.epoch if codes is not None else 0  # before any row is read
        if found is None:
            found = self._lazily(namespace, opener, codes, epoch) if codes is not None else None
        if found is None:
            ids, generations, blocks = self.sealed_rows(namespace)
            if not ids:
                return None
            versions = self._versions(namespace)
            vectors, opened = opener(ids, generations, np.concatenate(blocks))
            if not opened.all():  # destroyed keys: those rows are never served
                keep = np.flatnonzero(opened)
                ids = [ids[r] for r in keep]
                generations = [generations[r] for r in keep]
                versions = [versions[r] for r in keep]
                vectors = vectors[keep]
            found = NamespaceView.of(ids, generations, vectors)
            if codes is not None and found.codes is not None:
                keys = list(zip(ids, generations, versions, strict=True))
                packed = packed_rows(found.codes[:, : found.count])
                codes.save(namespace, NamespaceCodes(keys, packed), epoch)
        # Two threads may both open it: they store equal values, and a dict
        # assignment is atomic, so no lock is needed.
        self._namespaces[namespace] = found
        return found if len(found) else None

    def _lazily(
        self, namespace: str, opener: Opener, codes: CodeFiles, epoch: int
    ) -> NamespaceView | None:
        """A large namespace's view from its stored codes, its rows opened on first need;
        None (open it whole) if it is small, or if most of its rows have no stored code."""
        ids, generations, blocks = self.sealed_rows(namespace)
        count = len(ids)
        if count <= EXACT_ROWS:
            return None
        stored = codes.load(namespace, CODE_BITS // 8)
        if stored is None:
            return None
        versions = self._versions(namespace)
        where = {key: row for row, key in enumerate(stored.keys)}
        found = np.fromiter(
            (where.get(key, -1) for key in zip(ids, generations, versions, strict=True)),
            dtype=np.int64,
            count=count,
        )
        missing = np.flatnonzero(found < 0)
        if len(missing) * 4 > count:
            return None
        packed = np.zeros((count, CODE_BITS // 8), dtype=np.uint8)
        have = found >= 0
        packed[have] = stored.codes[found[have]]
        starts = np.cumsum([0] + [len(b) for b in blocks])

        def fetch(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            block = np.searchsorted(starts, rows, side="right") - 1
            sealed = np.stack([blocks[b][r - starts[b]] for b, r in zip(block, rows, strict=True)])
            return opener([ids[r] for r in rows], [generations[r] for r in rows], sealed)

        view = NamespaceView.lazily(ids, generations, packed, fetch, self.manifest.dimension)
        if len(missing):  # rows written since the codes were stored: opened and coded now
            assert view.codes is not None
            view.codes[:, missing] = sign_codes(view.vectors(missing))
            keys = list(zip(ids, generations, versions, strict=True))
            codes.save(namespace, NamespaceCodes(keys, packed_rows(view.codes)), epoch)
        return view

    def _versions(self, namespace: str) -> list[int]:
        versions: list[int] = []
        for seg in self.segments:
            rows = seg.groups.get(namespace)
            if rows is not None:
                held = seg.meta.versions
                versions.extend(held[rows] if isinstance(rows, slice) else (held[r] for r in rows))
        return versions

    def sealed_rows(self, namespace: str) -> tuple[list[str], list[int], list[np.ndarray]]:
        ids: list[str] = []
        generations: list[int] = []
        blocks: list[np.ndarray] = []
        for seg in self.segments:
            rows = seg.groups.get(namespace)
            if rows is not None:
                ids.extend(seg.ids(rows))
                generations.extend(seg.generations(rows))
                blocks.append(seg.sealed[rows])
        return ids, generations, blocks

    def opened(self) -> dict[str, NamespaceView]:
        """The namespaces opened so far (a copy)."""
        return dict(self._namespaces)

    def locate(self, item_id: str) -> tuple[Segment, int] | None:
        for seg in self.segments:
            row = seg.row_of.get(item_id)
            if row is not None:
                return seg, row
        return None


def _row_keys(
    segments: Iterable[Segment], namespace: str
) -> dict[tuple[str, int, int], tuple[Segment, int]]:
    """(item, key generation, version) -> where, for one namespace's rows: what a row
    holds is set by these three (a new version or generation is a new row)."""
    out = {}
    for seg in segments:
        rows = seg.groups.get(namespace)
        if rows is None:
            continue
        m = seg.meta
        for r in range(seg.rows)[rows] if isinstance(rows, slice) else rows:
            out[(m.item_ids[r], m.generations[r], m.versions[r])] = (seg, int(r))
    return out


def _updated(
    view: NamespaceView,
    namespace: str,
    old_only: set[Segment],
    new_only: set[Segment],
    opener: Opener | None,
) -> NamespaceView | None:
    gone = _row_keys(old_only, namespace)
    came = _row_keys(new_only, namespace)
    removed = {key[0] for key in gone if key not in came}
    added = [(key, where) for key, where in came.items() if key not in gone]
    if view.lazy is not None:  # built from stored codes: built again when next searched
        view.forget_rows(removed)
        return None
    if added and opener is None:
        view.changed(removed, [], [], np.zeros((0, view.matrix.shape[1]), np.float32))
        return None  # opened again, whole, when next searched
    ids = [key[0] for key, _ in added]
    generations = [key[1] for key, _ in added]
    vectors = np.zeros((0, view.matrix.shape[1]), np.float32)
    if added:
        assert opener is not None
        sealed = np.stack([seg.sealed[row] for _, (seg, row) in added])
        vectors, opened = opener(ids, generations, sealed)
        keep = np.flatnonzero(opened)
        ids = [ids[r] for r in keep]
        generations = [generations[r] for r in keep]
        vectors = vectors[keep]
    return view.changed(removed | set(ids), ids, generations, vectors)


@dataclass(frozen=True)
class Put:
    namespace: str
    kind: str
    predicate: str
    version: int
    text: str
    #: The key generation the text was read with: re-checked before the row is written,
    #: and the one its vector is sealed under.
    generation: int


Ops = dict[str, Put | None]  # item id -> its row after the batch, or None: no row


def text_of(kind: str, predicate: str, fields: dict[str, str] | None) -> str | None:
    """What is embedded: a turn's content; "<predicate>: <value>" for facts and
    preferences, so that "home address: 18 Haisong Road" answers "where do I live"."""
    if fields is None:
        return None
    if kind == "turn":
        return fields.get("content")
    value = fields.get("value")
    return None if value is None else f"{predicate.replace('_', ' ')}: {value}"


def plan_batch(
    log: EventLog, state: IndexState, events: list[ProjectedEvent], ops: Ops | None = None
) -> Ops:
    """Each touched item's row after the batch, applying its events in log order. Pass
    `ops` to go on from an earlier batch's (a rebuild plans the whole log at once)."""
    ops = {} if ops is None else ops
    for event in events:
        item, a = event.item_id, event.attrs
        if event.name == "Recorded":
            if a["kind"] in KINDS:
                ops[item] = _put(event, a["namespace"], a["kind"], a["predicate"])
        elif event.name in ("Superseded", "Redacted"):
            if event.fields is None:  # that generation's key is gone
                ops[item] = None
                continue
            held = ops[item] if item in ops else _held(state, item)
            if held is not None:
                ops[item] = _put(event, held.namespace, held.kind, held.predicate)
                continue
            # Not indexed: suppressed, erased, or its earlier content unreadable (a
            # redaction destroyed it). The clear state decides, as it is now: if it
            # changes later, a later event of this item corrects the row.
            current = log.get(UUID(item))
            if not (current.erased or current.suppressed) and current.kind in KINDS:
                ops[item] = _put(event, current.namespace, current.kind, current.predicate)
        elif event.name in ("Suppressed", "Erased"):
            ops[item] = None
        elif event.name == "Unsuppressed":
            ops[item] = _read_current(log, item, event.version)
    return ops


def _put(event: ProjectedEvent, namespace: str, kind: str, predicate: str) -> Put | None:
    text = text_of(kind, predicate, event.fields)
    if text is None:
        return None
    return Put(namespace, kind, predicate, event.version, text, int(event.attrs["key_generation"]))


def _held(state: IndexState, item_id: str) -> Put | None:
    found = state.locate(item_id)
    if found is None:
        return None
    seg, row = found
    m = seg.meta
    generation = m.generations[row]
    return Put(m.namespaces[row], m.kinds[row], m.predicates[row], m.versions[row], "", generation)


def _read_current(log: EventLog, item_id: str, version: int) -> Put | None:
    """Suppression removed the row, and the Unsuppressed event carries no content: the
    log has what the item holds now."""
    item = log.get(UUID(item_id))
    if item.erased or item.suppressed or item.kind not in KINDS:
        return None  # a later event (tombstone, suppression) has already decided
    fields = log.read(item)
    text = None if fields is ERASED else text_of(item.kind, item.predicate, fields)  # type: ignore[arg-type]
    if text is None:
        return None
    return Put(item.namespace, item.kind, item.predicate, version, text, item.key_generation)


def still_readable(
    log: EventLog, ops: Ops, vectors: np.ndarray
) -> tuple[Ops, np.ndarray, KeyRing | None]:
    """Drop rows whose key was destroyed while they were being embedded: an erasure that
    ran meanwhile found nothing to remove, so nothing of the item may be added now.
    Returns the keys too: the rows kept are sealed under them."""
    puts = [(item, op) for item, op in ops.items() if op is not None]
    if not puts:
        return ops, vectors, None
    keys = log.keys_for([item for item, _ in puts])
    keep = []
    for row, (item, op) in enumerate(puts):
        if keys.data_key(item, op.generation) is None:
            ops[item] = None
        else:
            keep.append(row)
    return ops, vectors[keep], keys


@dataclass
class Draft:
    """A segment a commit assembles; it is written under a new name."""

    item_ids: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    predicates: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    generations: list[int] = field(default_factory=list)
    blocks: list[np.ndarray] = field(default_factory=list)  # sealed rows

    @property
    def rows(self) -> int:
        return len(self.item_ids)

    def take(self, seg: Segment, rows: Iterable[int]) -> None:
        """Keep rows of a segment: their ciphertext is copied, never opened."""
        m, picked = seg.meta, list(rows)
        self.item_ids.extend(m.item_ids[r] for r in picked)
        self.namespaces.extend(m.namespaces[r] for r in picked)
        self.kinds.extend(m.kinds[r] for r in picked)
        self.predicates.extend(m.predicates[r] for r in picked)
        self.versions.extend(m.versions[r] for r in picked)
        self.generations.extend(m.generations[r] for r in picked)
        self.blocks.append(seg.sealed[picked])

    def add(self, puts: list[tuple[str, Put]], sealed: np.ndarray) -> None:
        for item_id, put in puts:
            self.item_ids.append(item_id)
            self.namespaces.append(put.namespace)
            self.kinds.append(put.kind)
            self.predicates.append(put.predicate)
            self.versions.append(put.version)
            self.generations.append(put.generation)
        self.blocks.append(sealed)

    def sealed(self) -> tuple[np.ndarray, SegmentMeta]:
        """The segment to write, its rows ordered by namespace (stable, so a compacted
        segment keeps its order): see `Segment.of`."""
        order = sorted(range(self.rows), key=self.namespaces.__getitem__)
        rows = np.concatenate(self.blocks)
        if order != list(range(self.rows)):
            rows = rows[order]
        meta = SegmentMeta(
            item_ids=tuple(self.item_ids[r] for r in order),
            namespaces=tuple(self.namespaces[r] for r in order),
            kinds=tuple(self.kinds[r] for r in order),
            predicates=tuple(self.predicates[r] for r in order),
            versions=tuple(self.versions[r] for r in order),
            generations=tuple(self.generations[r] for r in order),
        )
        return np.ascontiguousarray(rows, dtype=np.uint8), meta


@dataclass
class Layout:
    """The segments after a change, and what happens to the files they replace."""

    entries: list[Segment | Draft]
    #: Replaced segments that held a removed (or replaced) row.
    lost_rows: list[SegmentEntry]
    #: Replaced segments whose every row lives on in a replacement (an append): unlinked.
    appended: list[SegmentEntry]
    #: Segments left with no row at all: their files go, nothing replaces them.
    emptied: int

    def rewrite(self, seg: Segment, keep: list[int]) -> None:
        """`seg` replaced by a draft of its rows `keep` (none: it just goes)."""
        self.lost_rows.append(seg.entry)
        if not keep:
            self.emptied += 1
            return
        draft = Draft()
        draft.take(seg, keep)
        self.entries.append(draft)


def layout(segments: Sequence[Segment], ops: Ops, sealed: np.ndarray, segment_rows: int) -> Layout:
    """Compact the segments that hold a touched item (only those), then append the new
    rows (`sealed`, in the order of `ops`' puts) to the last segment while it has room,
    and to new segments after that. A segment rewritten here loses its dead rows too."""
    out = Layout([], [], [], 0)
    for seg in segments:
        hit = {seg.row_of[i] for i in ops if i in seg.row_of}
        if not hit:
            out.entries.append(seg)
            continue
        out.rewrite(seg, [r for r in seg.live_rows() if r not in hit])
    puts = [(item, op) for item, op in ops.items() if op is not None]
    offset = 0
    while offset < len(puts):
        last = out.entries[-1] if out.entries else None
        if last is None or last.rows >= segment_rows:
            last = Draft()
            out.entries.append(last)
        elif isinstance(last, Segment):
            out.appended.append(last.entry)
            draft = Draft()
            draft.take(last, last.live_rows())
            out.entries[-1] = last = draft
        take = min(segment_rows - last.rows, len(puts) - offset)
        last.add(puts[offset : offset + take], sealed[offset : offset + take])
        offset += take
    return out


def compacted(segments: Sequence[Segment], picked: set[Segment]) -> Layout:
    """The `picked` segments rewritten without their dead rows (a segment left with no
    row goes, nothing replaces it); the others as they are."""
    out = Layout([], [], [], 0)
    for seg in segments:
        if seg not in picked:
            out.entries.append(seg)
            continue
        out.rewrite(seg, seg.live_rows())
    return out


def mark_dead(
    segments: Sequence[Segment], found: dict[str, tuple[Segment, int]], at: int
) -> tuple[list[Segment], int]:
    """The segments with `found`'s rows listed dead (erased at `at`), and how many
    segments this left with no live row: those are dropped (their files are unlinked,
    nothing is rewritten)."""
    rows: dict[Segment, dict[int, int]] = {}
    for seg, row in found.values():
        rows.setdefault(seg, {})[row] = at
    out: list[Segment] = []
    emptied = 0
    for seg in segments:
        listed = rows.get(seg)
        if listed is None:
            out.append(seg)
            continue
        entry = seg.entry.with_dead(listed)
        if len(entry.dead) == entry.rows:
            emptied += 1
            continue
        out.append(seg.with_entry(entry))
    return out, emptied


def fragments(sealed: np.ndarray) -> list[bytes]:
    """What identifies a sealed row's bytes anywhere: its first 32 bytes (the random
    nonce and the start of the ciphertext) and its last 32 (the end and the GCM tag).
    Ciphertext, no content: a compaction searches the files for them."""
    out: list[bytes] = []
    for row in sealed:
        raw = row.tobytes()
        out.extend((raw[:32], raw[-32:]))
    return out


# -- what the index reports ---------------------------------------------------------


@dataclass(frozen=True)
class VectorAbsence:
    """Whether targets are absent, from what was read back from disk and from memory.

    `verify_absent` reads every segment; an erasure's own re-check reads only the
    segments it wrote (`segments_checked` says how many were read)."""

    #: Target rows named by the sidecars that were read.
    rows_in_manifest: int
    #: Target rows in the in-memory state (its segments, or a namespace opened in it).
    rows_in_memory: int
    manifest_valid: bool
    segments_checked: int
    #: Segments whose rows or sidecar do not match the manifest (size, checksum).
    segments_invalid: int
    stray_files: int
    #: Target rows listed dead: never read or served, their ciphertext still in a
    #: segment until compaction. Absent from reads only while their keys are destroyed.
    rows_dead: int = 0
    #: Of those, rows whose item key (that generation) is still alive: not absent.
    rows_dead_key_alive: int = 0

    @property
    def files_valid(self) -> bool:
        return self.manifest_valid and self.segments_invalid == 0

    @property
    def absent(self) -> bool:
        return (
            self.files_valid
            and self.rows_in_manifest == self.rows_in_memory == 0
            and self.stray_files == 0
            and self.rows_dead_key_alive == 0
        )

    def detail(self) -> dict[str, int | bool | str]:
        """The evidence a receipt carries: counts and flags only (and, when rows are
        listed dead, what that does and does not prove, in words)."""
        out: dict[str, int | bool | str] = {
            "rows_left": self.rows_in_manifest + self.rows_in_memory,
            "segments_checked": self.segments_checked,
            "segments_invalid": self.segments_invalid,
            "stray_files": self.stray_files,
            "files_valid": self.files_valid,
            "rows_dead_until_compaction": self.rows_dead,
        }
        if self.rows_dead:
            out["rows_dead_key_alive"] = self.rows_dead_key_alive
            out["dead_rows"] = DEAD_ROWS_EVIDENCE
        return out


#: What a receipt says of rows listed dead, as a code (the ledger keeps codes, never
#: prose; docs/compliance.md spells it out): never read or served again; the ciphertext
#: stays in its segment until compaction, sealed under the item's data key, which is
#: already destroyed; compaction removes the bytes, and the scheduled verification scan
#: compacts and proves them gone.
DEAD_ROWS_EVIDENCE = "unservable_key_destroyed_bytes_until_compaction"


NOTHING_CHECKED = VectorAbsence(0, 0, True, 0, 0, 0)


@dataclass(frozen=True)
class VectorErasure:
    """What an erasure did. No byte scan: the files hold each row sealed under its
    item's key, and the key store's destruction is what makes every copy unreadable
    (old segments, free blocks, backups); removing the rows stops them being named."""

    rows_removed: int
    segments_rewritten: int
    segments_removed: int
    #: The re-check after the commit: the manifest and the written files read back.
    check: VectorAbsence = NOTHING_CHECKED
    #: Of `rows_removed`, those listed dead (their keys destroyed) rather than rewritten.
    rows_dead: int = 0

    def counts(self) -> dict[str, int | bool]:
        """The erasure's own counts (not the re-check), for a receipt."""
        return {
            "rows_removed": self.rows_removed,
            "rows_listed_dead": self.rows_dead,
            "segments_rewritten": self.segments_rewritten,
            "segments_removed": self.segments_removed,
            "rows_sealed_under_item_keys": True,
        }


@dataclass(frozen=True)
class VectorCompaction:
    """What a compaction did, and its proof: after the new manifest was durable and the
    replaced files unlinked, every file of the index was read for the dead rows'
    ciphertext fragments (`fragments`), and the rewritten files were read back."""

    segments_rewritten: int
    segments_removed: int
    rows_dropped: int
    files_scanned: int = 0
    #: Files still holding a fragment of a dropped row (0: the bytes are gone).
    files_holding: int = 0
    #: Rewritten segments that did not read back as written.
    segments_invalid: int = 0

    @property
    def proved(self) -> bool:
        return self.files_holding == 0 and self.segments_invalid == 0

    def counts(self) -> dict[str, int]:
        return {
            "vector_segments_compacted": self.segments_rewritten + self.segments_removed,
            "vector_dead_rows_dropped": self.rows_dropped,
            "vector_files_scanned": self.files_scanned,
            "vector_files_holding_dead_rows": self.files_holding + self.segments_invalid,
        }


NOTHING_COMPACTED = VectorCompaction(0, 0, 0)


@dataclass(frozen=True)
class IndexedRow:
    item_id: str
    namespace: str
    kind: str
    version: int
    vector: np.ndarray
