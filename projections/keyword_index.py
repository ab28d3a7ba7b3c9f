"""The keyword index: exact words, numbers and identifiers, which embeddings blur.

A passport number, a phone prefix or a rare surname is one token among many to an
embedder; a keyword index finds it exactly. It holds live, unsuppressed items only: facts
(the current or conflicting version) and preferences as "<predicate>: <value>", and
transcript turns by content.

Terms are stored as keyed hashes, never as words (../docs/DESIGN.md, "Sealed
everywhere"). A term becomes an 8-byte BLAKE2b MAC of its text under the namespace's
index key (a derived key of the key store, ident `index_key_ident(namespace)`), kept as
a signed 64-bit integer: compact, fast to compare, and meaningless without the key. A
deleted posting's bytes may stay in a free page, a WAL frame or a backup; what they can
tell is bounded: without the key, nothing about the term (not even its length: every
hash is 8 bytes), and no link to another namespace (the same word hashes differently
under another namespace's key). Beside the hash, a posting holds in clear only its
namespace, a document number, the term's count and the document's length. Someone
holding the master key, who can unwrap the live index key, can test guesses ("is
'hangzhou' in this page?") and see which postings share a term within that one
namespace and key generation, but cannot read a term without guessing it: a short or
predictable value (a phone number, a date, a name from a list) falls to such a
dictionary attack, a random one does not. Destroying the namespace's
index key (a whole-namespace forget does, see `index_key_ident`) ends even that: the old
hashes become random numbers to everyone, and the next items are indexed under a new
generation that shares nothing with the old. Forgetting single items leaves the key
live, so their hashes, where a free page still holds them (SQLite's secure_delete zeroes
them; PostgreSQL's VACUUM frees them without a promise to overwrite), stay testable by a
master-key holder until the namespace's key is destroyed.

Which generation a namespace's rows were hashed under is recorded on each document row
and in `keyword_namespaces` (one row per namespace and generation: its document count and
total length, BM25's statistics, kept up to date so a search never counts documents). A
search uses the live generation's row and documents only, so a posting written under a
destroyed key is never served; the first catch-up that indexes the namespace under a new
generation purges every document of an older one and re-indexes those still live. An
item's postings are deleted through its document row's list of term hashes, so purging
never needs a key: rows written under a destroyed generation (say, by a catch-up that
committed while a forget ran) are purged by their item's Erased event like any others.

Why our own postings table, not SQLite FTS5 or PostgreSQL full-text search: this store
must forget provably, and now holds no words to hand to a full-text engine. An FTS5
'delete' leaves the deleted terms inside the index segments until a merge, and 'optimize'
rewrites the whole index, far too slow on every forget at 100k items; FTS5's
`secure-delete` option needs SQLite 3.44, and Debian's Python links 3.40. PostgreSQL's
tsvector/GIN would be a second implementation, and its default parsers do not split
Chinese. A plain table `keyword_postings(namespace, term, doc, tf, length)`, with
`keyword_docs` (each item's terms) loses an item's postings by ordinary row deletes,
which `secure_delete` zeroes on SQLite, on both backends with the same SQL.

Why this lean layout: the verification scan reads the data directory's bytes, and a
forget's WAL checkpoint writes the index's changed pages, so its size is paid often. A
posting is stored once, as the key of its table (WITHOUT ROWID on SQLite: no rowid copy,
no separate search index), and names its item by a small integer `doc`, not a
36-character id; it carries its document's length (documents never change: an update
renumbers the item), so scoring reads the query terms' postings and nothing else. An
item's postings are found for deletion through its document row, which lists its
distinct term hashes: one short blob per item instead of a second index over every
posting. Document numbers are never reused (AUTOINCREMENT on SQLite, a sequence on
PostgreSQL), so a posting can never be attributed to another item than the one it was
written for; a search maps its best postings to their document rows, so a posting
without one (`unattributed_rows`) could never be served.

Search cost follows the query's postings, not the namespace, and is bounded even for
common words (issue 37; `ranked`, limits in `TopK`). The statistics are one row and the
terms' document counts are range counts over the postings' key. A query whose postings
are few has the database sum BM25 over all of them, grouped by document number, and
return the best few, mapped to item ids. Otherwise MaxScore: the rarest terms' postings
are scored in full, the common terms are added by primary-key lookups for those
documents only, and the answer is proven equal to full scoring when its k-th best score
exceeds what the common terms can add at most (the sum of their idf * (k1 + 1)): a
document holding common terms only cannot enter. Unproven, every posting is scored, as
before. A query of common terms only is answered from each term's newest postings
(highest document numbers), scored exactly: bounded, but an older and better document
can be missed (`Ranking.exact` is False). Nothing reads every document of the namespace.
(One SQLite namespace of 100k items, benchmarks/bench_keyword_topk.py: common words from
about 14 ms CPU p50 with every posting scored to about 4 ms; docs/benchmarks.md.)

Like summaries, the projection never interprets event contents: the runner applies it
after the facts, preferences and transcripts projections in the same transaction, and it
recomputes every touched item from their tables as they are then (opening their sealed
cells, projections/cells.py). So each event type (recorded, superseded, redacted,
suppressed, unsuppressed, erased) comes out right by construction, and a rebuild equals
the incremental view. Also like summaries, what withdraws content is applied in the
batch itself, and what adds waits for the end of the catch-up (`settle`), in the same
transaction as its last batch.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, NamedTuple

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
    tuple_,
)

from memory_ledger.event_log import EventLog
from memory_ledger.projections.base import Projection, Row, keys_in, metadata
from memory_ledger.projections.cells import Cell, Cells, Opened
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.facts import KEY_COLUMNS, LIVE_STATUSES, facts
from memory_ledger.projections.id_sets import among
from memory_ledger.projections.preferences import preferences
from memory_ledger.projections.transcripts import transcripts

CHUNK = 500
#: Items indexed together at the end of a catch-up: few round trips, bounded memory.
SETTLE_CHUNK = 5000
K1 = 1.2
B = 0.75
#: Sums of the same terms added in another order can differ in the last bit, so ties
#: are settled in Python on scores rounded to 9 decimals (`_rank`); a search reads every
#: row within this margin of the last one it needs, which covers any such tie.
TIE_EPSILON = 1e-9
#: A query of common words only: how many times k of the best documents on their newest
#: postings are scored in full (`_Scoring.window`).
WINDOW_RESCORED = 2
#: Longer terms are cut (queries are cut the same way, so they still match): a base64
#: blob must not make hashing or tokenizing queries slow.
MAX_TERM_CHARS = 64
#: Domain separation of the term hash (BLAKE2b's personalisation, at most 16 bytes).
HASH_PERSON = b"ml-keyword-term"

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
    # The generation of the namespace's index key its terms were hashed under.
    Column("key_generation", Integer, nullable=False),
    Column("length", Integer, nullable=False),
    # A fact's key (NULL for other kinds): a newly recorded fact can supersede the live
    # facts of its key without an event of theirs, and this finds the indexed ones.
    Column("subject", Text),
    Column("predicate", Text),
    # The item's distinct term hashes, sorted, packed as big-endian signed 64-bit
    # integers: its postings' keys, so a purge deletes them by primary key.
    Column("terms", LargeBinary, nullable=False),
    Index("ix_keyword_docs_item", "item_id", unique=True),
    Index("ix_keyword_docs_namespace", "namespace", "key_generation"),
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
    Column("term", BigInteger, primary_key=True),  # the term's keyed hash
    Column("doc", DocNumber, primary_key=True, autoincrement=False),
    Column("tf", Integer, nullable=False),
    Column("length", Integer, nullable=False),  # the document's, for BM25's normalisation
    sqlite_with_rowid=False,
)

#: BM25's statistics of a namespace's documents under one index key generation, kept
#: by every write of documents in the same transaction: a search reads one row.
keyword_namespaces = Table(
    "keyword_namespaces",
    metadata,
    Column("namespace", Text, primary_key=True),
    Column("key_generation", Integer, primary_key=True, autoincrement=False),
    Column("docs", Integer, nullable=False),
    Column("length", BigInteger, nullable=False),
)

#: What `_index` writes of a document row: its number is the database's to give.
DOC_COLUMNS = ("item_id", "namespace", "key_generation", "length", "subject", "predicate", "terms")

# Items whose terms are (re)computed at the end of the catch-up in progress (see `apply`).
keyword_pending = Table(
    "keyword_pending",
    metadata,
    Column("item_id", Text, primary_key=True),
)


INDEX_KEY_PREFIX = "index:"


def index_key_ident(namespace: str) -> str:
    """The key store's name for a namespace's index key (`EventLog.derived_key`). The
    forget path destroys it on a whole-namespace forget, and a restore destroys every
    one (the rebuild indexes under new keys); nothing else may name it."""
    return f"{INDEX_KEY_PREFIX}{namespace}"


def indexed_namespaces_under(conn: Connection, namespace: str) -> list[str]:
    """The namespace and those below it (a user's projects) that have index statistics:
    whose index keys a whole-user forget destroys."""
    ns = keyword_namespaces.c.namespace
    query = select(ns).where((ns == namespace) | ns.startswith(namespace + "/")).distinct()
    return sorted(conn.execute(query).scalars())


class TermHasher:
    """Keyed hashes of terms under one namespace's index key generation, memoised: a
    rebuild hashes each distinct term of a namespace once."""

    def __init__(self, generation: int, key: bytes) -> None:
        self.generation = generation
        self._key = key
        self._known: dict[str, int] = {}

    def __call__(self, term: str) -> int:
        found = self._known.get(term)
        if found is None:
            digest = hashlib.blake2b(
                term.encode("utf-8"), key=self._key, digest_size=8, person=HASH_PERSON
            ).digest()
            found = self._known[term] = int.from_bytes(digest, "big", signed=True)
        return found


def hasher_of(log: EventLog, namespace: str, *, create: bool) -> TermHasher | None:
    """The namespace's live index key as a hasher; None if it has none (and not `create`)."""
    live = log.derived_key(index_key_ident(namespace), create=create)
    return None if live is None else TermHasher(*live)


def pack_terms(hashes: Iterable[int]) -> bytes:
    ordered = sorted(hashes)
    return struct.pack(f">{len(ordered)}q", *ordered)


def unpack_terms(packed: bytes) -> list[int]:
    return list(struct.unpack(f">{len(packed) // 8}q", bytes(packed)))


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
    # The per-item table: every term hash of an item is in its row's `terms`, beside the
    # item id; the data map counts one row per indexed item.
    table = keyword_docs
    primary_key = ("item_id",)
    holds = "keyed hashes of the terms of live, unsuppressed items (per-namespace key), with counts"
    reads_cells = True

    def __init__(self, log: EventLog | None = None) -> None:
        """`log` opens the source tables' sealed cells and holds the index keys; without
        it the projection can only name itself and answer the store protocol's counts."""
        self.log = log

    @property
    def tables(self) -> tuple[Table, ...]:
        return (keyword_postings, keyword_docs, keyword_namespaces, keyword_pending)

    def _log(self) -> EventLog:
        if self.log is None:
            raise RuntimeError("the keyword index needs the event log to index items")
        return self.log

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
        log = self._log()
        gone = [
            i for c in _chunks(bystanders) for i in sorted(set(c) - set(live_texts(conn, log, c)))
        ]
        self.purge(conn, sorted(changed.union(gone)))  # also their pending rows
        # An erased item is never indexed again: queuing it would make `settle` look for
        # texts that cannot be read (a forget's fixed cost), to index nothing.
        erased = {e.item_id for e in relevant if e.name == "Erased"}
        _insert(conn, keyword_pending, [(i,) for i in sorted((changed | recorded) - erased)])

    def settle(self, conn: Connection, opened: Opened | None = None) -> None:
        """Index the pending items. The first time a namespace is met, its index key is
        fetched (made, if it has none live); documents of the namespace hashed under
        another generation are purged and queued to be indexed again under this one."""
        pending = sorted(conn.execute(select(keyword_pending.c.item_id)).scalars())
        if not pending:
            return
        log = self._log()
        hashers: dict[str, TermHasher] = {}
        queue, queued = list(pending), set(pending)
        at = 0
        while at < len(queue):
            chunk = queue[at : at + SETTLE_CHUNK]
            at += len(chunk)
            live = live_texts(conn, log, chunk, opened)
            for namespace in sorted({t.namespace for t in live.values()} - hashers.keys()):
                hasher = hasher_of(log, namespace, create=True)
                assert hasher is not None  # create=True always gives one
                hashers[namespace] = hasher
                stale = self._stale_items(conn, namespace, hasher.generation)
                # A pending item has no document row (`apply` purged it, or it is new),
                # so none of them is stale: each item is indexed once.
                self.purge(conn, stale)
                queue.extend(i for i in stale if i not in queued)
                queued.update(stale)
            self._index(conn, live, hashers)
        conn.execute(delete(keyword_pending))

    @staticmethod
    def _stale_items(conn: Connection, namespace: str, generation: int) -> list[str]:
        """Items of the namespace indexed under another generation than `generation`."""
        n, d = keyword_namespaces, keyword_docs
        others = select(n.c.key_generation).where(
            n.c.namespace == namespace, n.c.key_generation != generation
        )
        if not conn.execute(others.limit(1)).first():
            return []  # the common case: one index probe
        query = select(d.c.item_id).where(
            d.c.namespace == namespace, d.c.key_generation != generation
        )
        return sorted(conn.execute(query).scalars())

    def _indexed_facts_of(self, conn: Connection, keys: Sequence[tuple[Any, ...]]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(keys), 300):
            chunk = keys[start : start + 300]
            query = select(keyword_docs.c.item_id).where(keys_in(keyword_docs, KEY_COLUMNS, chunk))
            found.update(conn.execute(query).scalars())
        return found

    def _index(
        self, conn: Connection, live: dict[str, LiveText], hashers: dict[str, TermHasher]
    ) -> None:
        """Document rows first, which number the documents; then their postings, sorted
        by key, each chunk's in one executemany; then the namespaces' statistics."""
        counted: list[tuple[str, str, int, dict[int, int]]] = []
        docs: list[tuple[Any, ...]] = []
        for item_id, text in sorted(live.items()):
            hasher = hashers[text.namespace]
            words = Counter(tokenize(text.text))
            if not words:
                continue
            counts = {hasher(word): n for word, n in words.items()}
            if len(counts) < len(words):  # two words, one hash (2**-64 a pair): add them up
                counts = Counter()
                for word, n in words.items():
                    counts[hasher(word)] += n
            length = sum(counts.values())
            counted.append((item_id, text.namespace, length, counts))
            docs.append(
                (
                    item_id,
                    text.namespace,
                    hasher.generation,
                    length,
                    text.subject,
                    text.predicate,
                    pack_terms(counts),
                )
            )
        _insert(conn, keyword_docs, docs, DOC_COLUMNS)
        numbers = self._numbers(conn, [item_id for item_id, _, _, _ in counted])
        postings = sorted(
            (namespace, term, numbers[item_id], n, length)
            for item_id, namespace, length, counts in counted
            for term, n in counts.items()
        )
        _insert(conn, keyword_postings, postings)
        stats: dict[tuple[str, int], list[int]] = {}
        for _, namespace, generation, length, _, _, _ in docs:
            entry = stats.setdefault((namespace, generation), [0, 0])
            entry[0] += 1
            entry[1] += length
        _add_stats(conn, stats)

    @staticmethod
    def _numbers(conn: Connection, item_ids: Sequence[str]) -> dict[str, int]:
        d = keyword_docs
        numbers: dict[str, int] = {}
        for chunk in _chunks(item_ids):
            query = select(d.c.item_id, d.c.doc).where(among(d.c.item_id, chunk))
            numbers.update((item_id, int(doc)) for item_id, doc in conn.execute(query))
        return numbers

    @staticmethod
    def _docs_of(conn: Connection, item_ids: Sequence[str]) -> list[tuple[int, str, list[int]]]:
        """(doc, namespace, term hashes) of the items that have a document row."""
        d = keyword_docs
        query = select(d.c.doc, d.c.namespace, d.c.terms).where(among(d.c.item_id, item_ids))
        return [(int(doc), ns, unpack_terms(terms)) for doc, ns, terms in conn.execute(query)]

    # -- the store protocol (see memory_ledger.stores.ProjectionStore) ---------------

    def purge(self, conn: Connection, item_ids: Sequence[str]) -> None:
        """The items' postings (by key: their document rows list the term hashes, so no
        index key is needed), document rows, their share of the namespaces' statistics,
        and any pending recomputation of them (ids only). The document rows are deleted
        by the numbers whose postings were deleted: a row another transaction committed
        in between (PostgreSQL reads committed) keeps its postings' only key; and the
        statistics lose what the delete actually removed (its RETURNING rows), so two
        purges of one item never subtract it twice."""
        d = keyword_docs
        for chunk in _chunks(sorted(set(item_ids))):
            docs = self._docs_of(conn, chunk)
            keys = sorted((ns, term, doc) for doc, ns, terms in docs for term in terms)
            _delete_postings(conn, keys)
            if docs:
                numbers = [doc for doc, _, _ in docs]
                removed = conn.execute(
                    delete(d)
                    .where(among(d.c.doc, numbers))
                    .returning(d.c.namespace, d.c.key_generation, d.c.length)
                ).all()
                stats: dict[tuple[str, int], list[int]] = {}
                for namespace, generation, length in removed:
                    entry = stats.setdefault((namespace, int(generation)), [0, 0])
                    entry[0] -= 1
                    entry[1] -= int(length)
                _add_stats(conn, stats)
            conn.execute(delete(keyword_pending).where(among(keyword_pending.c.item_id, chunk)))

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
                for start in range(0, len(terms), CHUNK):
                    query = select(func.count()).where(
                        p.c.namespace == namespace,
                        among(p.c.term, terms[start : start + CHUNK]),
                        p.c.doc == doc,
                    )
                    total += int(conn.execute(query).scalar_one())
        return total

    def unattributed_rows(self, conn: Connection) -> int:
        """Postings without a document row of their number and namespace (0 when sound).

        No item could find them, nor a search serve them, but they would be bytes left
        behind. Reads every posting: an audit, not part of a forget."""
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
        p, d, n = keyword_postings, keyword_docs, keyword_namespaces
        joined = p.outerjoin(d, (d.c.doc == p.c.doc) & (d.c.namespace == p.c.namespace))
        columns = (p.c.namespace, p.c.term, d.c.item_id, p.c.tf, p.c.length)
        query = select(*columns).select_from(joined)
        rows: list[Row] = sorted(
            (dict(r) for r in conn.execute(query).mappings()),
            key=lambda r: (r["item_id"] or "", r["term"], r["namespace"], r["tf"]),
        )
        query = select(*(c for c in d.c if c.name != "doc")).order_by(d.c.item_id)
        for r in conn.execute(query).mappings():  # the packed hashes, as printable hex
            rows.append({"doc": {**r, "terms": bytes(r["terms"]).hex()}})
        order = (n.c.namespace, n.c.key_generation)
        rows.extend({"stats": dict(r)} for r in conn.execute(select(n).order_by(*order)).mappings())
        pending = sorted(conn.execute(select(keyword_pending.c.item_id)).scalars())
        if pending:  # work left unsettled after a catch-up would be a bug worth seeing
            rows.append({"pending": pending})
        return rows


class LiveText(NamedTuple):
    namespace: str
    text: str
    subject: str | None = None  # facts only: their key
    predicate: str | None = None


def live_texts(
    conn: Connection, log: EventLog, item_ids: Sequence[str], opened: Opened | None = None
) -> dict[str, LiveText]:
    """The indexed text of each item that is live and unsuppressed, opened from the
    source tables' sealed cells (one key-store query per table; `opened`: the events a
    catch-up opened already). A cell whose key is gone opens as None: not live.

    A fact has one row per version; only a current or conflicting, readable one counts
    (the newest, should there ever be two)."""
    cells = Cells(log, opened)
    out: dict[str, LiveText] = {}
    newest: dict[str, int] = {}
    found: list[tuple[int, str, str, str, str, bool]] = []
    sealed: list[Cell] = []
    for table in (facts, preferences):
        c = table.c
        query = select(
            c.item_id, c.version, c.namespace, c.subject, c.predicate, c.key_generation, c.sealed
        ).where(
            among(table.c.item_id, sorted(set(item_ids))),
            table.c.value_state == "live",
            table.c.suppressed.is_(False),
        )
        if table is facts:
            query = query.where(facts.c.status.in_(LIVE_STATUSES))
        for item_id, version, namespace, subject, predicate, generation, blob in conn.execute(
            query
        ):
            found.append((version, item_id, namespace, subject, predicate, table is facts))
            sealed.append((item_id, generation, blob))
    for (version, item_id, namespace, subject, predicate, is_fact), value in zip(
        found, cells.open(sealed, "value"), strict=True
    ):
        if value is None or newest.get(item_id, -1) > version:
            continue
        newest[item_id] = version
        text = f"{predicate.replace('_', ' ')}: {value}"
        key = (subject, predicate) if is_fact else (None, None)
        out[item_id] = LiveText(namespace, text, *key)
    t = transcripts
    turn_query = select(t.c.item_id, t.c.namespace, t.c.key_generation, t.c.sealed).where(
        among(t.c.item_id, sorted(set(item_ids) - set(out))),
        t.c.content_state == "live",
        t.c.suppressed.is_(False),
    )
    turns = conn.execute(turn_query).all()
    contents = cells.open([(i, g, s) for i, _, g, s in turns], "content")
    for (item_id, namespace, _, _), content in zip(turns, contents, strict=True):
        if content is not None:
            out[item_id] = LiveText(namespace, content)
    return out


# -- search ------------------------------------------------------------------------------


class TopK(NamedTuple):
    """How many postings a search scores before it must prove or bound its answer.

    Counted in postings, since a search's cost is the postings it scores. With the
    defaults a search scores a few thousand postings at any namespace size, except
    when MaxScore cannot prove its answer and every posting is scored; the document
    counts still step through each query term's postings (a range count, about a
    third of the cost of scoring them on SQLite). Tuned on
    benchmarks/bench_keyword_topk.py; tests pass small limits to reach every path."""

    #: Query terms with at most this many postings in all: score them all (exact).
    full_postings: int = 8000
    #: MaxScore scores the rarest terms' postings up to this many in all (exact when proven).
    essential_postings: int = 4000
    #: Every term common: the newest postings read in all, shared among the terms.
    window_postings: int = 2000
    #: MaxScore adds the common terms only when the rare terms' `want`-th best score is
    #: at least this fraction of the common terms' bound (`_Scoring.maxscore`).
    hope: float = 0.5


TOP_K = TopK()


class Ranking(NamedTuple):
    """A search's answer and how it was reached (`search` returns its rows only)."""

    rows: list[tuple[str, float]]
    #: "full" (every posting scored), "maxscore" (proven equal to "full"),
    #: "maxscore-unproven" (no proof, so every posting scored), "window" (a query of
    #: common terms only: exact scores of the best candidates, not a proof).
    how: str
    exact: bool
    #: What a document holding each of the query's terms once, at the average length,
    #: scores: the sum of their idf (a term no document holds at its highest). A row's
    #: score over it is about the share of the query the document matches (`coverage`),
    #: which, unlike a score over the best row's, says whether the best match is any good.
    query_weight: float = 0.0

    def coverage(self) -> list[tuple[str, float]]:
        """The rows with their scores over `query_weight` (above 1 for a document that
        repeats the query's terms or is shorter than most): BM25's order."""
        if self.query_weight <= 0:
            return []
        return [(i, score / self.query_weight) for i, score in self.rows]


def search(
    conn: Connection,
    log: EventLog,
    namespace: str,
    query: str,
    k: int,
    allowed: set[str] | None = None,
) -> list[tuple[str, float]]:
    """The k best items of the namespace for the query by BM25, best first, ties by id.

    The query's terms are hashed with the namespace's live index key, read from the key
    store and never made here: a namespace without one has nothing indexed. Document
    frequency, count and average length are the namespace's own (under its live key
    generation): another tenant's vocabulary must not shape this one's ranking (nor be
    inferable from it). `allowed` restricts the answer, not the statistics: the
    caller's read-time filters (expiry, validity, scope) must not change how rare a word
    looks. How many postings are scored is bounded: see `ranked`.
    """
    words = sorted(set(tokenize(query)))
    if not words or k <= 0:
        return []
    hasher = hasher_of(log, namespace, create=False)
    if hasher is None:
        return []
    return ranked(conn, hasher, namespace, words, k, allowed).rows


def ranked(
    conn: Connection,
    hasher: TermHasher,
    namespace: str,
    words: Sequence[str],
    k: int,
    allowed: set[str] | None = None,
    limits: TopK = TOP_K,
) -> Ranking:
    """`search` on tokenized words and a hasher, saying how the answer was reached.

    One statement reads the statistics row and counts the query terms' postings (a
    range count each). Then one statement ranks (two when MaxScore is unproven), by one
    of three ways:

    - "full": the query's postings are few (`full_postings`): the database sums BM25
      over all of them, grouped by document, and returns the best few.
    - "maxscore": the rare terms' postings (`essential_postings`, rarest first) are
      scored in full; the common terms are added for the best of those documents only,
      by primary-key lookups. A document holding common terms only scores at most the
      sum of their upper bounds (idf * (k1 + 1)); when the `want`-th best score exceeds
      it, the answer is exactly "full"'s. When it does not, "full" is run (exact).
    - "window": every term is common. Each term's newest postings (highest document
      numbers: the latest indexed; `window_postings` in all) give partial scores, and
      the best 2 * `want` of those documents are scored in full by lookups. The scores
      are exact BM25, but an older document could rank above them: not proven, and
      reported so (`Ranking.exact`).
    """
    if not words or k <= 0:
        return Ranking([], "full", True)
    terms = sorted({hasher(w) for w in words})
    m = _mark(conn)
    stats = f"FROM {keyword_namespaces.name} WHERE namespace = {m} AND key_generation = {m}"
    counted = conn.exec_driver_sql(
        f"SELECT term, count(*), (SELECT docs {stats}), (SELECT length {stats}) "
        f"FROM {keyword_postings.name} WHERE namespace = {m} "
        f"AND term IN ({', '.join([m] * len(terms))}) GROUP BY term",
        (*(namespace, hasher.generation) * 2, namespace, *terms),
    ).all()
    if not counted or not counted[0][2]:
        return Ranking([], "full", True)
    n, average = int(counted[0][2]), int(counted[0][3]) / int(counted[0][2])
    df = {int(t): int(c) for t, c, _, _ in counted}
    query_weight = sum(_idf(n, df.get(t, 0)) for t in terms)
    # BM25 with the constants folded: w * tf / (tf + a + c * length), w = idf * (k1 + 1),
    # a = k1 * (1 - b), c = k1 * b / average. As tf / (tf + a + ...) < 1, w bounds what
    # a term can add to any document's score.
    weight = {t: _idf(n, f) * (K1 + 1) for t, f in df.items()}
    scoring = _Scoring(conn, namespace, hasher.generation, weight, K1 * (1 - B), K1 * B / average)
    rarest = sorted(df, key=lambda t: (df[t], t))
    essential: list[int] = []
    for term in rarest:
        if sum(df[t] for t in essential) + df[term] > limits.essential_postings:
            break
        essential.append(term)
    # None: MaxScore could not prove its answer (the others always answer).
    attempt: Callable[[int], list[tuple[str, float]] | None]
    if sum(df.values()) <= limits.full_postings or len(essential) == len(rarest):
        how, attempt = "full", scoring.full
    elif essential:
        how, attempt = "maxscore", lambda want: scoring.maxscore(want, essential, limits.hope)
    else:
        per_term = max(1, limits.window_postings // len(rarest))
        how, attempt = "window", lambda want: scoring.window(want, max(per_term, want))
    exact = how != "window"
    want = k
    while True:
        proven = attempt(want)
        if proven is None:  # MaxScore could not prove its answer: score every posting
            how, attempt = "maxscore-unproven", scoring.full
            proven = attempt(want)
            assert proven is not None
        # Every row left out scores below the want-th best by more than TIE_EPSILON, so
        # ranks after it even on rounded scores: the first `want` rows here are exact
        # (for a window: among its candidates).
        found = sorted(proven, key=_rank)
        exhausted = len(found) < want
        kept = found[:want]
        if allowed is not None:
            kept = [r for r in kept if r[0] in allowed]
        if len(kept) >= k or exhausted:
            return Ranking(kept[:k], how, exact, query_weight)
        want *= 4  # the caller's filters removed too many: read further down the ranking


class _Scoring:
    """The ranking statements of one search: the same BM25, summed by the database over
    different sets of postings. A candidate's other terms are added by a correlated
    subquery, one primary-key probe per term: as a join, PostgreSQL's planner may read
    every posting of those terms (a bitmap scan) and hash them, the cost avoided. Each
    returns (item id, score) rows: the `want` best of what it scored and every row
    within TIE_EPSILON of the last of them, as the database's order within a tie is by
    document number, not item id (ties are settled in Python, `_rank`)."""

    def __init__(
        self,
        conn: Connection,
        namespace: str,
        generation: int,
        weight: dict[int, float],
        a: float,
        c: float,
    ) -> None:
        self.conn, self.namespace, self.generation = conn, namespace, generation
        self.weight, self.a, self.c = weight, a, c
        self.m = _mark(conn)

    def _score(self, terms: Sequence[int], alias: str = "") -> tuple[str, list[Any]]:
        """SUM of the terms' BM25 over the rows of `alias`.keyword_postings, and its parameters."""
        p, m = f"{alias}." if alias else "", self.m
        cases = " ".join([f"WHEN {m} THEN {m}"] * len(terms))
        sql = f"SUM(CASE {p}term {cases} END * {p}tf / ({p}tf + {m} + {m} * {p}length))"
        return sql, [*(v for t in terms for v in (t, self.weight[t])), self.a, self.c]

    def _in(self, terms: Sequence[int], alias: str = "") -> str:
        p = f"{alias}." if alias else ""
        return f"{p}namespace = {self.m} AND {p}term IN ({', '.join([self.m] * len(terms))})"

    def _best(self, ranked: str, params: list[Any], want: int) -> list[tuple[str, float]]:
        """Run the CTEs `ranked` (which define r(doc, score)) and keep the best rows."""
        m = self.m
        # Each kept row's item id by a probe of its document row (a join can make
        # PostgreSQL read every document of the namespace); a posting of another
        # generation's document (or of none) has no id, and is not served.
        sql = (
            f"{ranked} SELECT (SELECT d.item_id FROM {keyword_docs.name} d "
            f"WHERE d.doc = r.doc AND d.key_generation = {m}), r.score FROM r "
            f"WHERE r.score >= (SELECT min(score) FROM "
            f"(SELECT score FROM r ORDER BY score DESC LIMIT {m}) best) - {m}"
        )
        rows = self.conn.exec_driver_sql(sql, (*params, self.generation, want, TIE_EPSILON))
        return [(i, float(v)) for i, v in rows if i is not None]

    def full(self, want: int) -> list[tuple[str, float]]:
        """Every posting of the query's terms scored (once, MATERIALIZED)."""
        terms = sorted(self.weight)
        score, params = self._score(terms)
        ranked = (
            f"WITH r AS MATERIALIZED (SELECT doc, {score} AS score "
            f"FROM {keyword_postings.name} WHERE {self._in(terms)} GROUP BY doc)"
        )
        return self._best(ranked, [*params, self.namespace, *terms], want)

    def maxscore(
        self, want: int, essential: Sequence[int], hope: float
    ) -> list[tuple[str, float]] | None:
        """The essential terms' documents scored on them (e); those that could still
        reach the `want`-th best of e once the other terms' bound is added (c) get
        those terms added by lookups (r). None when the proof fails: fewer than `want`
        documents in r, or the `want`-th best of r not above the other terms' bound
        (plus TIE_EPSILON), so a document outside e might rank among the best.

        When the `want`-th best of e is below `hope` times that bound, c is left empty
        (the proof fails at once, without lookups): on bench_keyword_topk's queries at
        100k, every proven answer had at least 0.7 and every unproven one at most 0.58.
        A guess of cost only: either way the answer is exact."""
        others = sorted(set(self.weight) - set(essential))
        bound = sum(self.weight[t] for t in others)
        m, table = self.m, keyword_postings.name
        partial, partial_params = self._score(essential)
        rest, rest_params = self._score(others, "p")
        # A document of e whose partial score plus `bound` stays below the `want`-th best
        # partial score (less TIE_EPSILON) cannot reach the `want`-th best full score,
        # which is at least that partial score.
        ranked = (
            f"WITH e AS MATERIALIZED (SELECT doc, {partial} AS s FROM {table} "
            f"WHERE {self._in(essential)} GROUP BY doc), "
            f"t AS MATERIALIZED (SELECT min(s) AS theta FROM "
            f"(SELECT s FROM e ORDER BY s DESC LIMIT {m}) best), "
            f"c AS MATERIALIZED (SELECT e.doc, e.s FROM e, t "
            f"WHERE e.s >= t.theta - {m} AND t.theta >= {m}), "
            f"r AS MATERIALIZED (SELECT c.doc, c.s + COALESCE((SELECT {rest} FROM {table} p "
            f"WHERE {self._in(others, 'p')} AND p.doc = c.doc), 0) AS score FROM c)"
        )
        params = [
            *partial_params,
            self.namespace,
            *essential,
            want,
            bound + TIE_EPSILON,
            hope * bound,
            *rest_params,
            self.namespace,
            *others,
        ]
        rows = self._best(ranked, params, want)
        scores = sorted((s for _, s in rows), reverse=True)
        if len(scores) < want or scores[want - 1] - TIE_EPSILON <= bound:
            return None
        return rows

    def window(self, want: int, per_term: int) -> list[tuple[str, float]]:
        """Each term's `per_term` newest postings (w) give partial scores; the
        WINDOW_RESCORED * `want` best of them (ties: newest first) are scored on every
        query term by lookups (r): few probes, so cheap on PostgreSQL too."""
        terms = sorted(self.weight)
        m, table = self.m, keyword_postings.name
        newest = " UNION ALL ".join(
            f"SELECT doc, term, tf, length FROM (SELECT doc, term, tf, length FROM {table} "
            f"WHERE namespace = {m} AND term = {m} ORDER BY doc DESC LIMIT {m}) w{i}"
            for i in range(len(terms))
        )
        partial, partial_params = self._score(terms)
        score, params = self._score(terms, "p")
        ranked = (
            f"WITH w AS MATERIALIZED ({newest}), "
            f"b AS MATERIALIZED (SELECT doc FROM w GROUP BY doc "
            f"ORDER BY {partial} DESC, doc DESC LIMIT {m}), "
            f"r AS MATERIALIZED (SELECT b.doc, (SELECT {score} FROM {table} p "
            f"WHERE {self._in(terms, 'p')} AND p.doc = b.doc) AS score FROM b)"
        )
        windows = [v for t in terms for v in (self.namespace, t, per_term)]
        rescored = WINDOW_RESCORED * want
        return self._best(
            ranked,
            [*windows, *partial_params, rescored, *params, self.namespace, *terms],
            want,
        )


def _idf(documents: int, frequency: int) -> float:
    """BM25's idf (the +1 form: never negative, for a term in most documents too)."""
    return math.log(1 + (documents - frequency + 0.5) / (frequency + 0.5))


def _rank(row: tuple[str, float]) -> tuple[float, str]:
    """Best first, ties (to 9 decimals: sums in another order differ in the last bit) by id."""
    return (-round(row[1], 9), row[0])


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


def _add_stats(conn: Connection, changes: dict[tuple[str, int], list[int]]) -> None:
    """Add (documents, length) to each (namespace, generation)'s statistics row; drop the
    rows left without documents. The same upsert on SQLite and PostgreSQL."""
    if not changes:
        return
    n, m = keyword_namespaces.name, _mark(conn)
    rows = [(ns, gen, docs, length) for (ns, gen), (docs, length) in sorted(changes.items())]
    conn.exec_driver_sql(
        f"INSERT INTO {n} (namespace, key_generation, docs, length) VALUES ({m}, {m}, {m}, {m}) "
        f"ON CONFLICT (namespace, key_generation) DO UPDATE SET docs = {n}.docs + excluded.docs, "
        f"length = {n}.length + excluded.length",
        rows,
    )
    if any(docs < 0 for docs, _ in changes.values()):
        empty = [(ns, gen) for ns, gen in sorted(changes)]
        conn.exec_driver_sql(
            f"DELETE FROM {n} WHERE namespace = {m} AND key_generation = {m} AND docs <= 0", empty
        )


def _delete_postings(conn: Connection, keys: list[tuple[str, int, int]]) -> None:
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
