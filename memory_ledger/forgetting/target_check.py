"""Confirm a resolved target set against the event log before any key is destroyed.

Scopes are resolved from projections (the catalog, the facts table) because they are
indexed and fast; but projections are rebuildable caches, and a damaged or tampered row
must not steer an irreversible erasure into another user's data. So every item a request
would touch (targets, what cascades from them, items whose history is shredded and items
whose mentions are redacted) is read back from the log, the source of truth, and must
belong to the request's namespace; targets must also have the attributes that selected
them (subject and predicate, category, sensitivity, a version's source or time), and a
cascaded item must really derive from a target or carry its words. Any mismatch refuses
the whole request: nothing is destroyed, the ledger records the refusal with the ids,
and the operator is told to rebuild the projections.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.utils import get_topic
from sqlalchemy import Connection, select

from memory_ledger.domain import MemoryItem
from memory_ledger.event_log import ERASED_TOPIC, EventLog
from memory_ledger.forgetting.scope import ForgetScope
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.events import decode_clear
from memory_ledger.times import canonical_time

SOURCE_FIELDS = ("session_id", "turn_id", "tool_call_id")
#: What a scope selects by, as the catalog holds it and the Recorded event says it.
CLEAR_ATTRIBUTES = ("namespace", "kind", "subject", "predicate", "category", "sensitivity")
RECORDED_TOPIC = get_topic(MemoryItem.Recorded)  # type: ignore[attr-defined]
PAGE = 5000


@dataclass(frozen=True)
class Mismatch:
    """One item the projections named that the log does not confirm. Ids and codes."""

    item_id: str
    reason: str  # not_in_log | other_namespace | not_selected | not_derived


def confirm_targets(
    log: EventLog,
    namespace: str,
    scope: ForgetScope,
    *,
    targets: Iterable[str],
    cascaded: Iterable[str] = (),
    history: Iterable[str] = (),
    mentions: Iterable[str] = (),
    loaded: dict[str, MemoryItem] | None = None,
) -> list[Mismatch]:
    """Every mismatch between what resolution chose and what the log says. `loaded`:
    items the request already read from the log (they are not read twice)."""
    problems: list[Mismatch] = []
    items: dict[str, MemoryItem] = {} if loaded is None else loaded
    roles = {"target": list(targets), "cascaded": list(cascaded)}
    roles |= {"history": list(history), "mention": list(mentions)}
    unread = [UUID(i) for ids in roles.values() for i in ids if i not in items]
    items.update((str(k), v) for k, v in log.get_many(unread).items())  # a query per 500
    versions = _Versions(log)
    if scope.kind in ("time_range", "source"):  # selected by their versions' provenance
        versions.prefetch(items[i] for r in ("target", "history") for i in roles[r] if i in items)
    for role, ids in roles.items():
        for item_id in ids:
            item = items.get(item_id)
            if item is None:
                problems.append(Mismatch(item_id, "not_in_log"))
                continue
            if not _in_namespace(item.namespace, namespace, scope):
                problems.append(Mismatch(item_id, "other_namespace"))
            elif role in ("target", "history") and not _selected(versions, item, scope, role):
                problems.append(Mismatch(item_id, "not_selected"))
    cascaded_items = [items[i] for i in roles["cascaded"] if i in items]
    if cascaded_items:
        sources = set(roles["target"]) | set(roles["cascaded"])
        spoken = _turns_spoken(versions, [items[i] for i in roles["target"] if i in items])
        for item in cascaded_items:
            if not _cascades(item, sources, spoken):
                problems.append(Mismatch(str(item.id), "not_derived"))
    return problems


def _in_namespace(item_namespace: str, namespace: str, scope: ForgetScope) -> bool:
    if item_namespace == namespace:
        return True  # a user's whole-namespace deletion covers their projects too
    return scope.kind == "namespace" and item_namespace.startswith(namespace + "/")


class _Versions:
    """Each item's version provenance, read from the log for many items at once, the
    first time any of them is asked for (most scopes never need it)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._known: dict[UUID, list[dict[str, Any]]] = {}

    def prefetch(self, items: Iterable[MemoryItem]) -> None:
        wanted = [i.id for i in items if i.id not in self._known]
        for item_id, events in self.log.events_of_many(wanted).items():
            self._known[item_id] = [
                e.provenance for e in events if type(e).__name__ in ("Recorded", "Superseded")
            ]

    def of(self, item: MemoryItem) -> list[dict[str, Any]]:
        if item.id not in self._known:
            self.prefetch([item])
        return self._known.get(item.id, [])


