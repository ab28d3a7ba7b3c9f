"""Forget requests in words: plan, clarify, confirm, execute, answer.

What users rely on: a plan destroys nothing and keeps no copy of the request's words; an
ambiguous request asks instead of widening; a non-request is not turned into one; a
plan runs once, only in its own namespace, and its answer comes from the request's real
status; an erasure by any path withdraws the open plans that show the erased items.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from factories import T0, fact, preference, store_bytes_contain, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.errors import InvalidTransition, InvalidWrite, NotFound
from memory_ledger.forgetting.planning import LexiconReader, Reading
from memory_ledger.forgetting.planning.flow import MAX_REQUEST_CHARS
from memory_ledger.forgetting.planning.plans import PLAN_TTL
from memory_ledger.principal import Principal

NOW = T0 + timedelta(days=30)


@pytest.fixture
def history(service: MemoryService, alice: MemoryLedger) -> dict[str, str]:
    """Alice: three addresses over time, a phone, two allergies, her friend Bob's
    address, a seat preference, a conversation yesterday, and an inference."""
    service.clock = lambda: NOW
    ids: dict[str, str] = {}

    def put(key: str, write: dict) -> None:
        ids[key] = alice.remember(write).item_id

    put("t1", turn("I live at 18 Haisong Road", turn_id="t1", at=T0))
    put("addr1", fact("home_address", "18 Haisong Road", at=T0, turn="t1"))
    put("addr2", fact("home_address", "4 Elm Street", at=T0 + timedelta(days=5), turn="t2"))
    put("addr3", fact("home_address", "9 Oak Lane", at=T0 + timedelta(days=10), turn="t3"))
    put("phone", fact("phone", "138 0000 1111", at=T0 + timedelta(days=3), turn="t4"))
    put("bob", fact("home_address", "7 Birch Road", subject="bob", at=T0, turn="t5"))
    put("peanuts", fact("allergy", "peanuts", at=T0, turn="t6", category="health"))
    put("shellfish", fact("allergy", "shellfish", at=T0, turn="t7", category="health"))
    put("seat", preference("seat", "window seat"))
    yesterday = NOW - timedelta(days=1)
    put("met", turn("We met at the cafe at 3:30 pm", turn_id="t9", session="s2", at=yesterday))
    put("diet", fact("diet", "probably vegetarian", origin="inferred", at=T0, turn="t8",
                     derived_from=[{"item_id": ids["t1"], "version": 1}]))  # fmt: skip
    return ids


def _keys(ids: dict[str, str], found: list[str]) -> set[str]:
    names = {v: k for k, v in ids.items()}
    return {names.get(i, i) for i in found}


CASES = [
    # request, status, intent, targets, which
    ("forget my current address", "planned", "delete", {"addr3"}),
    ("delete my address", "planned", "delete", {"addr1", "addr2", "addr3"}),
    ("forget my friend Bob's address", "planned", "delete", {"bob"}),
    ("delete my phone number", "planned", "delete", {"phone"}),
    ("删除我的电话号码", "planned", "delete", {"phone"}),
    ("forget that I'm allergic to peanuts", "planned", "delete", {"peanuts"}),
    ("delete my health information", "planned", "delete", {"peanuts", "shellfish"}),
    ("stop using my seat preference", "planned", "stop_using", {"seat"}),
    ("forget what you concluded about my diet", "planned", "stop_using", {"diet"}),
    ("delete what I said yesterday", "planned", "delete", {"met"}),
    ("forget my old address", "needs_clarification", "delete", set()),
    ("把我的旧住址删掉", "needs_clarification", "delete", set()),
    ("where do I live?", "not_a_request", None, set()),
    ("我住哪？", "not_a_request", None, set()),
    ("don't forget my birthday", "not_a_request", None, set()),
    ("别忘了我的生日", "not_a_request", None, set()),
    ("forget it, let's talk about dinner", "not_a_request", None, set()),
    ("forget my passport number", "nothing_matched", "delete", set()),
    ("forget Carol's phone number", "nothing_matched", "delete", set()),
]


@pytest.mark.parametrize(("text", "status", "intent", "targets"), CASES)
def test_a_request_becomes_the_plan_it_says(
    alice: MemoryLedger, history: dict[str, str], text: str, status: str, intent: str | None,
    targets: set[str],
) -> None:  # fmt: skip
    plan = alice.plan_forget(text)
    assert (plan.status, plan.intent) == (status, intent)
    assert _keys(history, plan.targets) == targets
    if status != "planned":
        assert not plan.targets and not plan.cascaded
    assert plan.plan_id.startswith("plan-") and plan.expires_at


def test_an_ambiguous_request_asks_with_candidates_and_never_widens(
    alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("forget my old address")
    assert plan.status == "needs_clarification" and not plan.targets
    assert _keys(history, [c["item_id"] for c in plan.candidates]) == {"addr1", "addr2"}
    assert plan.question and "18 Haisong Road" in plan.question and "4 Elm Street" in plan.question
    with pytest.raises(InvalidTransition, match="clarification"):
        alice.execute_plan(plan.plan_id)
    with pytest.raises(InvalidWrite, match="candidates"):  # a choice outside is refused
        alice.choose_candidates(plan.plan_id, [history["addr3"]])
    chosen = alice.choose_candidates(plan.plan_id, [history["addr1"]])
    assert (chosen.status, _keys(history, chosen.targets)) == ("planned", {"addr1"})
    assert "addr3" in _keys(history, chosen.keeps) and "addr2" in _keys(history, chosen.keeps)
    with pytest.raises(InvalidTransition):  # the question was answered once
        alice.choose_candidates(plan.plan_id, [history["addr2"]])


def test_a_redaction_names_the_spans_and_keeps_the_item(
    alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("delete the exact time but keep that we met")
    assert (plan.status, plan.intent, plan.spans) == ("planned", "redact", ["3:30 pm"])
    assert _keys(history, plan.targets) == {"met"} == _keys(history, plan.keeps)
    outcome = alice.execute_plan(plan.plan_id)
    assert outcome.status == "completed" and outcome.request_id
    assert alice.get(history["met"]).text == "We met at the cafe at [redacted]"


def test_an_update_changes_the_value_and_keeps_history(
    alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("update my phone number to 139 2222 3333", session_id="s9")
    assert (plan.intent, plan.new_value) == ("update", "139 2222 3333")
    outcome = alice.execute_plan(plan.plan_id)
    assert outcome.status == "completed" and outcome.request_id is None
    now = alice.get(history["phone"])
    assert now.text == "139 2222 3333" and now.provenance["session_id"] == "s9"
    assert [m.text for m in alice.history(history["phone"])] == ["138 0000 1111", "139 2222 3333"]


def test_stop_using_suppresses_and_erases_nothing(
    alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("forget what you concluded about my diet")
    assert plan.conclusion and plan.intent == "stop_using"
    alice.execute_plan(plan.plan_id)
    state = alice.get(history["diet"])
    assert state.suppressed and not state.erased and state.text == "probably vegetarian"
    assert not alice.get(history["t1"]).erased  # its source is left alone


def test_executing_erases_answers_from_the_request_and_runs_once(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("forget my current address")
    outcome = alice.execute_plan(plan.plan_id)
    assert outcome.status == "completed" and "9 Oak Lane" not in outcome.message
    report = service.requests.report(outcome.request_id)
    assert report.status == "completed" and set(report.targets) == {history["addr3"]}
    assert alice.get(history["addr3"]).erased and not alice.get(history["addr2"]).erased
    assert alice.plan_outcome(plan.plan_id).status == "completed"
    with pytest.raises(InvalidTransition, match="already executed"):
        alice.execute_plan(plan.plan_id)
    entries = [e for e in service.ledger.entries(outcome.request_id) if e.entry_type == "request"]
    assert json.loads(entries[0].payload_json)["plan_id"] == plan.plan_id


def test_two_confirmations_racing_execute_once(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("delete my phone number")
    results: list[object] = []

    def confirm() -> None:
        try:
            results.append(alice.execute_plan(plan.plan_id).request_id)
        except InvalidTransition as exc:
            results.append(exc)

    threads = [threading.Thread(target=confirm) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ran = [r for r in results if isinstance(r, str)]
    assert len(ran) == 1 and len(results) == 2
    assert alice.get(history["phone"]).erased


def test_a_run_that_stopped_half_way_is_resumed_by_executing_again(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    """A crash after the plan was claimed and before its request was filed: executing
    again files it with the id the plan chose, once."""
    plan = alice.plan_forget("delete my phone number")
    assert service.plans.claim(plan.plan_id, "req-00000000000000aa")
    outcome = alice.execute_plan(plan.plan_id)
    assert (outcome.request_id, outcome.status) == ("req-00000000000000aa", "completed")
    assert service.ledger.request_ids().count("req-00000000000000aa") == 1


def test_a_plan_is_its_namespaces_only(
    service: MemoryService, alice: MemoryLedger, bob: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("delete my phone number")
    for call in (bob.execute_plan, bob.forget_plan, bob.plan_outcome):
        with pytest.raises(NotFound, match="no forget plan"):
            call(plan.plan_id)
    with pytest.raises(NotFound):
        bob.choose_candidates(plan.plan_id, [history["phone"]])
    assert bob.plan_forget("delete my phone number").status == "nothing_matched"
    assert not alice.get(history["phone"]).erased


def test_a_plan_expires(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("delete my phone number")
    service.clock = lambda: NOW + PLAN_TTL + timedelta(seconds=1)
    with pytest.raises(InvalidTransition, match="expired"):
        alice.execute_plan(plan.plan_id)
    assert not alice.get(history["phone"]).erased
    assert alice.forget_plan(plan.plan_id).labels == {}  # its sealed part is gone


def test_the_memory_changing_under_a_plan_makes_it_stale(
    alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("forget my current address")
    alice.remember(fact("home_address", "1 New Road", at=NOW, turn="t10"))
    with pytest.raises(InvalidTransition, match="changed"):
        alice.execute_plan(plan.plan_id)
    assert not alice.get(history["addr3"]).erased


def test_an_erasure_by_another_path_withdraws_the_plans_that_show_it(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("forget my old address")  # its candidates' labels are sealed
    assert plan.candidates
    report = alice.forget(history["addr1"])
    assert alice.forget_plan(plan.plan_id).state == "withdrawn"
    receipts = [r for r in report.receipts if r.store == "forget_plans"]
    assert [(r.status, r.evidence["open_plans_naming_targets"]) for r in receipts] == [("ok", 0)]


def test_the_request_words_and_the_plan_labels_are_not_kept_in_clear(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    """The request repeats what is to be forgotten; the plan shows it. After executing,
    no file holds either, and a transcript turn that carried the request is redacted."""
    said = alice.remember(
        turn(
            "please delete my phone number 138 0000 1111 zebra-quokka",
            turn_id="t11",
            session="s3",
            at=NOW,
        )
    )
    plan = alice.plan_forget(
        "please delete my phone number 138 0000 1111 zebra-quokka", session_id="s3"
    )
    assert plan.labels[history["phone"]].endswith('"138 0000 1111"')
    alice.execute_plan(plan.plan_id)
    service.close()
    assert not store_bytes_contain(service.settings, "138 0000 1111")
    assert not store_bytes_contain(service.settings, "zebra-quokka")
    reopened = MemoryService(service.settings).for_principal(alice.principal)
    try:
        assert "138 0000 1111" not in (reopened.get(said.item_id).text or "")
    finally:
        reopened._service.close()


def test_bad_requests_are_refused_clearly(alice: MemoryLedger, history: dict[str, str]) -> None:
    for bad, match in [
        ("", "empty"),
        ("   ", "empty"),
        ("x" * (MAX_REQUEST_CHARS + 1), "at most"),
        ("forget\x00it", "NUL"),
        (b"forget my phone", "text"),
    ]:
        with pytest.raises(InvalidWrite, match=match):
            alice.plan_forget(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidWrite, match="time zone"):
        alice.plan_forget("forget my phone", timezone="Mars/Olympus")
    with pytest.raises(InvalidWrite, match="session_id"):
        alice.plan_forget("forget this conversation", session_id="s 1\n")
    for bad_id in ("plan-zz", "req-0123456789abcdef", 7):
        with pytest.raises(InvalidWrite, match="plan id"):
            alice.execute_plan(bad_id)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        alice.execute_plan("plan-0123456789abcdef")


def test_this_conversation_is_the_session_the_request_was_made_in(
    alice: MemoryLedger, history: dict[str, str]
) -> None:
    plan = alice.plan_forget("forget this conversation", session_id="s2")
    assert (plan.status, plan.scope) == ("planned", {"kind": "source", "session_id": "s2"})
    assert _keys(history, plan.targets) == {"met"}


class _Widening:
    """A plugged-in reader that claims every request is about everything."""

    def read(self, text: str, now, zone) -> Reading:  # type: ignore[no-untyped-def]
        reading = LexiconReader().read(text, now, zone)
        reading.everything = True
        return reading


def test_a_plugged_in_reader_cannot_widen_to_the_whole_user(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    service.planning.reader = _Widening()
    plan = alice.plan_forget("delete my phone number")
    assert _keys(history, plan.targets) == {"phone"}


WORDS = [
    "forget", "delete", "my", "old", "address", "phone", "删除", "地址", "旧", "yesterday",
    "that", "thing", "allergy", "bob's", "everything", "don't", "stop using", "seat", "the",
    "time", "but keep", "昨天", "上次", "last time", "in march", "?", "current", "Carol's",
    "and", "和", ",",
]  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
def test_any_request_stays_inside_the_namespace_and_destroys_nothing(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str], words: list[str]
) -> None:
    outsider = service.for_principal(Principal("acme", "mallory"))
    if not outsider.recall():
        outsider.remember(fact("home_address", "1 Secret Way", turn="t1"))
    plan = alice.plan_forget(" ".join(words))
    mine = set(history.values())
    assert set(plan.targets) | set(plan.cascaded) | set(plan.keeps) <= mine
    assert {c["item_id"] for c in plan.candidates} <= mine
    assert {i for p in plan.parts for i in p["item_ids"]} <= mine
    if plan.status not in ("planned", "partial_match"):
        assert not plan.targets
    if "everything" not in words and plan.scope is not None:
        assert plan.scope["kind"] != "namespace"
    assert not any(alice.get(i).erased for i in mine)


def test_a_plan_sees_what_was_written_since_the_last_plan(
    service: MemoryService, alice: MemoryLedger, history: dict[str, str]
) -> None:
    """Plans keep a namespace's clear attributes between them while the log has not
    moved: a write, in this process or through another service on the same store,
    moves it, and the next plan reads the rows again."""
    first = alice.plan_forget("delete my phone number")
    assert _keys(history, first.targets) == {"phone"}
    again = alice.plan_forget("delete my phone number")
    assert again.targets == first.targets
    with MemoryService(service.settings) as other:
        written = other.for_principal(alice.principal).remember(
            fact("allergy", "pollen", at=NOW - timedelta(days=2), turn="t20", category="health")
        )
    later = alice.plan_forget("delete my health information")
    assert _keys(history, later.targets) == {"peanuts", "shellfish", written.item_id}
    alice.forget_scope({"kind": "item", "item_ids": [history["phone"]]})
    assert history["phone"] not in alice.plan_forget("delete my phone number").targets
