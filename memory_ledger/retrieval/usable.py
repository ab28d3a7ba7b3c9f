"""What recall may use in a namespace: clear attributes in memory, current by log position.

Recall used to decide, per hit and in SQL, whether each item the indexes proposed is a
usable memory (namespace, suppression, expiry under the retention policy, the archived
tier, category, and for facts the current version inside its validity): about 40% of a
recall at 10,000 items in one namespace. Everything that decides it changes only when the
log moves (a write, a change of state, an erasure) or when time passes (expiry, validity).
So each namespace's decisive attributes are read once into memory (`NamespaceState`), and
brought up to date by the events appended since (`RecallStates.state`): the events' items
are read again, and nothing else. What depends on time is kept as times (`usable_from`,
`usable_until`) and compared at read time; what depends on the request (kinds, category,
the archived tier, a preference's scope) is compared per request. A hit is then judged by
one dict lookup and a few comparisons (`Filter.accept`), with no statement.

Held here: ids, kinds, subjects, predicates, categories, scopes, times, versions and
flags, the clear columns the catalog already holds; never content. It lives in this
process's memory only, and an erasure run here drops its items at once (the context
cache's store, `ContextCacheStore`, evicts them); another process's erasure moves the log,
and the next recall here reads the erased items again and finds them gone. Recall still
reads the rows it shows, sealed, and opens them with the items' keys: an item erased
between this state's refresh and that read is not shown.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    Text,
    bindparam,
    cast,
    literal,
    null,
    select,
    tuple_,
    union_all,
)

from memory_ledger.event_log import EventLog
from memory_ledger.policy.retention import RetentionPolicy
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.events import decode_clear
from memory_ledger.projections.facts import facts
from memory_ledger.projections.preferences import preferences
from memory_ledger.projections.transcripts import transcripts
from memory_ledger.retrieval.state_files import Snapshot, StateFiles, policy_digest

TABLES = {"fact": facts, "preference": preferences, "turn": transcripts}
#: Events since the last refresh above which the namespace is read again whole: reading
#: that many items by id costs about as much as reading the namespace.
REFRESH_EVENTS = 2_000
#: Events a state may move past its file before the file is written again (an erasure
#: among them rewrites it at once).
SAVE_EVERY = 500
#: Namespaces kept (least recently used dropped first).
MAX_NAMESPACES = 16
#: Ids per statement when items are read again by id.
ID_CHUNK = 500
_NEVER = "\uffff"  # sorts after every canonical time: "no end"


class Entry(NamedTuple):
    """One usable item as recall filters and ranks it: clear attributes only. An item is
    here if it is live, readable, not suppressed and (for facts) its current version;
    whether it is usable *now* is `usable_from <= now < usable_until`. A named tuple, not
    a dataclass: a state file (`state_files`) holds plain tuples, made entries again at
    about a tenth of a frozen dataclass's cost per item."""

    item_id: str
    kind: str
    subject: str
    predicate: str
    category: str
    tier: str
    written_at: str
    valid_from: str  # what recency counts from: the validity start, a turn's write time
    usable_from: str  # a fact's validity start; "" for the others
    usable_until: str  # the first of its expiry and a fact's validity end; _NEVER if none
    expires_at: str | None  # under the retention policy (a context's `valid_until`)
    status: str | None
    scope: str | None
    strength: float | None
    version: int
    flags: str
    origin: str
    #: The session a turn was said in (its neighbours are the turns beside it there).
    session: str | None = None


