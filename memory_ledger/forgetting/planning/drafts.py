"""A plan before it is stored, and the words for where it stands: a leaf module.

Both planners (planner.py for requests about items, information.py for requests that
name information), the size check (blast.py) and the flow (flow.py) make and read
drafts; keeping `Draft` here, importing nothing of the planning package, is what lets
them depend on it without depending on each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: What a part's (or a piece's) planning makes of it (`parts[].status`, `pieces[].status`).
RESOLVED, AMBIGUOUS, NOT_FOUND = "resolved", "ambiguous", "not_found"


@dataclass
class Blast:
    """What a plan would touch: counts only (safe to log and store in clear)."""

    #: Places: each (piece, item) a plan of information names, or each item a plan of
    #: items erases or changes (targets and their old versions).
    places: int
    #: Distinct items changed: erased, cascaded, redacted, suppressed or rewritten.
    items: int
    #: The namespace's items when the plan was made.
    namespace_items: int
    #: `items` / `namespace_items`.
    share: float
    #: The scope's kind when it is not a list of items (namespace, category, ...).
    scope: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Draft:
    """A plan before it is stored: ids, scope, labels; nothing written anywhere yet."""

    #: planned | partial_match (some parts of the request only) | needs_clarification |
    #: not_a_request | nothing_matched
    status: str
    intent: str | None = None
    conclusion: bool = False
    scope: dict[str, Any] | None = None  # what execution resolves again (a ForgetScope)
    targets: list[str] = field(default_factory=list)
    cascaded: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    keeps: list[str] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    spans: list[str] = field(default_factory=list)
    new_value: str | None = None
    question: str | None = None
    reason: str = ""  # a code: why it matched nothing, why it is not a request
    #: A request of several parts: each part's words (`said`), `status` (resolved,
    #: ambiguous, not_found), `item_ids` (its targets, or the candidates to choose
    #: from) and, when not found, `reason` (a code).
    parts: list[dict[str, Any]] = field(default_factory=list)
    #: A request that names information (information.py): each piece with its places
    #: (`item_id`, `kind`, `action` erase|redact, `spans`: a count), and what it keeps.
    pieces: list[dict[str, Any]] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)
    #: The spans to redact, per item (items that are not erased): the user's data.
    spans_by_item: dict[str, list[str]] = field(default_factory=dict)
    #: Planned by the information it names (information.py), not by items.
    information: bool = False
    #: What it touches (blast.py): set on every plan made from words before it is stored.
    blast: Blast | None = None
