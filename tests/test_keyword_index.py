"""The keyword index: exact words and identifiers, live items only, forgotten to the byte."""

from __future__ import annotations

import math

import pytest
from factories import fact, file_bytes_contain, later, preference, provenance, sqlite_files, turn
from sqlalchemy import event, inspect, select, text

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.principal import Principal
from memory_ledger.projections.keyword_index import (
    KeywordIndexProjection,
    hasher_of,
    keyword_docs,
    keyword_postings,
    search,
    tokenize,
    unpack_terms,
)

ALICE = Principal("acme", "alice")

# -- tokenizer -----------------------------------------------------------------------------


def test_english_words_are_casefolded_without_stopwords_or_single_letters() -> None:
    assert tokenize("The quick brown Fox, I am here.") == ["quick", "brown", "fox", "am", "here"]
    assert tokenize("a b c of the") == []
    assert tokenize("") == []


def test_identifiers_keep_the_whole_and_their_parts() -> None:
    assert tokenize("Passport E12345678, phone 0571-8888") == [
        "passport",
        "e12345678",
        "12345678",
        "phone",
        "0571-8888",
        "0571",
        "8888",
    ]
    assert tokenize("alice@example.com") == ["alice@example.com", "alice", "example", "com"]
    assert tokenize("user_id=42") == ["user_id", "user", "id", "42"]
    # NFKC: full-width forms and ligatures meet their ASCII spelling; casefold: ß is ss.
    assert tokenize("Ｅ１２３４５６７８ Straße ﬁle") == tokenize("E12345678 STRASSE file")


def test_chinese_is_split_into_bigrams_and_lone_characters_stay() -> None:
    assert tokenize("我住在杭州") == ["我住", "住在", "在杭", "杭州"]
    assert tokenize("杭") == ["杭"]
    assert tokenize("东京タワー") == ["东京", "京タ", "タワ", "ワー"]


def test_mixed_scripts_split_at_the_script_boundary() -> None:
    assert tokenize("我的护照E12345678号, tel 0571-8888") == [
        "我的",
        "的护",
        "护照",
        "e12345678",
        "12345678",
        "号",
        "tel",
        "0571-8888",
        "0571",
        "8888",
    ]
    assert tokenize("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]  # vowel signs stay in words


def test_overlong_terms_are_cut_the_same_way_for_queries() -> None:
    blob = "x" * 300
    assert tokenize(blob) == ["x" * 64] == tokenize(blob + "y")


# -- helpers -------------------------------------------------------------------------------


def found(ledger: MemoryLedger, query: str, k: int = 10, allowed: set[str] | None = None) -> list:
    ledger._service.runner.catch_up()
    with ledger._service.engine.connect() as conn:
        return search(conn, ledger._service.log, ledger.namespace, query, k, allowed)


def ids(ledger: MemoryLedger, query: str, **kw: object) -> list[str]:
    return [item_id for item_id, _ in found(ledger, query, **kw)]  # type: ignore[arg-type]


def hashes(ledger: MemoryLedger, words: set[str]) -> set[int]:
    """The words as the index stores them: keyed hashes under the namespace's live key."""
    hasher = hasher_of(ledger._service.log, ledger.namespace, create=False)
    assert hasher is not None
    return {hasher(w) for w in words}


def rows_of(service: MemoryService, item_ids: list[str]) -> int:
    with service.engine.connect() as conn:
        return KeywordIndexProjection().count_rows(conn, item_ids)


def orphans(service: MemoryService) -> int:
    with service.engine.connect() as conn:
        return KeywordIndexProjection().unattributed_rows(conn)


def numbers(service: MemoryService) -> dict[str, int]:
    with service.engine.connect() as conn:
        query = select(keyword_docs.c.item_id, keyword_docs.c.doc)
        return {item_id: int(doc) for item_id, doc in conn.execute(query)}


def doc_of(service: MemoryService, item_id: str) -> int:
    with service.engine.connect() as conn:
        query = select(keyword_docs.c.doc).where(keyword_docs.c.item_id == item_id)
        return int(conn.execute(query).scalar_one())


# -- search --------------------------------------------------------------------------------


def test_an_identifier_or_number_finds_the_exact_item_first(alice: MemoryLedger) -> None:
    passport = alice.remember(fact("passport_number", "E12345678")).item_id
    other = alice.remember(fact("old_passport", "E12345679", subject="spouse")).item_id
    phone = alice.remember(fact("phone", "0571-8888 (office)")).item_id
    chat = alice.remember(turn("My passport was renewed; the office is in Hangzhou")).item_id
    pref = alice.remember(preference("seat", "aisle, row 12")).item_id

    assert ids(alice, "E12345678") == [passport]
    assert ids(alice, "e12345678 passport")[0] == passport
    assert ids(alice, "0571") == [phone]
    assert ids(alice, "0571-8888")[0] == phone
    assert set(ids(alice, "passport")) == {passport, other, chat}
    assert ids(alice, "row 12") == [pref]
    assert ids(alice, "杭州") == []
    assert ids(alice, "the of and") == [] and ids(alice, "") == [] and ids(alice, "  ") == []
    assert ids(alice, "passport", k=0) == []


def test_chinese_text_is_found_by_a_chinese_query(alice: MemoryLedger) -> None:
    home = alice.remember(turn("我住在杭州西湖区")).item_id
    alice.remember(turn("我喜欢靠窗的座位"))
    assert ids(alice, "杭州") == [home]
    assert ids(alice, "西湖")[0] == home


def test_scores_are_bm25_within_the_namespace(alice: MemoryLedger, bob: MemoryLedger) -> None:
    one = alice.remember(turn("kyoto kyoto trip")).item_id
    two = alice.remember(turn("kyoto plans for december with family")).item_id
    alice.remember(turn("nothing relevant here"))
    # Bob's documents must not change Alice's statistics (df, count, average length).
    bob.remember_many([turn("kyoto " * i) for i in range(1, 6)])

    n, average = 3, (3 + 4 + 3) / 3  # lengths 3, 4 ("for" and "with" are stopwords), 3

    def bm25(tf: int, length: int, df: int) -> float:
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))

    result = found(alice, "Kyoto")
    assert [i for i, _ in result] == [one, two]
    assert result[0][1] == pytest.approx(bm25(2, 3, 2))
    assert result[1][1] == pytest.approx(bm25(1, 4, 2))