@dataclass
class NamespaceState:
    """A namespace's entries at a log position, under one retention policy."""

    namespace: str
    policy: RetentionPolicy
    position: int
    entries: dict[str, Entry] = field(default_factory=dict)
    #: The position of the state file last written for it (-1: none written).
    saved: int = -1
    #: Facts and preferences by (subject, predicate): a preference's scope is judged
    #: among its rivals, and a new fact changes the status of the others of its key.
    keyed: dict[str, dict[tuple[str, str], set[str]]] = field(
        default_factory=lambda: {"fact": {}, "preference": {}}
    )
    #: How many entries have each subject (a turn's is its speaker): recall tells a
    #: name in the query that names whose memories to prefer from a word to match.
    subjects: Counter[str] = field(default_factory=Counter)
    #: Each session's turns in the order they were said, and each turn's place there,
    #: built when first asked for after a change (`neighbours`); None: to be built again.
    #: One attribute, replaced whole: a reader never sees half of a rebuild.
    _turn_order: tuple[dict[str, list[str]], dict[str, int]] | None = None

    @property
    def preferences(self) -> dict[tuple[str, str], set[str]]:
        return self.keyed["preference"]

    def neighbours(self, item_id: str) -> tuple[str | None, str | None]:
        """The turns said just before and just after a turn in its session (None at
        either end, and for an item that is not a turn): recall lets a turn's neighbours
        share its relevance, as an answer follows the question it answers."""
        order = self._turn_order
        if order is None:
            order = self._turn_order = _turn_order(list(self.entries.values()))
        sessions, place = order
        entry = self.entries.get(item_id)
        at = place.get(item_id)
        if entry is None or entry.session not in sessions or at is None:
            return None, None
        turns = sessions[entry.session]
        before = turns[at - 1] if at > 0 else None
        after = turns[at + 1] if at + 1 < len(turns) else None
        return before, after

    def put(self, entry: Entry) -> None:
        self.drop(entry.item_id)
        self.entries[entry.item_id] = entry
        self.subjects[entry.subject] += 1
        if entry.kind == "turn":
            self._turn_order = None
        by_key = self.keyed.get(entry.kind)
        if by_key is not None:
            by_key.setdefault((entry.subject, entry.predicate), set()).add(entry.item_id)

    def drop(self, item_id: str) -> Entry | None:
        old = self.entries.pop(item_id, None)
        if old is not None:
            self.subjects[old.subject] -= 1
            if not self.subjects[old.subject]:
                del self.subjects[old.subject]
            if old.kind == "turn":
                self._turn_order = None
        by_key = None if old is None else self.keyed.get(old.kind)
        if old is not None and by_key is not None:
            key = (old.subject, old.predicate)
            same = by_key.get(key)
            if same is not None:
                same.discard(item_id)
                if not same:
                    del by_key[key]
        return old


def _turn_order(entries: Iterable[Entry]) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Each session's turns by the time they were written (then id), and each one's place."""
    by_session: dict[str, list[tuple[str, str]]] = {}
    for e in entries:
        if e.kind == "turn" and e.session is not None:
            by_session.setdefault(e.session, []).append((e.written_at, e.item_id))
    sessions = {s: [i for _, i in sorted(turns)] for s, turns in by_session.items()}
    place = {i: n for turns in sessions.values() for n, i in enumerate(turns)}
    return sessions, place


class RecallStates:
    """Every namespace's state this process has recalled from, kept between recalls, and
    with `files` persisted sealed (`state_files`), so that a fresh process loads a
    namespace's state in one pass instead of reading every item again."""

    def __init__(
        self, max_namespaces: int = MAX_NAMESPACES, files: StateFiles | None = None
    ) -> None:
        self._states: OrderedDict[str, NamespaceState] = OrderedDict()
        self._max = max_namespaces
        self._lock = threading.Lock()
        self.files = files

    def state(
        self,
        conn: Connection,
        log: EventLog,
        namespace: str,
        policy: RetentionPolicy,
        position: int,
    ) -> NamespaceState:
        """The namespace's state as of log position `position` (the position the
        projections have applied, read after they caught up), refreshed from the events
        after the state's own position; loaded from its state file or read whole the
        first time, under another retention policy, or when too much happened since."""
        with self._lock:
            state = self._states.get(namespace)
            if state is not None:
                self._states.move_to_end(namespace)
            if state is not None and not _current(state, policy, position):
                state = None
            if state is None:
                state = self._loaded(log, namespace, policy, position)
                if state is None:
                    state = NamespaceState(namespace, policy, position)
                    for entry in _read(conn, policy, namespace, None):
                        state.put(entry)
                self._states[namespace] = state
                while len(self._states) > self._max:
                    self._states.popitem(last=False)
            removed = 0
            if position > state.position:
                removed = _refresh(conn, log, state, position)
            if self.files is not None and (
                state.saved < 0 or removed or state.position - state.saved >= SAVE_EVERY
            ):
                self._save(log, state)
            return state

    def _loaded(
        self, log: EventLog, namespace: str, policy: RetentionPolicy, position: int
    ) -> NamespaceState | None:
        """The namespace's state from its file, if it is of this log (the event at its
        position is the one it names) and this policy, and not too far behind."""
        if self.files is None:
            return None
        snapshot = self.files.load(namespace)
        if snapshot is None or snapshot.policy != policy_digest(policy):
            return None
        state = NamespaceState(namespace, policy, snapshot.position, saved=snapshot.position)
        if not _current(state, policy, position) or snapshot.head != _head(log, state.position):
            return None
        entries = state.entries
        keyed = state.keyed
        subjects = state.subjects
        for row in snapshot.rows:
            entry = Entry._make(row)
            entries[entry.item_id] = entry
            subjects[entry.subject] += 1
            by_key = keyed.get(entry.kind)
            if by_key is not None:
                by_key.setdefault((entry.subject, entry.predicate), set()).add(entry.item_id)
        return state

    def _save(self, log: EventLog, state: NamespaceState) -> None:
        assert self.files is not None
        rows = [tuple(entry) for entry in state.entries.values()]
        head = _head(log, state.position)
        snapshot = Snapshot(state.position, head, policy_digest(state.policy), rows)
        self.files.save(state.namespace, snapshot)
        state.saved = state.position

    def evict(self, item_ids: Sequence[str]) -> int:
        """Drop these items from every namespace's state (an erasure in this process),
        and remove every state file: whichever namespace's file held them, none keeps
        them; each is written again, whole, at its namespace's next recall."""
        with self._lock:
            if self.files is not None:
                self.files.remove_all()
                for state in self._states.values():
                    state.saved = -1
            return sum(
                1
                for state in self._states.values()
                for item_id in item_ids
                if state.drop(item_id) is not None
            )

    def holding(self, item_ids: Sequence[str]) -> int:
        with self._lock:
            return sum(1 for state in self._states.values() for i in item_ids if i in state.entries)

    def clear(self) -> None:
        with self._lock:
            self._states.clear()


