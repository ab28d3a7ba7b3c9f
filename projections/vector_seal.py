"""Sealing and opening the vector index's rows: the product's one seal, per item.

A row's plaintext is its float32 vector followed by the SHA-256 digest of the text it
embeds, sealed with `crypto.seal_bytes` under the item's data key of the row's key
generation, purpose b"vector". The digest is what makes an embedding reusable: a rebuild
that meets the same item, key generation and text (digest) again takes the stored vector
instead of embedding the text again; it is sealed with the vector, so it is erased with
it. The embedder is the manifest's: files of another embedder are never opened.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence

import numpy as np

from memory_ledger.crypto import open_bytes, seal_bytes
from memory_ledger.errors import CorruptKeyEntry
from memory_ledger.keystore import KeyRing
from memory_ledger.projections.vector_files import DIGEST_BYTES, row_bytes

log = logging.getLogger("memory_ledger.vectors")

PURPOSE = b"vector"


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def seal_rows(
    keys: KeyRing,
    item_ids: Sequence[str],
    generations: Sequence[int],
    vectors: np.ndarray,
    digests: Sequence[bytes],
) -> np.ndarray:
    """One sealed row per item (uint8, `row_bytes` wide). Every key must be live: the
    caller has just checked (`still_readable`)."""
    dimension = vectors.shape[1]
    out = np.empty((len(item_ids), row_bytes(dimension)), dtype=np.uint8)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    for row, (item, generation) in enumerate(zip(item_ids, generations, strict=True)):
        key = keys.data_key(item, generation)
        if key is None:  # pragma: no cover - still_readable dropped it
            raise ValueError(f"no live key for item {item} (generation {generation})")
        plain = vectors[row].tobytes() + digests[row]
        out[row] = np.frombuffer(seal_bytes(key, item, generation, plain, PURPOSE), np.uint8)
    return out


def open_rows(
    keys: KeyRing,
    item_ids: Sequence[str],
    generations: Sequence[int],
    sealed: np.ndarray,
    dimension: int,
) -> tuple[np.ndarray, list[bytes], np.ndarray]:
    """(vectors, text digests, opened): a row whose key is destroyed (or whose key
    entry or ciphertext does not authenticate) is not opened, and never served."""
    count = len(item_ids)
    vectors = np.zeros((count, dimension), dtype=np.float32)
    digests: list[bytes] = [b""] * count
    opened = np.zeros(count, dtype=bool)
    width = 4 * dimension
    corrupt = 0
    for row, (item, generation) in enumerate(zip(item_ids, generations, strict=True)):
        try:
            key = keys.data_key(item, generation)
            if key is None:
                continue
            plain = open_bytes(key, item, generation, sealed[row].tobytes(), PURPOSE)
        except CorruptKeyEntry:
            corrupt += 1
            continue
        if len(plain) != width + DIGEST_BYTES:
            corrupt += 1
            continue
        vectors[row] = np.frombuffer(plain, dtype=np.float32, count=dimension)
        digests[row] = plain[width:]
        opened[row] = True
    if corrupt:
        log.warning("%d vector row(s) did not open with their item's key: not served", corrupt)
    return vectors, digests, opened
