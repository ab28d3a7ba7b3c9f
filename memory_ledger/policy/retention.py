"""Retention classes, the protect list and decay: how long an item is kept, as policy.

An item's life is decided by the policy in force when it is read, not the one it was
written under (that version is recorded on the item, for audit): a new policy applies to
existing items from the moment it is installed. The decision is made in two places that
must agree, and do because both are built here from the same rules:

- `decide()`, in Python, for one item (`explain`, `show`, derivation inputs);
- `expired_clause()`, a SQL condition over the catalog's clear columns, for every read
  path and for the retention sweep (no decryption, one statement however many classes).

The rules, in order:
1. An item whose predicate or category is on the protect list is never auto-forgotten
   (not by a class's TTL, not by its own `expires_at`, not by decay). A user's erasure
   request still erases it: only a legal hold blocks that (memory_ledger/forgetting/holds.py).
2. Otherwise the first class (in file order) whose every given attribute matches decides
   the TTL, counted from when the store recorded the item (`recorded_at`: a client cannot
   backdate it, and a read never moves it); no class matching leaves `default_ttl`.
3. The item's own `expires_at`, if earlier, wins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, Protocol, TypeVar

from pydantic import BeforeValidator, Field, model_validator
from sqlalchemy import BindParameter, ColumnElement, and_, bindparam, case, false, func, or_

from memory_ledger.times import canonical_time, to_utc
from memory_ledger.write_policy import (
    AnyKind,
    Fraction,
    Identifier,
    Origin,
    RetentionBasis,
    Sensitivity,
    StrictModel,
)

NEVER = "never"
_DURATION = re.compile(r"([1-9][0-9]{0,5})([mhdw])")
_UNIT = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
_UNIT["w"] = timedelta(weeks=1)
MAX_DURATION = timedelta(days=100 * 366)  # a century: longer is "never", said plainly
MAX_CLASSES = 256
MAX_LISTED = 1024


class ItemAttributes(Protocol):
    """An item's clear attributes by name, as the policy reads them: a catalog row
    (SQLAlchemy's `RowMapping`, whose keys may also be columns, so it is no
    `Mapping[str, Any]`) or a plain dict (`attributes_of`). Only lookups are needed."""

    def __getitem__(self, key: str, /) -> Any: ...

    def get(self, key: str, /) -> Any: ...


def parse_duration(value: object) -> timedelta | None:
    """`30d`, `12h`, `90m`, `2w`, or `never` (None). Zero, negative, fractional, bare
    numbers and anything over a century are refused: a TTL of 0 would erase every item
    the moment the policy is installed, and that is never what a reviewer approved."""
    if value == NEVER:
        return None
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"a duration is text like '30d', '12h', '90m', '2w' or '{NEVER}'")
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        if re.fullmatch(r"\s*-?[0-9]+(\.[0-9]+)?[mhdw]?\s*", value):
            raise ValueError("a duration must be a positive whole number of m, h, d or w")
        raise ValueError(f"a duration is text like '30d', '12h', '90m', '2w' or '{NEVER}'")
    length = int(match.group(1)) * _UNIT[match.group(2)]
    if length > MAX_DURATION:
        raise ValueError(f"a duration is at most 100 years; use '{NEVER}' for no limit")
    return length


def _duration(value: object) -> object:
    parse_duration(value)  # raises the clear message
    return value


Duration = Annotated[str, BeforeValidator(_duration)]


def _listed(value: object) -> object:
    """One value or a list of them, as the file prefers to write it."""
    return [value] if isinstance(value, str) else value


_Item = TypeVar("_Item")

#: An attribute a class selects on: one value or a list of them, or absent (matches any).
#: A generic alias, so each field names the type of its values (`Selector[Origin]`).
Selector = Annotated[
    tuple[_Item, ...] | None,
    BeforeValidator(_listed),
    Field(min_length=1, max_length=MAX_LISTED),
]


class RetentionClass(StrictModel):
    """Items matching every attribute given here live for `ttl` after they are recorded."""

    name: Identifier
    kind: Selector[AnyKind] = None
    category: Selector[Identifier] = None
    predicate: Selector[Identifier] = None
    sensitivity: Selector[Sensitivity] = None
    basis: Selector[RetentionBasis] = None
    origin: Selector[Origin] = None
    ttl: Duration
    #: What the TTL counts from: when the store recorded the item, or (memory files
    #: only) when an agent last read it, so a file in use lives on.
    since: Literal["recorded", "last_read"] = "recorded"

    @model_validator(mode="after")
    def _selects_something(self) -> RetentionClass:
        if not any(getattr(self, a) for a in MATCHED_ATTRIBUTES):
            raise ValueError(
                f"class {self.name} matches every item; say so with default_ttl instead"
            )
        if self.since == "last_read" and self.kind != ("file",):
            raise ValueError(f'class {self.name}: since = last_read needs kind = "file"')
        return self

    def counted_from(self, attrs: ItemAttributes) -> Any:
        """The time an item's TTL under this class counts from."""
        if self.since == "last_read":
            return attrs.get("reinforced_at") or attrs["recorded_at"]
        return attrs["recorded_at"]

    def matches(self, attrs: ItemAttributes) -> bool:
        return all(
            getattr(self, a) is None or attrs.get(a) in getattr(self, a) for a in MATCHED_ATTRIBUTES
        )


