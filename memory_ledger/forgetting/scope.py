"""What a forget request covers, and how it turns into an explicit set of items.

Resolution happens before anything is destroyed, from clear attributes only (the
catalog projection), and it never widens a scope silently: "my previous address" with
two previous addresses is answered with `needs_clarification` and the candidates.
Items derived from a target (an inference, a consolidation) and the transcript turns a
target was taken from are added as `cascaded`: they carry the same content.

One scope needs content to resolve: a predicate scope with a `value` ("forget that I
visited Bergen", one member of a set). Its value is compared with the items' values
decrypted from the event log (never a projection), in memory only; it is never
recorded: the ledger, the report and the logs learn only that a value filter was used.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, model_validator
from sqlalchemy import Connection, select, text

from memory_ledger.event_log import ERASED
from memory_ledger.identifiers import ItemId
from memory_ledger.projections.catalog import DERIVED, catalog
from memory_ledger.projections.facts import facts
from memory_ledger.projections.id_sets import among, unindexed
from memory_ledger.write_policy import (
    MAX_VALUE_BYTES,
    AwareDatetime,
    Identifier,
    Sensitivity,
    StrictModel,
    canonical_time,
    parse_input,
)

if TYPE_CHECKING:
    from memory_ledger.event_log import EventLog

#: Items one request may name: a whole user is a namespace scope, not a list of ids.
MAX_SCOPE_ITEMS = 10_000

ScopeKind = Literal[
    "item", "predicate", "source", "category", "sensitivity", "time_range", "namespace"
]


class ForgetScope(StrictModel):
    """One explicit scope. Exactly the parameters of its kind must be given."""

    kind: ScopeKind
    item_ids: Annotated[tuple[ItemId, ...], Field(max_length=MAX_SCOPE_ITEMS)] = ()
    subject: Identifier | None = None
    predicate: Identifier | None = None
    which: Literal["all", "current", "previous"] = "all"
    turn_id: Identifier | None = None
    session_id: Identifier | None = None
    tool_call_id: Identifier | None = None
    category: Identifier | None = None
    sensitivity: Sensitivity | None = None
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None
    #: Predicate scopes only: the one item whose value this is. Content: kept out of
    #: repr, and never recorded (`ledger_parameters` says only `value_filter: true`).
    value: Annotated[str | None, Field(repr=False)] = None

    @model_validator(mode="after")
    def _parameters_match_kind(self) -> ForgetScope:
        needs: dict[str, tuple[str, ...]] = {
            "item": ("item_ids",),
            "predicate": ("subject", "predicate"),
            "category": ("category",),
            "sensitivity": ("sensitivity",),
        }
        for name in needs.get(self.kind, ()):
            if not getattr(self, name):
                raise ValueError(f"a scope of kind {self.kind} needs {name}")
        if self.kind == "source" and not (self.turn_id or self.session_id or self.tool_call_id):
            raise ValueError("a source scope needs turn_id, session_id or tool_call_id")
        if self.kind == "time_range":
            if not (self.since or self.until):
                raise ValueError("a time_range scope needs since and/or until")
            if self.since and self.until and self.since >= self.until:
                raise ValueError("time_range: since must be before until")
        if self.which != "all" and self.kind != "predicate":
            raise ValueError("'which' applies to predicate scopes only")
        if self.value is not None:
            if self.kind != "predicate":
                raise ValueError("'value' applies to predicate scopes only")
            if self.which != "all":
                raise ValueError("'value' and 'which' cannot be combined: the value names the item")
            if not self.value.strip():
                raise ValueError("value must not be empty")
            size = len(self.value.encode("utf-8"))
            if size > MAX_VALUE_BYTES:
                raise ValueError(f"value is {size} bytes; the limit is {MAX_VALUE_BYTES} bytes")
        return self

    def ledger_parameters(self) -> dict[str, Any]:
        """The scope as the ledger records it: identifiers and timestamps only."""
        out: dict[str, Any] = {"kind": self.kind}
        for name in (
            "subject",
            "predicate",
            "turn_id",
            "session_id",
            "tool_call_id",
            "category",
            "sensitivity",
        ):
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.kind == "predicate":
            out["which"] = self.which
        if self.value is not None:
            out["value_filter"] = True  # that one was used; never the value
        if self.item_ids:
            out["item_ids"] = [str(i) for i in self.item_ids]
        for name in ("since", "until"):
            if getattr(self, name):
                out[name] = canonical_time(getattr(self, name))
        return out


def parse_scope(data: ForgetScope | dict[str, Any]) -> ForgetScope:
    return parse_input(ForgetScope, data, "forget scope", "nothing was erased")


@dataclass(frozen=True)
class Candidate:
    """One of several items a vague scope could mean. Ids and times only."""

    item_id: str
    valid_from: str
    valid_to: str | None


@dataclass(frozen=True)
class Resolution:
    status: str  # resolved | needs_clarification | nothing_matched
    targets: list[str] = field(default_factory=list)
    cascaded: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    #: Items that stay, whose earlier versions (changed in place) are to be shredded.
    history: list[str] = field(default_factory=list)


def resolve(
    conn: Connection, namespace: str, scope: ForgetScope, log: EventLog | None = None
) -> Resolution:
    """The explicit target set for a scope within one namespace. `log` is needed by a
    scope with a value, which is compared with the items' values read from the log."""
    if scope.value is not None:
        if log is None:
            raise ValueError("a scope with a value is resolved against the event log")
        found = _with_value(conn, log, namespace, scope)
        if found.status != "resolved":
            return found
        targets, history = found.targets, []
    elif scope.kind == "predicate" and scope.which != "all":
        found = _versions_of(conn, namespace, scope)
        if found.status != "resolved" or not found.targets:
            return found
        targets, history = found.targets, found.history
    elif scope.kind in ("source", "time_range"):
        targets, history = _matching_versions(conn, namespace, scope)
        if not targets and history:
            return Resolution("resolved", history=history)
    else:
        targets, history = _matching_items(conn, namespace, scope), []
    if not targets:
        return Resolution("nothing_matched")
    affected = derived_from(conn, namespace, targets)
    affected += [t for t in carrier_turns(conn, namespace, targets) if t not in affected]
    return Resolution("resolved", targets, sorted(affected), history=history)