def test_ties_are_broken_by_item_id_and_allowed_restricts_the_answer(
    alice: MemoryLedger,
) -> None:
    same = [alice.remember(turn("meeting at Globex")).item_id for _ in range(3)]
    alice.remember(turn("lunch alone"))
    result = found(alice, "globex")
    assert [i for i, _ in result] == sorted(same)
    assert len({s for _, s in result}) == 1
    assert found(alice, "globex", k=2) == result[:2]
    # The filter narrows the answer but not the statistics: same score as before.
    assert found(alice, "globex", allowed={same[2], "not-an-item"}) == [(same[2], result[0][1])]


def _statements(ledger: MemoryLedger, query: str, k: int) -> tuple[list, list[str]]:
    ledger._service.runner.catch_up()
    statements: list[str] = []
    engine = ledger._service.engine
    listener = lambda *args: statements.append(args[2])  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        with engine.connect() as conn:
            result = search(conn, ledger._service.log, ledger.namespace, query, k)
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    return result, statements


def test_a_search_is_two_statements_whatever_the_namespace(alice: MemoryLedger) -> None:
    """The statistics with the terms' document counts, then the ranked best few: the
    database sums the scores, so no statement (nor Python) runs per document."""
    # Lengths differ, so no two notes tie.
    alice.remember_many([turn(f"note {i} about the Q{i} report" + " x9" * i) for i in range(20)])
    result, statements = _statements(alice, "report q7 note", 5)
    assert len(result) == 5 and len(statements) == 2


def test_ties_beyond_what_was_read_are_settled_by_item_id(alice: MemoryLedger) -> None:
    """The database orders by document number within a tie: the ranked statement
    returns every row tied with the last one needed, so the answer is by item id, and
    still in two statements."""
    same = [w.item_id for w in alice.remember_many([turn(f"globex {i}") for i in range(30)])]
    result, statements = _statements(alice, "globex", 5)
    assert [i for i, _ in result] == sorted(same)[:5] and len(statements) == 2
    assert len({s for _, s in result}) == 1


def test_namespaces_are_isolated(alice: MemoryLedger, bob: MemoryLedger) -> None:
    mine = alice.remember(fact("passport_number", "E12345678")).item_id
    theirs = bob.remember(fact("passport_number", "E12345678")).item_id
    assert ids(alice, "E12345678") == [mine]
    assert ids(bob, "E12345678") == [theirs]
    bob.forget(theirs)
    assert ids(alice, "E12345678") == [mine]


# -- what is indexed, through every kind of event ------------------------------------------


