"""The principal's items as the planner sees them: clear attributes from the catalog,
text from the event log (never a projection), decrypted in memory only and only for
the few items a plan needs to look inside (labels, values, spans)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import Connection, select

from memory_ledger.event_log import ERASED
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.facts import facts
from memory_ledger.projections.runner import tracking

if TYPE_CHECKING:
    from memory_ledger.event_log import EventLog

#: Texts one plan may decrypt: enough to label candidates and look for spans in the
#: recent items of a heavy user, bounded so a plan costs the same at 100k items.
MAX_TEXTS = 400
PREVIEW_CHARS = 48


@dataclass(frozen=True)
class Row:
    """One live item's clear attributes."""

    item_id: str
    kind: str
    subject: str
    predicate: str
    category: str
    origin: str
    session_id: str | None
    turn_id: str | None
    written_at: str
    valid_from: str
    derived_from: tuple[str, ...]
    suppressed: bool
    #: Facts: `current`, `conflict` or `superseded` (the newest version's standing).
    status: str
    valid_to: str | None

    @property
    def inferred(self) -> bool:
        return self.origin == "inferred" or bool(self.derived_from)


class PoolRows:
    """The clear attributes of a few namespaces' items, kept between plans: a heavy
    user's 10,000 rows cost a plan 200-300 ms to read and build, the same for every plan.
    Kept with the position the catalog and facts projections had reached when read
    (their tracking rows, read in the same transaction as the rows). When they have
    moved on since, only the items the events in between touched are read again (and
    the other facts of a touched fact's key, whose standing a new version changes): an
    agent that writes a turn and then asks to forget something pays for that turn, not
    for the namespace. Read whole again when the position moved backwards (a rebuild
    under way) or moved more than `MAX_STEP` events. Attributes only (kinds, predicates,
    times, sessions): no content."""

    MAX_NAMESPACES = 8
    #: Events read to bring a namespace's rows forward; more, and they are read again.
    MAX_STEP = 5_000

    def __init__(self) -> None:
        self._kept: dict[str, tuple[int, list[Row]]] = {}

    def get(self, namespace: str, position: int) -> list[Row] | None:
        kept = self._kept.get(namespace)
        return kept[1] if kept is not None and kept[0] == position else None

    def behind(self, namespace: str, position: int) -> tuple[int, list[Row]] | None:
        """Rows kept at an earlier position, close enough to bring forward."""
        kept = self._kept.get(namespace)
        if kept is None or not kept[0] < position <= kept[0] + self.MAX_STEP:
            return None
        return kept

    def put(self, namespace: str, position: int, rows: list[Row]) -> None:
        self._kept.pop(namespace, None)
        while len(self._kept) >= self.MAX_NAMESPACES:
            self._kept.pop(next(iter(self._kept)))  # the least recently stored
        self._kept[namespace] = (position, rows)


def projected_position(conn: Connection) -> int:
    """How far the projections the pool reads (catalog, facts) have read the log."""
    names = ("catalog", "facts")
    found = conn.execute(select(tracking.c.position).where(tracking.c.name.in_(names))).scalars()
    positions = [int(p) for p in found]
    return min(positions) if len(positions) == len(names) else -1