MATCHED_ATTRIBUTES = ("kind", "category", "predicate", "sensitivity", "basis", "origin")


class Protect(StrictModel):
    """Never auto-forgotten: by TTL, by an item's own expiry, or by decay."""

    predicates: Annotated[tuple[Identifier, ...], Field(max_length=MAX_LISTED)] = ()
    categories: Annotated[tuple[Identifier, ...], Field(max_length=MAX_LISTED)] = ()

    def rule_for(self, attrs: ItemAttributes) -> str | None:
        if attrs.get("predicate") in self.predicates:
            return f"protect:predicate:{attrs['predicate']}"
        if attrs.get("category") in self.categories:
            return f"protect:category:{attrs['category']}"
        return None


class RetentionTable(StrictModel):
    """The `[retention]` table of a policy file."""

    version: Annotated[int, Field(strict=True, ge=1, le=1_000_000)]
    default_ttl: Duration = NEVER
    classes: Annotated[
        tuple[RetentionClass, ...], Field(alias="class", max_length=MAX_CLASSES)
    ] = ()
    protect: Protect = Protect()

    @model_validator(mode="after")
    def _names_unique(self) -> RetentionTable:
        names = [c.name for c in self.classes]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"class names must be unique: {', '.join(twice)}")
        return self


class DecayClass(StrictModel):
    name: Identifier
    category: Selector[Identifier] = None
    kind: Selector[AnyKind] = None
    half_life: Duration

    @model_validator(mode="after")
    def _selects_something(self) -> DecayClass:
        if not (self.category or self.kind):
            raise ValueError(f"decay class {self.name} needs a category or a kind")
        return self

    def matches(self, attrs: ItemAttributes) -> bool:
        return (self.category is None or attrs.get("category") in self.category) and (
            self.kind is None or attrs.get("kind") in self.kind
        )


class DecayTable(StrictModel):
    """The `[decay]` table: strength halves every `half_life` since the item was last
    recorded or reinforced; below `archive_below` it moves to the archived tier."""

    period: Duration = "1d"
    archive_below: Fraction = 0.05
    reinforce_step: Fraction = 0.1
    default_half_life: Duration = NEVER
    classes: Annotated[tuple[DecayClass, ...], Field(alias="class", max_length=MAX_CLASSES)] = ()

    @model_validator(mode="after")
    def _period_bounded(self) -> DecayTable:
        if parse_duration(self.period) is None:
            raise ValueError("the decay period must be a duration, not 'never'")
        return self