def test_an_update_replaces_the_terms(alice: MemoryLedger) -> None:
    item = alice.remember(fact("home_city", "Hangzhou")).item_id
    assert ids(alice, "hangzhou") == [item]
    alice.update(item, {"value": "Kyoto", "provenance": provenance(at=later(2))})
    assert ids(alice, "hangzhou") == []
    assert ids(alice, "kyoto") == ids(alice, "home city") == [item]


def test_a_fact_superseded_by_another_item_leaves_the_index(alice: MemoryLedger) -> None:
    """The newcomer changes the older item's status without an event of the older item."""
    old = alice.remember(fact("home_city", "Hangzhou")).item_id
    assert ids(alice, "hangzhou") == [old]
    new = alice.remember(fact("home_city", "Kyoto", at=later(5))).item_id
    assert ids(alice, "hangzhou") == []
    assert ids(alice, "kyoto") == [new]
    # Equal authority and equal time: a conflict, and both stay findable.
    rival = alice.remember(fact("home_city", "Osaka", at=later(5))).item_id
    assert ids(alice, "kyoto osaka") == sorted([new, rival])


def test_suppress_removes_and_unsuppress_restores(alice: MemoryLedger) -> None:
    chat = alice.remember(turn("The gate code is 4471")).item_id
    pref = alice.remember(preference("seat", "window")).item_id
    alice.suppress(chat)
    alice.suppress(pref)
    assert ids(alice, "4471") == [] and ids(alice, "window") == []
    assert rows_of(alice._service, [chat, pref]) == 0
    alice.unsuppress(chat)
    alice.unsuppress(pref)
    assert ids(alice, "4471") == [chat] and ids(alice, "window") == [pref]


def test_redaction_removes_the_redacted_value(alice: MemoryLedger) -> None:
    chat = alice.remember(turn("call me on 0571-8888 tonight")).item_id
    alice.redact(chat, ["content"])
    assert ids(alice, "0571") == [] and ids(alice, "tonight") == []
    assert ids(alice, "redacted") == [chat]


