"""The model protocol: the store locates, the model reads.

Most agents that call the forget tools are driven by a language model that understands
the user better than any offline reader of words. This module gives such a model two
calls, over the principal's own namespace only:

- `find_information(values=..., description=...)`: every place each literal value is
  said, in every form the mention lookup already knows (case, hyphens and spaces,
  phone and number groupings, amounts with their currency written three ways), grouped
  by value, with counts and a short snippet per place; a description without a value
  returns the items nearest in meaning, for the model to read and pick a value or a
  place from. Nothing is planned, nothing is changed.
- `forget_information(values, chosen, keeps, reason)`: a normal `ForgetPlan` (the same
  plan store, `choose`/`execute` path and receipts as a request in words: one request
  path for every erasure) over every place each value is said. The value's spans are
  redacted where it is said; a fact or preference whose whole value is the value is
  erased. Keeps are looked up too, shown in the plan, and never cut: a span that holds
  a keep string is left, an item that holds one is never erased whole. A description
  without a value names a place the model chose from `find_information` (an item id):
  that item is erased, unless it holds a keep.

The lookups are the information planner's (information.py), not a second matcher: the
values become literal pieces and go through `InformationPlanner.resolve` (which also
finds a value said apart across two consecutive turns), and the plan is its `draft`.
What the protocol itself decided (a value said nowhere, a chosen item that is not the
principal's) is the plan's `note`, in the plan's language (located.toml).
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from memory_ledger.errors import InvalidWrite
from memory_ledger.forgetting.planning.drafts import NOT_FOUND, RESOLVED, Draft
from memory_ledger.forgetting.planning.information import (
    VALUE_KINDS,
    Found,
    InformationPlanner,
    Thing,
    is_whole_value,
    value_identity,
    value_shape,
)
from memory_ledger.forgetting.planning.pieces import EMAIL, Piece
from memory_ledger.forgetting.planning.reading import Reading
from memory_ledger.forgetting.redaction import span_pattern
from memory_ledger.identifiers import is_identifier
from memory_ledger.residue import MIN_NEEDLE_BYTES

if TYPE_CHECKING:
    from memory_ledger.forgetting.planning.information import PlanItems
    from memory_ledger.forgetting.planning.request import PlanningRequest

# -- bounds ---------------------------------------------------------------------------
# A model may pass anything: these keep one call's work and answer small whatever it
# passes (they are the information reader's own bounds where one exists).
#: Values (and, separately, keeps) one call may name: a request in words names at most
#: 12 pieces (pieces.MAX_PIECES), and a model passes each in the few wordings the user
#: and the memory use ("Harriet Vell", "Ms. Vell"; a phone number in three formats).
MAX_VALUES = 32
#: Places chosen for descriptions, per call: as many as a request has pieces.
MAX_CHOSEN = 12
#: A value's length: longer is a passage, not a value (pieces.MAX_PIECE_CHARS).
MAX_VALUE_CHARS = 200
#: A description's length (for find): a sentence or two.
MAX_DESCRIPTION_CHARS = 500
#: A reason's length: it is shown back to the user in the plan's sealed message.
MAX_REASON_CHARS = 500
#: Places returned per value by find (the count says how many there are in all).
MAX_PLACES_SHOWN = 50
#: Items returned for a description (nearest by meaning).
MAX_NEAREST = 12
#: Characters of text shown each side of a span in a snippet.
SNIPPET_SIDE = 40
#: A value shorter than the mention index can look up (MIN_NEEDLE_BYTES: "Art", "702",
#: "86k") is searched in every text of the namespace, with the same matcher: the model
#: named it, so it is looked for, but each costs a pass over the namespace's cells, so
#: a call may name only this many, and none shorter than MIN_SHORT_CHARS.
MAX_SHORT_VALUES = 3
MIN_SHORT_CHARS = 2

_CJK = re.compile(r"[\u3400-\u9fff]")


@functools.cache
def notes() -> dict[str, str]:
    """The notes' templates (located.toml), by `<language>_<code>`."""
    text = resources.files(__package__).joinpath("located.toml").read_text(encoding="utf-8")
    return dict(tomllib.loads(text)["notes"])