@dataclass(frozen=True)
class RetentionDecision:
    """Why an item lives as long as it does: the rule, its TTL and the resulting expiry."""

    rule: str  # protect:predicate:X | protect:category:X | class:NAME | item:expires_at | default
    ttl: str | None  # as written in the policy, or None
    expires_at: str | None  # canonical time, or None (kept until erased)
    protected_by: str | None = None

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= canonical_time(now)


@dataclass(frozen=True)
class RetentionPolicy:
    table: RetentionTable
    decay: DecayTable

    @property
    def version(self) -> int:
        return self.table.version

    def decide(self, attrs: ItemAttributes, *, protect: bool = True) -> RetentionDecision:
        """One item's decision from its clear attributes (a catalog row's columns).
        `protect=False`: what the classes and its own expiry say, protect list aside."""
        protected = self.table.protect.rule_for(attrs) if protect else None
        if protected:
            return RetentionDecision(protected, None, None, protected)
        rule, ttl, since = "default", self.table.default_ttl, attrs["recorded_at"]
        for retention_class in self.table.classes:
            if retention_class.matches(attrs):
                rule, ttl = f"class:{retention_class.name}", retention_class.ttl
                since = retention_class.counted_from(attrs)
                break
        length = parse_duration(ttl)
        expires = None
        if length is not None:
            expires = canonical_time(to_utc(since) + length)
        own = attrs.get("expires_at")
        if own is not None and (expires is None or own < expires):
            return RetentionDecision("item:expires_at", None, own)
        return RetentionDecision(rule, None if length is None else ttl, expires)

    def protected_clause(self, columns: Any) -> ColumnElement[bool]:
        protect = self.table.protect
        clauses = []
        if protect.predicates:
            clauses.append(columns.predicate.in_(protect.predicates))
        if protect.categories:
            clauses.append(columns.category.in_(protect.categories))
        return or_(*clauses) if clauses else false()

    def expired_clause(self, columns: Any) -> ColumnElement[bool]:
        """True for items expired at the bound time, over the catalog's columns
        (`columns` is a table's `.c`). It takes its times as parameters (`cutoffs(now)`),
        so a statement using it is built once. Equal to `decide(row).expired(now)` for
        every row (tested)."""
        now: BindParameter[str] = bindparam("now")  # canonical_time text, as stored
        own = and_(columns.expires_at.is_not(None), columns.expires_at <= now)
        whens = [
            (_matches(c, columns), _lived(columns, c.ttl, f"ttl_cutoff_{i}", c.since))
            for i, c in enumerate(self.table.classes)
        ]
        by_class = _lived(columns, self.table.default_ttl, "ttl_cutoff_default")
        if whens:
            by_class = case(*whens, else_=by_class)
        return and_(~self.protected_clause(columns), or_(own, by_class))

    def cutoffs(self, now: datetime) -> dict[str, str]:
        """The parameters of `expired_clause` at `now` (the statement's `now` included):
        an item recorded at or before a class's cutoff has outlived that class's TTL."""
        params = {"now": canonical_time(now)}
        ttls = [(f"ttl_cutoff_{i}", c.ttl) for i, c in enumerate(self.table.classes)]
        for name, ttl in [*ttls, ("ttl_cutoff_default", self.table.default_ttl)]:
            length = parse_duration(ttl)
            if length is not None:
                try:
                    params[name] = canonical_time(now - length)
                except OverflowError:  # before year 1: nothing was recorded that early
                    params[name] = ""
        return params

    def decay_half_life(self, attrs: ItemAttributes) -> tuple[str, timedelta | None]:
        """(rule, half-life) for one item: the first decay class matching, or the default."""
        for decay_class in self.decay.classes:
            if decay_class.matches(attrs):
                return f"decay:{decay_class.name}", parse_duration(decay_class.half_life)
        return "decay:default", parse_duration(self.decay.default_half_life)

    def strength_of(self, row: ItemAttributes, at: datetime) -> tuple[float, str]:
        """An item's strength at `at` from its catalog row, and the decay rule used."""
        rule, half_life = self.decay_half_life(row)
        since = to_utc(row["reinforced_at"] or row["recorded_at"])
        base, times = float(row["strength"]), int(row["reinforcements"])
        return strength_at(base, times, since, at, half_life, self.decay.reinforce_step), rule

    def period_start(self, now: datetime) -> tuple[int, datetime]:
        """The decay period `now` falls in (its number since the epoch, and its start):
        a decay pass evaluates strength at the period's start, so two passes in one
        period decide the same."""
        length = parse_duration(self.decay.period)
        assert length is not None  # refused at load
        epoch = datetime(2000, 1, 1, tzinfo=now.tzinfo)
        number = math.floor((to_utc(now) - to_utc(epoch)) / length)
        return number, to_utc(epoch) + number * length


