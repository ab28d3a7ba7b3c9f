"""The lifecycle ledger as a Merkle tree, RFC 9162 (Certificate Transparency 2.0) §2.1.

The hash chain stays what the ledger is; the tree is derived from it. Its leaves are the
entries' chain hashes (32 bytes each) in ledger order, so leaf index = seq - 1, and the
tree needs no payload to be read again: only the `entry_hash` column. An entry's chain
hash already covers its predecessor's hash, seq, request id, type, time and payload.

The tree keeps every perfect subtree's hash (`levels`), built once over the leaves it
holds and extended as the ledger grows; any head, inclusion proof or consistency proof
at any size up to that is then O(log n) hashes (MTH, PATH and PROOF of §2.1.1-2.1.4).
Verification (§2.1.3.2, §2.1.4.2) is the standalone verifier's, so there is one copy.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory_ledger.audit.verifier import (
    EMPTY_ROOT,
    leaf_hash,
    node_hash,
    verify_consistency,
    verify_inclusion,
)

__all__ = [
    "EMPTY_ROOT",
    "MerkleTree",
    "leaf_hash",
    "node_hash",
    "verify_consistency",
    "verify_inclusion",
]


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


class MerkleTree:
    """An append-only tree over leaf hashes. `levels[k][i]` is the hash of the perfect
    subtree of leaves [i * 2^k, (i + 1) * 2^k)."""

    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self.levels: list[list[bytes]] = [[]]
        self.extend(leaves)

    @classmethod
    def of_leaves(cls, data: Iterable[bytes]) -> MerkleTree:
        """A tree over raw leaf bytes (each hashed with the 0x00 prefix)."""
        return cls(leaf_hash(d) for d in data)

    @property
    def size(self) -> int:
        return len(self.levels[0])

    def extend(self, leaf_hashes: Iterable[bytes]) -> None:
        """Append leaf hashes (already hashed with the 0x00 prefix)."""
        self.levels[0].extend(leaf_hashes)
        k = 0
        while len(self.levels[k]) >= 2:
            if len(self.levels) == k + 1:
                self.levels.append([])
            below, above = self.levels[k], self.levels[k + 1]
            for i in range(len(above), len(below) // 2):
                above.append(node_hash(below[2 * i], below[2 * i + 1]))
            k += 1

    def _hash(self, start: int, end: int) -> bytes:
        """MTH of leaves [start, end); start is aligned to the subtree sizes RFC 9162's
        recursion produces, so every left part is a perfect subtree held in `levels`."""
        n = end - start
        if n == 0:
            return EMPTY_ROOT
        if n & (n - 1) == 0 and start % n == 0:
            return self.levels[n.bit_length() - 1][start // n]
        k = _split(n)
        return node_hash(self._hash(start, start + k), self._hash(start + k, end))

    def _check_size(self, size: int) -> None:
        if not 0 <= size <= self.size:
            raise ValueError(f"tree size {size} is not in 0..{self.size}")

    def root(self, size: int | None = None) -> bytes:
        """MTH of the first `size` leaves (default: all)."""
        size = self.size if size is None else size
        self._check_size(size)
        return self._hash(0, size)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """PATH(index, D[0:size]): the audit path of leaf `index` in the tree of `size`."""
        size = self.size if size is None else size
        self._check_size(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf {index} is not in a tree of size {size}")
        proof: list[bytes] = []
        start, end = 0, size
        while end - start > 1:
            k = _split(end - start)
            if index < start + k:
                proof.append(self._hash(start + k, end))
                end = start + k
            else:
                proof.append(self._hash(start, start + k))
                start += k
        proof.reverse()  # PATH lists the nodes from the leaf upwards
        return proof

    def consistency_proof(self, first: int, second: int | None = None) -> list[bytes]:
        """PROOF(first, D[0:second]): the nodes that show the tree of `first` leaves is a
        prefix of the tree of `second`. Empty when first is 0 or equals second."""
        second = self.size if second is None else second
        self._check_size(second)
        if not 0 <= first <= second:
            raise ValueError(f"size {first} is not in 0..{second}")
        if first in (0, second):
            return []
        proof: list[bytes] = []
        start, end, m, whole = 0, second, first, True
        # SUBPROOF(m, D[start:end], whole), unrolled: each step adds one node, outermost
        # last, so the nodes are gathered and reversed at the end.
        while m != end - start:
            k = _split(end - start)
            if m <= k:
                proof.append(self._hash(start + k, end))
                end = start + k
            else:
                proof.append(self._hash(start, start + k))
                start, m, whole = start + k, m - k, False
        if not whole:
            proof.append(self._hash(start, end))
        proof.reverse()
        return proof
