"""MemoryLedgerStore: LangGraph's BaseStore over a principal's ledger, on real stores.

Every test uses a real ledger (SQLite, and PostgreSQL when reachable) and LangGraph's own
classes: the BaseStore methods, `Item`/`SearchItem`, and a compiled StateGraph whose
nodes reach the store through the runtime, as an app's nodes do.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

import pytest
from conftest import ALICE, BOB
from factories import fact, store_bytes_contain
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    PutOp,
    SearchItem,
)

from memory_ledger.agents.langgraph_store import (
    ENVELOPE_FORMAT,
    REDACTED_FIELD,
    MemoryLedgerStore,
)
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite
from memory_ledger.identifiers import is_identifier

USER_NS = ("users", "alice-smith")


def _store_items(ledger: MemoryLedger) -> list:
    """The store's facts as the ledger holds them (clear attributes and sealed text)."""
    return ledger.recall(subject="langgraph_store", kind="fact", limit=100)


def test_put_get_search_list_and_delete_roundtrip(alice: MemoryLedger) -> None:
    store = MemoryLedgerStore(alice)
    assert isinstance(store, BaseStore)
    store.put(USER_NS, "drink", {"text": "flat white coffee every morning", "rating": 5})
    store.put(USER_NS, "food", {"text": "pizza margherita on fridays", "rating": 3})
    store.put(("users", "alice-smith", "trips"), "kyoto", {"text": "Kyoto in April", "rating": 4})
    store.put(("teams", "blue"), "motto", {"text": "ship it", "rating": 1})

    item = store.get(USER_NS, "drink")
    assert isinstance(item, Item)
    assert (item.namespace, item.key) == (USER_NS, "drink")
    assert item.value == {"text": "flat white coffee every morning", "rating": 5}
    assert isinstance(item.created_at, datetime) and item.created_at.tzinfo is not None
    assert item.updated_at == item.created_at
    assert store.get(USER_NS, "nothing") is None
    assert store.get(("users", "someone-else"), "drink") is None

    # A second put is a new version of the same item: the first stays as history.
    store.put(USER_NS, "drink", {"text": "green tea", "rating": 4})
    again = store.get(USER_NS, "drink")
    assert again is not None and again.value == {"text": "green tea", "rating": 4}
    assert again.created_at == item.created_at and again.updated_at > item.updated_at
    versions = store.history(USER_NS, "drink")
    assert [v.value["text"] for v in versions] == ["flat white coffee every morning", "green tea"]
    assert len(_store_items(alice)) == 4, "one item per key, not one per put"

    under_user = store.search(("users",))
    assert all(isinstance(s, SearchItem) for s in under_user)
    assert {(s.namespace, s.key) for s in under_user} == {
        (USER_NS, "drink"),
        (USER_NS, "food"),
        (("users", "alice-smith", "trips"), "kyoto"),
    }
    assert under_user[0].key == "drink", "newest first without a query"
    assert [s.key for s in store.search((), filter={"rating": {"$gte": 4}})] == ["drink", "kyoto"]
    exact = store.search(USER_NS, filter={"text": "pizza margherita on fridays"})
    assert [s.key for s in exact] == ["food"]
    assert store.search((), filter={"rating": {"$ne": 1}, "text": "ship it"}) == []
    ranked = store.search((), query="pizza on fridays")
    assert ranked[0].key == "food" and ranked[0].score is not None
    assert [s.score for s in ranked] == sorted((s.score for s in ranked), reverse=True)
    page = store.search((), limit=2, offset=1)
    assert [s.key for s in page] == [s.key for s in store.search((), limit=10)][1:3]

    assert store.list_namespaces() == [("teams", "blue"), USER_NS, (*USER_NS, "trips")]
    assert store.list_namespaces(prefix=("users",)) == [USER_NS, (*USER_NS, "trips")]
    assert store.list_namespaces(suffix=("trips",)) == [(*USER_NS, "trips")]
    assert store.list_namespaces(prefix=("*", "blue")) == [("teams", "blue")]
    assert store.list_namespaces(max_depth=1) == [("teams",), ("users",)]
    assert store.list_namespaces(limit=1, offset=1) == [USER_NS]

    store.delete(USER_NS, "drink")
    report = store.last_report
    assert report is not None and report.completed, report
    assert report.scope["kind"] == "item" and len(report.targets) == 1
    assert store.get(USER_NS, "drink") is None
    assert store.history(USER_NS, "drink") == []
    assert "drink" not in {s.key for s in store.search(())}
    assert alice.get(report.targets[0]).erased
    store.put(USER_NS, "food", None)  # LangGraph's other spelling of a delete
    assert store.last_report is not None and store.last_report.completed
    assert store.get(USER_NS, "food") is None
    assert store.forget(USER_NS, "food") is None, "nothing left to erase: nothing filed"


