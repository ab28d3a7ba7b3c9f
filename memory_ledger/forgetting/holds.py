"""Legal holds: a named reason that blocks every deletion within a scope until lifted.

A hold is placed and lifted by an operator (compliance), never by an agent, and both
are entries in the lifecycle ledger: the ledger is where an auditor looks, it is
hash-chained, and it outlives any restore of the stores. While a hold covers an item:

- a user's forget request that would erase or rewrite it ends `blocked`, naming the
  hold, with nothing erased (never a silent `partial`); lifting the hold resumes it;
- the retention sweep leaves it alone (it still counts as expired for every read:
  a hold keeps data for the case, not for the agent).

Scope: a namespace (`acme/alice`) or a tenant (`acme`, every namespace under it),
narrowed to a category and/or a predicate if given.

Names: a hold's name is unique within the subtree it is placed in, not across the
store. Placing one is refused only if a hold of that name is in force at its namespace
or below it, which is all inside what the placer covers: the same name may be in force
in two unrelated subtrees (`acme/alice` and `acme/bob`), and no answer to a compliance
officer of one subtree depends on the holds of another. So a name alone may be
ambiguous to someone who covers both: lifting takes the namespace too, or resolves the
name within the caller's subtree (`within`), and refuses a name that is still ambiguous.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, false, or_, select

from memory_ledger.errors import InvalidWrite, NotFound
from memory_ledger.identifiers import is_identifier, is_namespace, is_namespace_part
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.policy.retention import ItemAttributes
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.id_sets import among

#: Holds in force at once within one subtree (counted at the new hold's namespace and
#: below it, like its name, so the limit says nothing about other subtrees).
MAX_HOLDS = 1000


def inside(namespace: str, root: str) -> bool:
    """Whether `namespace` is `root` or in its subtree (`acme/alice` is inside `acme`,
    `acme/alicia` is not inside `acme/alice`)."""
    return namespace == root or namespace.startswith(root + "/")


@dataclass(frozen=True)
class Hold:
    hold_id: str
    name: str
    reason: str
    namespace: str
    category: str | None
    predicate: str | None
    placed_by: str
    placed_at: str

    def covers(self, attrs: ItemAttributes) -> bool:
        """Whether an item (its namespace, category and predicate) is under this hold."""
        return (
            inside(str(attrs["namespace"]), self.namespace)
            and self.category in (None, attrs.get("category"))
            and self.predicate in (None, attrs.get("predicate"))
        )

    def clause(self, columns: Any) -> Any:
        """The same test in SQL, over the catalog's columns."""
        parts = [
            or_(
                columns.namespace == self.namespace,
                columns.namespace.startswith(self.namespace + "/", autoescape=True),
            )
        ]
        if self.category is not None:
            parts.append(columns.category == self.category)
        if self.predicate is not None:
            parts.append(columns.predicate == self.predicate)
        return and_(*parts)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Holds:
    """The holds in force, read from the ledger each time (a hold placed by another
    process counts at once)."""

    def __init__(self, ledger: LifecycleLedger) -> None:
        self.ledger = ledger

    def active(self) -> list[Hold]:
        placed: dict[str, Hold] = {}
        for entry in self.ledger.entries_of_type(EntryType.HOLD, EntryType.HOLD_LIFTED):
            p = entry.payload
            if entry.entry_type is EntryType.HOLD:
                placed[entry.request_id] = Hold(
                    entry.request_id,
                    p["name"],
                    p["reason"],
                    p["namespace"],
                    p.get("category"),
                    p.get("predicate"),
                    p["placed_by"],
                    entry.recorded_at,
                )
            else:
                placed.pop(entry.request_id, None)
        return list(placed.values())

    def place(
        self,
        name: str,
        *,
        namespace: str,
        reason: str,
        placed_by: str,
        category: str | None = None,
        predicate: str | None = None,
    ) -> Hold:
        if not (is_namespace(namespace) or is_namespace_part(namespace)):
            raise InvalidWrite("a hold's namespace is a namespace (tenant/user) or a tenant")
        for label, value in (("name", name), ("category", category), ("predicate", predicate)):
            if value is not None and not is_identifier(value):
                raise InvalidWrite(f"a hold's {label} must be an identifier; nothing was placed")
        # Only the holds at the new one's namespace or below it count: they are all
        # inside what the placer covers (a hold above it, or beside it, is not theirs).
        below = [h for h in self.active() if inside(h.namespace, namespace)]
        if any(h.name == name for h in below):
            raise InvalidWrite(
                f"a hold named {name} is already in force in {namespace} or below it; "
                "nothing was placed"
            )
        if len(below) >= MAX_HOLDS:
            raise InvalidWrite(
                f"at most {MAX_HOLDS} holds can be in force at once in {namespace} and below it"
            )
        hold_id = f"hold-{uuid.uuid4().hex[:16]}"
        payload = {
            "name": name,
            "reason": reason,
            "namespace": namespace,
            "category": category,
            "predicate": predicate,
            "placed_by": placed_by,
        }
        entry = self.ledger.append(hold_id, EntryType.HOLD, payload)
        return Hold(
            hold_id, name, reason, namespace, category, predicate, placed_by, entry.recorded_at
        )

    def lift(
        self,
        name: str,
        *,
        lifted_by: str,
        namespace: str | None = None,
        within: Callable[[str], bool] | None = None,
    ) -> Hold:
        """Lift the hold `find` resolves `name` to; returns it."""
        hold = self.find(name, namespace=namespace, within=within)
        self.ledger.append(
            hold.hold_id, EntryType.HOLD_LIFTED, {"name": name, "lifted_by": lifted_by}
        )
        return hold

    def find(
        self,
        name: str,
        *,
        namespace: str | None = None,
        within: Callable[[str], bool] | None = None,
    ) -> Hold:
        """The hold in force named `name`: the one placed at `namespace` if given, and
        only among the holds whose namespace `within` accepts (a token's subtree) if
        given. The same name may be in force in several subtrees: if more than one is
        left, it is refused (InvalidWrite naming their namespaces, all of them inside
        `within`); if none, NotFound."""
        found = [
            h
            for h in self.active()
            if h.name == name
            and (namespace is None or h.namespace == namespace)
            and (within is None or within(h.namespace))
        ]
        if not found:
            where = f" at {namespace}" if namespace is not None else ""
            raise NotFound(f"no hold named {name} is in force{where}")
        if len(found) > 1:
            places = sorted(h.namespace for h in found)
            raise InvalidWrite(
                f"{len(found)} holds named {name} are in force ({', '.join(places)}): name "
                "the namespace of the one meant; nothing was lifted",
                ["namespace: required, the name is in force in more than one namespace"],
            )
        return found[0]

    def covering(self, conn: Connection, item_ids: Iterable[str]) -> dict[str, list[str]]:
        """Hold name -> the ids among `item_ids` it covers (live items, by the catalog)."""
        holds = self.active()
        ids = sorted(set(item_ids))
        if not holds or not ids:
            return {}
        out: dict[str, list[str]] = {}
        for start in range(0, len(ids), 500):
            query = select(
                catalog.c.item_id, catalog.c.namespace, catalog.c.category, catalog.c.predicate
            ).where(among(catalog.c.item_id, ids[start : start + 500]))
            for row in conn.execute(query).mappings():
                for hold in holds:
                    if hold.covers(row):
                        out.setdefault(hold.name, []).append(row["item_id"])
        return out

    def clause(self, columns: Any) -> Any:
        """Items under any hold in force, over the catalog's columns."""
        holds = self.active()
        return or_(*(h.clause(columns) for h in holds)) if holds else false()
