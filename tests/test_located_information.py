"""The model protocol: the store locates, the model reads (located.py).

An agent driven by a model understands the user; what it cannot do is find every place
a value is said in a memory of thousands of items, in every written form. What it
relies on: `find_information` returns every place of each value it passes, grouped by
value, with a snippet, and nothing of another principal's; `forget_information`
returns a plan over every one of those places (the same plan, the same execution, the
same receipts as a request in words), the keeps it passes are never cut, bad input is
refused by name, and after execution no read returns the value and no file holds it.
"""

# ruff: noqa: F811 - `memory` is the fixture of test_forget_information, used by name
from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import anyio
import httpx
import pytest
from factories import store_bytes_contain, turn
from http_server import server_on_scratch_store
from test_forget_information import _keys, _nowhere, _places, _text, memory  # noqa: F401

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryLedger
from memory_ledger.client import (
    AsyncMemoryLedgerClient,
    Forbidden,
    ForgetPlan,
    FoundInformation,
    FoundValue,
    MemoryLedgerClient,
)
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite
from memory_ledger.forgetting.planning.located import MAX_VALUE_CHARS, MAX_VALUES
from memory_ledger.times import now


def test_find_groups_every_place_of_each_value_in_every_form(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    """A phone number written three ways and stored as a fact is one group of four
    places; a phrase with a hyphen is found by its spaced form; a value said nowhere is
    reported, not dropped; snippets show the words around it."""
    found = alice.find_information(["206-555-0148", "copper finch", "Larch House"])
    phone, phrase, missing = found["values"]
    assert phone["status"] == "found" and phone["count"] == 4
    assert _keys(memory, [p["item_id"] for p in phone["places"]]) == {
        "t_phone1", "t_phone2", "t_phone3", "fact_phone",
    }  # fmt: skip
    said = {s for p in phone["places"] for s in p["said_as"]}
    assert said == {"(206) 555-0148", "206-555-0148", "206.555.0148"}
    by_key = {_keys(memory, [p["item_id"]]).pop(): p for p in phone["places"]}
    assert by_key["fact_phone"]["action"] == "erase"
    assert by_key["t_phone1"]["action"] == "redact"
    assert "(206) 555-0148" in by_key["t_phone1"]["snippet"]
    assert _keys(memory, [p["item_id"] for p in phrase["places"]]) == {"t_phrase1", "t_phrase2"}
    assert missing == {"value": "Larch House", "status": "not_found", "count": 0, "places": []}


def test_find_is_the_principals_only(
    alice: MemoryLedger, bob: MemoryLedger, memory: dict[str, str]
) -> None:
    bob.remember_many([turn("Bob's code is 7142.", turn_id="b1")])
    assert bob.find_information(["7142"])["values"][0]["count"] == 1
    mine = alice.find_information(["7142"])["values"][0]
    assert set(p["item_id"] for p in mine["places"]) <= set(memory.values())
    assert bob.find_information(["Birch Lodge"])["values"][0]["status"] == "not_found"


def test_forget_plans_every_place_then_execution_leaves_no_read_and_no_byte(
    alice: MemoryLedger, memory: dict[str, str], settings: Settings
) -> None:
    """The values a model passes are one plan over every place each is said (the fact
    erased, the turns redacted), executed by the same path as a request in words; then
    the values are in no item, no recall, no export and no file."""
    plan = alice.forget_information(
        ["206-555-0148", "copper finch"], reason="the user asked in chat"
    )
    assert plan.status == "planned" and plan.intent == "delete"
    assert _places(memory, plan) == {
        "fact_phone": "erase", "t_phone1": "redact", "t_phone2": "redact",
        "t_phone3": "redact", "t_phrase1": "redact", "t_phrase2": "redact",
    }  # fmt: skip
    assert "the user asked in chat" in plan.note
    blast = plan.blast or {}
    assert (blast["places"], blast["items"]) == (6, 6) and blast["namespace_items"] >= 6
    outcome = alice.execute_plan(plan.plan_id)
    assert outcome.status == "completed" and outcome.request_ids
    _nowhere(alice, memory, "206-555-0148", "206.555.0148", "(206) 555-0148", "copper finch")
    assert _nowhere_as_bytes(settings, "555-0148", "555.0148", "copper finch", "copper-finch")
    one = _text(alice, memory["t_phone1"]) or ""
    assert one.startswith("Call me at") and one.endswith("if the delivery is late.")


def _nowhere_as_bytes(settings: Settings, *needles: str) -> bool:
    held = {n: store_bytes_contain(settings, n) for n in needles}
    assert not any(held.values()), held
    return True


def test_a_keep_is_shown_and_never_cut(alice: MemoryLedger, memory: dict[str, str]) -> None:
    """The old deposit goes everywhere it is said; the new one, said in the same turn,
    is kept and listed in the plan. A chosen place that holds a keep is not erased."""
    plan = alice.forget_information(
        ["3,400 EUR"],
        keeps=["3,150 EUR"],
        chosen=[{"description": "the deposit talk", "item_id": memory["t_amount4"]}],
    )
    assert plan.status == "partial_match"
    first = plan.pieces[0]
    assert _keys(memory, [p["item_id"] for p in first["places"]]) == {
        "t_amount1", "t_amount2", "t_amount3",
    }  # fmt: skip
    assert plan.kept and _keys(memory, plan.kept[0]["item_ids"]) >= {"t_amount1", "t_amount4"}
    assert plan.pieces[1]["status"] == "not_found"
    assert "holds something to keep" in plan.note
    alice.execute_plan(plan.plan_id)
    revised = _text(alice, memory["t_amount1"]) or ""
    assert "3,150 EUR" in revised and "3,400" not in revised
    assert _text(alice, memory["t_amount4"]) == "So we agreed on 3,150 EUR for the deposit, right?"
    _nowhere(alice, memory, "3,400 EUR", "€3,400")


def test_a_chosen_place_for_a_description_is_erased(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    plan = alice.forget_information(
        chosen=[{"description": "the note about the dog", "item_id": memory["f12"]}]
    )
    assert plan.status == "planned" and _keys(memory, plan.targets) == {"f12"}
    alice.execute_plan(plan.plan_id)
    assert alice.get(memory["f12"]).erased
    assert _text(alice, memory["f13"]) is not None


def test_a_value_said_nowhere_is_a_note_not_a_plan(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    plan = alice.forget_information(["Larch House"])
    assert plan.status == "nothing_matched" and not plan.targets
    assert "'Larch House' is said nowhere" in plan.note
    assert "Larch House" not in str(plan.outline())  # the note is sealed


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda a: a.find_information(), "values: empty"),
        (lambda a: a.find_information("7142"), "values: not a list"),
        (lambda a: a.find_information([7142]), "values[0]: type"),
        (lambda a: a.find_information(["x" * (MAX_VALUE_CHARS + 1)]), "values[0]: too long"),
        (lambda a: a.find_information([f"v{n}xx" for n in range(MAX_VALUES + 1)]),
         "values: too many"),
        (lambda a: a.find_information(description=3), "description: type"),
        (lambda a: a.forget_information([]), "values: empty"),
        (lambda a: a.forget_information(["7142"], keeps=["7142"]), "keeps: overlap"),
        (lambda a: a.forget_information(chosen=[{"item_id": "x"}]), "chosen[0]: shape"),
        (lambda a: a.forget_information(["7142"], reason=5), "reason: type"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_by_name(alice: MemoryLedger, call, problem: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidWrite) as refused:
        call(alice)
    assert problem in str(refused.value.problems)


def test_a_value_too_short_to_look_for_is_said_so(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    assert alice.find_information(["a"])["values"][0]["status"] == "too_short"
    plan = alice.forget_information(["a"])
    assert plan.status == "nothing_matched" and "too short" in plan.note


def test_a_short_name_is_found_as_a_word_and_its_common_uses_are_kept(
    bob: MemoryLedger,
) -> None:
    """ "Art" is shorter than the mention index looks up: it is searched in every text,
    as a word (not in "start"); the keep "art class" protects the ordinary use, and in
    a place where both are said the name goes and the lower-case keep stays (a
    capitalised span never takes its lower-case namesake)."""
    said = [
        "My cousin Art checked into rehab.",
        "Tell Art I'm rooting for him.",
        "I signed up for an art class at the start of May.",
        "Art drove me to art class today.",
        "Nothing about him here.",
    ]
    stored = bob.remember_many([turn(t, turn_id=f"a{n}") for n, t in enumerate(said)])
    ids = [s.item_id for s in stored]
    found = bob.find_information(["Art"])["values"][0]
    assert {p["item_id"] for p in found["places"]} == set(ids[:4])
    plan = bob.forget_information(["Art"], keeps=["art class"])
    assert plan.status == "planned"
    assert {p["item_id"] for p in plan.pieces[0]["places"]} == {ids[0], ids[1], ids[3]}
    assert plan.kept[0]["item_ids"] == sorted([ids[2], ids[3]])
    bob.execute_plan(plan.plan_id)
    texts = [bob.get(i).text or "" for i in ids]
    assert "Art" not in texts[0] and "Art" not in texts[1]
    assert texts[3] == "[redacted] drove me to art class today."
    assert (texts[2], texts[4]) == (said[2], said[4])


# -- over HTTP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    with server_on_scratch_store(tmp_path_factory, "located") as (base, settings):
        store = TokenStore(settings, now)
        tokens = {
            "alice": store.create("acme/alice", "agent")[1],
            "alice_forget": store.create("acme/alice", "agent", ["forget"])[1],
            "bob": store.create("acme/bob", "agent", ["forget"])[1],
        }
        yield base, tokens
        store.close()


def _said(base: str, token: str, text: str) -> str:
    body = {
        "kind": "turn", "subject": "user", "content": text, "origin": "explicit",
        "sensitivity": "personal",
        "provenance": {"writer": "http-agent", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1", "turn_id": "t1"},
    }  # fmt: skip
    made = httpx.post(f"{base}/v1/memories", json=body, headers=_auth(token))
    assert made.status_code in (200, 201), made.text
    return str(made.json()["memories"][0]["item_id"])


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_find_and_forget_over_http(served: tuple[str, dict[str, str]]) -> None:
    """find reads with any agent token of the namespace; forget needs the forget grant;
    the namespace is the token's (a body naming one is refused); the plan executes
    through the same endpoint as any plan."""
    base, tokens = served
    one = _said(base, tokens["alice"], "Call Harriet Vell at 503-555-0118.")
    two = _said(base, tokens["alice"], "Ms. Vell said (503) 555-0118 is her office line.")
    _said(base, tokens["bob"], "Bob's lawyer is Harriet Vell too.")
    alice, eraser = _auth(tokens["alice"]), _auth(tokens["alice_forget"])
    found = httpx.post(f"{base}/v1/information/find", json={"values": ["503-555-0118"]},
                       headers=alice)  # fmt: skip
    assert found.status_code == 200, found.text
    group = found.json()["values"][0]
    assert group["count"] == 2 and {p["item_id"] for p in group["places"]} == {one, two}
    body = {"values": ["Harriet Vell", "Ms. Vell", "503-555-0118"], "keeps": ["office line"]}
    refused = httpx.post(f"{base}/v1/information/forget", json=body, headers=alice)
    assert refused.status_code == 403, refused.text
    named = httpx.post(f"{base}/v1/information/forget", json={**body, "namespace": "acme/bob"},
                       headers=eraser)  # fmt: skip
    assert named.status_code == 422, named.text
    bad = httpx.post(f"{base}/v1/information/forget", json={"values": [7]}, headers=eraser)
    assert bad.status_code == 422 and bad.headers["content-type"].startswith(
        "application/problem+json"
    )
    plan = httpx.post(f"{base}/v1/information/forget", json=body, headers=eraser)
    assert plan.status_code == 201 and plan.json()["status"] == "planned", plan.text
    done = httpx.post(f"{base}/v1/forget-plans/{plan.json()['plan_id']}/execute", headers=eraser)
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    texts = [httpx.get(f"{base}/v1/memories/{i}", headers=alice).json()["text"] for i in (one, two)]
    assert all("Vell" not in t and "0118" not in t for t in texts), texts
    assert "office line" in texts[1]
    bobs = httpx.post(f"{base}/v1/information/find", json={"values": ["Harriet Vell"]},
                      headers=_auth(tokens["bob"])).json()  # fmt: skip
    assert bobs["values"][0]["count"] == 1  # another principal's memory is untouched


def test_the_clients_sync_and_async_speak_the_protocol(
    served: tuple[str, dict[str, str]],
) -> None:
    """Typed results from both clients: the places of a value, then a plan over them
    (which a token without the forget grant may not make)."""
    base, tokens = served
    made = _said(
        base, tokens["alice"], "The front desk is 503-555-0177, or 5035550177 from the lobby phone."
    )
    with MemoryLedgerClient(base, tokens["alice_forget"]) as client:
        found = client.find_information(["(503) 555-0177"])
        assert isinstance(found, FoundInformation) and isinstance(found.values[0], FoundValue)
        assert found.values[0].count == 1 and found.values[0].places[0]["item_id"] == made
        assert set(found.values[0].places[0]["said_as"]) == {"503-555-0177", "5035550177"}

    async def plan_async() -> ForgetPlan:
        async with AsyncMemoryLedgerClient(base, tokens["alice"]) as reader:
            with pytest.raises(Forbidden):
                await reader.forget_information(["503-555-0177"])
        async with AsyncMemoryLedgerClient(base, tokens["alice_forget"]) as client:
            return await client.forget_information(["503-555-0177"], reason="changed the code")

    plan = anyio.run(plan_async)
    assert plan.status == "planned" and plan.pieces[0]["places"][0]["item_id"] == made
    assert "changed the code" in plan.note