def test_batch_runs_ops_in_order_and_abatch_runs_it_in_a_thread(alice: MemoryLedger) -> None:
    store = MemoryLedgerStore(alice)
    results = store.batch(
        [
            PutOp(USER_NS, "k", {"v": 1}),
            GetOp(USER_NS, "k"),
            PutOp(USER_NS, "k", None),
            GetOp(USER_NS, "k"),
        ]
    )
    assert results[0] is None and results[2] is None and results[3] is None
    assert isinstance(results[1], Item) and results[1].value == {"v": 1}

    async def use() -> tuple[Item | None, list[SearchItem], list[tuple[str, ...]]]:
        await store.aput(USER_NS, "async", {"v": "from the event loop"})
        got = await store.aget(USER_NS, "async")
        found = await store.asearch(("users",), filter={"v": "from the event loop"})
        spaces = await store.alist_namespaces()
        await store.adelete(USER_NS, "async")
        return got, found, spaces

    got, found, spaces = asyncio.run(use())
    assert got is not None and got.value == {"v": "from the event loop"}
    assert [s.key for s in found] == ["async"] and spaces == [USER_NS]
    assert store.last_report is not None and store.last_report.completed
    assert store.get(USER_NS, "async") is None


def test_bad_operations_are_refused_before_anything_is_stored(alice: MemoryLedger) -> None:
    store = MemoryLedgerStore(alice)
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"v": 1})
    # ... but LangGraph's own stores take its reserved root from batch, and so does this
    store.batch([PutOp(("langgraph", "x"), "k", {"v": 1})])
    assert store.batch([GetOp(("langgraph", "x"), "k")])[0] is not None
    store.batch([PutOp(("langgraph", "x"), "k", None)])
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", {"v": 1})])
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("a.b",), "k")])  # a period would address ("a", "b")
    with pytest.raises(NotImplementedError):
        store.put(USER_NS, "k", {"v": 1}, ttl=5)
    with pytest.raises(InvalidWrite):  # the ledger's value limit, 16 KiB
        store.put(USER_NS, "big", {"text": "x" * 20_000})
    store.put(USER_NS, "k", {"n": 1})
    with pytest.raises(ValueError, match="operator"):
        store.search((), filter={"n": {"$near": 1}})
    with pytest.raises(InvalidWrite):
        MemoryLedgerStore(alice, subject="not an identifier")
    with pytest.raises(InvalidWrite):
        MemoryLedgerStore(alice, sensitivity="secret")  # type: ignore[arg-type]
    assert [s.key for s in store.search(())] == ["k"]