def _matching_items(conn: Connection, namespace: str, scope: ForgetScope) -> list[str]:
    c = catalog.c
    if scope.kind == "namespace":  # a user's deletion covers their project namespaces too
        query = select(c.item_id).where(
            (c.namespace == namespace) | c.namespace.startswith(namespace + "/")
        )
    elif scope.kind == "item":  # the ids lead: the namespace only confirms
        query = select(c.item_id).where(
            unindexed(c.namespace) == namespace,
            among(c.item_id, [str(i) for i in scope.item_ids]),
        )
    else:
        query = select(c.item_id).where(c.namespace == namespace)
    if scope.kind == "predicate":
        query = query.where(c.subject == scope.subject, c.predicate == scope.predicate)
    elif scope.kind == "source":
        for name in ("turn_id", "session_id", "tool_call_id"):
            if getattr(scope, name):
                query = query.where(c[name] == getattr(scope, name))
    elif scope.kind == "category":
        query = query.where(c.category == scope.category)
    elif scope.kind == "sensitivity":
        query = query.where(c.sensitivity == scope.sensitivity)
    elif scope.kind == "time_range":
        if scope.since:
            query = query.where(c.written_at >= canonical_time(scope.since))
        if scope.until:
            query = query.where(c.written_at < canonical_time(scope.until))
    return sorted(conn.execute(query.order_by(c.item_id)).scalars())


def _matching_versions(
    conn: Connection, namespace: str, scope: ForgetScope
) -> tuple[list[str], list[str]]:
    """Source and time scopes match versions, not items. An item whose current version
    matches is erased; one where only earlier versions match keeps its current value and
    has its history shredded."""
    c = catalog.c
    since = canonical_time(scope.since) if scope.since else None
    until = canonical_time(scope.until) if scope.until else None

    def matches(session: str | None, turn: str | None, tool: str | None, at: str) -> bool:
        if scope.kind == "time_range":
            return (since is None or at >= since) and (until is None or at < until)
        wanted = {"session_id": session, "turn_id": turn, "tool_call_id": tool}
        return all(getattr(scope, k) is None or getattr(scope, k) == v for k, v in wanted.items())

    targets, history = [], []
    rows = conn.execute(select(c.item_id, c.versions).where(c.namespace == namespace))
    for item_id, raw in rows:
        hits = [matches(*v) for v in json.loads(raw)]
        if hits[-1]:
            targets.append(item_id)
        elif any(hits):
            history.append(item_id)
    return sorted(targets), sorted(history)


