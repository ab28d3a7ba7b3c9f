"""Forgetting information, not items: a request names values, and every place holds them.

People ask to forget a door code, a phone number, a name, an amount, a phrase, which an
agent's memory holds in many places at once: the user's own turns, staff notes, the
agent's log lines, a few facts. What users rely on: a value repeated in many places is
one plan that takes every place, never "which one?"; a fact whose value it is is erased,
and every other item that says it loses the span and keeps the rest; several pieces in
one request are one plan that lists every piece (or names the one not found); what a
keep clause names ("the current amount remains 3,150 EUR") and look-alikes ("71420"
beside "7142") survive; "old" picks the superseded version; the plan's clear part names
places by id, kind, action and count, never the values.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from factories import T0, cli, fact, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.forgetting.planning.plans import plans_table

NOW = T0 + timedelta(days=40)
#: Speakers of the history: the user, two staff members and the agent's own log.
SPEAKERS = ("user", "concierge", "manager", "agent")
FILLER = (
    "Is the roof terrace open this weekend?",
    "Recycling pickup moved to Tuesday.",
    "agent: maintenance ticket opened for the lift",
    "The boiler inspection is on Friday at 6 pm.",
    "Please remind residents about quiet hours.",
    "agent: party room request forwarded to Dana",
    "My neighbour's dog was barking all night.",
    "Thanks, that helps.",
)
SAID = [  # (key, speaker, text): every value in several places and wordings
    ("t_code1", "user", "The gate code is 7142."),
    ("t_code2", "concierge", "Confirming the gate code: 7142. The parcel locker is 71420."),
    ("t_code3", "agent", "agent: shared gate code 7142 with the courier"),
    ("t_code4", "manager", "Heads up: 7142 no longer works, the new gate code is 5830."),
    ("t_code5", "concierge", "Code 5830 for the side gate, as of today."),
    ("t_code6", "user", "5830 works at the side gate, I tried it this morning."),
    ("t_phone1", "user", "Call me at (206) 555-0148 if the delivery is late."),
    ("t_phone2", "agent", "agent: called 206-555-0148, no answer"),
    ("t_phone3", "concierge", "We have 206.555.0148 on file as the mobile number."),
    ("t_amount1", "manager", "The deposit was revised from 3,400 EUR to 3,150 EUR."),
    ("t_amount2", "concierge", "Invoice sent: deposit, 3,400 EUR."),
    ("t_amount3", "agent", "agent: reminder sent about the deposit, €3,400"),
    ("t_amount4", "user", "So we agreed on 3,150 EUR for the deposit, right?"),
    ("t_phrase1", "user", "My backup phrase is 'copper finch'."),
    ("t_phrase2", "concierge", "Noted the backup phrase as copper-finch."),
    ("t_place1", "user", "We're staying at Birch Lodge."),
    ("t_place2", "agent", "agent: booked transport to Birch Lodge"),
    ("t_place3", "manager", "Keys for Birch Lodge are at the front desk."),
    ("t_name1", "user", "You can call me Wren."),
    ("t_name2", "concierge", "Left a note for Wren at the desk."),
    ("t_relay1", "manager", "Checked relay-17 this morning."),
    ("t_relay2", "agent", "agent: flagged relay-17 for follow-up"),
    ("t_relay3", "user", "Is relay-17 still the intercom relay?"),
    ("z_code1", "user", "门禁码是8649。"),
    ("z_code2", "concierge", "确认一下门禁码:8649。"),
    ("z_code3", "agent", "agent: 已把门禁码8649发给快递员"),
    ("z_name1", "user", "这里大家都叫我豆包。"),
    ("z_name2", "concierge", "豆包又来前台了。"),
]


def _said(key: str, speaker: str, text: str, n: int) -> dict:
    write = turn(text, turn_id=key, session=f"s{n // 12}", at=T0 + timedelta(hours=n))
    write["subject"] = speaker
    write["origin"] = "explicit" if speaker == "user" else "observed"
    return write


def _form(predicate: str, value: str, at: int, form: str) -> dict:
    """A fact from a form (a tool call), so no turn carries it."""
    write = fact(predicate, value, at=T0 + timedelta(hours=at), category="contact")
    write["provenance"] = {
        "writer": "extractor",
        "written_at": (T0 + timedelta(hours=at)).isoformat(),
        "tool_call_id": form,
    }
    return write


@pytest.fixture
def memory(service: MemoryService, alice: MemoryLedger) -> dict[str, str]:
    """Alice's building: 28 turns that say values, 40 that do not, four speakers, and
    four facts (her phone, the old and the current gate code)."""
    service.clock = lambda: NOW
    writes: list[tuple[str, dict]] = []
    for n, (key, speaker, text) in enumerate(SAID):
        writes.append((key, _said(key, speaker, text, 2 * n)))
        filler = FILLER[n % len(FILLER)]
        writes.append((f"f{n}", _said(f"f{n}", SPEAKERS[n % 4], filler, 2 * n + 1)))
    for n in range(len(SAID), 40):
        writes.append((f"f{n}", _said(f"f{n}", SPEAKERS[n % 4], FILLER[n % 8], 2 * n + 1)))
    writes.append(("fact_phone", _form("phone", "206-555-0148", 13, "form-1")))
    writes.append(("fact_code_old", _form("gate_code", "7142", 1, "form-2")))
    writes.append(("fact_code_new", _form("gate_code", "5830", 7, "form-3")))
    stored = alice.remember_many([w for _, w in writes])
    return {key: s.item_id for (key, _), s in zip(writes, stored, strict=True)}


def _keys(ids: dict[str, str], found: list[str]) -> set[str]:
    names = {v: k for k, v in ids.items()}
    return {names.get(i, i) for i in found}


def _places(ids: dict[str, str], plan) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {
        _keys(ids, [pl["item_id"]]).pop(): pl["action"] for p in plan.pieces for pl in p["places"]
    }


def _text(alice: MemoryLedger, item_id: str) -> str | None:
    state = alice.get(item_id)
    return None if state.erased else state.text


def _holds(text: str | None, value: str) -> bool:
    """`value` in `text` on token boundaries ("7142" is not in "71420")."""
    if not text:
        return False
    return re.search(rf"(?<![\w,.-]){re.escape(value)}(?![\w]|[,.-]\d)", text, re.I) is not None


def _nowhere(alice: MemoryLedger, ids: dict[str, str], *values: str) -> None:
    """None of the values is readable anywhere: items, recall, context, export."""
    for key, item_id in ids.items():
        for value in values:
            assert not _holds(_text(alice, item_id), value), (key, value)
    recalled = " ".join(m.text or "" for m in alice.recall(limit=1000))
    exported = json.dumps(alice.export(), ensure_ascii=False, default=str)
    for value in values:
        assert not _holds(recalled, value)
        assert not _holds(exported, value)


def test_a_value_said_in_many_places_is_one_plan_for_every_place(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    """The old code is in a fact, the user's turn, a staff note and the agent's log:
    one plan takes them all (not "I found 4 memories, which one?"); the fact goes, each
    turn loses the code and keeps the rest."""
    plan = alice.plan_forget("Delete the old gate code 7142 from memory")
    assert plan.status == "planned" and not plan.candidates and not plan.question
    assert _places(memory, plan) == {
        "fact_code_old": "erase",
        "t_code1": "redact",
        "t_code2": "redact",
        "t_code3": "redact",
        "t_code4": "redact",
    }
    assert _keys(memory, plan.targets) == {"fact_code_old"}
    assert "fact_code_new" not in _keys(memory, plan.targets)
    outcome = alice.execute_plan(plan.plan_id)
    assert outcome.status == "completed"
    assert len(outcome.request_ids) == 2  # the redaction, and the forget of the fact
    assert all(r in outcome.message for r in outcome.request_ids)
    _nowhere(alice, memory, "7142")
    assert alice.get(memory["fact_code_old"]).erased
    assert _text(alice, memory["fact_code_new"]) == "5830"
    four = _text(alice, memory["t_code4"]) or ""
    assert four.startswith("Heads up:") and "no longer works, the new gate code is 5830." in four
    assert "71420" in (_text(alice, memory["t_code2"]) or "")  # the look-alike stays
    rendered = alice.context("what was the old code?").render()
    assert not _holds(rendered, "7142")


def test_a_value_in_several_formats_and_several_pieces_is_one_plan(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    """A place, a phone number (written three ways) and a nickname, in one request:
    every piece listed, every format of the number found; executed, all of it goes."""
    plan = alice.plan_forget(
        "Delete Birch Lodge, delete 206-555-0148, and delete the nickname Wren"
    )
    assert plan.status == "planned"
    assert [(p["kind"], p["status"]) for p in plan.pieces] == [
        ("name", "resolved"), ("phone", "resolved"), ("name", "resolved"),
    ]  # fmt: skip
    assert [p["status"] for p in plan.parts] == ["resolved"] * 3
    assert _places(memory, plan) == {
        "t_place1": "redact", "t_place2": "redact", "t_place3": "redact",
        "t_phone1": "redact", "t_phone2": "redact", "t_phone3": "redact",
        "fact_phone": "erase", "t_name1": "redact", "t_name2": "redact",
    }  # fmt: skip
    assert alice.execute_plan(plan.plan_id).status == "completed"
    _nowhere(alice, memory, "Birch Lodge", "206-555-0148", "(206) 555-0148", "206.555.0148", "Wren")
    assert _text(alice, memory["t_phone1"]) == "Call me at [redacted] if the delivery is late."
    assert "at the front desk" in (_text(alice, memory["t_place3"]) or "")


def test_a_piece_that_is_not_stored_is_named_not_dropped(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    plan = alice.plan_forget("Delete Birch Lodge and the value 9911-4400")
    assert plan.status == "partial_match"
    assert [p["status"] for p in plan.pieces] == ["resolved", "not_found"]
    assert plan.message.startswith("I could not find")
    assert "9911-4400" in plan.message  # the user's eyes: the sealed part
    assert _keys(memory, list(plan.spans_by_item)) == {"t_place1", "t_place2", "t_place3"}


def test_a_keep_clause_keeps_the_value_in_the_same_turn(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    """ "The deposit was revised from 3,400 EUR to 3,150 EUR": only the forgotten amount
    goes, in every way it is written; the kept one stays, and the plan lists it."""
    plan = alice.plan_forget(
        "remove the earlier amount 3,400 EUR; the current amount remains 3,150 EUR"
    )
    assert plan.status == "planned" and plan.intent == "redact"
    assert set(_places(memory, plan)) == {"t_amount1", "t_amount2", "t_amount3"}
    assert [_keys(memory, k["item_ids"]) for k in plan.kept] == [{"t_amount1", "t_amount4"}]
    assert plan.kept[0]["said"] == "the current amount remains 3,150 EUR"
    assert alice.execute_plan(plan.plan_id).status == "completed"
    revised = _text(alice, memory["t_amount1"]) or ""
    assert revised == "The deposit was revised from [redacted] to 3,150 EUR."
    assert _text(alice, memory["t_amount4"]) == "So we agreed on 3,150 EUR for the deposit, right?"
    _nowhere(alice, memory, "3,400 EUR", "€3,400")


def test_old_picks_the_superseded_version(alice: MemoryLedger, memory: dict[str, str]) -> None:
    """ "The old gate code", with an old and a current one on file: the old one, in the
    fact and wherever it is said; the current one is not touched."""
    plan = alice.plan_forget("forget the old gate code")
    assert plan.status == "planned"
    places = _places(memory, plan)
    assert places["fact_code_old"] == "erase"
    assert {"t_code1", "t_code2", "t_code3", "t_code4"} <= set(places)
    assert not {"fact_code_new", "t_code5", "t_code6"} & set(places)
    assert alice.execute_plan(plan.plan_id).status == "completed"
    _nowhere(alice, memory, "7142")
    assert _text(alice, memory["t_code5"]) == "Code 5830 for the side gate, as of today."


def test_a_look_alike_survives(alice: MemoryLedger, memory: dict[str, str]) -> None:
    plan = alice.plan_forget("Please purge the parcel locker number 71420.")
    assert plan.status == "planned"
    assert _places(memory, plan) == {"t_code2": "redact"}
    alice.execute_plan(plan.plan_id)
    two = _text(alice, memory["t_code2"])
    assert two == "Confirming the gate code: 7142. The parcel locker is [redacted]."


@pytest.mark.parametrize(
    "text",
    [
        "redact 206-555-0148 everywhere",
        "the value 206-555-0148 should not be restated",
        "Treat 206-555-0148 as unavailable from now on.",
    ],
)
def test_redact_everywhere_and_other_ways_of_saying_it_are_requests(
    alice: MemoryLedger, memory: dict[str, str], text: str
) -> None:
    plan = alice.plan_forget(text)
    assert plan.status == "planned" and plan.intent == "delete"
    assert _keys(memory, plan.targets) == {"fact_phone"}
    assert set(_places(memory, plan)) == {"fact_phone", "t_phone1", "t_phone2", "t_phone3"}


def test_a_quoted_phrase_and_a_code_go_in_every_form(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    plan = alice.plan_forget("Delete the backup phrase 'copper finch' and the value relay-17")
    assert plan.status == "planned"
    assert set(_places(memory, plan)) == {
        "t_phrase1", "t_phrase2", "t_relay1", "t_relay2", "t_relay3",
    }  # fmt: skip
    alice.execute_plan(plan.plan_id)
    _nowhere(alice, memory, "copper finch", "copper-finch", "relay-17")
    assert _text(alice, memory["t_relay3"]) == "Is [redacted] still the intercom relay?"


@pytest.mark.parametrize(
    ("text", "gone", "kept"),
    [
        ("把门禁码8649删掉", {"z_code1", "z_code2", "z_code3"}, []),
        ("豆包这个小名不要再提了,但保留门禁码8649", {"z_name1", "z_name2"}, ["8649"]),
        ("删掉豆包和8649", {"z_name1", "z_name2", "z_code1", "z_code2", "z_code3"}, []),
    ],
)
def test_chinese_requests_name_information_too(
    alice: MemoryLedger, memory: dict[str, str], text: str, gone: set[str], kept: list[str]
) -> None:
    plan = alice.plan_forget(text)
    assert plan.status == "planned" and not plan.question
    assert set(_places(memory, plan)) == gone
    assert alice.execute_plan(plan.plan_id).status == "completed"
    for key in gone:
        after = _text(alice, memory[key]) or ""
        assert "[redacted]" in after and "豆包" not in after
    for value in kept:
        assert value in (_text(alice, memory["z_code1"]) or "")


def test_the_plan_lists_pieces_places_and_keeps_and_keeps_values_out_of_clear_fields(
    alice: MemoryLedger, memory: dict[str, str], service: MemoryService, where: list[str]
) -> None:
    request = "Delete the old gate code 7142 and Birch Lodge, but keep 5830"
    plan = alice.plan_forget(request)
    body = plan.to_dict()
    assert [p["kind"] for p in body["pieces"]] == ["code", "name"]
    for piece in body["pieces"]:
        for place in piece["places"]:
            assert set(place) == {"item_id", "kind", "action", "spans"}
            assert place["action"] in ("erase", "redact") and isinstance(place["spans"], int)
    assert [k["kind"] for k in body["kept"]] == ["code"]
    assert _keys(memory, body["kept"][0]["item_ids"]) == {
        "t_code4", "t_code5", "t_code6", "fact_code_new",
    }  # fmt: skip
    assert body["spans_by_item"][memory["t_code1"]] == ["7142"]  # for the user's eyes
    clear = json.dumps(plan.outline(), ensure_ascii=False)
    with service.engine.connect() as conn:
        row = conn.execute(plans_table.select().where(plans_table.c.plan_id == plan.plan_id)).one()
    for value in ("7142", "Birch Lodge", "5830", "gate code"):
        assert value not in clear and value not in row.outline
    assert "spans_by_item" not in plan.outline()
    code, out = cli("forget", "-n", "acme/alice", *where, "--request", request, "--json")
    printed = json.loads(out)
    assert code == 0 and [p["status"] for p in printed["pieces"]] == ["resolved", "resolved"]


def test_two_different_things_that_fit_are_asked_about_and_the_choice_is_planned(
    bob: MemoryLedger, service: MemoryService
) -> None:
    """Two locker codes, neither replacing the other: "the locker code" could be either,
    so the plan asks, naming both; the one chosen is planned with all its places."""
    service.clock = lambda: NOW
    said = [
        ("user", "The locker code is 4417."),
        ("concierge", "Confirming the locker code: 4417."),
        ("user", "The locker code is 9086."),
        ("agent", "agent: shared locker code 9086 with the courier"),
        ("concierge", "Tested 9086 on the keypad, all good."),
    ]
    ids = [bob.remember(_said(f"b{n}", who, text, n)).item_id for n, (who, text) in enumerate(said)]
    plan = bob.plan_forget("Delete the locker code")
    assert plan.status == "needs_clarification"
    assert plan.pieces[0]["status"] == "ambiguous" and not plan.targets
    labels = [c["label"] for c in plan.candidates]
    assert len(labels) == 2 and "'4417'" in labels[0] and "'9086'" in labels[1]
    chosen = bob.choose_candidates(plan.plan_id, [plan.candidates[1]["item_id"]])
    assert chosen.status == "planned" and chosen.intent == "redact"
    assert set(chosen.spans_by_item) == set(ids[2:])
    assert bob.execute_plan(chosen.plan_id).status == "completed"
    assert bob.get(ids[0]).text == "The locker code is 4417."
    assert bob.get(ids[4]).text == "Tested [redacted] on the keypad, all good."


def test_a_run_that_stopped_between_its_two_requests_is_finished_by_executing_again(
    alice: MemoryLedger, memory: dict[str, str], service: MemoryService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The redaction was filed (and withdrew the plan, as every erasure withdraws the
    plans that show its items), then the process died before the forget request:
    executing the plan again files the forget, once, and answers for both."""
    plan = alice.plan_forget("Delete the old gate code 7142 from memory")
    real = service.requests.submit

    def crash(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt  # the process stops here

    monkeypatch.setattr(service.requests, "submit", crash)
    with pytest.raises(KeyboardInterrupt):
        alice.execute_plan(plan.plan_id)
    assert not alice.get(memory["fact_code_old"]).erased
    assert "[redacted]" in (_text(alice, memory["t_code1"]) or "")
    monkeypatch.setattr(service.requests, "submit", real)
    outcome = alice.execute_plan(plan.plan_id)
    assert outcome.status == "completed" and len(outcome.request_ids) == 2
    assert alice.get(memory["fact_code_old"]).erased
    assert all(service.ledger.request_ids().count(r) == 1 for r in outcome.request_ids)
    with pytest.raises(Exception, match="already executed"):
        alice.execute_plan(plan.plan_id)


def test_the_answer_later_names_every_request_of_the_plan(
    alice: MemoryLedger, memory: dict[str, str]
) -> None:
    plan = alice.plan_forget("Delete the old gate code 7142 from memory")
    done = alice.execute_plan(plan.plan_id)
    later = alice.plan_outcome(plan.plan_id)
    assert (later.status, later.request_ids) == ("completed", done.request_ids)


def test_a_plugged_in_reader_cannot_name_a_value_the_request_does_not_say(
    alice: MemoryLedger, memory: dict[str, str], service: MemoryService
) -> None:
    """A model-backed reader returns pieces behind the same interface; a value it names
    must be in the request's own words, so it cannot reach a value the user did not
    name (the planner then resolves what it names like any other piece)."""
    from memory_ledger.errors import InvalidWrite
    from memory_ledger.forgetting.planning import LexiconReader
    from memory_ledger.forgetting.planning.pieces import Piece

    class Model(LexiconReader):
        def __init__(self, value: str) -> None:
            super().__init__()
            self.value = value

        def read(self, text, now, zone):  # type: ignore[no-untyped-def]
            reading = super().read(text, now, zone)
            assert reading.information is not None
            reading.information.pieces = [Piece(self.value, "code", said=self.value)]
            return reading

    service.planning.reader = Model("5830")
    with pytest.raises(InvalidWrite, match="does not say"):
        alice.plan_forget("Delete the old gate code 7142 from memory")
    service.planning.reader = Model("7142")
    plan = alice.plan_forget("Delete the old gate code 7142 from memory")
    assert plan.status == "planned" and "fact_code_new" not in _keys(memory, plan.targets)


@pytest.mark.parametrize(
    "text",
    ["Forget Birch Lodge from every conversation and note", "所有对话和备注里的Birch Lodge都删掉"],
)
def test_where_to_forget_is_not_what_to_forget(
    alice: MemoryLedger, memory: dict[str, str], text: str
) -> None:
    """ "From every conversation and note" says where the value goes, not which messages:
    no turn is erased, each loses the name and keeps the rest."""
    plan = alice.plan_forget(text)
    assert plan.status == "planned" and plan.intent == "redact" and not plan.cascaded
    assert _places(memory, plan) == {
        "t_place1": "redact", "t_place2": "redact", "t_place3": "redact",
    }  # fmt: skip
    alice.execute_plan(plan.plan_id)
    assert _text(alice, memory["t_place3"]) == "Keys for [redacted] are at the front desk."
