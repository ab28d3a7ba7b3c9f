"""One namespace's opened vectors, in memory only, and how they are searched fast.

The first search of a namespace opens its rows (`IndexState.namespace`): one contiguous
float32 matrix, and for a large namespace a compact code per row (`CODE_BITS` signs of
random projections, SimHash, 64 bytes a row). A search of a large namespace ranks every
row by the Hamming distance of its code to the query's (XOR and popcount: a sixteenth of
the float32 bytes to read), keeps the few hundred nearest as candidates, and scores those
exactly (float32 dot products): what it returns are exact similarities, best first. A
namespace of up to `EXACT_ROWS` rows is scored exactly, all of it, as before.

The codes are computed from the opened vectors when a namespace is opened whole, and
kept sealed on disk (`vector_codes`): a fresh process then builds a large namespace's
view from them without opening any row (`NamespaceView.lazily`), and opens only the rows
a search scores exactly, on first need (issue 37).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np

#: Rows up to which a namespace is scored exactly: at 4,096 rows of 512 dimensions the
#: matmul reads 8 MiB, well under a millisecond.
EXACT_ROWS = 4096
#: Bits of a row's code (64 bytes), whatever the dimension.
CODE_BITS = 512
#: Candidates rescored exactly, at least (and at least `CANDIDATE_FACTOR` per result
#: wanted). Measured on the bilingual heavy set at 100,000 rows (docs/benchmarks.md):
#: the exact top 50 is within the nearest 1,024 codes.
CANDIDATES = 1024
CANDIDATE_FACTOR = 16
_PLANES_SEED = 20250511
_CHUNK = 8192


@cache
def _planes(dimension: int) -> np.ndarray:
    """Fixed random hyperplanes (the same in every process: codes are never stored)."""
    rng = np.random.default_rng(_PLANES_SEED)
    return rng.standard_normal((dimension, CODE_BITS), dtype=np.float32)


def sign_codes(vectors: np.ndarray) -> np.ndarray:
    """(CODE_BITS // 64, rows) uint64: the signs of each row's random projections, one
    line per 64-bit word, so a distance is a few passes over contiguous words."""
    planes = _planes(vectors.shape[1])
    packed = np.empty((len(vectors), CODE_BITS // 8), dtype=np.uint8)
    for start in range(0, len(vectors), _CHUNK):
        rows = vectors[start : start + _CHUNK]
        # a query (one row) without BLAS, whose threads cost more than it (see `_dot`)
        chunk = rows @ planes if len(rows) > 64 else np.einsum("ij,jk->ik", rows, planes)
        packed[start : start + _CHUNK] = np.packbits(chunk > 0, axis=1)
    return np.ascontiguousarray(packed.view(np.uint64).T)


def packed_rows(codes: np.ndarray) -> np.ndarray:
    """(rows, CODE_BITS // 8) uint8: each row's code as bytes (what `vector_codes` keeps)."""
    return np.ascontiguousarray(codes.T).view(np.uint8)


def from_packed(packed: np.ndarray) -> np.ndarray:
    """The words x rows layout of `sign_codes` from `packed_rows`' bytes."""
    return np.ascontiguousarray(np.ascontiguousarray(packed).view(np.uint64).T)


#: Row indices -> (their vectors, whether each opened): a lazy view's way to its rows.
Fetch = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(eq=False)
class LazyRows:
    """A lazily built view's opened rows: packed in `store` in the order they were
    opened (`slots`: row -> its line there, -1 while unopened), so memory and page
    faults grow with the rows searched, not with the namespace. `failed`: rows that did
    not open (a destroyed key, a corrupt row), never served."""

    slots: np.ndarray
    failed: np.ndarray
    fetch: Fetch
    store: np.ndarray
    used: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def hamming(codes: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Bits differing between each row's code (words x rows) and one code (words x 1)."""
    distance = np.bitwise_count(codes[0] ^ code[0]).astype(np.uint16)
    for word in range(1, len(codes)):
        distance += np.bitwise_count(codes[word] ^ code[word])
    return distance


@dataclass(frozen=True, eq=False)
class NamespaceView:
    """A namespace's opened rows: ids, key generations, vectors, codes (large ones only).
    Its vectors are never written anywhere (its codes are, sealed: `vector_codes`);
    `dead` collects rows found with a destroyed key. A view built from stored codes
    (`lazily`) opens its rows on first need and keeps them packed in `lazy.store`.

    A commit changes a view without opening the namespace again (`changed`): removed
    rows are zeroed in place (their vectors leave memory at once) and masked, new rows
    are appended into spare capacity. The buffers are shared with the view it came
    from, which only ever reads its own first `count` rows, so a search running on the
    older view meanwhile stays consistent (a removed row reads as zeros there)."""

    ids: list[str]
    generations: list[int]
    matrix: np.ndarray  # rows [:count] in use, the rest spare capacity
    codes: np.ndarray | None
    count: int
    alive: np.ndarray | None = None  # None: every row in use is alive
    position: dict[str, int] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    #: Set when built from stored codes: rows are opened on first need (`_ensure`).
    lazy: LazyRows | None = None

    @classmethod
    def of(cls, ids: list[str], generations: list[int], matrix: np.ndarray) -> NamespaceView:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        codes = sign_codes(matrix) if len(ids) > EXACT_ROWS else None
        position = {item: row for row, item in enumerate(ids)}
        return cls(list(ids), list(generations), matrix, codes, len(ids), None, position)

    @classmethod
    def lazily(
        cls, ids: list[str], generations: list[int], codes: np.ndarray, fetch: Fetch, dimension: int
    ) -> NamespaceView:
        """A large namespace's view from its rows' stored codes (packed bytes): no row is
        opened until a search scores it (`ensure`); `matrix` stays empty."""
        count = len(ids)
        lazy = LazyRows(
            np.full(count, -1, dtype=np.int64),
            np.zeros(count, dtype=bool),
            fetch,
            np.empty((min(count, CANDIDATES * 4), dimension), dtype=np.float32),
        )
        position = {item: row for row, item in enumerate(ids)}
        empty = np.zeros((0, dimension), dtype=np.float32)
        return cls(
            list(ids), list(generations), empty, from_packed(codes), count, None, position,
            lazy=lazy,
        )  # fmt: skip

    def ensure(self, rows: np.ndarray) -> None:
        """Open these rows if they are not yet (a lazy view); nothing for an opened one."""
        lazy = self.lazy
        if lazy is None or not len(rows):
            return
        with lazy.lock:
            need = np.unique(rows[lazy.slots[rows] < 0])
            if not len(need):
                return
            vectors, ok = lazy.fetch(need)
            end = lazy.used + len(need)
            if end > len(lazy.store):  # grow by half at least, so opening is amortised
                rows_held = max(end, len(lazy.store) * 3 // 2)
                grown = np.empty((rows_held, lazy.store.shape[1]), dtype=np.float32)
                grown[: lazy.used] = lazy.store[: lazy.used]
                lazy.store = grown
            vectors[~ok] = 0.0
            lazy.store[lazy.used : end] = vectors
            lazy.slots[need] = np.arange(lazy.used, end)
            lazy.failed[need[~ok]] = True
            lazy.used = end

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """These rows' vectors (opened first, for a lazy view; a failed row reads zeros)."""
        if self.lazy is None:
            return self.matrix[rows]
        self.ensure(rows)
        return self.lazy.store[self.lazy.slots[rows]]

    def forget_rows(self, removed: set[str]) -> None:
        """Zero the rows of `removed` in memory now (a commit removed them; the view is
        dropped and built again at the next search)."""
        lazy = self.lazy
        for item in removed:
            row = self.position.get(item)
            if row is None:
                continue
            if lazy is not None and lazy.slots[row] >= 0:
                lazy.store[lazy.slots[row]] = 0.0
            elif lazy is None:
                self.matrix[row] = 0.0
            if self.codes is not None:
                self.codes[:, row] = 0

    def without(self, removed: set[str]) -> NamespaceView:
        """This view with `removed` rows masked and zeroed (rows an erasure listed dead):
        nothing is opened or coded again, for a lazy view as for an opened one."""
        if self.lazy is None:
            return self.changed(removed, [], [], np.zeros((0, self.matrix.shape[1]), np.float32))
        self.forget_rows(removed)
        alive = np.ones(self.count, dtype=bool) if self.alive is None else self.alive.copy()
        position = self.position  # removals in place: see `changed`
        for item in removed:
            row = position.pop(item, None)
            if row is not None:
                alive[row] = False
        return replace(self, alive=alive, position=position)

    def __len__(self) -> int:
        return len(self.position)

    def holds(self, item_id: str) -> bool:
        return item_id in self.position

    def changed(
        self,
        removed: set[str],
        added_ids: list[str],
        added_generations: list[int],
        added: np.ndarray,
    ) -> NamespaceView:
        """This view after a commit: `removed` rows gone (zeroed now), rows appended."""
        count = self.count
        alive = np.ones(count, dtype=bool) if self.alive is None else self.alive.copy()
        # Removed items leave the lookup in place, for every view sharing it (an older
        # view must not find an erased row either, and copying the lookup cost a forget
        # O(namespace): 100,000 entries); it is copied only before rows are appended.
        position = self.position
        for item in removed:
            row = position.pop(item, None)
            if row is not None:
                alive[row] = False
                self.matrix[row] = 0.0  # the decrypted vector leaves memory now
                if self.codes is not None:
                    self.codes[:, row] = 0
        if len(position) * 4 < count * 3:  # mostly removed rows: compact
            keep = np.flatnonzero(alive)
            view = NamespaceView.of(
                [self.ids[r] for r in keep], [self.generations[r] for r in keep], self.matrix[keep]
            )
            if not len(added_ids):
                return view
            return view.changed(set(), added_ids, added_generations, added)
        matrix, codes, extra = self.matrix, self.codes, len(added_ids)
        if count + extra > len(matrix):  # grow by half, so appends are amortised
            matrix = np.zeros((max(count + extra, count * 3 // 2, 64), matrix.shape[1]), np.float32)
            matrix[:count] = self.matrix[:count]
            if codes is not None:
                codes = np.zeros((codes.shape[0], len(matrix)), dtype=np.uint64)
                codes[:, :count] = self.codes[:, :count]  # type: ignore[index]
        if extra:
            matrix[count : count + extra] = added
            if codes is not None:
                codes[:, count : count + extra] = sign_codes(added)
            elif count + extra > EXACT_ROWS:
                codes = np.zeros((CODE_BITS // 64, len(matrix)), dtype=np.uint64)
                codes[:, : count + extra] = sign_codes(matrix[: count + extra])
            position = {**position, **{item: count + i for i, item in enumerate(added_ids)}}
            alive = np.concatenate([alive, np.ones(extra, dtype=bool)])
        return NamespaceView(
            self.ids + list(added_ids) if extra else self.ids,
            self.generations + list(added_generations) if extra else self.generations,
            matrix,
            codes,
            count + extra,
            None if alive.all() else alive,
            position,
            self.dead,
        )

    def search(
        self, query: np.ndarray, k: int, accept: Callable[[str], bool] | None = None
    ) -> list[tuple[int, float]]:
        """(row, exact similarity) of the k best rows that `accept` takes, best first.
        The filter is applied to the best rows first, widening only when it removes too
        many: no per-row Python pass over a large namespace."""
        want = k
        slack = 0 if accept is None else 16 + k // 2
        while True:
            rows, scores = self._top(query, want + slack)
            keep = np.ones(len(rows), dtype=bool)
            if self.lazy is not None:  # rows that did not open are never served
                keep &= ~self.lazy.failed[rows]
            if self.alive is not None:
                keep &= self.alive[rows]
            found: list[tuple[int, float]] = []
            for row, score in zip(rows[keep].tolist(), scores[keep].tolist(), strict=True):
                if accept is None or accept(self.ids[row]):
                    found.append((row, score))
                    if len(found) == k:  # the filter is asked no further than needed
                        return found
            if len(rows) == self.count:
                return found
            want *= 4

    def similarities(self, query: np.ndarray, item_ids: Iterable[str]) -> dict[str, float]:
        """Exact similarity of each of these items that has a live row here: recall
        scores the keyword index's hits on both halves, not only those both found."""
        found = [(i, r) for i in item_ids if (r := self.position.get(i)) is not None]
        if self.alive is not None:
            found = [(i, r) for i, r in found if self.alive[r]]
        found = [(i, r) for i, r in found if i not in self.dead]
        if not found:
            return {}
        rows = np.fromiter((r for _, r in found), dtype=np.int64, count=len(found))
        scores = _dot(self.vectors(rows), query)
        failed = None if self.lazy is None else self.lazy.failed[rows]
        return {
            i: float(s)
            for n, ((i, _), s) in enumerate(zip(found, scores, strict=True))
            if failed is None or not failed[n]
        }

    def _top(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        count = self.count
        candidates = max(CANDIDATES, CANDIDATE_FACTOR * n)
        lazy = self.lazy
        if self.codes is None or candidates * 2 >= count:
            every = self.matrix[:count] if lazy is None else self.vectors(np.arange(count))
            scores = _dot(every, query)
            if lazy is not None:
                scores[lazy.failed[:count]] = -np.inf
            if self.alive is not None:
                scores[~self.alive] = -np.inf
            order = best(scores, n)
            return order, scores[order]
        code = sign_codes(query[None, :])
        distance = hamming(self.codes[:, :count], code)
        if self.alive is not None:
            distance[~self.alive] = np.iinfo(np.uint16).max
        picked = np.argpartition(distance, candidates - 1)[:candidates]
        picked.sort()  # equal scores keep their row order, as in the exact path
        scores = _dot(self.vectors(picked), query)
        if lazy is not None:
            scores[lazy.failed[picked]] = -np.inf
        order = best(scores, n)
        return picked[order], scores[order]


def _dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Exact float32 similarities. Not through BLAS: for a few thousand rows, its
    threads cost more than the arithmetic (tens of ms on two busy cores, measured)."""
    return np.einsum("ij,j->i", matrix, query)


def best(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the n highest scores, best first; equal scores by position."""
    if n < len(scores):
        top = np.sort(np.argpartition(-scores, n - 1)[:n])
        return top[np.argsort(-scores[top], kind="stable")]
    return np.argsort(-scores, kind="stable")