def _current(state: NamespaceState, policy: RetentionPolicy, position: int) -> bool:
    """Whether `state` can be brought to `position` by refreshing it."""
    return (
        state.policy == policy
        and state.position <= position
        and position - state.position <= REFRESH_EVENTS
    )


def _head(log: EventLog, position: int) -> str:
    """The event at `position`, named by its aggregate and version: a state file of
    another log (a restore, a store re-created) names another one."""
    found = log.notifications(position - 1, 1) if position > 0 else []
    if not found or found[0].id != position:
        return f"none@{position}"
    return f"{found[0].originator_id}:{found[0].originator_version}"


def _refresh(conn: Connection, log: EventLog, state: NamespaceState, position: int) -> int:
    """Read again the items the events after the state's position touched: their own
    (each event's item), those a served context reinforced (a policy may count a TTL from
    the last read), and for facts every fact of the same subject and predicate (a new fact
    supersedes or conflicts with the others). Returns how many items left the state."""
    touched: set[str] = set()
    start = state.position
    while start < position:
        batch = log.notifications(start, min(500, position - start))
        if not batch:
            break
        for event in decode_clear(log, batch):
            touched.add(event.item_id)
            if event.name == "ContextServed":
                touched.update(str(s["item_id"]) for s in event.attrs.get("items") or [])
        start = batch[-1].id
    old = [e for i in touched if (e := state.entries.get(i)) is not None and e.kind == "fact"]
    keys = {(e.subject, e.predicate) for e in old}
    found = {e.item_id: e for e in _read(conn, state.policy, state.namespace, sorted(touched))}
    keys.update((e.subject, e.predicate) for e in found.values() if e.kind == "fact")
    dropped = {item_id for item_id in touched if state.drop(item_id) is not None}
    if keys:
        facts_by_key = state.keyed["fact"]
        for key in keys:
            for item_id in list(facts_by_key.get(key, ())):
                state.drop(item_id)
                dropped.add(item_id)
        again = _read_facts_of(conn, state.policy, state.namespace, keys)
        found.update((e.item_id, e) for e in again)
    for entry in found.values():
        state.put(entry)
    state.position = position
    return len(dropped - found.keys())  # items that left the state (erased, suppressed...)


