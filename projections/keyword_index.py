"""The keyword index: exact words, numbers and identifiers, which embeddings blur.

A passport number, a phone prefix or a rare surname is one token among many to an
embedder; a keyword index finds it exactly. It holds live, unsuppressed items only: facts
(the current or conflicting version) and preferences as "<predicate>: <value>", and
transcript turns by content.

Why our own postings table, not SQLite FTS5 or PostgreSQL full-text search: this store
must forget provably. An FTS5 'delete' leaves the deleted terms inside the index segments
until a merge, and 'optimize' rewrites the whole index, far too slow on every forget at
100k items; FTS5's `secure-delete` option needs SQLite 3.44, and Debian's Python links
3.40. PostgreSQL's tsvector/GIN would be a second implementation, and its default parsers
do not split Chinese. A plain table `keyword_postings(namespace, term, doc, tf)`, with
`keyword_docs` (each item's length and terms) for BM25's length normalisation, loses an
item's terms by ordinary row deletes, which `secure_delete` zeroes on SQLite, on both
backends with the same SQL; the byte scan reads these tables like every other.

Why this lean layout: every forget scans the data directory's bytes, so the index's size
is paid on every forget. A posting is stored once, as the key of its table (WITHOUT
ROWID on SQLite: no rowid copy, no separate search index), and names its item by a small
integer `doc`, not a 36-character id. An item's postings are found for deletion through
its document row, which lists its distinct terms: one short text per item instead of a
second index over every posting. Document numbers are never reused (AUTOINCREMENT on
SQLite, a sequence on PostgreSQL), so a posting can never be attributed to another item
than the one it was written for; a search joins postings to their document rows, so a
posting without one (`unattributed_rows`) could never be served.

Like summaries, the projection never interprets event contents: the runner applies it
after the facts, preferences and transcripts projections in the same transaction, and it
recomputes every touched item from their tables as they are then. So each event type
(recorded, superseded, redacted, suppressed, unsuppressed, erased) comes out right by
construction, and a rebuild equals the incremental view. Also like summaries, what
withdraws content is applied in the batch itself, and what adds waits for the end of
the catch-up (`settle`), in the same transaction as its last batch.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    Table,
    Text,
    case,
    delete,
    func,
    literal,
    select,
    tuple_,
)

from memory_ledger.event_log import EventLog
from projections.base import Projection, Row, keys_in, metadata
from projections.cells import Cells
from projections.events import ProjectedEvent
from projections.facts import KEY_COLUMNS, LIVE_STATUSES, facts
from projections.preferences import preferences
from projections.transcripts import transcripts

CHUNK = 500
#: Items indexed together at the end of a catch-up: few round trips, bounded memory.
SETTLE_CHUNK = 5000
K1 = 1.2
TIE_SLACK = 8
B = 0.75
#: Longer terms are cut (queries are cut the same way, so they still match): a base64
#: blob must not become an index key larger than PostgreSQL's B-tree accepts.
MAX_TERM_CHARS = 64

#: A document's number: 64-bit on PostgreSQL (its sequence must not run out in a long-lived
#: store, as every re-indexing of an item takes a new one); SQLite's integers are 64-bit,
#: and only `INTEGER` makes the column the rowid, which AUTOINCREMENT needs.
DocNumber = BigInteger().with_variant(Integer, "sqlite")

keyword_docs = Table(
    "keyword_docs",
    metadata,
    Column("doc", DocNumber, primary_key=True, autoincrement=True),
    Column("item_id", Text, nullable=False),
    Column("namespace", Text, nullable=False),
    Column("length", Integer, nullable=False),
    # A fact's key (NULL for other kinds): a newly recorded fact can supersede the live
    # facts of its key without an event of theirs, and this finds the indexed ones.
    Column("subject", Text),
    Column("predicate", Text),
    # The item's distinct terms, sorted, one per line: its postings' keys, so a purge
    # deletes them by primary key. Last, so a search reading a document's length need not
    # read a long item's terms (SQLite reads a record's columns in order).
    Column("terms", Text, nullable=False),
    Index("ix_keyword_docs_item", "item_id", unique=True),
    # Covering, for the namespace's document count and total length.
    Index("ix_keyword_docs_namespace", "namespace", "length"),
    Index("ix_keyword_docs_fact_key", "namespace", "subject", "predicate"),
    # Numbers are never reused, not even those of the last rows deleted (see the module).
    sqlite_autoincrement=True,
)

keyword_postings = Table(
    "keyword_postings",
    metadata,
    # The key is the search's access path: (namespace, term IN ...) reads the postings
    # of the query's terms in one range each. No other index.
    Column("namespace", Text, primary_key=True),
    Column("term", Text, primary_key=True),
    Column("doc", DocNumber, primary_key=True, autoincrement=False),
    Column("tf", Integer, nullable=False),
    sqlite_with_rowid=False,
)

#: What `_index` writes of a document row: its number is the database's to give.
DOC_COLUMNS = ("item_id", "namespace", "length", "subject", "predicate", "terms")

# Items whose terms are (re)computed at the end of the catch-up in progress (see `apply`).
keyword_pending = Table(
    "keyword_pending",
    metadata,
    Column("item_id", Text, primary_key=True),
)

# -- tokenizer ---------------------------------------------------------------------------

# Scripts written without spaces between words (and Hangul, whose words are long
# agglutinations): indexed as overlapping character bigrams, no dictionary needed.
_UNSPACED = (
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1100-\u11ff"  # Hangul Jamo
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals
    "\u3005\u3006\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c"  # 々〆〇, numerals
    "\u3040-\u312f"  # Hiragana, Katakana, Bopomofo
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31a0-\u31ff"  # Bopomofo extended, Katakana extensions
    "\u3400-\u4dbf\u4e00-\u9fff"  # CJK unified ideographs (+ extension A)
    "\ua000-\ua4cf"  # Yi
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B to G
)


def _mark_ranges() -> str:
    """Combining marks of the BMP as a character-class body: Python's \\w excludes them,
    which would cut Devanagari or Arabic words at every vowel sign."""
    ranges: list[tuple[int, int]] = []
    for code in range(0x300, 0x10000):
        if unicodedata.category(chr(code)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    return "".join(f"\\u{a:04x}-\\u{b:04x}" if a != b else f"\\u{a:04x}" for a, b in ranges)


_WORD = rf"[\w{_mark_ranges()}]+"
# A connector between two word runs keeps the whole as one more term ("0571-8888",
# "e-12.5", "alice@example.com"), besides the runs themselves.
_CONNECTORS = "-./:@+#&"
_TOKEN = re.compile(rf"{_WORD}(?:[{re.escape(_CONNECTORS)}]{_WORD})*")
_PARTS = re.compile(rf"[{re.escape(_CONNECTORS)}_]+")
_UNSPACED_RUN = re.compile(f"[{_UNSPACED}]+")
_LETTERS_OR_DIGITS = re.compile(r"\d+|\D+")

_STOPWORD_TEXT = (
    "a an and are as at be been but by for from had has have he her his i if in into is "
    "it its me my of on or our she so than that the their them then there these they this "
    "those to was we were what when which who will with you your"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def tokenize(text: str) -> list[str]:
    """Terms of a text in order, repeats kept (they are the term frequencies).

    NFKC then casefold, so full-width digits, ligatures and case all meet. Words and
    numbers are terms; a run joined by connectors ("0571-8888", "v1.2.3") is a term as
    well as each of its parts, so both the whole identifier and a part ("0571") match;
    a run mixing letters and digits ("e12345678") adds its letter and digit pieces
    ("12345678"). Unspaced scripts give overlapping bigrams, or the character itself
    when it stands alone. Single ASCII letters and a few English stopwords are dropped:
    they match everything and identify nothing. Queries use the same function.
    """
    normal = unicodedata.normalize("NFKC", text).casefold()
    out: list[str] = []
    for whole in _TOKEN.findall(normal):
        if whole.isascii() and (whole.isalpha() or whole.isdigit()):  # most tokens
            if (len(whole) > 1 or whole.isdigit()) and whole not in STOPWORDS:
                out.append(whole[:MAX_TERM_CHARS])
            continue
        parts = [p for p in _PARTS.split(whole) if p]
        if len(parts) > 1 and not _UNSPACED_RUN.search(whole):
            _keep(out, whole)
        for part in parts:
            if _UNSPACED_RUN.search(part):
                _split_unspaced(out, part)
            else:
                _word(out, part)
    return out


def _split_unspaced(out: list[str], part: str) -> None:
    at = 0
    for run in _UNSPACED_RUN.finditer(part):
        if run.start() > at:
            _word(out, part[at : run.start()])
        chars = run.group()
        if len(chars) == 1:
            out.append(chars)
        else:
            out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        at = run.end()
    if at < len(part):
        _word(out, part[at:])


def _word(out: list[str], word: str) -> None:
    _keep(out, word)
    pieces = _LETTERS_OR_DIGITS.findall(word)
    if len(pieces) > 1:
        for piece in pieces:
            _keep(out, piece)


def _keep(out: list[str], term: str) -> None:
    if len(term) == 1 and term.isascii() and term.isalpha():
        return
    if term in STOPWORDS or not any(c.isalnum() for c in term):
        return
    out.append(term[:MAX_TERM_CHARS])


# -- the projection ----------------------------------------------------------------------


class KeywordIndexProjection(Projection):
    name: ClassVar[str] = "keyword_index"
    # The per-item table: every term of an item is in its row's `terms`, beside the item
    # id. The residue check reads `table` by item (erased ones excluded), as the data map
    # counts it: one row per indexed item.
    table = keyword_docs
    primary_key = ("item_id",)
    holds = "terms (words, numbers, bigrams) of live, unsuppressed items, with counts"

    @property
    def tables(self) -> tuple[Table, ...]:
        return (keyword_postings, keyword_docs, keyword_pending)

    def __init__(self, log: EventLog | None = None) -> None:
        self.log = log

    @property
    def cells(self) -> Cells:
        if self.log is None:
            raise RuntimeError("this keyword index was made without the log")
        return Cells(self.log)

    def wants(self, event: ProjectedEvent) -> bool:
        if event.name == "Recorded":
            return event.attrs["kind"] in ("fact", "preference", "turn")
        return True  # any later event of an item: unknown ids simply have no rows

    def handle(self, event: ProjectedEvent, batch: Any) -> None:
        raise NotImplementedError("the keyword index recomputes items in `apply`")

    def apply(self, conn: Connection, events: Sequence[ProjectedEvent]) -> None:
        """Withdraw at once every touched item's terms, and those of indexed facts that
        a newly recorded fact of their key superseded, so no committed batch leaves
        erased, suppressed or replaced words findable; index what is live at the end of
        the catch-up (`settle`). In a rebuild most facts are superseded a few batches
        after they are recorded: indexing them per batch wrote and deleted their
        postings for nothing (19 s instead of 7 s added to a rebuild at 100k events)."""
        relevant = [e for e in events if self.wants(e)]
        if not relevant:
            return
        changed = {e.item_id for e in relevant if e.name != "Recorded"}
        # A Recorded event is its item's first: such an item has no rows to delete.
        recorded = {e.item_id for e in relevant if e.name == "Recorded"} - changed
        keys = {
            tuple(e.attrs[c] for c in KEY_COLUMNS)
            for e in relevant
            if e.name == "Recorded" and e.attrs["kind"] == "fact"
        }
        # Without an event of its own, an indexed fact's text cannot change, but a
        # newcomer can supersede it: it can only leave the index, never need new terms.
        bystanders = sorted(self._indexed_facts_of(conn, sorted(keys)) - changed - recorded)
        cells = self.cells
        gone = [
            i for c in _chunks(bystanders) for i in sorted(set(c) - set(live_texts(conn, c, cells)))
        ]
        self.purge(conn, sorted(changed.union(gone)))  # also their pending rows
        _insert(conn, keyword_pending, [(i,) for i in sorted(changed | recorded)])

    def settle(self, conn: Connection) -> None:
        pending = sorted(conn.execute(select(keyword_pending.c.item_id)).scalars())
        if not pending:
            return
        # A pending item has no terms: `apply` purged it, or it is new.
        for start in range(0, len(pending), SETTLE_CHUNK):
            self._index(conn, pending[start : start + SETTLE_CHUNK])
        conn.execute(delete(keyword_pending))

    def _indexed_facts_of(self, conn: Connection, keys: Sequence[tuple[Any, ...]]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(keys), 300):
            chunk = keys[start : start + 300]
            query = select(keyword_docs.c.item_id).where(keys_in(keyword_docs, KEY_COLUMNS, chunk))
            found.update(conn.execute(query).scalars())
        return found

    def _index(self, conn: Connection, item_ids: Sequence[str]) -> None:
        """Document rows first, which number the documents; then their postings, sorted
        by key, each chunk's in one executemany."""
        counted: list[tuple[str, LiveText, Counter[str]]] = []
        docs: list[tuple[str, str, int, str | None, str | None, str]] = []
        for item_id, live in sorted(live_texts(conn, item_ids, self.cells).items()):
            counts = Counter(tokenize(live.text))
            if not counts:
                continue
            counted.append((item_id, live, counts))
            # Terms hold no line break (they are runs of word characters and connectors),
            # so the lines are the postings' terms exactly.
            terms = "\n".join(sorted(counts))
            length = sum(counts.values())
            docs.append((item_id, live.namespace, length, live.subject, live.predicate, terms))
        _insert(conn, keyword_docs, docs, DOC_COLUMNS)
        numbers = self._numbers(conn, [item_id for item_id, _, _ in counted])
        postings = sorted(
            (live.namespace, term, numbers[item_id], n)
            for item_id, live, counts in counted
            for term, n in counts.items()
        )
        _insert(conn, keyword_postings, postings)

    @staticmethod
    def _numbers(conn: Connection, item_ids: Sequence[str]) -> dict[str, int]:
        d = keyword_docs
        numbers: dict[str, int] = {}
        for chunk in _chunks(item_ids):
            query = select(d.c.item_id, d.c.doc).where(d.c.item_id.in_(chunk))
            numbers.update((item_id, int(doc)) for item_id, doc in conn.execute(query))
        return numbers

    @staticmethod
    def _docs_of(conn: Connection, item_ids: Sequence[str]) -> list[tuple[int, str, str]]:
        """(doc, namespace, terms) of the items that have a document row."""
        d = keyword_docs
        query = select(d.c.doc, d.c.namespace, d.c.terms).where(d.c.item_id.in_(item_ids))
        return [(int(doc), namespace, terms) for doc, namespace, terms in conn.execute(query)]

    # -- the store protocol (see memory_ledger.stores.ProjectionStore) ---------------

    def purge(self, conn: Connection, item_ids: Sequence[str]) -> None:
        """The items' postings (by key: their document rows list the terms), document
        rows, and any pending recomputation of them (ids only). The document rows are
        deleted by the numbers whose postings were deleted: a row another transaction
        committed in between (PostgreSQL reads committed) keeps its postings' only key."""
        for chunk in _chunks(sorted(set(item_ids))):
            docs = self._docs_of(conn, chunk)
            keys = sorted((ns, term, doc) for doc, ns, terms in docs for term in terms.split("\n"))
            _delete_postings(conn, keys)
            if docs:
                numbers = [doc for doc, _, _ in docs]
                conn.execute(delete(keyword_docs).where(keyword_docs.c.doc.in_(numbers)))
            conn.execute(delete(keyword_pending).where(keyword_pending.c.item_id.in_(chunk)))

    def count_rows(self, conn: Connection, item_ids: Sequence[str]) -> int:
        """Document rows of the items, and the postings their terms key: 0 proves no term
        of theirs is left, given that no posting outlives its document row.

        Postings carry no item id, so once an item's document row is gone nothing cheap
        can name its postings: that invariant is kept by construction instead. A row and
        its postings are written together from one term count, and deleted together by
        `purge`, by key, in one transaction. `unattributed_rows` checks it by reading every
        posting (0.35 s for 550,000 postings on SQLite: not for the forget path), and the
        snapshot shows an orphan, so the rebuild property tests would catch one."""
        p = keyword_postings
        total = 0
        for chunk in _chunks(sorted(set(item_ids))):
            for doc, namespace, terms in self._docs_of(conn, chunk):
                total += 1
                for part in _chunks(terms.split("\n")):
                    query = select(func.count()).where(
                        p.c.namespace == namespace, p.c.term.in_(part), p.c.doc == doc
                    )
                    total += int(conn.execute(query).scalar_one())
        return total

    def unattributed_rows(self, conn: Connection) -> int:
        """Postings without a document row of their number and namespace (0 when sound).

        No item could find them, nor a search serve them, but their terms would be bytes
        left behind. Reads every posting: an audit, not part of a forget."""
        p, d = keyword_postings, keyword_docs
        # NOT IN a subquery: one hashed set of the documents (NOT NULL columns, so no
        # NULL trap), three times faster on SQLite than a join probing each posting's row.
        numbered = select(d.c.namespace, d.c.doc)
        query = select(func.count()).where(tuple_(p.c.namespace, p.c.doc).not_in(numbered))
        return int(conn.execute(query).scalar_one())

    def snapshot(self, conn: Connection) -> list[Row]:
        """Every row, with each posting's document number replaced by its item id (None
        for an orphan): numbers follow the order items were indexed in, which differs
        between an incremental build and a rebuild."""
        p, d = keyword_postings, keyword_docs
        joined = p.outerjoin(d, (d.c.doc == p.c.doc) & (d.c.namespace == p.c.namespace))
        query = select(p.c.namespace, p.c.term, d.c.item_id, p.c.tf).select_from(joined)
        rows: list[Row] = sorted(
            (dict(r) for r in conn.execute(query).mappings()),
            key=lambda r: (r["item_id"] or "", r["term"], r["namespace"], r["tf"]),
        )
        query = select(*(c for c in d.c if c.name != "doc")).order_by(d.c.item_id)
        rows.extend({"doc": dict(r)} for r in conn.execute(query).mappings())
        pending = sorted(conn.execute(select(keyword_pending.c.item_id)).scalars())
        if pending:  # work left unsettled after a catch-up would be a bug worth seeing
            rows.append({"pending": pending})
        return rows


