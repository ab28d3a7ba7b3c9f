"""The ledger's Merkle tree (memory_ledger/audit/merkle.py) against RFC 9162 §2.1: the
tree's heads and proofs equal a direct transcription of MTH, PATH and PROOF, every
inclusion and consistency proof verifies for every entry and pair of sizes, and a
tampered leaf, root or proof does not."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.audit.merkle import (
    EMPTY_ROOT,
    MerkleTree,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)

# -- RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1 as written: the reference -------------------------


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return hashlib.sha256(b"\x00" + d[0]).digest()
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + mth(d[:k]) + mth(d[k:])).digest()


def path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*path(m, d[:k]), mth(d[k:])]
    return [*path(m - k, d[k:]), mth(d[:k])]


def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    if m == len(d):
        return [] if b else [mth(d)]
    k = _k(len(d))
    if m <= k:
        return [*subproof(m, d[:k], b), mth(d[k:])]
    return [*subproof(m - k, d[k:], False), mth(d[:k])]


def data(n: int) -> list[bytes]:
    return [f"entry {i}".encode() for i in range(n)]


def flip(value: bytes) -> bytes:
    return bytes([value[0] ^ 1]) + value[1:]


MAX = 70


@pytest.fixture(scope="module")
def tree() -> MerkleTree:
    return MerkleTree.of_leaves(data(MAX))


def test_the_empty_tree_is_the_hash_of_nothing() -> None:
    assert MerkleTree().root() == EMPTY_ROOT == hashlib.sha256(b"").digest()


def test_heads_and_proofs_equal_rfc_9162_for_every_size_up_to_70(tree: MerkleTree) -> None:
    d = data(MAX)
    for n in range(MAX + 1):
        assert tree.root(n) == mth(d[:n]), n
        for m in range(n):
            assert tree.inclusion_proof(m, n) == path(m, d[:n]), (m, n)
        for m in range(1, n):
            assert tree.consistency_proof(m, n) == subproof(m, d[:n], True), (m, n)


def test_every_proof_verifies_for_every_entry_and_pair_of_sizes(tree: MerkleTree) -> None:
    leaves = [leaf_hash(x) for x in data(MAX)]
    for n in range(MAX + 1):
        root = tree.root(n)
        for m in range(n):
            proof = tree.inclusion_proof(m, n)
            assert verify_inclusion(m, n, leaves[m], proof, root), (m, n)
            assert len(proof) <= max(1, n - 1).bit_length()  # O(log n)
        for m in range(n + 1):
            proof = tree.consistency_proof(m, n)
            assert verify_consistency(m, n, tree.root(m), root, proof), (m, n)
            assert len(proof) <= 2 * max(1, n).bit_length()


def test_a_tree_grown_in_steps_equals_one_built_at_once() -> None:
    grown = MerkleTree()
    for chunk in (data(1), data(6)[1:], data(33)[6:], data(MAX)[33:]):
        grown.extend(leaf_hash(x) for x in chunk)
    whole = MerkleTree.of_leaves(data(MAX))
    assert grown.levels == whole.levels


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_tampered_leaf_root_or_inclusion_proof_fails(
    tree: MerkleTree, draw: st.DataObject
) -> None:
    n = draw.draw(st.integers(1, MAX))
    m = draw.draw(st.integers(0, n - 1))
    leaf = leaf_hash(data(MAX)[m])
    proof = tree.inclusion_proof(m, n)
    root = tree.root(n)
    assert verify_inclusion(m, n, leaf, proof, root)
    assert not verify_inclusion(m, n, flip(leaf), proof, root)  # the entry changed
    assert not verify_inclusion(m, n, leaf, proof, flip(root))
    assert not verify_inclusion(n, n, leaf, proof, root)  # past the end
    if proof:
        i = draw.draw(st.integers(0, len(proof) - 1))
        assert not verify_inclusion(m, n, leaf, [*proof[:i], flip(proof[i]), *proof[i + 1 :]], root)
        assert not verify_inclusion(m, n, leaf, proof[:-1], root)  # truncated
        assert not verify_inclusion(m, n, leaf, [*proof, proof[0]], root)  # too long
    other = draw.draw(st.integers(0, n - 1))
    if data(MAX)[other] != data(MAX)[m] and other != m:
        assert not verify_inclusion(other, n, leaf, proof, root)  # another position


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_tampered_consistency_proof_or_root_fails(tree: MerkleTree, draw: st.DataObject) -> None:
    n = draw.draw(st.integers(2, MAX))
    m = draw.draw(st.integers(1, n - 1))
    proof = tree.consistency_proof(m, n)
    old, new = tree.root(m), tree.root(n)
    assert verify_consistency(m, n, old, new, proof)
    assert not verify_consistency(m, n, flip(old), new, proof)
    assert not verify_consistency(m, n, old, flip(new), proof)
    assert not verify_consistency(n, m, new, old, proof)
    i = draw.draw(st.integers(0, len(proof) - 1))
    assert not verify_consistency(m, n, old, new, [*proof[:i], flip(proof[i]), *proof[i + 1 :]])
    assert not verify_consistency(m, n, old, new, proof[:-1])
    # A rewritten history: the same sizes, one old leaf changed.
    changed = draw.draw(st.integers(0, m - 1))
    rewritten = MerkleTree.of_leaves(
        [b"rewritten" if i == changed else x for i, x in enumerate(data(n))]
    )
    assert not verify_consistency(m, n, old, rewritten.root(n), rewritten.consistency_proof(m, n))


def test_sizes_out_of_range_are_refused(tree: MerkleTree) -> None:
    with pytest.raises(ValueError):
        tree.root(MAX + 1)
    with pytest.raises(ValueError):
        tree.inclusion_proof(5, 5)
    with pytest.raises(ValueError):
        tree.consistency_proof(6, 5)
