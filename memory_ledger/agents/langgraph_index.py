"""What the LangGraph store embeds, and how a query ranks its documents.

LangGraph's stores embed the *fields* of a document that their `index` config names
(`fields`, default `["$"]`: the whole document as JSON text), one vector per text a
path yields, and score a document by its best vector; a `put(..., index=False)` is
stored but not embedded, and `put(..., index=[paths])` embeds those paths instead. The
ledger's own vector index embeds a fact's whole value, and the store's value is its
sealed envelope (a hex header, then the document), so its vectors rank the envelope,
not what the app asked to be searched: `这是中文` scored 0.06 against the document
`{"text": "这是中文"}`. So the store ranks with vectors of its own, made as LangGraph
makes them.

**Where the vectors live: in memory, never on disk.** They are made when a search first
needs them (with the config's `embed`, or the service's embedder when none is given),
kept per (item, version, paths) in this process, and the cache is cut down to the
store's live items on every search, and emptied of an item as it is deleted. A deleted
document's vectors therefore leave no file to erase, and an item forgotten by another
route (a forget of the principal) is never scored: a search only ranks items it has
just read back from the ledger. The price is that a process embeds each document once
before its first search sees it; for one user's memories with the default embedder
that is milliseconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from langgraph.store.base import ensure_embeddings, get_text_at_path, tokenize_path

#: A document's index setting, as its put gave it: None (the store's fields), False
#: (not embedded) or the paths to embed.
IndexSetting = bool | list[str] | None
#: One path as LangGraph's stores keep it: "$" (the whole document) or its tokens.
Path = tuple[str, str | list[str]]

WHOLE_DOCUMENT = "$"


class DocumentIndex:
    """The `index` config of a store: which paths are embedded, and with what.

    `config` is LangGraph's `IndexConfig` (`embed`, `fields`; `dims` is the embedder's
    business and only recorded). The SQLite store's name for `fields`, `text_fields`,
    is accepted too. With no `embed`, `default_embed` (the service's embedder) is used.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None,
        default_embed: Callable[[list[str]], np.ndarray],
    ) -> None:
        config = dict(config or {})
        fields = config.get("fields") or config.get("text_fields") or [WHOLE_DOCUMENT]
        if isinstance(fields, str):
            fields = [fields]
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise ValueError(f"Text fields must be a list or a string. Got {fields}")
        self.fields: list[str] = fields
        self.config = config
        embed = config.get("embed")
        if embed is None:
            self._embed = default_embed
            self.embeddings: Any = None
        else:
            self.embeddings = ensure_embeddings(embed)
            documents = self.embeddings.embed_documents
            self._embed = lambda texts: np.asarray(documents(texts), dtype=np.float64)
        self._query = (
            (lambda text: np.asarray(self.embeddings.embed_query(text), dtype=np.float64))
            if self.embeddings is not None
            else (lambda text: np.asarray(default_embed([text])[0], dtype=np.float64))
        )
        self._vectors: dict[Hashable, np.ndarray] = {}
        self._lock = threading.Lock()

    def paths(self, setting: IndexSetting) -> list[str]:
        """The paths a document is embedded by: its put's own, or the store's; none for
        `index=False`."""
        if setting is False:
            return []
        if setting is None or setting is True:
            return list(self.fields)
        return list(setting)

    @staticmethod
    def texts(value: Mapping[str, Any], paths: Sequence[str]) -> list[str]:
        """Every text the paths yield from the document (a missing field: none)."""
        out: list[str] = []
        for path in paths:
            tokens: str | list[str] = (
                WHOLE_DOCUMENT if path == WHOLE_DOCUMENT else tokenize_path(path)
            )
            out.extend(t for t in get_text_at_path(value, tokens) if t)
        return out

    def scores(
        self, query: str, documents: Sequence[tuple[Hashable, Mapping[str, Any], list[str]]]
    ) -> dict[Hashable, float]:
        """The cosine similarity of the query to each document's best vector, for the
        documents (key, value, paths) that have one. The cache keeps these keys only."""
        with self._lock:
            kept = {key: self._vectors[key] for key, _, _ in documents if key in self._vectors}
            missing = [(key, self.texts(value, paths)) for key, value, paths in documents]
            missing = [(key, texts) for key, texts in missing if key not in kept and texts]
            if missing:
                flat = [text for _, texts in missing for text in texts]
                vectors = _unit(self._embed(flat))
                at = 0
                for key, texts in missing:
                    kept[key] = vectors[at : at + len(texts)]
                    at += len(texts)
            self._vectors = kept
        if not kept:
            return {}
        query_vector = _unit(self._query(query)[None, :])[0]
        # Clipped: rounding can put a unit vector's cosine with itself a hair above 1.
        return {
            key: float(np.clip(np.max(rows @ query_vector), -1.0, 1.0))
            for key, rows in kept.items()
        }

    def drop(self, keep: Callable[[Hashable], bool]) -> None:
        """Forget the vectors of the keys `keep` refuses (a deleted item's)."""
        with self._lock:
            self._vectors = {k: v for k, v in self._vectors.items() if keep(k)}


def _unit(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero: it matches nothing)."""
    rows = np.asarray(rows, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