class LiveText(NamedTuple):
    namespace: str
    text: str
    subject: str | None = None  # facts only: their key
    predicate: str | None = None


def live_texts(conn: Connection, item_ids: Sequence[str], cells: Cells) -> dict[str, LiveText]:
    """The indexed text of each item that is live and unsuppressed.

    A fact has one row per version; only a current or conflicting, readable one counts
    (the newest, should there ever be two)."""
    out: dict[str, LiveText] = {}
    newest: dict[str, int] = {}
    for table in (facts, preferences):
        columns = ("item_id", "version", "namespace", "subject", "predicate")
        columns += ("sealed", "key_generation")
        query = select(*(table.c[c] for c in columns)).where(
            table.c.item_id.in_(sorted(set(item_ids) - set(out))),  # an item has one kind
            table.c.value_state == "live",
            table.c.suppressed.is_(False),
        )
        if table is facts:
            query = query.where(facts.c.status.in_(LIVE_STATUSES))
        rows = [dict(r) for r in conn.execute(query).mappings()]
        cells.fill(rows, "value", "value")
        for r in rows:
            item_id, version, namespace = r["item_id"], r["version"], r["namespace"]
            subject, predicate, value = r["subject"], r["predicate"], r["value"]
            if value is None or newest.get(item_id, -1) > version:
                continue
            newest[item_id] = version
            text = f"{predicate.replace('_', ' ')}: {value}"
            key = (subject, predicate) if table is facts else (None, None)
            out[item_id] = LiveText(namespace, text, *key)
    t = transcripts
    query = select(t.c.item_id, t.c.namespace, t.c.sealed, t.c.key_generation).where(
        transcripts.c.item_id.in_(sorted(set(item_ids) - set(out))),
        transcripts.c.content_state == "live",
        transcripts.c.suppressed.is_(False),
    )
    turns = [dict(r) for r in conn.execute(query).mappings()]
    cells.fill(turns, "content", "content")
    for r in turns:
        if r["content"] is not None:
            out[r["item_id"]] = LiveText(r["namespace"], r["content"])
    return out