class Pool:
    """The items of one namespace, loaded once per plan."""

    def __init__(
        self,
        conn: Connection,
        log: EventLog,
        namespace: str,
        only: Sequence[str] | None = None,
        kept: PoolRows | None = None,
    ) -> None:
        """The namespace's items; with `only`, just those (and more with `extend`): what
        a plan from the places a request's values were found in needs, at a cost that
        follows the places, not the namespace. `kept`: whole namespaces' rows from
        earlier plans, used while the log has not moved."""
        self.conn = conn
        self.log = log
        self.namespace = namespace
        self.rows: list[Row] = []
        self.by_id: dict[str, Row] = {}
        self._texts: dict[str, str | None] = {}
        self.partial = only is not None
        if only is None and kept is not None:
            position = projected_position(conn)
            rows = kept.get(namespace, position) if position >= 0 else None
            if rows is None:
                earlier = kept.behind(namespace, position) if position >= 0 else None
                if earlier is None:
                    self._load(None)
                else:
                    self._forward(*earlier, position)
                if position >= 0:
                    kept.put(namespace, position, self.rows)
            else:
                self.rows = rows  # never changed: a whole pool is not extended
                self.by_id = {row.item_id: row for row in rows}
            return
        self._load(None if only is None else list(only))

    def _forward(self, since: int, rows: list[Row], position: int) -> None:
        """The rows kept at `since`, with the items the log's events after it touched
        (up to `position`) read again: changed, added, or gone when no longer in the
        catalog; and every kept fact of a key a touched fact has, for its standing."""
        touched: set[str] = set()
        after = since
        while after < position:
            batch = self.log.notifications(after, min(1000, position - after))
            if not batch:
                break
            touched.update(str(n.originator_id) for n in batch)
            after = max(int(n.id) for n in batch)
        keys = {(r.subject, r.predicate) for r in rows if r.item_id in touched and r.kind != "turn"}
        self._load(sorted(touched))  # the touched items as they are now
        keys |= {(r.subject, r.predicate) for r in self.rows if r.kind != "turn"}
        again = [
            r.item_id
            for r in rows
            if r.kind != "turn" and (r.subject, r.predicate) in keys and r.item_id not in touched
        ]
        self._load(sorted(again))
        fresh = {r.item_id for r in self.rows}
        self.rows.extend(r for r in rows if r.item_id not in touched and r.item_id not in fresh)
        self.rows.sort(key=lambda row: (row.written_at, row.item_id))
        self.by_id = {row.item_id: row for row in self.rows}

    def extend(self, item_ids: Sequence[str]) -> None:
        """Add these items to a pool of some items only."""
        wanted = sorted({i for i in item_ids if i not in self.by_id})
        if wanted and self.partial:
            self._load(wanted)

    def _load(self, only: list[str] | None) -> None:
        if only is not None and not only:
            return
        c = catalog.c
        query = select(
            c.item_id, c.kind, c.subject, c.predicate, c.category, c.origin, c.session_id,
            c.turn_id, c.written_at, c.valid_from, c.derived_from, c.suppressed,
        ).where(c.namespace == self.namespace)  # fmt: skip
        batches = [None] if only is None else [only[i : i + 500] for i in range(0, len(only), 500)]
        for batch in batches:
            chosen = query if batch is None else query.where(c.item_id.in_(batch))
            standing = self._standing(self.conn, self.namespace, batch)
            for r in self.conn.execute(chosen):
                status, valid_to = standing.get(r.item_id, ("current", None))
                self.rows.append(
                    Row(
                        r.item_id,
                        r.kind,
                        r.subject,
                        r.predicate,
                        r.category,
                        r.origin,
                        r.session_id,
                        r.turn_id,
                        r.written_at,
                        r.valid_from,
                        tuple(json.loads(r.derived_from)),
                        bool(r.suppressed),
                        status,
                        valid_to,
                    )
                )
        self.rows.sort(key=lambda row: (row.written_at, row.item_id))
        self.by_id = {row.item_id: row for row in self.rows}

    @staticmethod
    def _standing(
        conn: Connection, namespace: str, only: list[str] | None = None
    ) -> dict[str, tuple[str, str | None]]:
        f = facts.c
        newest: dict[str, tuple[int, str, str | None]] = {}
        query = select(f.item_id, f.version, f.status, f.valid_to).where(f.namespace == namespace)
        rows = conn.execute(query if only is None else query.where(f.item_id.in_(only)))
        for item_id, version, status, valid_to in rows:
            if item_id not in newest or version > newest[item_id][0]:
                newest[item_id] = (version, status, valid_to)
        return {i: (s, v) for i, (_, s, v) in newest.items()}

    def texts(self, item_ids: list[str]) -> dict[str, str | None]:
        """Each item's current text (value or content), read from the log; None if it
        cannot be read (erased meanwhile). At most MAX_TEXTS per plan, newest first."""
        self.extend(item_ids)
        wanted = [i for i in item_ids if i not in self._texts and i in self.by_id]
        room = MAX_TEXTS - len(self._texts)
        if wanted and room > 0:
            wanted = sorted(wanted, key=lambda i: self.by_id[i].written_at, reverse=True)[:room]
            items = self.log.get_many([UUID(i) for i in wanted])
            keys = self.log.keys_for(wanted)
            for ident in wanted:
                item = items.get(UUID(ident))
                text = None
                if item is not None and not item.erased:
                    fields = self.log.open_fields(keys, ident, item.key_generation, item.sealed)
                    if fields is not ERASED:
                        name = "content" if item.kind == "turn" else "value"
                        text = fields.get(name)  # type: ignore[union-attr]
                self._texts[ident] = text
        return {i: self._texts.get(i) for i in item_ids}

    def label(self, item_id: str, language: str) -> str:
        """A short label a user can recognise: what it is, when, and a preview."""
        row = self.by_id.get(item_id)
        if row is None:
            return item_id
        text = self.texts([item_id]).get(item_id) or ""
        preview = " ".join(text.split())
        if len(preview) > PREVIEW_CHARS:
            preview = preview[: PREVIEW_CHARS - 1] + "…"
        day = row.written_at[:10]
        if row.kind == "turn":
            what = "对话" if language == "zh" else "message"
            head = f"{what} {day}"
        else:
            who = "" if row.subject == "user" else f"{row.subject} "
            head = f"{who}{row.predicate}"
            if row.status == "superseded" or (row.valid_to and row.kind == "fact"):
                until = (row.valid_to or "")[:10]
                head += f" ({row.valid_from[:10]} – {until})" if until else f" (from {day})"
            else:
                head += f" ({day})"
        return f'{head}: "{preview}"' if preview else head


