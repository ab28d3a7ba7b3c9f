"""The keyword index holds keyed hashes of terms under a per-namespace index key, never
the terms: no file keeps a word of an item, a namespace's hashes share nothing with
another's, and destroying the namespace's key ends every use of its old hashes."""

from __future__ import annotations

import secrets
import string
import struct

from factories import fact, preference, sqlite_files, turn
from sqlalchemy import select

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.projections.keyword_index import (
    KeywordIndexProjection,
    hasher_of,
    index_key_ident,
    keyword_docs,
    keyword_namespaces,
    keyword_postings,
    search,
    tokenize,
)


def ids(ledger: MemoryLedger, query: str, k: int = 10) -> list[str]:
    ledger._service.runner.catch_up()
    with ledger._service.engine.connect() as conn:
        return [i for i, _ in search(conn, ledger._service.log, ledger.namespace, query, k)]


def token() -> str:
    """A random word no file could hold by chance: letters, then eight digits."""
    letters = "".join(secrets.choice(string.ascii_lowercase) for _ in range(9))
    return f"Kw{letters}{secrets.randbelow(10**8):08d}"


def raw_files(settings: Settings) -> bytes:
    """Every byte of the data directory's files (projections, WAL, event store, keys)."""
    return b"".join(p.read_bytes() for p in sqlite_files(settings) if p.exists())


def test_no_file_holds_a_term_and_a_forgotten_items_hashes_are_zeroed(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    gone = [token() for _ in range(3)]
    kept = token()
    erased = [
        alice.remember(turn(f"met {gone[0]} at the station", turn_id="t1")).item_id,
        alice.remember(fact("passport_number", gone[1])).item_id,
        alice.remember(preference("nickname", gone[2])).item_id,
    ]
    alice.remember(turn(f"{kept} is my locker", turn_id="t2"))
    for word, item in zip(gone, erased, strict=True):
        assert ids(alice, word) == [item]
    hasher = hasher_of(service.log, alice.namespace, create=False)
    assert hasher is not None
    forgotten = {t for word in gone for t in tokenize(word)}
    assert len(forgotten) == 9  # each token: the whole, its letters, its digits

    for item in erased:
        assert alice.forget(item).completed

    for word in gone:
        assert ids(alice, word) == []
    assert ids(alice, kept) != []
    if settings.postgres is not None:
        return
    data = raw_files(settings)
    # Not a term of any item, erased or live, in any spelling: the index holds hashes,
    # and (in this branch) the other projections hold sealed blobs.
    for term in forgotten | set(tokenize(kept)) | set(gone) | {kept}:
        assert term.encode() not in data, term
    # And a forgotten item's hashes are gone too (secure_delete, WAL checkpointed):
    # SQLite stores a 64-bit integer as 8 big-endian bytes, as `terms` packs them.
    live = {hasher(t) for t in tokenize(f"{kept} is my locker")}
    for term in forgotten:
        assert hasher(term) not in live
        assert struct.pack(">q", hasher(term)) not in data, term


def test_the_same_word_hashes_differently_in_two_namespaces(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    mine = alice.remember(fact("passport_number", "E12345678")).item_id
    theirs = bob.remember(fact("passport_number", "E12345678")).item_id
    assert ids(alice, "E12345678") == [mine] and ids(bob, "E12345678") == [theirs]
    a = hasher_of(service.log, alice.namespace, create=False)
    b = hasher_of(service.log, bob.namespace, create=False)
    assert a is not None and b is not None
    assert a("e12345678") != b("e12345678")
    p = keyword_postings
    with service.engine.connect() as conn:
        terms = {
            ns: set(conn.execute(select(p.c.term).where(p.c.namespace == ns)).scalars())
            for ns in (alice.namespace, bob.namespace)
        }
    assert terms[alice.namespace] == {a(t) for t in tokenize("passport number: E12345678")}
    assert not terms[alice.namespace] & terms[bob.namespace]  # nothing to compare across


def test_a_search_never_makes_a_key(alice: MemoryLedger, service: MemoryService) -> None:
    assert ids(alice, "anything") == []
    assert service.log.derived_key(index_key_ident(alice.namespace), create=False) is None


def _generations(service: MemoryService, namespace: str) -> tuple[set[int], list[tuple]]:
    d, n = keyword_docs, keyword_namespaces
    with service.engine.connect() as conn:
        docs = set(
            conn.execute(select(d.c.key_generation).where(d.c.namespace == namespace)).scalars()
        )
        stats = conn.execute(
            select(n.c.key_generation, n.c.docs).where(n.c.namespace == namespace)
        ).all()
    return docs, [tuple(r) for r in stats]


def test_destroying_the_index_key_ends_the_old_hashes_and_a_new_generation_reindexes(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    old = alice.remember(turn("我住在杭州西湖区, gate 4471")).item_id
    other = bob.remember(turn("gate 4471 too")).item_id
    assert ids(alice, "杭州") == [old] and ids(alice, "4471") == [old]
    before = hasher_of(service.log, alice.namespace, create=False)
    assert before is not None and _generations(service, alice.namespace) == (
        {before.generation},
        [(before.generation, 1)],
    )

    service.log.destroy_derived_keys([index_key_ident(alice.namespace)])

    # No live key: nothing is searchable, and the search made none.
    assert ids(alice, "杭州") == [] and ids(alice, "4471") == []
    assert hasher_of(service.log, alice.namespace, create=False) is None
    assert ids(bob, "4471") == [other]  # another namespace's key is untouched

    # The next catch-up indexing the namespace makes the next generation, purges what
    # was hashed under the old one and indexes it again: old and new items are found.
    new = alice.remember(turn("西湖 again, gate 4471")).item_id
    assert set(ids(alice, "4471")) == {old, new}
    assert ids(alice, "杭州") == [old]
    after = hasher_of(service.log, alice.namespace, create=False)
    assert after is not None and after.generation == before.generation + 1
    assert _generations(service, alice.namespace) == ({after.generation}, [(after.generation, 2)])
    with service.engine.connect() as conn:
        stored = set(conn.execute(select(keyword_postings.c.term)).scalars())
        assert KeywordIndexProjection().unattributed_rows(conn) == 0
    assert before("杭州") not in stored and after("杭州") in stored

    # A rebuild under the live generation equals the incremental view.
    expected = service.runner.snapshot()["keyword_index"]
    service.rebuild(["keyword_index"])
    assert service.runner.snapshot()["keyword_index"] == expected


def test_rows_of_a_destroyed_generation_are_purged_by_their_items(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """Purging needs no key: the document row lists the hashes its postings are keyed by."""
    item = alice.remember(turn("locker Zr9kept")).item_id
    assert ids(alice, "zr9kept") == [item]
    service.log.destroy_derived_keys([index_key_ident(alice.namespace)])
    report = alice.forget(item)
    assert report.completed, report.to_dict()
    with service.engine.connect() as conn:
        assert KeywordIndexProjection().count_rows(conn, [item]) == 0
    assert _generations(service, alice.namespace) == (set(), [])