# -- search ------------------------------------------------------------------------------


def search(
    conn: Connection,
    namespace: str,
    query: str,
    k: int,
    allowed: set[str] | None = None,
) -> list[tuple[str, float]]:
    """The k best items of the namespace for the query by BM25, best first, ties by id.

    Document frequency, count and average length are the namespace's own: another
    tenant's vocabulary must not shape this one's ranking (nor be inferable from it).
    `allowed` restricts the answer, not the statistics: the caller's read-time filters
    (expiry, validity, scope) must not change how rare a word looks. One statement counts
    the query terms' documents with the namespace's totals; a second has the database
    sum BM25 over those terms' postings and return the best few rows.
    """
    terms = sorted(set(tokenize(query)))
    if not terms or k <= 0:
        return []
    p, d = keyword_postings, keyword_docs
    in_namespace = d.c.namespace == namespace
    n_docs = select(func.count()).select_from(d).where(in_namespace).scalar_subquery()
    total = select(func.sum(d.c.length)).where(in_namespace).scalar_subquery()
    counted = conn.execute(
        select(p.c.term, func.count(), n_docs, total)
        .where(p.c.namespace == namespace, p.c.term.in_(terms))
        .group_by(p.c.term)
    ).all()
    if not counted:
        return []
    n, average = int(counted[0][2]), int(counted[0][3]) / int(counted[0][2])
    idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df, _, _ in counted}
    # BM25 summed by the database, over the query terms' postings only, and only the
    # best few rows come back: the cost follows the postings of the query's words, and
    # Python sees k rows, not every document that shares a word with the query.
    weight = case(*((p.c.term == t, literal(w, Float)) for t, w in sorted(idf.items())))
    norm = p.c.tf + K1 * (1 - B + B * d.c.length / literal(average, Float))
    score = func.sum(weight * p.c.tf * (K1 + 1) / norm).label("score")
    ranked_query = (
        select(d.c.item_id, score)
        .join(d, d.c.doc == p.c.doc)
        .where(p.c.namespace == namespace, p.c.term.in_(sorted(idf)))
        .group_by(d.c.item_id)
        .order_by(score.desc(), d.c.item_id)
    )
    want = k
    while True:
        # A few more than needed: sums of the same terms added in another order can
        # differ in the last bit, so ties are settled here, on rounded scores.
        fetch = want + TIE_SLACK
        rows = conn.execute(ranked_query.limit(fetch)).all()
        found = sorted(((i, float(v)) for i, v in rows), key=lambda r: (-round(r[1], 9), r[0]))
        kept = found[:want] if len(rows) == fetch else found
        if allowed is not None:
            kept = [r for r in kept if r[0] in allowed]
        if len(kept) >= k or len(rows) < fetch:
            return kept[:k]
        want *= 4  # the caller's filters removed too many: read further down the ranking


# -- helpers -----------------------------------------------------------------------------


def _insert(
    conn: Connection, table: Table, rows: list[tuple[Any, ...]], names: Sequence[str] = ()
) -> None:
    """Straight to the driver's executemany, as `Projection._flush` does: a rebuild
    writes half a million postings, and SQLAlchemy's per-row processing would dominate.
    (Multi-row VALUES statements were no faster on SQLite, and slower with psycopg.)
    `names` are the columns given, all by default."""
    if not rows:
        return
    names = list(names) or [c.name for c in table.columns]
    mark = _mark(conn)
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"
    conn.exec_driver_sql(sql, rows)


def _delete_postings(conn: Connection, keys: list[tuple[str, str, int]]) -> None:
    """By primary key (namespace, term, doc), in one executemany, as `_insert`."""
    if not keys:
        return
    m = _mark(conn)
    where = f"namespace = {m} AND term = {m} AND doc = {m}"
    conn.exec_driver_sql(f"DELETE FROM {keyword_postings.name} WHERE {where}", keys)


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def _chunks(values: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(values), CHUNK):
        yield list(values[start : start + CHUNK])
