"""What a new fact does to the other facts of its predicate, decided at write time.

A predicate has one current value (`one`) or a set of them (`many`), by the policy
(memory_ledger/policy/__init__.py). A write may say whether it adds to the set or replaces
(`mode`), and which members it replaces (`replaces`). The outcome is recorded in the
fact's `Recorded` event as clear attributes, `cardinality` and `replaces` (item ids),
so the facts projection decides from the log alone and a rebuild after a policy change
equals the view before it. Events written before cardinality existed carry neither and
behave as `one`.

| predicate | mode | replaces | recorded |
|---|---|---|---|
| one | none or `replace` | none | `one`: supersedes by authority and time, conflicts kept |
| one | `add` | | refused: the predicate holds one current value |
| one | | ids | refused: a new value replaces the current one without naming it |
| many | none or `add` | none | `many`, replaces nothing: joins the set |
| many | none or `replace` | ids | `many`, replaces those members only |
| many | `replace` | none | `many`, replaces every current member (the set becomes this one) |

Only facts have a cardinality. Preferences never supersede one another (each is
changed in place with `update`, and scopes are chosen at read time), and turns are
never replaced, so `mode` and `replaces` are refused on them at the write boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select

from memory_ledger.errors import InvalidWrite
from memory_ledger.projections.facts import LIVE_STATUSES, facts
from memory_ledger.write_policy import MemoryWrite

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_ledger.domain import MemoryItem


@dataclass(frozen=True)
class FactSets:
    """What deciding a write's set change reads, for one namespace: the policy's
    cardinality of a predicate (asked at each write: an installed policy takes effect),
    the namespace's own items (`owned`: NotFound for another namespace's id), and the
    facts view (caught up first)."""

    namespace: str
    cardinality_of: Callable[[str], str]
    owned: Callable[[str], MemoryItem]
    catch_up: Callable[[], object]
    engine: Engine


@dataclass(frozen=True)
class SetChange:
    """What one write records: its predicate's cardinality (None for preferences and
    turns) and the ids of the members it replaces."""

    cardinality: str | None
    replaces: tuple[str, ...] = ()


def decide(
    sets: FactSets, write: MemoryWrite, earlier: Sequence[tuple[MemoryWrite, str]] = ()
) -> SetChange:
    """`earlier`: the writes before this one in the same batch, with their new ids, so a
    `replace` of a whole set also replaces members written just before it."""
    if write.kind != "fact":
        return SetChange(None)
    predicate = write.effective_predicate
    cardinality = sets.cardinality_of(predicate)
    about = f"{write.subject}/{predicate}"
    if cardinality == "one":
        if write.mode == "add":
            raise InvalidWrite(
                f"mode 'add' refused: {about} holds one current value, so a new fact replaces "
                "it (the default); declare the predicate many-valued in policy.toml to keep "
                "several; nothing was stored",
                ["mode: 'add' applies to many-valued predicates only"],
            )
        if write.replaces:
            raise InvalidWrite(
                f"replaces refused: {about} holds one current value, and a new fact replaces "
                "it without naming it; nothing was stored",
                ["replaces: applies to many-valued predicates only"],
            )
        return SetChange("one")
    if write.mode == "add" or (write.mode is None and not write.replaces):
        return SetChange("many")
    if write.replaces:
        named = list(dict.fromkeys(str(i) for i in write.replaces))
        _check_members(sets, write, named)
        return SetChange("many", tuple(sorted(named)))
    members = set(_current_members(sets, write))
    members.update(
        item_id
        for other, item_id in earlier
        if other.kind == "fact"
        and (other.subject, other.effective_predicate) == (write.subject, predicate)
    )
    return SetChange("many", tuple(sorted(members)))


def _check_members(sets: FactSets, write: MemoryWrite, named: list[str]) -> None:
    """Each replaced id must be a live fact of this namespace, subject and predicate:
    confirmed against the log (NotFound for an id of another namespace, exactly like an
    id that never existed), and still current or in conflict in the facts view."""
    about = f"{write.subject}/{write.effective_predicate}"
    for item_id in named:
        item = sets.owned(item_id)
        if item.kind != "fact" or (item.subject, item.predicate) != (
            write.subject,
            write.effective_predicate,
        ):
            raise InvalidWrite(
                f"replaces: item {item_id} is not a fact about {about}; nothing was stored",
                [f"replaces: {item_id} is not a member of {about}"],
            )
        if item.erased:
            raise InvalidWrite(
                f"replaces: item {item_id} was erased; nothing was stored",
                [f"replaces: {item_id} was erased"],
            )
    status = _statuses(sets, named)
    stale = [i for i in named if status.get(i) not in LIVE_STATUSES]
    if stale:
        raise InvalidWrite(
            f"replaces: {', '.join(stale)} no longer current in {about} (already replaced "
            "or superseded); nothing was stored",
            [f"replaces: {i} is not a current member" for i in stale],
        )


def _statuses(sets: FactSets, item_ids: list[str]) -> dict[str, str]:
    """Each item's standing in the facts view: its newest version's status."""
    sets.catch_up()
    query = select(facts.c.item_id, facts.c.version, facts.c.status).where(
        facts.c.item_id.in_(item_ids)
    )
    newest: dict[str, tuple[int, str]] = {}
    with sets.engine.connect() as conn:
        for item_id, version, status in conn.execute(query):
            if item_id not in newest or version > newest[item_id][0]:
                newest[item_id] = (version, status)
    return {item_id: status for item_id, (_, status) in newest.items()}


def _current_members(sets: FactSets, write: MemoryWrite) -> list[str]:
    """The set as it stands: live (current or conflict) facts of the key."""
    sets.catch_up()
    f = facts.c
    query = (
        select(f.item_id)
        .where(
            f.namespace == sets.namespace,
            f.subject == write.subject,
            f.predicate == write.effective_predicate,
            f.status.in_(LIVE_STATUSES),
        )
        .distinct()
    )
    with sets.engine.connect() as conn:
        return sorted(conn.execute(query).scalars())