def _read(
    conn: Connection, policy: RetentionPolicy, namespace: str, item_ids: Sequence[str] | None
) -> Iterable[Entry]:
    """The namespace's usable items (all, or those of `item_ids`), every kind."""
    if item_ids is None:
        rows = conn.execute(_statement(False), {"namespace": namespace}).mappings()
        yield from _entries(policy, rows, namespace)
        return
    for start in range(0, len(item_ids), ID_CHUNK):
        chunk = list(item_ids[start : start + ID_CHUNK])
        rows = conn.execute(_statement(True), {"ids": chunk}).mappings()
        yield from _entries(policy, rows, namespace)


def _read_facts_of(
    conn: Connection, policy: RetentionPolicy, namespace: str, keys: set[tuple[str, str]]
) -> Iterable[Entry]:
    ordered = sorted(keys)
    for start in range(0, len(ordered), ID_CHUNK):
        params = {"namespace": namespace, "keys": ordered[start : start + ID_CHUNK]}
        rows = conn.execute(_facts_statement(), params).mappings()
        yield from _entries(policy, rows, namespace)


def _entries(policy: RetentionPolicy, rows: Iterable[Any], namespace: str) -> Iterable[Entry]:
    seen: set[str] = set()
    for row in rows:
        if row["namespace"] != namespace or row["item_id"] in seen:
            continue  # by id: another namespace's; by version: one row per fact
        seen.add(row["item_id"])
        kind = row["p_kind"]
        expires = policy.decide(row).expires_at
        until = expires or _NEVER
        valid_to = row["p_valid_to"]
        if valid_to is not None and valid_to < until:
            until = valid_to
        yield Entry(
            item_id=row["item_id"],
            kind=kind,
            subject=row["p_subject"],
            predicate=row["predicate"],
            category=row["p_category"],
            tier=row["tier"],
            written_at=row["written_at"],
            valid_from=row["p_since"],
            usable_from=row["p_since"] if kind == "fact" else "",
            usable_until=until,
            expires_at=expires,
            status=row["p_status"],
            scope=row["p_scope"],
            strength=row["p_strength"],
            version=int(row["version"]),
            flags=row["flags"] or "",
            origin=row["p_origin"],
            session=row["session_id"] if kind == "turn" else None,
        )


def _kind_query(kind: str, narrow: Any) -> Any:
    """Live, readable, unsuppressed rows of one kind (for facts the current version),
    with the catalog's columns as they are (the retention policy decides on them) and
    the kind's own as `p_*`. Time, tier and category are not decided here: they are
    compared at read time, so the state stays right as time passes."""
    table = TABLES[kind]
    # typed NULLs: PostgreSQL would take an untyped one in a UNION for text
    text_none, number_none = cast(null(), Text), cast(null(), Float)
    subject = table.c.speaker if kind == "turn" else table.c.subject
    since = table.c.written_at if kind == "turn" else table.c.valid_from
    query = (
        select(
            *catalog.c,
            literal(kind, Text).label("p_kind"),
            subject.label("p_subject"),
            table.c.category.label("p_category"),
            table.c.origin.label("p_origin"),
            since.label("p_since"),
            (facts.c.valid_to if kind == "fact" else text_none).label("p_valid_to"),
            (facts.c.status if kind == "fact" else text_none).label("p_status"),
            (table.c.scope if kind == "preference" else text_none).label("p_scope"),
            (table.c.strength if kind == "preference" else number_none).label("p_strength"),
        )
        .join(catalog, catalog.c.item_id == table.c.item_id)
        .where(narrow, table.c.suppressed.is_(False), table.c.sealed.is_not(None))
    )
    if kind == "fact":
        query = query.where(facts.c.status.in_(("current", "conflict")))
    return query


@functools.cache
def _statement(by_id: bool) -> Any:
    """Every kind in one statement: by `namespace`, or by `ids` (then without a namespace
    condition, kept in Python: given one, SQLite reads the namespace's index, every row
    of a large namespace, instead of looking the ids up by key)."""
    queries = []
    for kind, table in TABLES.items():
        narrow: ColumnElement[bool]
        if by_id:
            narrow = table.c.item_id.in_(bindparam("ids", expanding=True))
        else:
            narrow = table.c.namespace == bindparam("namespace")
        queries.append(_kind_query(kind, narrow))
    return union_all(*queries)


@functools.cache
def _facts_statement() -> Any:
    where = tuple_(facts.c.subject, facts.c.predicate).in_(bindparam("keys", expanding=True))
    return _kind_query("fact", where & (facts.c.namespace == bindparam("namespace")))
