"""One namespace's opened vectors, in memory only, and how they are searched fast.

The first search of a namespace opens its rows (`IndexState.namespace`): one contiguous
float32 matrix, and for a large namespace a compact code per row (`CODE_BITS` signs of
random projections, SimHash, 64 bytes a row). A search of a large namespace ranks every
row by the Hamming distance of its code to the query's (XOR and popcount: a sixteenth of
the float32 bytes to read), keeps the few hundred nearest as candidates, and scores those
exactly (float32 dot products): what it returns are exact similarities, best first. A
namespace of up to `EXACT_ROWS` rows is scored exactly, all of it, as before.

The codes are only ever in memory: they are computed from the opened vectors when the
namespace is opened, and dropped with them when a commit changes the namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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
    """(rows, CODE_BITS // 64) uint64: the signs of each row's random projections."""
    planes = _planes(vectors.shape[1])
    packed = np.empty((len(vectors), CODE_BITS // 8), dtype=np.uint8)
    for start in range(0, len(vectors), _CHUNK):
        chunk = vectors[start : start + _CHUNK] @ planes
        packed[start : start + _CHUNK] = np.packbits(chunk > 0, axis=1)
    return packed.view(np.uint64)


@dataclass(frozen=True, eq=False)
class NamespaceView:
    """A namespace's opened rows: ids, key generations, vectors, codes (large ones only).
    Never written anywhere; `dead` collects rows found with a destroyed key."""

    ids: list[str]
    generations: list[int]
    matrix: np.ndarray
    codes: np.ndarray | None
    dead: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, ids: list[str], generations: list[int], matrix: np.ndarray) -> NamespaceView:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        codes = sign_codes(matrix) if len(ids) > EXACT_ROWS else None
        return cls(ids, generations, matrix, codes)

    def __len__(self) -> int:
        return len(self.ids)

    def search(
        self, query: np.ndarray, k: int, accept: Callable[[str], bool] | None = None
    ) -> list[tuple[int, float]]:
        """(row, exact similarity) of the k best rows that `accept` takes, best first.
        The filter is applied to the best rows first, widening only when it removes too
        many: no per-row Python pass over a large namespace."""
        want = k
        slack = 0 if accept is None else 16 + 3 * k
        while True:
            rows, scores = self._top(query, want + slack)
            found = [(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]
            if accept is not None:
                found = [hit for hit in found if accept(self.ids[hit[0]])]
            if len(found) >= k or len(rows) == len(self.ids):
                return found[:k]
            want *= 4

    def _top(self, query: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        count = len(self.ids)
        candidates = max(CANDIDATES, CANDIDATE_FACTOR * n)
        if self.codes is None or candidates * 2 >= count:
            scores = self.matrix @ query
            order = best(scores, n)
            return order, scores[order]
        code = sign_codes(query[None, :])
        distance = np.bitwise_count(self.codes ^ code).sum(axis=1, dtype=np.uint16)
        picked = np.argpartition(distance, candidates - 1)[:candidates]
        picked.sort()  # equal scores keep their row order, as in the exact path
        scores = self.matrix[picked] @ query
        order = best(scores, n)
        return picked[order], scores[order]


def best(scores: np.ndarray, n: int) -> np.ndarray:
    """Positions of the n highest scores, best first; equal scores by position."""
    if n < len(scores):
        top = np.sort(np.argpartition(-scores, n - 1)[:n])
        return top[np.argsort(-scores[top], kind="stable")]
    return np.argsort(-scores, kind="stable")