def test_forget_removes_postings_and_their_bytes(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    gone = alice.remember(turn("I met Xq7haisong at the station", turn_id="t1")).item_id
    kept = alice.remember(turn("Zr9kept is my locker", turn_id="t2")).item_id
    assert ids(alice, "xq7haisong") == [gone] and rows_of(service, [gone]) > 0

    report = alice.forget(gone)

    assert report.completed, report.to_dict()
    [receipt] = [r for r in report.receipts if r.store == "keyword_index"]
    assert receipt.status == "ok" and receipt.evidence == {"rows_left": 0}
    assert rows_of(service, [gone]) == 0 and ids(alice, "xq7haisong") == []
    assert ids(alice, "zr9kept") == [kept]
    assert orphans(service) == 0
    if settings.postgres is None:
        files = sqlite_files(settings)
        # The index stores keyed hashes: not even a live item's casefolded term is in a file.
        assert file_bytes_contain(files, "zr9kept") == []
        assert file_bytes_contain(files, "xq7haisong") == []
        assert file_bytes_contain(files, "Xq7haisong") == []


def test_forgetting_common_words_completes(alice: MemoryLedger, settings: Settings) -> None:
    """Terms are no needles of the residue scan: "live" and "personal" are in every
    file's clear columns, and would keep the request partial forever."""
    item = alice.remember(turn("live personal current explicit general", turn_id="t1")).item_id
    alice.remember(turn("live music tonight", turn_id="t2"))
    report = alice.forget(item)
    assert report.completed, report.to_dict()
    if settings.postgres is None:
        _, scan = alice._service.requests.scan_files(report.request_id)
        assert scan is not None and scan.status == "ok"


# -- rebuild -------------------------------------------------------------------------------


def test_rebuild_equals_the_incremental_view(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    runner = service.runner
    a = alice.remember(fact("home_city", "Hangzhou")).item_id
    runner.catch_up()
    alice.remember(fact("home_city", "Kyoto", at=later(3)))
    b = alice.remember(turn("call 0571-8888 about passport E12345678")).item_id
    runner.catch_up()
    c = alice.remember(preference("seat", "window, row 12")).item_id
    bob.remember(turn("我住在杭州西湖区"))
    alice.update(c, {"value": "aisle", "provenance": provenance(at=later(4))})
    alice.suppress(a)
    alice.unsuppress(a)
    alice.redact(b, ["content"])
    d = alice.remember(turn("Xq7haisong was here", turn_id="t9")).item_id
    alice.forget(d)
    alice.suppress(alice.remember(turn("temporary note", turn_id="t8")).item_id)
    runner.catch_up()
    incremental = runner.snapshot()["keyword_index"]
    terms = {r["term"] for r in incremental if "term" in r}
    assert terms >= hashes(alice, {"kyoto", "aisle", "redacted"}) | hashes(bob, {"杭州"})
    assert not terms & hashes(alice, {"hangzhou", "window", "0571", "xq7haisong", "temporary"})

    numbered = numbers(service)
    assert len(numbered) == 4 and orphans(service) == 0

    service.rebuild(["keyword_index"])  # alone: the source tables are at the head
    assert runner.snapshot()["keyword_index"] == incremental
    # The same view under other document numbers: the snapshot does not depend on them.
    assert numbers(service).keys() == numbered.keys() and numbers(service) != numbered
    service.rebuild()
    assert runner.snapshot()["keyword_index"] == incremental
    assert orphans(service) == 0


# -- the lean layout and its invariant -----------------------------------------------------


def test_a_posting_is_stored_once_keyed_by_a_document_number(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    item = alice.remember(turn("Passport E12345678 renewed")).item_id
    alice._service.runner.catch_up()
    with service.engine.connect() as conn:
        found = inspect(conn)
        assert [c["name"] for c in found.get_columns("keyword_postings")] == [
            "namespace",
            "term",
            "doc",
            "tf",
            "length",
        ]
        key = found.get_pk_constraint("keyword_postings")["constrained_columns"]
        assert key == ["namespace", "term", "doc"]
        assert found.get_indexes("keyword_postings") == []  # the key is the only B-tree
        if settings.postgres is None:
            ddl = conn.execute(
                text("SELECT sql FROM sqlite_master WHERE name = 'keyword_postings'")
            ).scalar_one()
            assert ddl.rstrip().endswith("WITHOUT ROWID")
        docs = conn.execute(select(keyword_docs).where(keyword_docs.c.item_id == item)).one()
        postings = conn.execute(select(keyword_postings.c.term, keyword_postings.c.doc)).all()
    words = {"passport", "e12345678", "12345678", "renewed"}
    assert unpack_terms(docs.terms) == sorted(hashes(alice, words))
    assert sorted(postings) == [(t, docs.doc) for t in unpack_terms(docs.terms)]
    assert rows_of(service, [item]) == 1 + 4  # its document row and its postings


def test_document_numbers_are_never_reused(alice: MemoryLedger, service: MemoryService) -> None:
    """Not even the highest one, once its row is deleted (SQLite's default would reuse
    it): a posting left behind by any fault must never be attributed to another item."""
    alice.remember_many([turn("first note"), turn("second note", turn_id="t2")])
    alice._service.runner.catch_up()
    numbered = numbers(service)
    last = max(numbered, key=lambda i: numbered[i])
    alice.forget(last)
    newcomer = alice.remember(turn("third note", turn_id="t3")).item_id
    alice._service.runner.catch_up()
    assert doc_of(service, newcomer) > numbered[last]


def test_an_update_renumbers_the_item_and_leaves_no_posting_behind(
    alice: MemoryLedger, service: MemoryService
) -> None:
    item = alice.remember(fact("home_city", "Hangzhou")).item_id
    alice._service.runner.catch_up()
    before = doc_of(service, item)
    alice.update(item, {"value": "Kyoto", "provenance": provenance(at=later(2))})
    alice._service.runner.catch_up()
    assert doc_of(service, item) != before
    assert rows_of(service, [item]) == 1 + 3  # "home", "city", "kyoto"
    assert orphans(service) == 0


def test_the_invariant_check_reports_postings_without_their_document(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """Corrupt the index by hand, three ways, and watch the checks see it."""
    kept = alice.remember(turn("Zr9kept is my locker")).item_id
    lost = alice.remember(turn("Xq7haisong at the station", turn_id="t2")).item_id
    alice._service.runner.catch_up()
    terms_of_lost = rows_of(service, [lost]) - 1
    lost_doc = doc_of(service, lost)
    assert orphans(service) == 0
    p, d = keyword_postings, keyword_docs
    with service.engine.begin() as conn:  # a document row deleted, its postings left
        conn.execute(d.delete().where(d.c.item_id == lost))
    assert orphans(service) == terms_of_lost
    # count_rows cannot name the postings of an item whose row is gone: the invariant
    # check is what sees them, and the snapshot shows them as nobody's.
    assert rows_of(service, [lost]) == 0
    snapshot = service.runner.snapshot()["keyword_index"]
    nobodys = {r["term"] for r in snapshot if "term" in r and r["item_id"] is None}
    assert nobodys >= hashes(alice, {"xq7haisong"})

    with service.engine.begin() as conn:  # cleaned up; then a posting inserted by hand
        conn.execute(p.delete().where(p.c.doc == lost_doc))
    assert orphans(service) == 0
    with service.engine.begin() as conn:
        row = {"namespace": alice.namespace, "term": 7, "doc": lost_doc, "tf": 1, "length": 1}
        conn.execute(p.insert().values(**row))
    assert orphans(service) == 1

    with service.engine.begin() as conn:  # a posting under another namespace's document
        conn.execute(p.delete().where(p.c.doc == lost_doc))
        row = {
            "namespace": "acme/bob",
            "term": 7,
            "doc": doc_of(service, kept),
            "tf": 1,
            "length": 1,
        }
        conn.execute(p.insert().values(**row))
    assert orphans(service) == 1

    with service.engine.begin() as conn:
        conn.execute(p.delete().where(p.c.namespace == "acme/bob"))
    assert orphans(service) == 0
    # While an item's document row is there, count_rows counts it and its postings.
    assert rows_of(service, [kept]) == 1 + len(set(tokenize("Zr9kept is my locker")))


def test_an_index_from_older_code_is_dropped_and_rebuilt(settings: Settings) -> None:
    """The old layout (item ids in every posting, two secondary indexes) has other
    columns: the runner drops it and replays the log, never migrates it."""
    with MemoryService(settings) as service:
        ledger = service.for_principal(ALICE)
        item = ledger.remember(turn("Passport E12345678 renewed")).item_id
        service.runner.catch_up()
        with service.engine.begin() as conn:
            for table in ("keyword_postings", "keyword_docs"):
                conn.execute(text(f"DROP TABLE {table}"))
            conn.execute(
                text(
                    "CREATE TABLE keyword_postings (namespace TEXT NOT NULL, term TEXT NOT "
                    "NULL, item_id TEXT NOT NULL, tf INTEGER NOT NULL)"
                )
            )
            conn.execute(
                text("CREATE INDEX ix_keyword_postings_item ON keyword_postings (item_id)")
            )
            conn.execute(
                text(
                    "CREATE TABLE keyword_docs (item_id TEXT PRIMARY KEY, namespace TEXT NOT "
                    "NULL, length INTEGER NOT NULL, subject TEXT, predicate TEXT)"
                )
            )
            old = {"ns": ledger.namespace, "id": item}
            conn.execute(text("INSERT INTO keyword_postings VALUES (:ns, 'stale', :id, 1)"), old)
            conn.execute(text("INSERT INTO keyword_docs VALUES (:id, :ns, 1, NULL, NULL)"), old)
    with MemoryService(settings) as service:
        ledger = service.for_principal(ALICE)
        assert ids(ledger, "e12345678") == [item] and ids(ledger, "stale") == []
        with service.engine.connect() as conn:
            names = [c["name"] for c in inspect(conn).get_columns("keyword_postings")]
        assert names == ["namespace", "term", "doc", "tf", "length"]
        assert rows_of(service, [item]) == 1 + 4 and orphans(service) == 0


def test_verify_reports_postings_a_purge_left_behind(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """The erasure's receipt counts the item's rows by key; `verify` also reads every
    posting, so terms left without their document row fail the request's check."""
    stored = alice.remember(turn("Xq7haisong at the station")).item_id
    alice._service.runner.catch_up()
    with service.engine.connect() as conn:
        [(doc, namespace, terms)] = KeywordIndexProjection._docs_of(conn, [stored])
    report = alice.forget(stored)
    assert report.completed and service.requests.verify(report.request_id).failed_stores == []
    with service.engine.begin() as conn:  # what a purge that lost its document row would leave
        row = {"namespace": namespace, "term": terms[0], "doc": doc, "tf": 1, "length": 1}
        conn.execute(keyword_postings.insert().values(**row))
    check = service.requests.verify(report.request_id)
    assert check.failed_stores == ["keyword_index"]
    [receipt] = [r for r in check.receipts if r.store == "keyword_index"]
    assert receipt.evidence["unattributed_rows"] == 1 and receipt.evidence["rows_left"] == 0