def candidate(pool: Pool, item_id: str, language: str) -> dict[str, Any]:
    row = pool.by_id[item_id]
    return {
        "item_id": item_id,
        "label": pool.label(item_id, language),
        "kind": row.kind,
        "subject": row.subject,
        "predicate": row.predicate,
        "written_at": row.written_at,
        "valid_from": row.valid_from,
        "valid_to": row.valid_to,
    }


def things(rows: list[Row]) -> list[list[Row]]:
    """Distinct things among items: each member of a set (several live values of one
    predicate), each single-valued predicate with its versions, each turn."""
    groups: dict[tuple[str, str], list[Row]] = {}
    out: list[list[Row]] = []
    for row in rows:
        if row.kind == "turn":
            out.append([row])
        else:
            groups.setdefault((row.subject, row.predicate), []).append(row)
    for group in groups.values():
        live = [r for r in group if r.status in ("current", "conflict")]
        if len(live) > 1:
            out += [[r] for r in live]
        else:
            out.append(group)
    return out


def face(thing: list[Row]) -> Row:
    """The item that stands for a thing in a question: its live version, or its latest."""
    live = [r for r in thing if r.status in ("current", "conflict")]
    return max(live or thing, key=lambda r: r.written_at)


def without_derived(rows: list[Row]) -> list[Row]:
    """Items derived from another of the rows are erased with it (cascade)."""
    ids = {r.item_id for r in rows}
    return [r for r in rows if not set(r.derived_from) & ids]


def without_carriers(rows: list[Row]) -> list[Row]:
    """Turns a selected fact was taken from go with the fact (cascade): not targets."""
    sources = {(r.session_id, r.turn_id) for r in rows if r.kind != "turn" and r.turn_id}
    return [r for r in rows if r.kind != "turn" or (r.session_id, r.turn_id) not in sources]