def _letters(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding function (LangGraph's `embed` may be one): how often
    each of 64 character classes occurs, so a text is closest to itself."""
    rows = []
    for text in texts:
        row = [0.0] * 64
        for char in text:
            row[ord(char) % 64] += 1.0
        rows.append(row)
    return rows


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_query_is_compared_with_the_document_not_its_envelope(alice: MemoryLedger) -> None:
    """The default index is LangGraph's: the whole document's text (with the service's
    embedder), so each of five scripts finds its own document first."""
    store = MemoryLedgerStore(alice)
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for number, text in enumerate(texts):
        store.put(("user_123", "memories"), str(number), {"text": text})
    for number, text in enumerate(texts):
        found = store.search(("user_123", "memories"), query=text)
        assert found[0].key == str(number), (text, [(s.key, s.score) for s in found])
        assert found[0].score is not None and found[0].score > 0.5


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_index_config_and_each_puts_index_decide_what_is_embedded(
    alice: MemoryLedger,
) -> None:
    store = MemoryLedgerStore(alice, index={"dims": 64, "embed": _letters, "fields": ["title"]})
    store.put(("docs",), "a", {"title": "qqqq", "body": "zzzz"})
    store.put(("docs",), "b", {"title": "zzzz", "body": "qqqq"})
    store.put(("docs",), "c", {"title": "wwww", "body": "qqqq"}, index=["body"])
    store.put(("docs",), "d", {"title": "qqqq"}, index=False)
    found = store.search(("docs",), query="qqqq")
    assert [s.key for s in found[:2]] in (["a", "c"], ["c", "a"])  # title of a, body of c
    assert found[0].score == pytest.approx(1.0) and found[1].score == pytest.approx(1.0)
    assert [(s.key, s.score) for s in found[2:]] == [("b", pytest.approx(0.0)), ("d", None)]
    assert store.get(("docs",), "d") is not None, "index=False is stored, not embedded"
    store.put(("docs",), "a", {"title": "zzzz"})  # a new version is embedded anew
    assert {s.key for s in store.search(("docs",), query="zzzz")[:2]} == {"a", "b"}
    with pytest.raises(ValueError, match="Text fields"):
        MemoryLedgerStore(alice, index={"fields": 3})  # type: ignore[typeddict-item]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_filters_take_dotted_paths_and_refuse_what_the_sql_stores_refuse(
    alice: MemoryLedger,
) -> None:
    store = MemoryLedgerStore(alice)
    store.put(("docs",), "h", {"access-level": "public", "user": {"access-level": "nested"}})
    store.put(("docs",), "d", {"123abc": "ok", "user": {"123abc": "ok2", "age": 30}})
    assert [s.key for s in store.search(("docs",), filter={"user.access-level": "nested"})] == ["h"]
    assert [s.key for s in store.search(("docs",), filter={"user.123abc": "ok2"})] == ["d"]
    assert [s.key for s in store.search(("docs",), filter={"user.age": {"$gt": 20}})] == ["d"]
    with pytest.raises(ValueError, match="Invalid filter key"):
        store.search(("docs",), filter={"access') = 'public' OR '1'='1": "x"})
    with pytest.raises(ValueError, match="Unsupported operator"):
        store.search(("nothing-here",), filter={"n": {"$near": 1}})


def test_a_delete_erases_what_reads_no_longer_show(alice: MemoryLedger) -> None:
    """A suppressed item is hidden from get, but a delete of its key erases it."""
    store = MemoryLedgerStore(alice)
    store.put(USER_NS, "k", {"v": "hidden, not gone"})
    [held] = _store_items(alice)
    alice.suppress(held.item_id)
    assert store.get(USER_NS, "k") is None
    report = store.forget(USER_NS, "k")
    assert report is not None and report.completed and report.targets == [held.item_id]
    assert alice.get(held.item_id).erased


def test_two_principals_with_the_same_tuple_never_meet(service: MemoryService) -> None:
    alice, bob = service.for_principal(ALICE), service.for_principal(BOB)
    alice_store, bob_store = MemoryLedgerStore(alice), MemoryLedgerStore(bob)
    shared = ("users", "shared-label")
    alice_store.put(shared, "profile", {"text": "alice's secret"})
    bob_store.put(shared, "profile", {"text": "bob's note"})

    got = bob_store.get(shared, "profile")
    assert got is not None and got.value == {"text": "bob's note"}
    assert [s.value for s in bob_store.search(())] == [{"text": "bob's note"}]
    assert bob_store.search((), query="alice's secret")[0].value == {"text": "bob's note"}
    # The same tuple and key hash to unrelated predicates under each principal's key.
    [a_item], [b_item] = _store_items(alice), _store_items(bob)
    assert a_item.predicate != b_item.predicate
    assert a_item.predicate.startswith("lg_") and is_identifier(a_item.predicate)

    bob_store.delete(shared, "profile")
    assert bob_store.last_report is not None and bob_store.last_report.completed
    assert bob_store.last_report.targets == [b_item.item_id]
    mine = alice_store.get(shared, "profile")
    assert mine is not None and mine.value == {"text": "alice's secret"}


def test_a_delete_is_a_verified_forget_and_no_byte_holds_it(settings: Settings) -> None:
    token = f"zq{secrets.token_hex(8)}"
    email = f"alice.{secrets.token_hex(4)}@example.com"
    label = f"label-{secrets.token_hex(6)}"
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        store = MemoryLedgerStore(alice)
        store.put(("users", label), email, {"text": f"door code {token}"})
        kept_token = f"zq{secrets.token_hex(8)}"
        store.put(("users", label), "kept", {"text": f"kept {kept_token}"})
        service.runner.catch_up()
        service.vectors.catch_up()
        # Sealed before any delete: not the document, the label nor the key, anywhere.
        for needle in (token, email, label, kept_token):
            assert store_bytes_contain(settings, needle) == [], needle
        [held] = [m for m in _store_items(alice) if token in (m.text or "")]

        store.delete(("users", label), email)
        report = store.last_report
        assert report is not None and report.completed, report.to_dict()
        assert report.targets == [held.item_id] and report.mentions == []
        receipts = {(r.store, r.action): r.status for r in store.last_receipts}
        for store_name in ("event_log", "key_store", "facts", "catalog", "vector_index"):
            assert any(s == store_name for s, _ in receipts), store_name
        assert receipts[("key_store", "key_bytes_gone")] == "ok"
        assert all(status == "ok" for status in receipts.values())
        verified = service.requests.verify(report.request_id)
        assert verified.failed_stores == [], verified.to_dict()

    with MemoryService(settings) as service:  # a new ledger over the same store
        alice = service.for_principal(ALICE)
        store = MemoryLedgerStore(alice)
        assert store.get(("users", label), email) is None
        assert [s.key for s in store.search(())] == ["kept"]
        assert alice.get(held.item_id).erased and alice.get(held.item_id).text is None
        assert service.requests.report(report.request_id).status == "completed"
    for needle in (token, email, label, kept_token):
        assert store_bytes_contain(settings, needle) == [], needle


def test_labels_and_keys_are_in_no_clear_column(alice: MemoryLedger) -> None:
    store = MemoryLedgerStore(alice)
    store.put(("users", "alice@example"), "alice@example.com", {"text": "hello"})
    [held] = _store_items(alice)
    clear = json.dumps(
        [held.subject, held.predicate, held.category, held.provenance], ensure_ascii=False
    )
    assert "alice" not in clear and "example" not in clear
    header, _, document = (held.text or "").partition("\n")
    assert "alice" not in header, "the header is hex, not text"
    assert json.loads(bytes.fromhex(header))["format"] == ENVELOPE_FORMAT
    assert json.loads(document) == {"text": "hello"}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_delete_never_damages_another_item_of_the_same_namespace(alice: MemoryLedger) -> None:
    """A label or key shared by many items is never cut out of them (the envelope's
    header is one token to the mention rule); a repeated *value* is redacted, as the
    ledger does for every forget."""
    store = MemoryLedgerStore(alice)
    shared = ("homes", "flat 12 Baker Street")  # digits and words: identifying, to the ledger
    store.put(shared, "address", {"street": "18 Haisong Road"})
    store.put(shared, "keys", {"text": "spare keys with the neighbour", "n": 2})
    store.put(("notes",), "delivery", {"text": "deliver to 18 Haisong Road please"})

    store.delete(shared, "address")
    report = store.last_report
    assert report is not None and report.completed
    kept = store.get(shared, "keys")
    assert kept is not None and kept.value == {"text": "spare keys with the neighbour", "n": 2}
    assert store.list_namespaces() == [shared, ("notes",)]
    delivery = store.get(("notes",), "delivery")
    assert delivery is not None and delivery.value == {"text": "deliver to [forgotten] please"}
    assert REDACTED_FIELD not in delivery.value
    assert len(report.mentions) == 1


@pytest.mark.parametrize("backend", ["sqlite"])
def test_items_are_memories_of_the_principal(alice: MemoryLedger) -> None:
    """What the app stores is governed like any memory: recalled in context, and erased
    by the principal's own forget requests (here: by category)."""
    store = MemoryLedgerStore(alice)
    store.put(USER_NS, "seat", {"text": "always an aisle seat on long flights"})
    alice.remember(fact("city", "Hangzhou"))
    found = alice.context("aisle seat on flights").items
    assert any("aisle seat" in (i.text or "") for i in found)
    everything = alice.forget_scope({"kind": "category", "category": "langgraph"})
    assert everything.completed and len(everything.targets) == 1
    assert store.get(USER_NS, "seat") is None
    assert [m.predicate for m in alice.recall()] == ["city"]


class _State(TypedDict):
    question: str
    answer: str


@dataclass
class _Context:
    user: str


def _graph(store: BaseStore):  # type: ignore[no-untyped-def]
    def remember(state: _State, runtime: Runtime[_Context]) -> dict[str, str]:
        assert runtime.store is not None
        runtime.store.put(("memories", runtime.context.user), "last", {"text": state["question"]})
        return {}

    def answer(state: _State) -> dict[str, str]:
        item = get_store().get(("memories", "alice-smith"), "last")
        return {"answer": f"you said: {item.value['text']}" if item else "nothing"}

    graph = StateGraph(_State, context_schema=_Context)
    graph.add_node("remember", remember)
    graph.add_node("answer", answer)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "answer")
    graph.add_edge("answer", END)
    return graph.compile(store=store)


def test_a_compiled_langgraph_graph_uses_the_store(alice: MemoryLedger) -> None:
    store = MemoryLedgerStore(alice)
    app = _graph(store)
    out = app.invoke(
        {"question": "book the window seat", "answer": ""},
        {"configurable": {"thread_id": "thread-7"}},
        context=_Context(user="alice-smith"),
    )
    assert out["answer"] == "you said: book the window seat"
    [held] = _store_items(alice)
    assert held.provenance["session_id"] == "thread-7", "the thread is the write's source"
    assert held.provenance["writer"] == "langgraph"

    async def run_async() -> dict:
        return await app.ainvoke(  # type: ignore[no-any-return]
            {"question": "and a vegetarian meal", "answer": ""},
            {"configurable": {"thread_id": "not an identifier!"}},
            context=_Context(user="alice-smith"),
        )

    assert asyncio.run(run_async())["answer"] == "you said: and a vegetarian meal"
    [held] = _store_items(alice)
    assert held.version == 2 and held.provenance["session_id"] == "langgraph"
    # A forget of the thread's source erases what the thread stored (and nothing else).
    report = alice.forget_scope({"kind": "source", "session_id": "thread-7"})
    assert report.completed and report.history == [held.item_id], "its first version only"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])
def test_another_process_cannot_read_a_deleted_item(settings: Settings) -> None:
    with MemoryService(settings) as service:
        store = MemoryLedgerStore(service.for_principal(ALICE))
        store.put(USER_NS, "gone", {"text": "to be forgotten"})
        store.put(USER_NS, "kept", {"text": "still here"})
        store.delete(USER_NS, "gone")
        assert store.last_report is not None and store.last_report.completed
    code = (
        "import json, sys\n"
        "from memory_ledger.agents.langgraph_store import MemoryLedgerStore\n"
        "from memory_ledger.api import MemoryService\n"
        "from memory_ledger.config import Settings\n"
        "from memory_ledger.principal import Principal\n"
        "with MemoryService(Settings.resolve(sys.argv[1])) as s:\n"
        "    store = MemoryLedgerStore(s.for_principal(Principal('acme', 'alice')))\n"
        "    ns = ('users', 'alice-smith')\n"
        "    print(json.dumps([store.get(ns, 'gone') is None,\n"
        "                      [i.value for i in store.search(ns)]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(settings.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [True, [{"text": "still here"}]]
