"""The Python client (memory_ledger.client) against a real `memory-ledger serve` process
on loopback: sync and async, typed results, problem+json raised as exceptions, the
change feed read as an iterator that ends by itself."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from http_server import server_on_scratch_store
from waits import HUNG

from memory_ledger.access import TokenStore
from memory_ledger.client import (
    Added,
    AsyncMemoryLedgerClient,
    ClientError,
    Conflict,
    Context,
    Forbidden,
    InvalidRequest,
    MemoryLedgerClient,
    MemoryPage,
    NotFound,
    Notice,
    RequestReport,
    Unauthenticated,
)
from memory_ledger.config import Settings
from memory_ledger.times import now

pytestmark = pytest.mark.slow
#: Every call is bounded: nothing in this file can wait for ever.
TIMEOUT = HUNG


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Settings]]:
    with server_on_scratch_store(tmp_path_factory, "client") as served:
        yield served


@pytest.fixture(scope="module")
def tokens(server: tuple[str, Settings]) -> Iterator[dict[str, str]]:
    store = TokenStore(server[1], now)
    made = {
        "alice": store.create("acme/alice", "agent", ["forget"])[1],
        "alice_plain": store.create("acme/alice", "agent")[1],
        "bob": store.create("acme/bob", "agent", ["forget"])[1],
        "dana": store.create("acme/dana", "agent", ["forget"])[1],
    }
    yield made
    store.close()


@pytest.fixture
def alice(server: tuple[str, Settings], tokens: dict[str, str]) -> Iterator[MemoryLedgerClient]:
    with MemoryLedgerClient(server[0], tokens["alice"], timeout=TIMEOUT) as client:
        yield client


def _fact(predicate: str, value: str) -> dict[str, object]:
    return {
        "kind": "fact", "subject": "user", "predicate": predicate, "value": value,
        "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "client-test", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1", "turn_id": "t1"},
    }  # fmt: skip


def test_the_client_imports_neither_the_service_nor_its_libraries() -> None:
    code = (
        "import sys, memory_ledger.client\n"
        "heavy = ('memory_ledger.api', 'memory_ledger.http', 'sqlalchemy', 'fastapi',"
        " 'pydantic', 'eventsourcing', 'numpy', 'projections')\n"
        "found = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "assert not found, found\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HUNG)


def test_add_continue_recall_and_read_back(alice: MemoryLedgerClient) -> None:
    first = alice.add("I moved to Hangzhou last week.", origin="explicit")
    assert isinstance(first, Added) and first.kind == "turn"
    assert first.session_id.startswith("session-") and first.writer == "alice"
    reply = alice.add(
        "Noted: Hangzhou.", origin="observed", role="assistant", session_id=first.session_id
    )
    assert reply.session_id == first.session_id and reply.turn_id != first.turn_id
    page = alice.recall(kind="turn", limit=500)
    assert isinstance(page, MemoryPage)
    texts = {m.item_id: m.text for m in page.memories}
    assert texts[first.item_id] == "I moved to Hangzhou last week."
    assert texts[reply.item_id] == "Noted: Hangzhou."
    item = alice.get(first.item_id)
    assert item.text == "I moved to Hangzhou last week." and not item.erased
    assert item.provenance["session_id"] == first.session_id
    context = alice.context("Hangzhou moved", kinds=["turn"])
    assert isinstance(context, Context) and context.rendered
    assert first.item_id in [i.item_id for i in context.items]
    listed = list(alice.list_memories(kind="turn", limit=1))  # one page at a time
    assert {first.item_id, reply.item_id} <= {m.item_id for m in listed}


def test_the_full_form_batches_updates_and_history(alice: MemoryLedgerClient) -> None:
    stored = alice.remember(_fact("home_address", "18 Haisong Road"))
    assert stored.kind == "fact" and stored.version == 1
    seat, employer = alice.remember_many([_fact("seat_note", "window"), _fact("employer", "Acme")])
    assert seat.item_id != employer.item_id
    provenance = {"writer": "client-test", "written_at": datetime.now(UTC).isoformat(),
                  "turn_id": "t2"}  # fmt: skip
    assert alice.update(stored.item_id, "7 Binjiang Avenue", provenance) == 2
    assert [m.text for m in alice.history(stored.item_id)] == [
        "18 Haisong Road",
        "7 Binjiang Avenue",
    ]
    assert alice.suppress(seat.item_id) == 2
    assert seat.item_id not in [m.item_id for m in alice.list_memories(kind="fact")]
    assert alice.unsuppress(seat.item_id) == 3


def test_errors_are_raised_as_typed_problems(
    server: tuple[str, Settings], tokens: dict[str, str], alice: MemoryLedgerClient
) -> None:
    stranger = MemoryLedgerClient(server[0], "mlt_not_a_token", timeout=TIMEOUT)
    with stranger, pytest.raises(Unauthenticated) as refused:
        stranger.recall()
    assert refused.value.status == 401 and refused.value.title == "Unauthenticated"
    with pytest.raises(NotFound) as missing:
        alice.get(str(uuid4()))
    assert missing.value.status == 404 and missing.value.detail
    with pytest.raises(InvalidRequest) as invalid:
        alice.add("hello", origin="user")
    assert invalid.value.status == 422 and invalid.value.type == "about:blank"
    assert any(p.startswith("origin:") for p in invalid.value.problems)
    with pytest.raises(InvalidRequest) as nul:
        alice.add("a\x00b", origin="explicit")
    assert any(p.startswith("text:") for p in nul.value.problems)
    stored = alice.remember(_fact("pet_name", "Mochi"))
    plain = MemoryLedgerClient(server[0], tokens["alice_plain"], timeout=TIMEOUT)
    with plain, pytest.raises(Forbidden) as forbidden:
        plain.forget(stored.item_id)
    assert forbidden.value.status == 403
    assert alice.forget(stored.item_id).completed
    provenance = {"writer": "client-test", "written_at": datetime.now(UTC).isoformat(),
                  "turn_id": "t3"}  # fmt: skip
    with pytest.raises(Conflict) as conflict:
        alice.update(stored.item_id, "Luna", provenance)
    assert conflict.value.status == 409
    mine = alice.add("mine", origin="explicit").item_id
    bob = MemoryLedgerClient(server[0], tokens["bob"], timeout=TIMEOUT)
    with bob, pytest.raises(NotFound):  # another namespace's item: as if it did not exist
        bob.get(mine)
    assert all(isinstance(e, ClientError) for e in (refused.value, missing.value, nul.value))


def test_forget_in_words_requests_and_receipts(alice: MemoryLedgerClient) -> None:
    alice.remember(_fact("phone_number", "+86 138 0000 0000"))
    plan = alice.plan_forget("forget my phone number")
    assert plan.status == "planned" and plan.targets and plan.request_id is None
    outcome = alice.execute_plan(plan.plan_id)
    assert outcome.request_id and outcome.status == "completed"
    report = alice.request_status(outcome.request_id)
    assert isinstance(report, RequestReport) and report.completed
    assert set(plan.targets) <= set(report.targets)
    receipts = alice.receipts(outcome.request_id)
    assert receipts and {r.status for r in receipts} == {"ok"}
    assert "event_log" in [r.store for r in receipts]
    dry = alice.forget_scope({"kind": "category", "category": "general"}, dry_run=True)
    assert dry.status == "dry_run"
    listed = alice.list_requests(limit=200)
    assert outcome.request_id in [r.request_id for r in listed.requests]
    assert alice.verify_request(outcome.request_id).request_id == outcome.request_id


def test_a_retried_write_with_its_idempotency_key_runs_once(alice: MemoryLedgerClient) -> None:
    key = f"add-{uuid4().hex}"
    first = alice.add("Call me Ali.", origin="explicit", idempotency_key=key)
    again = alice.add("Call me Ali.", origin="explicit", idempotency_key=key)
    assert again == first  # the same item, the same generated session
    with pytest.raises(InvalidRequest):  # the same key with another body
        alice.add("Call me Al.", origin="explicit", idempotency_key=key)
    stored = [m for m in alice.list_memories(kind="turn") if m.item_id == first.item_id]
    assert len(stored) == 1


def test_the_feed_is_an_iterator_of_notices_that_ends(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    with MemoryLedgerClient(server[0], tokens["dana"], timeout=TIMEOUT) as dana:
        added = dana.add("Dana's first turn.", origin="explicit")
        seen = list(dana.feed(wait=0.5))  # ends 0.5 s after the last notice
        assert all(isinstance(n, Notice) for n in seen)
        recorded = [n for n in seen if n.type == "memory_recorded"]
        assert added.item_id in [n.item_id for n in recorded]
        assert all(n.namespace in (None, "acme/dana") for n in seen)
        assert "Dana's first turn." not in repr([n.raw for n in seen])  # never content
        cursor = seen[-1].cursor
        later = dana.add("Dana's second turn.", origin="explicit")
        resumed = [n for n in dana.feed(cursor, wait=0.5) if n.type == "memory_recorded"]
        assert [n.item_id for n in resumed] == [later.item_id]
        following = dana.feed(cursor, wait=0.5, follow=True)
        assert next(following).item_id == later.item_id
        # Nothing more yet: the stream ends after 0.5 s, and following opens it again
        # from the last cursor, until a notice comes (a write a second later).
        writer = threading.Timer(1.0, lambda: dana.add("Dana's third.", origin="explicit"))
        writer.start()
        try:
            third = next(n for n in following if n.type == "memory_recorded")
        finally:
            writer.join(timeout=TIMEOUT)
            following.close()
        assert third.item_id not in (added.item_id, later.item_id)
        assert dana.get(third.item_id).text == "Dana's third."
        with pytest.raises(ClientError) as gone:
            next(dana.feed("9.9.9", wait=0.5))
        assert gone.value.status in (410, 422)


def test_the_async_client(server: tuple[str, Settings], tokens: dict[str, str]) -> None:
    async def session() -> None:
        async with AsyncMemoryLedgerClient(server[0], tokens["bob"], timeout=TIMEOUT) as bob:
            assert (await bob.health())["status"] == "ok"
            first = await bob.add("I prefer aisle seats.", origin="explicit")
            reply = await bob.add(
                "Aisle seat noted.", origin="observed", role="assistant",
                session_id=first.session_id,
            )  # fmt: skip
            assert reply.session_id == first.session_id
            page = await bob.recall(kind="turn")
            assert {first.item_id, reply.item_id} <= {m.item_id for m in page.memories}
            listed = [m.item_id async for m in bob.list_memories(kind="turn", limit=1)]
            assert first.item_id in listed
            assert (await bob.get(first.item_id)).text == "I prefer aisle seats."
            context = await bob.context("aisle seats")
            assert first.item_id in [i.item_id for i in context.items]
            with pytest.raises(InvalidRequest) as invalid:
                await bob.add("", origin="explicit")
            assert any(p.startswith("text:") for p in invalid.value.problems)
            with pytest.raises(NotFound):
                await bob.request_status(str(uuid4()))
            notices = [n async for n in bob.feed(wait=0.5)]
            assert first.item_id in [n.item_id for n in notices]
            report = await bob.forget_scope({"kind": "source", "session_id": first.session_id})
            assert report.completed and set(report.targets) == {first.item_id, reply.item_id}
            assert await bob.receipts(report.request_id)
            assert (await bob.get(first.item_id)).erased

    asyncio.run(asyncio.wait_for(session(), timeout=HUNG))