@dataclass
class Chosen:
    """A thing the model describes without a value, and the place it chose for it."""

    description: str
    item_id: str


@dataclass
class Located:
    """What the model asked to forget, checked: values, chosen places, keeps, reason."""

    values: list[str] = field(default_factory=list)
    chosen: list[Chosen] = field(default_factory=list)
    keeps: list[str] = field(default_factory=list)
    reason: str = ""

    @property
    def language(self) -> str:
        said = [*self.values, *self.keeps, *(c.description for c in self.chosen)]
        return "zh" if any(_CJK.search(s) for s in said) else "en"


# -- checking what a caller passes ----------------------------------------------------


def _text(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidWrite(f"{name} must be text, not {type(value).__name__}", [f"{name}: type"])
    if "\x00" in value:
        raise InvalidWrite(f"{name} must not contain NUL", [f"{name}: NUL"])
    if not value.strip():
        raise InvalidWrite(f"{name} must not be empty", [f"{name}: empty"])
    if len(value) > limit:
        raise InvalidWrite(f"{name} is at most {limit} characters", [f"{name}: too long"])
    return value.strip()


def _texts(values: object, name: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidWrite(f"{name} must be a list of strings", [f"{name}: not a list"])
    if len(values) > MAX_VALUES:
        raise InvalidWrite(f"{name}: at most {MAX_VALUES} per call", [f"{name}: too many"])
    out = [_text(v, f"{name}[{n}]", MAX_VALUE_CHARS) for n, v in enumerate(values)]
    return list(dict.fromkeys(out))


def check_find(values: object, description: object) -> tuple[list[str], str]:
    """find's arguments: some values, or a description, or both."""
    checked = _texts(values, "values")
    said = "" if description is None else _text(description, "description", MAX_DESCRIPTION_CHARS)
    if not checked and not said:
        raise InvalidWrite("find_information needs values or a description", ["values: empty"])
    return checked, said


def check_forget(values: object, chosen: object, keeps: object, reason: object) -> Located:
    """forget's arguments: values and/or chosen places, keeps, an optional reason."""
    located = Located(_texts(values, "values"), [], _texts(keeps, "keeps"))
    if chosen is not None:
        if isinstance(chosen, str) or not isinstance(chosen, Sequence):
            raise InvalidWrite("chosen must be a list of {description, item_id}", ["chosen: type"])
        if len(chosen) > MAX_CHOSEN:
            raise InvalidWrite(f"chosen: at most {MAX_CHOSEN} per call", ["chosen: too many"])
        for n, entry in enumerate(chosen):
            if isinstance(entry, Chosen):
                entry = {"description": entry.description, "item_id": entry.item_id}
            if not isinstance(entry, dict) or set(entry) != {"description", "item_id"}:
                raise InvalidWrite(
                    "each chosen place is {description, item_id}", [f"chosen[{n}]: shape"]
                )
            item_id = entry["item_id"]
            if not isinstance(item_id, str) or not is_identifier(item_id):
                raise InvalidWrite("a chosen place is an item id", [f"chosen[{n}].item_id"])
            said = _text(entry["description"], f"chosen[{n}].description", MAX_VALUE_CHARS)
            located.chosen.append(Chosen(said, item_id))
    if not located.values and not located.chosen:
        raise InvalidWrite(
            "forget_information needs values, or descriptions with a chosen place",
            ["values: empty"],
        )
    overlap = [v for v in located.values if v.lower() in {k.lower() for k in located.keeps}]
    if overlap:
        raise InvalidWrite("a value cannot be forgotten and kept at once", ["keeps: overlap"])
    if reason is not None:
        located.reason = _text(reason, "reason", MAX_REASON_CHARS)
    return located


# -- the lookups ----------------------------------------------------------------------


def piece_of(value: str) -> Piece:
    """A given value as a literal piece of the shape it has, so the lookup derives the
    written forms of that shape ("415-555-0199" is a phone number, "3,400 EUR" an
    amount, "relay-14" a code, anything else a quoted text: hyphens and spaces both)."""
    if EMAIL.fullmatch(value):
        kind = "email"
    else:
        kind = value_shape(value)
        kind = "quoted" if kind == "text" else kind
    return Piece(value, kind, said=value)


def _searchable(value: str) -> bool:
    return len(value.encode()) >= MIN_NEEDLE_BYTES


class LocatedPlanner:
    """Finds and plans given values with the information planner's lookups."""

    def __init__(self, request: PlanningRequest, plan_items: PlanItems) -> None:
        self.info = InformationPlanner(request, plan_items)
        self.pool = self.info.pool
        self.request = request

    def found(self, value: str) -> Found:
        """Every place the value is said: the information planner's lookup (with a
        value said apart across two turns), or, for a value too short for the mention
        index, the same matcher over every text of the namespace."""
        piece = piece_of(value)
        if _searchable(value):
            return self.info.resolve(piece)
        places = self.info.short_places(value)
        if not places:
            return Found(piece, NOT_FOUND, reason="value_not_found")
        thing = Thing(value_identity(piece.kind, value), piece.kind, [value], places=places)
        facts = [i for i in places if self.pool.by_id[i].kind in VALUE_KINDS]
        texts = self.pool.texts(facts)
        thing.erase = {
            i for i in facts if any(is_whole_value(texts.get(i) or "", s) for s in places[i])
        }
        return Found(piece, RESOLVED, [thing])

    def guard(self, pieces: list[Found], keeps: list[str]) -> None:
        """A keep is never cut: in each place, a value's span that overlaps a keep said
        there without holding it whole ("Bill" in "water bill", "小雨" in "明天有小雨")
        is left, since the redaction takes every occurrence of the span in the item. A
        keep the named value holds whole ("Mr. Hale" in "Mr. Hale's retirement party")
        goes with the value: the user named the value whole. An item whose whole value
        is the value is erased (its keeps are the value's own)."""
        keeping = span_pattern(keeps)
        if keeping is None:
            return
        items = sorted({i for f in pieces for t in f.things for i in t.places})
        texts = self.pool.texts(items)
        for found in pieces:
            for thing in found.things:
                for item in list(thing.places):
                    text = texts.get(item) or ""
                    kept = keeping.spans(text)
                    if not kept or item in thing.erase:
                        continue
                    spans = [s for s in thing.places[item] if not _cuts(text, s, kept)]
                    if spans:
                        thing.places[item] = spans
                    else:
                        del thing.places[item]
            if found.status == RESOLVED and not any(t.places for t in found.things):
                found.status, found.reason = NOT_FOUND, "only_in_keeps"

    # -- find ---------------------------------------------------------------------------

    def find(self, values: list[str], description: str) -> dict[str, Any]:
        groups = []
        for value in values:
            if not self._may_search(value, values):
                groups.append({"value": value, "status": "too_short", "count": 0, "places": []})
                continue
            found = self.found(value)
            places = found.places if found.status == RESOLVED else {}
            erase = found.erase if found.status == RESOLVED else set()
            groups.append(
                {
                    "value": value,
                    "status": "found" if places else "not_found",
                    "count": len(places),
                    "places": self._places(places, erase)[:MAX_PLACES_SHOWN],
                }
            )
        nearest = self._nearest(description) if description else []
        return {"values": groups, "nearest": nearest}

    def _places(self, places: dict[str, list[str]], erase: set[str]) -> list[dict[str, Any]]:
        ordered = sorted(places, key=lambda i: (self.pool.by_id[i].written_at, i))
        texts = self.pool.texts(ordered[:MAX_PLACES_SHOWN])
        out = []
        for item in ordered:
            row = self.pool.by_id[item]
            out.append(
                {
                    "item_id": item,
                    "kind": row.kind,
                    "written_at": row.written_at,
                    "said_as": places[item],
                    "action": "erase" if item in erase else "redact",
                    "snippet": snippet(texts.get(item) or "", places[item]),
                }
            )
        return out

    def _may_search(self, value: str, values: list[str]) -> bool:
        """Long enough for the lookup, or one of the few short values a call may name."""
        if _searchable(value):
            return True
        short = [v for v in values if not _searchable(v)]
        return len(value) >= MIN_SHORT_CHARS and short.index(value) < MAX_SHORT_VALUES

    def _nearest(self, description: str) -> list[dict[str, Any]]:
        """The items closest in meaning to a description: for the model to read."""
        vectors = self.request.store.vectors
        if vectors is None:
            return []
        vectors.catch_up()
        ranked = vectors.search(self.info.namespace, vectors.embed_query(description), MAX_NEAREST)
        ids = [i for i, _ in ranked]
        self.pool.extend(ids)
        texts = self.pool.texts([i for i in ids if i in self.pool.by_id])
        return [
            {
                "item_id": i,
                "kind": self.pool.by_id[i].kind,
                "written_at": self.pool.by_id[i].written_at,
                "score": round(float(score), 4),
                "snippet": snippet(texts.get(i) or "", []),
            }
            for i, score in ranked
            if i in self.pool.by_id and texts.get(i)
        ]

    # -- forget -------------------------------------------------------------------------

    def draft(self, located: Located) -> tuple[Draft, list[str]]:
        """The plan over every place of each value, and the notes on what it did."""
        language = located.language
        said: list[str] = []
        kept: list[Found] = []
        for keep in located.keeps:
            places: dict[str, list[str]] = {}
            if self._may_search(keep, located.keeps):
                found = self.found(keep)
                places = {i: [] for i in found.places} if found.status == RESOLVED else {}
            if not places:
                said.append(note(language, "keep_not_found", value=keep))
            # listed with no spans: `guard` protects them, place by place
            kept.append(
                Found(
                    Piece(keep, "quoted", said=keep), RESOLVED, [Thing("kept", "", places=places)]
                )
            )
        pieces: list[Found] = []
        for value in located.values:
            if not self._may_search(value, located.values):
                said.append(note(language, "too_short", value=value))
                pieces.append(Found(piece_of(value), NOT_FOUND, reason="value_too_short"))
                continue
            found = self.found(value)
            if found.status != RESOLVED:
                said.append(note(language, "not_found", value=value))
            pieces.append(found)
        self.guard(pieces, located.keeps)
        for chosen in located.chosen:
            pieces.append(self._chosen(chosen, located.keeps, language, said))
        reading = Reading(language=language, intent="delete")  # type: ignore[arg-type]
        draft = self.info.draft(reading, pieces, kept, 0)
        if located.reason:
            said.append(note(language, "reason", reason=located.reason))
        return draft, said

    def _chosen(self, chosen: Chosen, keeps: list[str], language: str, said: list[str]) -> Found:
        piece = Piece(chosen.description, "description", said=chosen.description)
        self.pool.extend([chosen.item_id])
        if chosen.item_id not in self.pool.by_id:
            said.append(note(language, "chosen_unknown", item=chosen.item_id))
            return Found(piece, NOT_FOUND, reason="chosen_item_unknown")
        text = self.pool.texts([chosen.item_id]).get(chosen.item_id) or ""
        keeping = span_pattern(keeps)
        if keeping is not None and keeping.search(text):
            said.append(note(language, "chosen_keeps", item=chosen.item_id))
            return Found(piece, NOT_FOUND, reason="chosen_item_holds_keep")
        thing = Thing(f"item:{chosen.item_id}", "description", places={chosen.item_id: []})
        thing.erase.add(chosen.item_id)
        return Found(piece, RESOLVED, [thing])


def _cuts(text: str, span: str, kept: list[tuple[int, int]]) -> bool:
    """Whether redacting `span` in `text` (every occurrence, as the redaction does)
    cuts into a keep said there without taking it whole."""
    pattern = span_pattern([span])
    if pattern is None:
        return False
    return any(
        a < d and c < b and not (a <= c and d <= b) for a, b in pattern.spans(text) for c, d in kept
    )


def note(language: str, code: str, **values: str) -> str:
    return notes()[f"{language}_{code}"].format(**values)


def snippet(text: str, spans: list[str]) -> str:
    """A short window of `text` around the first span (or its start), on one line."""
    flat = " ".join(text.split())
    at, length = 0, 0
    for span in spans:
        found = flat.find(" ".join(span.split()))
        if found >= 0:
            at, length = found, len(" ".join(span.split()))
            break
    start = max(0, at - SNIPPET_SIDE)
    end = min(len(flat), at + length + SNIPPET_SIDE)
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


__all__ = [
    "MAX_VALUES",
    "Chosen",
    "Located",
    "LocatedPlanner",
    "check_find",
    "check_forget",
]