def _selected(versions: _Versions, item: MemoryItem, scope: ForgetScope, role: str) -> bool:
    """Does the log give the item the attributes its scope selected it by?"""
    if scope.kind in ("item", "namespace"):
        return True  # named by id (checked at submit), or everything in the namespace
    if scope.kind == "predicate":
        return item.subject == scope.subject and item.predicate == scope.predicate
    if scope.kind == "category":
        return bool(item.category == scope.category)
    if scope.kind == "sensitivity":
        return bool(item.sensitivity == scope.sensitivity)
    hits = [_version_matches(p, scope) for p in versions.of(item)]
    if not hits:
        return False
    # A target's current version matches; a history item keeps its current version and
    # loses earlier ones that match.
    return hits[-1] if role == "target" else any(hits[:-1])


def _version_matches(provenance: dict[str, Any], scope: ForgetScope) -> bool:
    if scope.kind == "time_range":
        at = provenance["written_at"]
        since = canonical_time(scope.since) if scope.since else None
        until = canonical_time(scope.until) if scope.until else None
        return (since is None or at >= since) and (until is None or at < until)
    return all(
        getattr(scope, name) is None or provenance.get(name) == getattr(scope, name)
        for name in SOURCE_FIELDS
    )


def _turns_spoken(versions: _Versions, items: list[MemoryItem]) -> set[tuple[str, str]]:
    """The (session, turn) every version of these items was taken from."""
    versions.prefetch(items)
    return {
        (p["session_id"], p["turn_id"])
        for item in items
        for p in versions.of(item)
        if p.get("session_id") and p.get("turn_id")
    }


def _cascades(item: MemoryItem, sources: set[str], spoken: set[tuple[str, str]]) -> bool:
    """Derived (transitively) from a target, or a transcript turn a target came from
    (`spoken`: only targets' own sources, as resolution's carrier turns are)."""
    if any(ref["item_id"] in sources for ref in item.derived_from):
        return True
    turn = (item.provenance.get("session_id"), item.provenance.get("turn_id"))
    return item.kind == "turn" and turn in spoken


_NOT_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


def _folded(text: str) -> str:
    return _NOT_ALNUM.sub("_", text.casefold()).strip("_")


def identifiers_repeating(items: Iterable[MemoryItem], texts: Iterable[str]) -> int:
    """How many of the items carry a forgotten value inside one of their identifiers.

    Identifiers (subject, predicate, category, session, turn and tool-call ids, consent
    refs) stay in clear after erasure by design: they are how a request finds its
    targets. A client that builds them from content (`..._deleted_harbor_steps_line`)
    leaves that content behind, and no key destruction can remove it; the receipt says so."""
    values = {f for f in map(_folded, set(texts)) if len(f) >= 4}
    if not values:
        return 0
    # Matched on whole words of the folded forms (`harbor_steps_line` holds "Harbor
    # steps line"), through an index of the names' words: a request of thousands of
    # items does not compare every value with every name.
    by_word: dict[str, set[tuple[str, str]]] = {}
    for item in items:
        item_id = str(item.id)
        for name in map(_folded, _identifiers(item)):
            for word in set(name.split("_")):
                by_word.setdefault(word, set()).add((item_id, name))
    hits: set[str] = set()
    for value in values:
        # Only names holding the value's rarest word can hold the value: a common first
        # word (`note` of `note_12`) would compare it with nearly every name.
        words = value.split("_")
        rarest = min(words, key=lambda w: len(by_word.get(w, ())))
        hits.update(
            item_id for item_id, name in by_word.get(rarest, ()) if f"_{value}_" in f"_{name}_"
        )
    return len(hits)


def _identifiers(item: MemoryItem) -> list[str]:
    ids = [item.provenance.get(k) or "" for k in (*SOURCE_FIELDS, "consent_ref")]
    return [item.subject, item.predicate, item.category, *ids]


def catalog_disagreements(log: EventLog, conn: Connection) -> tuple[list[str], list[str]]:
    """The whole catalog against the log, for `doctor`: (items whose catalog row names
    another namespace, kind, subject, predicate, category or sensitivity than their
    Recorded event, or that the log does not hold; live items the catalog lacks, which a
    scope could never reach). One pass over the log's Recorded and Erased events."""
    recorded: dict[str, tuple[Any, ...]] = {}
    erased: set[str] = set()
    after = 0
    while True:
        page = log.recorder.select_notifications(
            start=after + 1, limit=PAGE, topics=[RECORDED_TOPIC, ERASED_TOPIC]
        )
        if not page:
            break
        after = page[-1].id
        for event in decode_clear(log, page):
            if event.name == "Erased":
                erased.add(event.item_id)
            else:
                recorded[event.item_id] = tuple(event.attrs[a] for a in CLEAR_ATTRIBUTES)
    columns = [catalog.c.item_id, *(catalog.c[a] for a in CLEAR_ATTRIBUTES)]
    rows = {str(r[0]): tuple(r[1:]) for r in conn.execute(select(*columns))}
    wrong = sorted(i for i, attrs in rows.items() if recorded.get(i) != attrs)
    missing = sorted(i for i in recorded.keys() - rows.keys() if i not in erased)
    return wrong, missing
