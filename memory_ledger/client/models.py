"""What the client returns: frozen dataclasses with the fields of the service's JSON
(the same names as the Python API's results, memory_ledger/views.py and friends).

Each has `from_dict`, which takes the fields it knows and ignores any others, so a
newer service that adds a field does not break an older client; `raw` keeps the whole
answer as it came."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T", bound="_Model")


@dataclass(frozen=True)
class _Model:
    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "raw":
                continue
            if f.name in data:
                kwargs[f.name] = data[f.name]
            elif f.default is MISSING and f.default_factory is MISSING:
                raise ValueError(f"{cls.__name__}: the answer has no {f.name!r}")
        kwargs.update(cls._nested(data))
        return cls(**kwargs, raw=data)  # type: ignore[call-arg]

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class Remembered(_Model):
    """One stored memory: its id, version, kind and log position."""

    item_id: str
    version: int
    kind: str
    position: int
    cardinality: str | None = None
    replaces: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Added(_Model):
    """A turn stored by `add`: its ids, and the session and turn it was recorded under
    (pass `session_id` back to continue the session)."""

    item_id: str
    version: int
    kind: str
    position: int
    session_id: str
    turn_id: str
    writer: str | None = None
    written_at: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_answer(cls, data: dict[str, Any]) -> Added:
        [memory] = data["memories"]
        return cls.from_dict({**memory, **{k: v for k, v in data.items() if k != "memories"}})


@dataclass(frozen=True)
class Memory(_Model):
    """A live memory as recall lists it; `text` is the value or the turn's content."""

    item_id: str
    version: int
    kind: str
    subject: str
    predicate: str
    text: str | None
    category: str = "general"
    origin: str | None = None
    confidence: float = 1.0
    sensitivity: str | None = None
    status: str = "current"
    scope: str = "global"
    strength: float | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    expires_at: str | None = None
    suppressed: bool = False
    provenance: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class MemoryPage(_Model):
    """One page of a listing, and the cursor of the next (None at the end)."""

    memories: list[Memory]
    next_cursor: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"memories": [Memory.from_dict(m) for m in data["memories"]]}


@dataclass(frozen=True)
class ItemState(_Model):
    """One item read from the log: its text, or None once erased (or expired)."""

    item_id: str
    version: int
    kind: str
    subject: str
    predicate: str
    text: str | None
    erased: bool = False
    suppressed: bool = False
    redaction: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    expired: bool = False
    archived: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class ContextItem(_Model):
    """An item in a turn's context, with its trust label and provenance. `untrusted`:
    it reads like an instruction; show it quoted, never follow it."""

    item_id: str
    version: int
    kind: str
    subject: str
    predicate: str
    text: str
    trust: str
    untrusted: bool = False
    hint: bool = False
    score: float = 0.0
    tokens: int = 0
    scope: str = "global"
    provenance: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Context(_Model):
    """The context for one turn: ranked items within the token budget, and `rendered`,
    the text to give the model."""

    items: list[ContextItem]
    token_budget: int
    tokens: int
    omitted: int = 0
    rank: str = "hybrid"
    embedder: str = ""
    context_mac: str | None = None
    recorded_on: str | None = None
    valid_until: str | None = None
    summary: dict[str, Any] | None = None
    rendered: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"items": [ContextItem.from_dict(i) for i in data["items"]]}


@dataclass(frozen=True)
class Summary(_Model):
    """The namespace's profile summary and the (item id, version) inputs it was built from."""

    namespace: str
    text: str
    inputs: list[dict[str, Any]] = field(default_factory=list)
    summarizer: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Receipt(_Model):
    """What one store did for a request and what it checked: ids and counts only."""

    store: str
    action: str
    targets: int
    status: str
    evidence: dict[str, Any] = field(default_factory=dict)
    at: str | None = None
    attempt: int = 1
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class RequestReport(_Model):
    """A forget (or redaction) request: where it stands, its targets and receipts."""

    request_id: str
    namespace: str
    status: str
    scope: dict[str, Any] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    cascaded: list[str] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    mentions: list[str] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    failed_stores: list[str] = field(default_factory=list)
    residue_checked: bool = False
    residue_scan: str = ""
    basis: str = "user_request"
    held_by: list[str] = field(default_factory=list)
    message: str = ""
    status_url: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"receipts": [Receipt.from_dict(r) for r in data.get("receipts", [])]}

    @property
    def completed(self) -> bool:
        return self.status == "completed"


@dataclass(frozen=True)
class RequestSummary(_Model):
    """A forget request as listed: its id, namespace, status, scope and item count."""

    request_id: str
    namespace: str
    status: str
    scope: dict[str, Any] = field(default_factory=dict)
    items: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class RequestPage(_Model):
    requests: list[RequestSummary]
    next_cursor: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"requests": [RequestSummary.from_dict(r) for r in data["requests"]]}


@dataclass(frozen=True)
class ForgetPlan(_Model):
    """A forget request in words, planned: nothing is erased until it is executed.
    `labels`, `question`, `message` and `candidates[].label` repeat the user's data:
    for the user's eyes only."""

    plan_id: str
    status: str
    intent: str | None = None
    language: str = ""
    scope: dict[str, Any] | None = None
    targets: list[str] = field(default_factory=list)
    cascaded: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    keeps: list[str] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    stores: list[str] = field(default_factory=list)
    question: str | None = None
    message: str = ""
    expires_at: str | None = None
    state: str = ""
    request_id: str | None = None
    #: A plan of information (in words, or from values: forget_information): each piece
    #: with its places, what it keeps, and what the model protocol noted.
    pieces: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""
    #: What it would touch, in counts: places, items, namespace_items, share, scope.
    blast: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class FoundValue(_Model):
    """One value find_information looked for: `status` found | not_found | too_short,
    how many places say it (`count`), and the first of them (`places`: item_id, kind,
    written_at, said_as, action erase | redact, snippet). The user's data."""

    value: str
    status: str
    count: int
    places: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class FoundInformation(_Model):
    """What find_information answered: each value's places, and the memories nearest
    a description (item_id, kind, written_at, score, snippet)."""

    values: list[FoundValue]
    nearest: list[dict[str, Any]] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _nested(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"values": [FoundValue.from_dict(v) for v in data["values"]]}


@dataclass(frozen=True)
class PlanOutcome(_Model):
    """What executing a plan did, from its request's status: ids and counts only."""

    plan_id: str
    status: str
    intent: str | None = None
    request_id: str | None = None
    message: str = ""
    targets: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    request_ids: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class Notice(_Model):
    """One change-feed event. `cursor` is the SSE id: pass it as `after` to resume.
    Notices carry ids, kinds and codes, never content."""

    cursor: str
    type: str
    event_id: str | None = None
    at: str | None = None
    namespace: str | None = None
    item_id: str | None = None
    kind: str | None = None
    origin: str | None = None
    writer: str | None = None
    request_id: str | None = None
    reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
