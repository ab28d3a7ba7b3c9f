"""A LangGraph `BaseStore` over one principal's `MemoryLedger`.

A LangGraph app keeps long-term memory in a store addressed by a namespace tuple and a
key (`store.put(("memories", user_id), "prefs", {...})`). This adapter keeps every such
item as a fact of the principal's ledger, so what the app stores is governed like any
other memory: provenance on every write, history kept on every change, and a delete that
is a forget request, erased from every store and verified, with receipts.

**Under the principal, never beside it.** The ledger is bound to one authenticated
principal; the LangGraph tuple only addresses items *inside* that principal's namespace.
No tuple, however it is spelled, reaches another principal's data: two principals using
the same tuple and key hold two unrelated items, and neither can name the other's.

**Nothing of the tuple or key in clear.** Namespace labels and keys are free text to
LangGraph, and often personal (`("users", "alice@example.com")`). The ledger keeps in
clear only identifiers, so the adapter stores:

- the document, its tuple and its key, together, *sealed* in the fact's value (the
  item's own data key: erasing the item destroys them with it);
- in the clear predicate, a keyed hash of (store subject, tuple, key):
  `lg_<32 hex digits>`, an HMAC-SHA256 under a derived key of the key store
  (`EventLog.derived_key`, the mechanism the keyword index uses for its term hashes;
  ident `lg-key:<namespace>`, one per principal). A `get` is then one indexed
  lookup on (subject, predicate). Without the key, a predicate says nothing about the
  tuple or key; under another principal's key the same tuple hashes to another
  predicate, so nothing links the two. Like a keyword-index hash, a predicate left in
  the log after its item is erased can be tested against guesses by someone holding the
  master key (who can unwrap the live derived key); it cannot be read without guessing.

The subject (default `langgraph_store`), category, writer and the provenance session id
are identifiers chosen by the app's configuration, never by a tuple.

**What changes for the app.**

- `put` of an existing key is a new *version* of the same item (`MemoryLedger.update`):
  memory-ledger keeps history, so the earlier document stays readable with `history`
  until the item is deleted. A `put` is not an overwrite in place.
- `delete` (and `put(..., None)`) files a forget request of kind `item` for every item
  the key holds: every version is crypto-shredded and purged from every store, each
  store returns a receipt, and the request's `RequestReport` is kept on the store
  (`last_report`, `recent_reports`) and in the lifecycle ledger. Like every forget, it
  also redacts word-for-word repeats of the document's distinctive parts (a house number
  with its street) in the principal's other memories (the ledger's mention rule; see
  the user guide's "forget").
- The items are facts of the principal: `recall` and `context` see them, the profile
  summary may include them, and a forget request of the principal (by source session,
  by category, the whole namespace) erases them with everything else.
- A document is at most 16 KiB of UTF-8 once encoded (the ledger's value limit);
  `ttl` is not supported: how long an item lives is the retention policy's decision
  (`supports_ttl` is False, so LangGraph refuses a `ttl` before it reaches here).

**Search and how it scales.** A search recalls the store's items (one indexed query on
the subject; each item's value is opened), keeps those under the prefix that match the
filter (LangGraph's: equality, `$eq $ne $gt $gte $lt $lte`, dotted paths into nested
objects as its SQL stores read them), and, given a query, ranks them by the fields the
`index` config names, as LangGraph does (`langgraph_index`: one vector per text a path
yields, the best one scores; `put(..., index=False)` is not embedded, `index=[paths]`
embeds those). So a search costs one pass over the principal's store items, at most
`MAX_RECALL_LIMIT` (10 000) of them, the most recently written first; beyond that, the
oldest are not seen (a warning is logged). `list_namespaces` is the same pass. That
suits a store of one user's memories; a store of millions of documents per principal
needs a namespace index of its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from langgraph.config import get_config
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from memory_ledger.agents.langgraph_index import DocumentIndex, IndexSetting
from memory_ledger.api import MemoryLedger
from memory_ledger.errors import InvalidWrite
from memory_ledger.forgetting.requests import RequestReport
from memory_ledger.identifiers import IDENTIFIER_RULE, is_identifier
from memory_ledger.retrieval.context import MAX_RECALL_LIMIT
from memory_ledger.store_protocol import Receipt
from memory_ledger.views import Memory
from memory_ledger.write_policy import Origin, Sensitivity, canonical_time

log = logging.getLogger("memory_ledger.agents")

#: What the sealed header says it is (inside the hex, like the rest of the header).
ENVELOPE_FORMAT = "memory-ledger/langgraph-item/1"
#: The key store's name for a principal's lookup key (`EventLog.derived_key`), in clear
#: in the key store: short words only, so that the verification scan, which looks for
#: an erased document's words of six letters or more, never finds one of its own here.
KEY_IDENT_PREFIX = "lg-key:"
#: Domain separation of the lookup hash: no other use of the key hashes the same bytes.
HASH_DOMAIN = b"ml-langgraph-item\x00"
#: Hex digits of the HMAC kept in the predicate: 128 bits, and under the identifier
#: rule's limit (a run of 40 hex digits would look like a content hash, and is refused).
HASH_HEX = 32
PREDICATE_PREFIX = "lg_"
#: A document whose sealed JSON no longer parses (a forget elsewhere redacted a span
#: that crossed its structure) is returned as its text under this one field.
REDACTED_FIELD = "__memory_ledger_redacted__"
#: How many delete reports the store keeps in memory (the ledger keeps all of them).
RECENT_REPORTS = 100
#: A filter key, as LangGraph's SQL stores accept it: letters, digits, `_`, `-`, and
#: dots between the steps of a path into nested objects (`user.access-level`).
FILTER_KEY = re.compile(r"[a-zA-Z0-9_.-]+")


@dataclass(frozen=True)
class _Stored:
    """One store item as read back from the ledger."""

    item_id: str
    version: int
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    #: What the put said to embed: None (the store's fields), False, or its own paths.
    index: IndexSetting = None

    def item(self) -> Item:
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )

    def search_item(self, score: float | None) -> SearchItem:
        return SearchItem(
            namespace=self.namespace,
            key=self.key,
            value=self.value,
            created_at=self.created_at,
            updated_at=self.updated_at,
            score=score,
        )


class MemoryLedgerStore(BaseStore):
    """A LangGraph store whose items are facts of one principal's ledger.

    `ledger` fixes the principal: every item lives in its namespace. The other options
    are identifiers recorded in clear on every item, so they must not carry personal
    text: `subject` names this store's items (two stores of one principal with
    different subjects do not see each other's items), `writer` goes into provenance,
    `session_id` is the provenance source when a write does not happen inside a
    LangGraph run whose `thread_id` is an identifier (inside one, the thread id is used,
    so a source-scope forget of that thread erases what it stored). `origin` and
    `sensitivity` are recorded on every item (defaults: `observed`, `personal`).

    `index` is LangGraph's `IndexConfig`: `fields` (default `["$"]`, the whole
    document) are what a search query is compared with, embedded by `embed` (default:
    the service's embedder; `langgraph_index` says where the vectors are kept).
    """

    supports_ttl: bool = False

    def __init__(
        self,
        ledger: MemoryLedger,
        *,
        subject: str = "langgraph_store",
        writer: str = "langgraph",
        session_id: str = "langgraph",
        category: str = "langgraph",
        origin: Origin = "observed",
        sensitivity: Sensitivity = "personal",
        index: IndexConfig | None = None,
    ) -> None:
        for name, value in (
            ("subject", subject),
            ("writer", writer),
            ("session_id", session_id),
            ("category", category),
        ):
            if not is_identifier(value):
                raise InvalidWrite(f"invalid {name}: use {IDENTIFIER_RULE}")
        if origin not in get_args(Origin) or sensitivity not in get_args(Sensitivity):
            raise InvalidWrite(
                f"origin is one of {get_args(Origin)}, sensitivity one of {get_args(Sensitivity)}"
            )
        self.ledger = ledger
        self.subject = subject
        self.writer = writer
        self.session_id = session_id
        self.category = category
        self.origin = origin
        self.sensitivity = sensitivity
        self._index = DocumentIndex(index, self._embed)
        #: The config as given, and the embeddings made of its `embed`, under the names
        #: LangGraph's own stores give them (None when not configured).
        self.index_config = index
        self.embeddings = self._index.embeddings
        #: The report of the last delete (a forget request), or None.
        self.last_report: RequestReport | None = None
        #: The reports of the most recent deletes, oldest first.
        self.recent_reports: deque[RequestReport] = deque(maxlen=RECENT_REPORTS)
        # One batch at a time: a put reads the key's item, then writes its next version.
        self._lock = threading.RLock()
        self._lookup_key: bytes | None = None

    # -- BaseStore ---------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order, each seeing the effect of those before it."""
        ops = list(ops)
        for op in ops:  # ops passed straight to batch skip BaseStore's own checks
            validate_op_namespace(op)
        with self._lock:
            return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread: the ledger's API is synchronous, and an event
        loop must not wait on SQLite or PostgreSQL."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self._newest(op.namespace, op.key)
            return None if found is None else found.item()
        if isinstance(op, PutOp):
            _check_put_namespace(op.namespace)
            if op.ttl is not None:
                raise NotImplementedError(
                    "TTL is not supported by MemoryLedgerStore: the retention policy decides"
                )
            if op.value is None:
                self.forget(op.namespace, op.key)
            else:
                self._put(op.namespace, op.key, op.value, op.index)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"unknown operation type: {type(op).__name__}")

    # -- beyond BaseStore --------------------------------------------------------------

    def forget(self, namespace: tuple[str, ...], key: str) -> RequestReport | None:
        """Erase the item at (namespace, key), every version of it, with a forget
        request; its report (receipts) is returned and kept as `last_report`. None when
        the key holds nothing (there is nothing to erase, and nothing is filed).

        Every item of the key's predicate is erased, found by clear columns (the
        catalog), not by `recall`: a suppressed or expired item, or a duplicate that two
        racing writers made and one superseded, is hidden from reads but still held,
        and a delete must leave none of them."""
        with self._lock:
            ids = self._item_ids(tuple(namespace), str(key))
            if not ids:
                return None
            report = self.ledger.forget(*ids)
            erased = set(ids)
            self._index.drop(lambda cached: cached[0] not in erased)  # type: ignore[index]
            self.last_report = report
            self.recent_reports.append(report)
            return report

    @property
    def last_receipts(self) -> list[Receipt]:
        """The receipts of the last delete: one per store, then the key proof."""
        return [] if self.last_report is None else list(self.last_report.receipts)

    def history(self, namespace: tuple[str, ...], key: str) -> list[Item]:
        """Every version the key's item still holds, oldest first: what `put` kept."""
        with self._lock:
            found = self._newest(tuple(namespace), str(key))
            if found is None:
                return []
            versions = []
            for memory in self.ledger.history(found.item_id):
                stored = self._decode(memory)
                if stored is not None:
                    versions.append(stored.item())
            return versions

    # -- writes ------------------------------------------------------------------------

    def _put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: IndexSetting | list[str] = None,
    ) -> None:
        setting = _index_setting(index)
        now = self.ledger.now()
        current = self._newest(namespace, key)
        created = current.created_at if current is not None else now
        text = _envelope(namespace, key, dict(value), created, now, setting)
        provenance = {
            "writer": self.writer,
            "written_at": now,
            "session_id": self._source(),
        }
        if current is not None:
            self.ledger.update(current.item_id, {"value": text, "provenance": provenance})
            return
        self.ledger.remember(
            {
                "kind": "fact",
                "subject": self.subject,
                "predicate": self._predicate(namespace, key),
                "value": text,
                "category": self.category,
                "origin": self.origin,
                "sensitivity": self.sensitivity,
                "provenance": provenance,
                # One current value per key, whatever the deployment's default cardinality.
                "mode": "replace",
            }
        )

    def _source(self) -> str:
        """The provenance session: the LangGraph thread, when this runs inside a run and
        its id is an identifier; otherwise the store's configured `session_id`."""
        try:
            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # not inside a runnable context
            thread = None
        return thread if isinstance(thread, str) and is_identifier(thread) else self.session_id

    # -- reads -------------------------------------------------------------------------

    def _find(self, namespace: tuple[str, ...], key: str) -> list[_Stored]:
        """The live items of (namespace, key), oldest first: normally one (two writers
        racing to create a key may make two; the newest is the one served)."""
        memories = self.ledger.recall(
            subject=self.subject,
            predicate=self._predicate(namespace, key),
            kind="fact",
            limit=100,
            include_archived=True,
        )
        found = [self._decode(m) for m in memories]
        same = [s for s in found if s is not None and s.namespace == namespace and s.key == key]
        return sorted(same, key=_order)

    def _item_ids(self, namespace: tuple[str, ...], key: str) -> list[str]:
        """Every item the key's predicate holds in this namespace, live or not yet swept."""
        found = self.ledger.catalog_rows(
            ("item_id",), subject=self.subject, predicate=self._predicate(namespace, key)
        )
        return sorted(item_id for (item_id,) in found)

    def _newest(self, namespace: tuple[str, ...], key: str) -> _Stored | None:
        found = self._find(tuple(namespace), str(key))
        return found[-1] if found else None

    def _all(self) -> list[_Stored]:
        """Every live item of this store, newest first (at most MAX_RECALL_LIMIT)."""
        memories = self.ledger.recall(
            subject=self.subject, kind="fact", limit=MAX_RECALL_LIMIT, include_archived=True
        )
        if len(memories) == MAX_RECALL_LIMIT:
            log.warning(
                "the LangGraph store of %s holds %d items or more: search and "
                "list_namespaces see the newest %d only",
                self.ledger.namespace,
                MAX_RECALL_LIMIT,
                MAX_RECALL_LIMIT,
            )
        out: dict[tuple[tuple[str, ...], str], _Stored] = {}
        for memory in memories:
            stored = self._decode(memory)
            if stored is None:
                continue
            seen = out.get((stored.namespace, stored.key))
            if seen is None or _order(stored) > _order(seen):
                out[(stored.namespace, stored.key)] = stored
        return sorted(out.values(), key=_order, reverse=True)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.filter:
            _check_filter(op.filter)
        prefix = tuple(op.namespace_prefix)
        matching = [
            s
            for s in self._all()
            if s.namespace[: len(prefix)] == prefix
            and (not op.filter or _matches_filter(s.value, op.filter))
        ]
        if op.query and matching:
            keyed = {_vector_key(s, self._index.paths(s.index)): s for s in matching}
            scores = self._index.scores(
                op.query,
                [(k, s.value, self._index.paths(s.index)) for k, s in keyed.items()],
            )
            scored = sorted(
                (k for k in keyed if k in scores), key=lambda k: scores[k], reverse=True
            )
            unscored = [k for k in keyed if k not in scores]  # index=False, or no field
            ranked = [(keyed[k], scores.get(k)) for k in [*scored, *unscored]]
        else:
            ranked = [(s, None) for s in matching]
        window = ranked[op.offset : op.offset + op.limit]
        return [s.search_item(score) for s, score in window]

    def _embed(self, texts: list[str]) -> Any:
        """The service's embedder (the one its vector index and context builder use):
        what a store without an `embed` of its own embeds with."""
        return self.ledger.embed(texts)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = {s.namespace for s in self._all()}
        if op.match_conditions:
            spaces = {
                ns for ns in spaces if all(_namespace_matches(c, ns) for c in op.match_conditions)
            }
        if op.max_depth is not None:
            spaces = {ns[: op.max_depth] for ns in spaces}
        return sorted(spaces)[op.offset : op.offset + op.limit]

    # -- the sealed envelope and the lookup hash ---------------------------------------

    def _decode(self, memory: Memory) -> _Stored | None:
        """The store item a fact holds; None for a fact that is not one (another writer's
        fact of the same subject) or whose envelope cannot be read."""
        if memory.text is None:
            return None
        first, newline, document = memory.text.partition("\n")
        try:
            header = json.loads(bytes.fromhex(first).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None  # not one of ours: another writer's fact of the same subject
        if not newline or not isinstance(header, dict) or header.get("format") != ENVELOPE_FORMAT:
            return None
        try:
            namespace = tuple(str(label) for label in header["namespace"])
            key = str(header["key"])
            created = datetime.fromisoformat(header["created_at"])
            updated = datetime.fromisoformat(header["updated_at"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            # Ids only: the header holds personal text.
            log.warning("item %s: its LangGraph header no longer parses", memory.item_id)
            return None
        try:
            value = json.loads(document)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            value = {REDACTED_FIELD: document}
        index = header.get("index")
        if not (index is None or index is False or _is_paths(index)):
            index = None
        return _Stored(
            memory.item_id, memory.version, namespace, key, value, created, updated, index
        )

    def _predicate(self, namespace: tuple[str, ...], key: str) -> str:
        """`lg_` and the keyed hash of (subject, tuple, key): what a get looks up."""
        message = json.dumps(
            [self.subject, list(namespace), key], ensure_ascii=False, separators=(",", ":")
        )
        digest = hmac.new(self._key(), HASH_DOMAIN + message.encode("utf-8"), hashlib.sha256)
        return PREDICATE_PREFIX + digest.hexdigest()[:HASH_HEX]

    def _key(self) -> bytes:
        """The principal's lookup key, made on first use and kept in the key store
        (wrapped by the master key, like every data key)."""
        if self._lookup_key is None:
            self._lookup_key = self.ledger.namespace_key(KEY_IDENT_PREFIX)
        return self._lookup_key


def _index_setting(index: Any) -> IndexSetting:
    """A put's `index`, checked: None or True (the store's fields), False, or paths."""
    if index is None or index is True:
        return None
    if index is False:
        return False
    if isinstance(index, str):
        return [index]
    if _is_paths(index):
        return list(index)
    raise ValueError(f"index must be False, None or a list of field paths, not {index!r}")


def _is_paths(index: Any) -> bool:
    return isinstance(index, list | tuple) and all(isinstance(p, str) for p in index)


def _vector_key(stored: _Stored, paths: list[str]) -> tuple[str, int, tuple[str, ...]]:
    """What a document's vectors are cached under: a new version or other paths are
    embedded anew."""
    return (stored.item_id, stored.version, tuple(paths))


def _order(stored: _Stored) -> tuple[datetime, str]:
    """Newest last: by the time of the last put, ties (two writers) by item id."""
    return (stored.updated_at, stored.item_id)


def _envelope(
    namespace: tuple[str, ...],
    key: str,
    value: dict[str, Any],
    created: datetime,
    updated: datetime,
    index: IndexSetting = None,
) -> str:
    """What the fact's value seals: a header line, then the document.

    The header (format, tuple, key, times) is JSON in hex: one token without
    separators, which the ledger's mention rule never cuts into parts, so a label or key
    shared by many items (`("users", "flat 12 Baker St")`) is never redacted out of the
    others when one of them is forgotten, and which holds no word for the verification
    scan to find in clear elsewhere (a marker in words would be in every item).

    The document is indented JSON, one member per line, so that a mention redaction
    (which cuts values at line breaks and at `: `) replaces text inside a string rather
    than across the document's structure; and it stays text, so the ledger's vector and
    keyword indexes find it, and forgetting a value elsewhere ("12 Main Street") redacts
    it here too."""
    header: dict[str, Any] = {
        "format": ENVELOPE_FORMAT,
        "namespace": list(namespace),
        "key": key,
        "created_at": canonical_time(created),
        "updated_at": canonical_time(updated),
    }
    if index is not None:  # what the put said to embed (the store's fields when absent)
        header["index"] = index
    document = json.dumps(value, ensure_ascii=False, indent=1)
    encoded = json.dumps(header, ensure_ascii=False).encode("utf-8").hex()
    return f"{encoded}\n{document}"


def _check_put_namespace(namespace: tuple[str, ...]) -> None:
    """An empty namespace, refused for PutOps passed straight to batch too. The reserved
    root `langgraph` is refused by `BaseStore.put` (an app's put) but not here: LangGraph's
    own stores accept it from `batch`, which is how LangGraph itself writes there."""
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A prefix or suffix condition, `*` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type: {condition.match_type}")
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _matches_filter(value: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """LangGraph's filter: every field equal, nested objects field by field, and the
    comparison operators `$eq $ne $gt $gte $lt $lte` (as LangGraph's own stores). A
    key is a path, `user.city` the field `city` of the object `user`, and a key that is
    not one (`FILTER_KEY`) is a ValueError, as in LangGraph's SQL stores."""
    return all(_matches_value(_at_path(value, name), expected) for name, expected in wanted.items())


def _check_filter(wanted: Mapping[str, Any]) -> None:
    """Refuse, before anything is read, what LangGraph's SQL stores refuse: a filter key
    that is not a path of letters, digits, `_`, `-` and dots, or an unknown operator."""
    for name, expected in wanted.items():
        if not isinstance(name, str) or not FILTER_KEY.fullmatch(name):
            raise ValueError(
                f"Invalid filter key: {name!r}. Filter keys must contain only alphanumeric "
                "characters, underscores, dots, and hyphens."
            )
        if isinstance(expected, Mapping):
            for operator in expected:
                if str(operator).startswith("$") and operator not in _OPERATORS:
                    raise ValueError(f"Unsupported operator: {operator}")


def _at_path(value: Any, path: str) -> Any:
    """The field a dotted path names (None when a step is missing)."""
    for step in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def _matches_value(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(_apply(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and _matches_filter(actual, expected)
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_matches_value(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


def _apply(actual: Any, operator: str, operand: Any) -> bool:
    if operator not in _OPERATORS:
        raise ValueError(f"Unsupported operator: {operator}")
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    if isinstance(actual, str) and isinstance(operand, str):
        left_text, right_text = actual, operand  # text against text, as SQLite compares
        return {
            "$gt": left_text > right_text,
            "$gte": left_text >= right_text,
            "$lt": left_text < right_text,
            "$lte": left_text <= right_text,
        }[operator]
    try:
        left, right = float(actual), float(operand)
    except (TypeError, ValueError, OverflowError):
        return False  # a missing or non-numeric field is outside every range
    return {
        "$gt": left > right,
        "$gte": left >= right,
        "$lt": left < right,
        "$lte": left <= right,
    }[operator]
