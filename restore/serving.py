"""What a store should serve of an item, state by state: the drill's yardstick.

A drill must not cry wolf. Recall never returns a superseded, suppressed, archived or
expired item, so "every kept item is recalled" is false on any healthy store that has
lived a little. Instead each sampled item's *state* is decided from the log (erased,
suppressed, archived, expired under the retention policy) and, for facts, from the
facts projection's versioning (superseded), and the store is held to what that state
promises:

| state      | `get` reads its text | `recall` returns it | `recall(include_archived)` |
|------------|----------------------|---------------------|----------------------------|
| current    | yes                  | yes                 | yes                        |
| superseded | yes                  | no                  | no                         |
| suppressed | yes                  | no                  | no                         |
| archived   | yes                  | no                  | yes                        |
| expired    | no (withheld)        | no                  | no                         |
| erased     | no (key destroyed)   | no                  | no                         |

An agent's own items (memory files, runs) are read from the log only: current or erased.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from sqlalchemy import func, select

from memory_ledger.agent_state import AGENT_KINDS
from memory_ledger.errors import NotFound
from memory_ledger.event_log import ERASED
from memory_ledger.policy.retention import attributes_of
from memory_ledger.principal import Principal
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.facts import LIVE_STATUSES, facts
from memory_ledger.retrieval.context import MAX_RECALL_LIMIT
from memory_ledger.times import canonical_time

if TYPE_CHECKING:
    from memory_ledger.domain import MemoryItem
    from memory_ledger.restore.live import LiveStore

STATES = ("current", "superseded", "suppressed", "archived", "expired", "erased")
#: state -> (text readable by `get`, returned by `recall`, returned with archived ones)
PROMISES: dict[str, tuple[bool, bool, bool]] = {
    "current": (True, True, True),
    "superseded": (True, False, False),
    "suppressed": (True, False, False),
    "archived": (True, False, True),
    "expired": (False, False, False),
    "erased": (False, False, False),
}


@dataclass(frozen=True)
class ItemServing:
    """One item's state in one store, and what that store actually served of it."""

    item_id: str
    kind: str
    state: str  # one of STATES, or "absent" when the log does not hold the item
    version: int
    readable: bool
    recalled: bool
    recalled_with_archived: bool

    def broken_promise(self) -> str | None:
        """What the store served against its state's promise (a code), or None."""
        if self.state == "absent":
            return None
        readable, recalled, with_archived = PROMISES[self.state]
        if self.readable != readable:
            return "not_readable" if readable else "readable"
        if self.recalled != recalled:
            return "not_recalled" if recalled else "recalled"
        if self.recalled_with_archived != with_archived:
            return "not_recalled_with_archived" if with_archived else "recalled_with_archived"
        return None


def state_of(service: LiveStore, item: MemoryItem) -> str:
    """An item's state, decided in this order (an erased item is erased whatever else
    is true of it; a suppressed fact that was also superseded is suppressed)."""
    if item.erased:
        return "erased"
    if item.kind in AGENT_KINDS:
        return "current"
    if service.retention.decide(attributes_of(item)).expired(service.clock()):
        return "expired"
    if item.suppressed:
        return "suppressed"
    if item.archived:
        return "archived"
    if item.kind == "fact" and not _fact_is_live(service, str(item.id)):
        return "superseded"
    return "current"


def serving(service: LiveStore, item_id: str) -> ItemServing:
    """Decide `item_id`'s state in `service`, and read what the store serves of it."""
    service.runner.catch_up()
    try:
        item = service.log.get(UUID(item_id))
    except NotFound:
        return ItemServing(item_id, "", "absent", 0, False, False, False)
    state = state_of(service, item)
    if item.kind in AGENT_KINDS:  # an agent's own item: read from the log, never recalled
        readable = service.log.read(item) is not ERASED
        return ItemServing(item_id, item.kind, state, item.version, readable, readable, readable)
    ledger = service.for_principal(Principal.from_namespace(item.namespace))
    text = ledger.get(item_id).text
    subject, predicate = item.subject, (item.predicate if item.kind != "turn" else None)

    def returned(include_archived: bool) -> bool:
        found = ledger.recall(
            subject=subject,
            predicate=predicate,
            kind=item.kind,
            limit=MAX_RECALL_LIMIT,
            include_archived=include_archived,
        )
        return any(m.item_id == item_id for m in found)

    return ItemServing(
        item_id, item.kind, state, item.version, text is not None, returned(False), returned(True)
    )


def changed_after(service: LiveStore, item_id: str, position: int) -> bool:
    """Whether the live store wrote anything deciding the item's state after `position`
    (a restore point): the item's own last change in the log (a rewrite, a suppression,
    a new value...: `EventLog.last_changes`; the catalog's position is only where the
    item was recorded), and for a fact any version of its subject and predicate (a
    newer fact supersedes it). Until then a restored copy must hold the item in the
    same state as the live store."""
    last = service.log.last_changes([UUID(item_id)]).get(UUID(item_id))
    if last is None or last > position:
        return True  # not in the live log, or changed since the restore point
    with service.engine.connect() as conn:
        row = conn.execute(
            select(
                catalog.c.kind,
                catalog.c.namespace,
                catalog.c.subject,
                catalog.c.predicate,
            ).where(catalog.c.item_id == item_id)
        ).first()
        if row is None:
            return True  # not live here: decided by the log, not comparable
        kind, namespace, subject, predicate = row
        if kind != "fact":
            return False
        latest = conn.execute(
            select(func.max(facts.c.position)).where(
                facts.c.namespace == namespace,
                facts.c.subject == subject,
                facts.c.predicate == predicate,
            )
        ).scalar()
    return latest is not None and int(latest) > position


def _fact_is_live(service: LiveStore, item_id: str) -> bool:
    """The facts projection's verdict on the item's latest version: current or in
    conflict, and still valid (the same rule recall applies)."""
    now = canonical_time(service.clock())
    with service.engine.connect() as conn:
        row = conn.execute(
            select(facts.c.status, facts.c.valid_to)
            .where(facts.c.item_id == item_id)
            .order_by(facts.c.version.desc())
            .limit(1)
        ).first()
    if row is None:
        return False
    status, valid_to = row
    return status in LIVE_STATUSES and (valid_to is None or valid_to > now)