_BASIS_ORDER = ("session", "consent", "contract", "indefinite")  # narrowest first


def inherited_retention(
    policy: RetentionPolicy, inputs: list[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The retention of an item derived from `inputs` (their attributes: catalog rows or
    `attributes_of`): it never outlives them. The earliest expiry among them under the
    policy in force (an input's own `expires_at`, or its class's TTL counted from when
    it was recorded), with that input's basis; if none expires, the narrowest basis;
    None for no inputs. A merge or a conclusion must not give its inputs a new life."""
    if not inputs:
        return None
    # Protection aside: it is the inputs' shelter, decided when each is read; the
    # derived item is sheltered by it in turn if it matches the protect list itself.
    dated = [(policy.decide(i, protect=False).expires_at, i) for i in inputs]
    expiring = [(at, i) for at, i in dated if at is not None]
    if expiring:
        at, first = min(expiring, key=lambda pair: pair[0])
        return {"basis": first.get("basis") or "indefinite", "expires_at": at}
    bases = [i.get("basis") or "indefinite" for i in inputs]
    return {"basis": min(bases, key=_BASIS_ORDER.index)}


def attributes_of(item: Any) -> dict[str, Any]:
    """What the policy decides on, from an item aggregate (memory_ledger/domain.py):
    the same values the catalog holds in clear for it."""
    return {
        "kind": item.kind,
        "category": item.category,
        "predicate": item.predicate,
        "sensitivity": item.sensitivity,
        "basis": item.retention.get("basis") or "indefinite",
        "origin": item.origin,
        "recorded_at": canonical_time(item.created_on),
        "expires_at": item.retention.get("expires_at"),
        "reinforced_at": getattr(item, "viewed_at", None),  # a memory file's last read
    }


def strength_at(
    base: float,
    reinforcements: int,
    since: datetime,
    at: datetime,
    half_life: timedelta | None,
    step: float,
) -> float:
    """Strength at `at`: the written strength plus `step` per time the item was served
    in a context (at most 1), halving every `half_life` since it was last recorded or
    served. Reads that do not serve it (recall, show) never change it."""
    level = min(1.0, base + step * reinforcements)
    if half_life is None:
        return level
    age = max(timedelta(0), at - since)
    return level * 0.5 ** (age / half_life)


def _matches(retention_class: RetentionClass, columns: Any) -> ColumnElement[bool]:
    parts = [
        getattr(columns, a).in_(getattr(retention_class, a))
        for a in MATCHED_ATTRIBUTES
        if getattr(retention_class, a) is not None
    ]
    return and_(*parts)


def _lived(columns: Any, ttl: str, cutoff: str, since: str = "recorded") -> ColumnElement[bool]:
    """Whether an item has outlived `ttl`: recorded (or, `since="last_read"`, last read)
    at or before the `cutoff` parameter."""
    if parse_duration(ttl) is None:
        return false()
    if since == "last_read":  # the catalog keeps a memory file's last read as reinforced_at
        return func.coalesce(columns.reinforced_at, columns.recorded_at) <= bindparam(cutoff)
    return columns.recorded_at <= bindparam(cutoff)
