"""The mention index: where a piece of information lives, with no plaintext.

People forget information, not items: one phone number lives in a dozen turns, a fact,
a file. To find every place a value is mentioned, a forget used to open every sealed
cell of the namespace (100,000 cells: 30 s). This index keeps, for every text the
store holds (turns, every version of facts and preferences, memory files), the item
under keyed hashes of the text's units (memory_ledger/text_units.py), so a lookup
costs the postings of the value's rarest units plus opening only the items that hold
all of them; the matcher then decides on the opened text, as before.

Unlike the keyword index (live, unsuppressed items, for ranking), it covers everything
an item can still be read as: superseded and suppressed versions too, since their text
can still be opened and must still be redacted. Terms are 8-byte BLAKE2b MACs under the
namespace's index key, the keyword index's own (`index_key_ident`), so what a free page
or a backup keeps of a deleted posting tells nothing without that key, and a
whole-namespace forget, which destroys the key, ends even that. Beside the hash a
posting holds its namespace and a document number; a document row holds the item id,
the key generation and the packed hashes (to delete its postings by key).

Like the keyword index it never interprets events: every item an event touches is
withdrawn at once and queued, and the end of the catch-up (`settle`) recomputes each
queued item from the source tables as they then are, so each event type comes out
right by construction and a rebuild equals the incremental view. A lookup that meets
documents hashed under another generation than the live one (written just before a
key was replaced) answers None, and the caller searches the slow way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Index,
    Integer,
    LargeBinary,
    Table,
    Text,
    delete,
    func,
    select,
)

from memory_ledger.event_log import EventLog
from memory_ledger.projections.base import Projection, metadata
from memory_ledger.projections.cells import Cells, Opened
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.facts import facts
from memory_ledger.projections.id_sets import among
from memory_ledger.projections.keyword_index import (
    DocNumber,
    TermHasher,
    hasher_of,
    pack_terms,
    unpack_terms,
)
from memory_ledger.projections.memory_files import memory_files
from memory_ledger.projections.preferences import preferences
from memory_ledger.projections.transcripts import transcripts
from memory_ledger.text_units import lookup_units, units

CHUNK = 500
#: The tables whose sealed cells are texts of items, with the field each keeps.
SOURCES: tuple[tuple[Table, str], ...] = (
    (transcripts, "content"),
    (facts, "value"),
    (preferences, "value"),
    (memory_files, "content"),
)
#: How many of a value's rarest units are intersected: two cut the candidates to
#: almost only the items that mention it; more would cost postings for little.
INTERSECTED = 2
#: Events that change no text of their item: an item is recomputed for every other one.
TEXT_UNCHANGED = frozenset(
    {"ContextServed", "Viewed", "Archived", "Unarchived", "Suppressed", "Unsuppressed"}
)

mention_docs = Table(
    "mention_docs",
    metadata,
    Column("doc", DocNumber, primary_key=True, autoincrement=True),
    Column("item_id", Text, nullable=False),
    Column("namespace", Text, nullable=False),
    Column("key_generation", Integer, nullable=False),
    # The item's distinct unit hashes, sorted, packed: its postings' keys.
    Column("terms", LargeBinary, nullable=False),
    Index("ix_mention_docs_item", "item_id", unique=True),
    Index("ix_mention_docs_namespace", "namespace", "key_generation"),
    sqlite_autoincrement=True,
)

mention_postings = Table(
    "mention_postings",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("term", BigInteger, primary_key=True),
    Column("doc", DocNumber, primary_key=True, autoincrement=False),
    sqlite_with_rowid=False,
)

mention_pending = Table("mention_pending", metadata, Column("item_id", Text, primary_key=True))


class MentionIndexProjection(Projection):
    name: ClassVar[str] = "mention_index"
    table = mention_docs
    primary_key = ("item_id",)
    holds = "keyed hashes of the units of every text of every item (per-namespace key)"
    reads_cells = True

    def __init__(self, log: EventLog | None = None) -> None:
        self.log = log

    @property
    def tables(self) -> tuple[Table, ...]:
        return (mention_postings, mention_docs, mention_pending)

    def wants(self, event: ProjectedEvent) -> bool:
        return True  # any event of any item: an id without texts simply gets no row

    def handle(self, event: ProjectedEvent, batch: Any) -> None:
        raise NotImplementedError("the mention index recomputes items in `apply`")

    def apply(self, conn: Connection, events: Sequence[ProjectedEvent]) -> None:
        """Withdraw every touched item at once (an erased or rewritten text is never
        findable after the batch commits); queue them all for `settle`."""
        relevant = [e for e in events if e.name not in TEXT_UNCHANGED]
        touched = sorted({e.item_id for e in relevant})
        changed = sorted({e.item_id for e in relevant if e.name != "Recorded"})
        self.purge(conn, changed)
        # An erased item has nothing to index again (its texts cannot be read).
        erased = {e.item_id for e in relevant if e.name == "Erased"}
        _insert(conn, mention_pending, [(i,) for i in touched if i not in erased])

    def settle(self, conn: Connection, opened: Opened | None = None) -> None:
        pending = sorted(conn.execute(select(mention_pending.c.item_id)).scalars())
        if not pending:
            return
        if self.log is None:
            raise RuntimeError("the mention index needs the event log to index items")
        cells = Cells(self.log, opened)
        hashers: dict[str, TermHasher] = {}
        seen: dict[str, str] = {}  # word -> unit, for this settle only
        for start in range(0, len(pending), CHUNK):
            chunk = pending[start : start + CHUNK]
            texts = item_texts(conn, cells, chunk)
            docs = []
            for item_id, (namespace, said) in sorted(texts.items()):
                hasher = hashers.get(namespace)
                if hasher is None:
                    hasher = hasher_of(self.log, namespace, create=True)
                    assert hasher is not None
                    hashers[namespace] = hasher
                terms = {hasher(u) for text in said for u in units(text, seen)}
                if terms:
                    docs.append((item_id, namespace, hasher.generation, pack_terms(terms)))
            _insert(conn, mention_docs, docs, ("item_id", "namespace", "key_generation", "terms"))
            numbers = dict(
                conn.execute(
                    select(mention_docs.c.item_id, mention_docs.c.doc).where(
                        among(mention_docs.c.item_id, [d[0] for d in docs])
                    )
                ).all()
            )
            postings = sorted(
                (namespace, term, int(numbers[item_id]))
                for item_id, namespace, _, packed in docs
                for term in unpack_terms(packed)
            )
            _insert(conn, mention_postings, postings)
        conn.execute(delete(mention_pending))

    # -- the store protocol --------------------------------------------------------------

    def purge(self, conn: Connection, item_ids: Sequence[str]) -> None:
        """The items' postings (by key, from their document rows), documents and queue
        entries: no index key is needed to forget."""
        d = mention_docs
        for start in range(0, len(item_ids), CHUNK):
            chunk = sorted(set(item_ids[start : start + CHUNK]))
            rows = conn.execute(
                select(d.c.doc, d.c.namespace, d.c.terms).where(among(d.c.item_id, chunk))
            ).all()
            keys = [(ns, t, int(doc)) for doc, ns, terms in rows for t in unpack_terms(terms)]
            if keys:
                m = _mark(conn)
                conn.exec_driver_sql(
                    f"DELETE FROM {mention_postings.name} "
                    f"WHERE namespace = {m} AND term = {m} AND doc = {m}",
                    keys,
                )
            if rows:
                conn.execute(delete(d).where(among(d.c.doc, [int(r[0]) for r in rows])))
            conn.execute(delete(mention_pending).where(among(mention_pending.c.item_id, chunk)))

    def count_rows(self, conn: Connection, item_ids: Sequence[str]) -> int:
        """Document rows of the items (no posting outlives its document: the purge
        deletes postings first, by the document's own list)."""
        ids = sorted(set(item_ids))
        if not ids:
            return 0
        query = (
            select(func.count()).select_from(mention_docs).where(among(mention_docs.c.item_id, ids))
        )
        return int(conn.execute(query).scalar() or 0)

    def unattributed_rows(self, conn: Connection) -> int:
        """Postings whose document row is gone: a purge that lost its way."""
        p, d = mention_postings, mention_docs
        orphan = select(func.count()).select_from(p).where(~p.c.doc.in_(select(d.c.doc)))
        return int(conn.execute(orphan).scalar() or 0)

    def snapshot(self, conn: Connection) -> list[Any]:
        """The documents as ids and packed terms in hex (numbers are the database's to
        give)."""
        d = mention_docs
        query = select(d.c.item_id, d.c.namespace, d.c.key_generation, d.c.terms)
        rows = conn.execute(query.order_by(d.c.item_id))
        return [(i, ns, gen, bytes(terms).hex()) for i, ns, gen, terms in rows]


def item_texts(
    conn: Connection, cells: Cells, item_ids: Sequence[str]
) -> dict[str, tuple[str, list[str]]]:
    """item id -> (namespace, every readable text its source rows keep: all versions)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for table, field in SOURCES:
        rows = conn.execute(
            select(
                table.c.item_id, table.c.namespace, table.c.key_generation, table.c.sealed
            ).where(among(table.c.item_id, list(item_ids)), table.c.sealed.is_not(None))
        ).all()
        opened = cells.open([(r[0], r[2], r[3]) for r in rows], field)
        for (item_id, namespace, _, _), text in zip(rows, opened, strict=True):
            if text:
                out.setdefault(item_id, (namespace, []))[1].append(text)
    return out


def candidates(
    conn: Connection, log: EventLog, namespace: str, values: Sequence[str]
) -> set[str] | None:
    """The items of the namespace that hold every one of some value's rarest units: a
    superset of those the matcher finds any of the values in. None when the index
    cannot answer (a value without usable units, or documents under another key
    generation), and the caller must search the slow way."""
    return candidates_each(conn, log, namespace, [values])[0]


def candidates_each(
    conn: Connection, log: EventLog, namespace: str, groups: Sequence[Sequence[str]]
) -> list[set[str] | None]:
    """`candidates` for each group of values, in a few queries for all of them: a plan
    that looks up the values of 700 facts asks the index once, not 700 times (each
    lookup costs its own count, postings and document queries). Each answer is what
    `candidates` gives for that group alone."""
    wanted = [[lookup_units(v) for v in values] for values in groups]
    usable = [
        bool(values) and all(w is not None for w in ws)
        for values, ws in zip(groups, wanted, strict=True)
    ]
    out: list[set[str] | None] = [None] * len(groups)
    if not any(usable):
        return out
    hasher = hasher_of(log, namespace, create=False)
    if hasher is None:  # never indexed: the namespace holds no text
        return [set() if ok else None for ok in usable]
    d, p = mention_docs, mention_postings
    stale = select(d.c.doc).where(
        d.c.namespace == namespace, d.c.key_generation != hasher.generation
    )
    if conn.execute(stale.limit(1)).first() is not None:
        return out
    hashed = [
        [sorted({hasher(u) for u in w or ()}) for w in ws] if ok else []
        for ws, ok in zip(wanted, usable, strict=True)
    ]
    every = sorted({t for group in hashed for terms in group for t in terms})
    counts: dict[int, int] = {}
    for start in range(0, len(every), CHUNK):
        chunk = every[start : start + CHUNK]
        counts.update(
            conn.execute(
                select(p.c.term, func.count())
                .where(p.c.namespace == namespace, among(p.c.term, chunk))
                .group_by(p.c.term)
            ).all()
        )
    # Each value's rarest units, whose postings are then read together (a request that
    # erases a thousand items looks up a thousand values: a query per chunk of terms,
    # not per term).
    chosen = [
        [
            sorted(terms, key=lambda t: counts[t])[:INTERSECTED]
            for terms in group
            if all(t in counts for t in terms)  # else a unit no text holds: nothing mentions it
        ]
        for group in hashed
    ]
    needed = sorted({t for group in chosen for terms in group for t in terms})
    postings: dict[int, set[int]] = {t: set() for t in needed}
    for start in range(0, len(needed), CHUNK):
        query = select(p.c.term, p.c.doc).where(
            p.c.namespace == namespace, among(p.c.term, needed[start : start + CHUNK])
        )
        for term, doc in conn.execute(query):
            postings[term].add(doc)
    docs_each: list[set[int]] = []
    for group in chosen:
        docs: set[int] = set()
        for terms in group:
            docs |= set.intersection(*(postings[t] for t in terms))
        docs_each.append(docs)
    item_of: dict[int, str] = {}
    numbers = sorted(set().union(*docs_each))
    for start in range(0, len(numbers), CHUNK):
        chunk = numbers[start : start + CHUNK]
        item_of.update(
            conn.execute(select(d.c.doc, d.c.item_id).where(among(d.c.doc, chunk))).all()
        )
    for at, (docs, ok) in enumerate(zip(docs_each, usable, strict=True)):
        if ok:
            out[at] = {item_of[doc] for doc in docs if doc in item_of}
    return out


def _insert(
    conn: Connection, table: Table, rows: Iterable[tuple[Any, ...]], names: Sequence[str] = ()
) -> None:
    rows = list(rows)
    if not rows:
        return
    names = list(names) or [c.name for c in table.columns]
    m = _mark(conn)
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join([m] * len(names))})"
    conn.exec_driver_sql(sql, rows)


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"