def normalized(text: str) -> str:
    """How a value filter is compared: Unicode NFC, case folded, runs of white space as
    one space, no leading or trailing space."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())
    return " ".join(folded.split())


def _with_value(conn: Connection, log: EventLog, namespace: str, scope: ForgetScope) -> Resolution:
    """The item of the subject and predicate whose current value is the scope's value.
    Every item that is not erased is compared (current, in conflict or superseded,
    suppressed or not), on its value read from the log. Two or more matches are asked
    about, by id and validity, rather than all erased."""
    assert scope.value is not None
    c = catalog.c
    rows = conn.execute(
        select(c.item_id, c.valid_from).where(
            c.namespace == namespace,
            c.subject == scope.subject,
            c.predicate == scope.predicate,
            c.kind.in_(("fact", "preference")),
        )
    ).all()
    wanted = normalized(scope.value)
    keys = log.keys_for([r.item_id for r in rows])
    matched = []
    for row in rows:
        item = log.get(UUID(row.item_id))
        if item.erased or item.namespace != namespace:
            continue
        fields = log.open_fields(keys, row.item_id, item.key_generation, item.sealed)
        if fields is ERASED:
            continue
        value = fields.get("value")  # type: ignore[union-attr]
        if value is not None and normalized(value) == wanted:
            matched.append(row)
    if not matched:
        return Resolution("nothing_matched")
    if len(matched) == 1:
        return Resolution("resolved", [matched[0].item_id])
    ends = _valid_to(conn, [r.item_id for r in matched])
    candidates = [
        Candidate(r.item_id, r.valid_from, ends.get(r.item_id))
        for r in sorted(matched, key=lambda r: (r.valid_from, r.item_id))
    ]
    return Resolution("needs_clarification", candidates=candidates)


def _valid_to(conn: Connection, item_ids: list[str]) -> dict[str, str | None]:
    """Each fact's end of validity, from its newest version (preferences have none)."""
    f = facts.c
    rows = conn.execute(
        select(f.item_id, f.version, f.valid_to).where(among(f.item_id, item_ids))
    ).all()
    newest: dict[str, tuple[int, str | None]] = {}
    for item_id, version, valid_to in rows:
        if item_id not in newest or version > newest[item_id][0]:
            newest[item_id] = (version, valid_to)
    return {item_id: valid_to for item_id, (_, valid_to) in newest.items()}


def _versions_of(conn: Connection, namespace: str, scope: ForgetScope) -> Resolution:
    """`current` is the live value; `previous` is a value no longer current: a whole item
    another fact superseded, or an earlier version of an item changed in place. Two or
    more previous values is ambiguous, and we ask rather than erase them all."""
    f = facts.c
    rows = conn.execute(
        select(f.item_id, f.version, f.status, f.valid_from, f.valid_to).where(
            f.namespace == namespace, f.subject == scope.subject, f.predicate == scope.predicate
        )
    ).all()
    latest: dict[str, Any] = {}
    for row in rows:  # an item's standing is its newest version's
        if row.item_id not in latest or row.version > latest[row.item_id].version:
            latest[row.item_id] = row
    live = ("current", "conflict")
    if scope.which == "current":
        chosen = sorted(
            (r for r in latest.values() if r.status in live), key=lambda r: r.valid_from
        )
        found = [r.item_id for r in chosen]
        return Resolution("resolved" if found else "nothing_matched", found)
    whole = [r for r in latest.values() if r.status not in live]
    inside = [
        r
        for r in rows
        if r.status == "superseded"
        and latest[r.item_id].status in live
        and r.version < latest[r.item_id].version
    ]
    candidates = sorted(whole + inside, key=lambda r: r.valid_from)
    if len(candidates) > 1:
        return Resolution(
            "needs_clarification",
            candidates=[Candidate(r.item_id, r.valid_from, r.valid_to) for r in candidates],
        )
    if not candidates:
        return Resolution("nothing_matched")
    if whole:
        return Resolution("resolved", [whole[0].item_id])
    return Resolution("resolved", history=[inside[0].item_id])


def carrier_turns(conn: Connection, namespace: str, targets: list[str]) -> list[str]:
    """Transcript turns a target was taken from: they carry the same words. A turn is
    identified by its session and turn id together, since turn ids may repeat per session."""
    c = catalog.c
    sources = set(
        conn.execute(
            select(c.session_id, c.turn_id).where(among(c.item_id, targets), c.turn_id.is_not(None))
        ).all()
    )
    if not sources:
        return []
    query = select(c.item_id, c.session_id, c.turn_id).where(
        c.namespace == namespace,
        c.kind == "turn",
        among(c.turn_id, sorted({t for _, t in sources})),
    )
    found = {i for i, session, turn in conn.execute(query) if (session, turn) in sources}
    return sorted(found - set(targets))


def erased_with(conn: Connection, namespace: str, targets: list[str]) -> list[str]:
    """Everything a request erases besides its targets, as execution will find it: the
    turns they were taken from, and what was derived from either (a plan shows this)."""
    turns = carrier_turns(conn, namespace, targets)
    derived = derived_from(conn, namespace, sorted(set(targets) | set(turns)))
    return sorted((set(turns) | set(derived)) - set(targets))


def derived_from(conn: Connection, namespace: str, targets: list[str]) -> list[str]:
    """Items whose inputs include a target, transitively: they may embed its content."""
    c = catalog.c
    rows = conn.execute(
        select(c.item_id, c.derived_from).where(c.namespace == namespace, text(DERIVED))
    ).all()
    inputs = {item_id: set(json.loads(raw)) for item_id, raw in rows}
    reached, frontier = set(targets), set(targets)
    while frontier:
        frontier = {i for i, sources in inputs.items() if sources & frontier} - reached
        reached |= frontier
    return sorted(reached - set(targets))
