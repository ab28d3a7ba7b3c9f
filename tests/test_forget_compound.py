"""Forget requests of several parts: every part is planned, or the answer names it.

"Forget my sister's address and my phone number" asks for two things. What users rely
on: each part is read and planned on its own and the plan is the union of what the parts
name (never more: a part adds nothing another part did not name); a part that could be
several things is asked about, by name, while the others stay in the plan; a part that
matches nothing is named, with why, and the plan says it covers only part of the request
(`partial_match`); asking again after some of it was erased says which part is gone,
never "Nothing stored matches that" while something named is still stored.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from factories import T0, cli, fact, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.errors import InvalidTransition
from memory_ledger.forgetting.planning import LexiconReader
from memory_ledger.forgetting.planning.plans import plans_table

NOW = T0 + timedelta(days=30)
NOTHING = ("Nothing stored matches that", "没有找到相符的记录")


@pytest.fixture
def family(service: MemoryService, alice: MemoryLedger) -> dict[str, str]:
    """Alice: her sister Kavya's address (told in a turn), her own address and phone."""
    service.clock = lambda: NOW
    ids: dict[str, str] = {}

    def put(key: str, write: dict) -> None:
        ids[key] = alice.remember(write).item_id

    put("t1", turn("My sister Kavya lives at 12 Lake Road", turn_id="t1", at=T0))
    put("sibling", fact("sibling", "Kavya", at=T0, turn="t1"))
    put("kavya_addr", fact("home_address", "12 Lake Road", subject="kavya", at=T0, turn="t1"))
    put("addr", fact("home_address", "9 Oak Lane", at=T0 + timedelta(days=1), turn="t2"))
    put("phone", fact("phone", "138 0000 1111", at=T0 + timedelta(days=2), turn="t3"))
    return ids


def _keys(ids: dict[str, str], found: list[str]) -> set[str]:
    names = {v: k for k, v in ids.items()}
    return {names.get(i, i) for i in found}


def _parts(ids: dict[str, str], plan) -> list[tuple[str, str, set[str], str]]:  # type: ignore[no-untyped-def]
    return [(p["said"], p["status"], _keys(ids, p["item_ids"]), p["reason"]) for p in plan.parts]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("forget my sister's address and my phone number",
         ["my sister's address", "my phone number"]),
        ("删掉我妹妹的地址和我的电话号码", ["我妹妹的地址", "我的电话号码"]),
    ],
)  # fmt: skip
def test_both_parts_of_a_request_are_planned(
    alice: MemoryLedger, family: dict[str, str], text: str, said: list[str]
) -> None:
    plan = alice.plan_forget(text)
    assert (plan.status, plan.intent) == ("planned", "delete")
    assert _keys(family, plan.targets) == {"kavya_addr", "phone"}  # not Alice's own address
    assert plan.scope == {"kind": "item", "item_ids": sorted(plan.targets)}
    assert _parts(family, plan) == [
        (said[0], "resolved", {"kavya_addr"}, ""),
        (said[1], "resolved", {"phone"}, ""),
    ]
    assert "addr" in _keys(family, plan.keeps)
    alice.execute_plan(plan.plan_id)
    assert alice.get(family["kavya_addr"]).erased and alice.get(family["phone"]).erased
    assert not alice.get(family["addr"]).erased


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("forget my address and my phone number", ["my address", "my phone number"]),
        ("forget my address and phone number", ["my address", "phone number"]),
        ("删掉我的地址和我的电话号码", ["我的地址", "我的电话号码"]),
        ("请把我的地址和电话号码都删掉", ["我的地址", "电话号码"]),
    ],
)
def test_an_address_and_a_phone_are_two_targets_not_a_question(
    alice: MemoryLedger, family: dict[str, str], text: str, said: list[str]
) -> None:
    plan = alice.plan_forget(text)
    assert plan.status == "planned" and not plan.candidates and not plan.question
    assert _keys(family, plan.targets) == {"addr", "phone"}  # the sister's address stays
    assert [p["said"] for p in plan.parts] == said
    assert [p["status"] for p in plan.parts] == ["resolved", "resolved"]


@pytest.mark.parametrize(
    ("first", "both", "said"),
    [
        ("forget my sister's address", "forget my sister's address and my phone number",
         ["my sister's address", "my phone number"]),
        ("删掉我妹妹的地址", "删掉我妹妹的地址和我的电话号码", ["我妹妹的地址", "我的电话号码"]),
    ],
)  # fmt: skip
def test_asking_again_says_which_part_is_gone(
    alice: MemoryLedger, family: dict[str, str], first: str, both: str, said: list[str]
) -> None:
    """The first part was erased on its own; the same two-part words again plan the phone
    and say the sister's address is not found; once both are gone, both are named."""
    alice.execute_plan(alice.plan_forget(first).plan_id)
    assert alice.get(family["kavya_addr"]).erased
    plan = alice.plan_forget(both)
    assert (plan.status, _keys(family, plan.targets)) == ("partial_match", {"phone"})
    gone, kept = _parts(family, plan)
    assert gone[:3] == (said[0], "not_found", set()) and gone[3] and kept[1] == "resolved"
    assert said[0] in plan.message and not any(n in plan.message for n in NOTHING)
    assert plan.message.index(said[0]) < plan.message.index("138 0000 1111")  # said first
    outcome = alice.execute_plan(plan.plan_id)  # the user saw it: what was found runs
    assert outcome.status == "completed" and alice.get(family["phone"]).erased
    assert "1" in outcome.message and said[0] not in outcome.message
    again = alice.plan_forget(both)
    assert again.status == "nothing_matched" and not again.targets
    assert all(s in again.message for s in said)
    assert not any(n in again.message for n in NOTHING)
    assert [p["status"] for p in again.parts] == ["not_found", "not_found"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("forget my passport number and my phone number", "my passport number"),
        ("删掉我的护照号码和我的电话号码", "我的护照号码"),
    ],
)
def test_a_part_that_matches_nothing_is_named_and_the_plan_is_partial(
    alice: MemoryLedger, family: dict[str, str], text: str, said: str
) -> None:
    plan = alice.plan_forget(text)
    assert (plan.status, _keys(family, plan.targets)) == ("partial_match", {"phone"})
    assert plan.message.startswith(
        ("I could not find 'my passport number'", "没有找到“我的护照号码”")
    )
    assert _parts(family, plan)[0] == (said, "not_found", set(), "no_such_value")
    assert plan.stores  # executable, once the user has seen it
    assert alice.forget_plan(plan.plan_id).status == "partial_match"


def test_a_part_never_takes_what_another_part_names(
    alice: MemoryLedger, family: dict[str, str]
) -> None:
    """No email is stored: "my email" is not found, and never read as the address the
    other part names (a predicate "email_address" shares the word "address")."""
    plan = alice.plan_forget("forget my address and my email")
    assert (plan.status, _keys(family, plan.targets)) == ("partial_match", {"addr"})
    assert _parts(family, plan)[1] == ("my email", "not_found", set(), "no_such_value")
    assert alice.plan_forget("forget my email").status == "nothing_matched"


def test_a_borrowed_possessor_never_widens_a_part(
    alice: MemoryLedger, family: dict[str, str]
) -> None:
    """ "My sister's address and phone number": the phone is the sister's. She has none
    stored, so that part is not found (and says how it was read); Alice's own phone is
    not taken in its place."""
    plan = alice.plan_forget("forget my sister's address and phone number")
    assert (plan.status, _keys(family, plan.targets)) == ("partial_match", {"kavya_addr"})
    assert plan.parts[1]["read_as"] == "my sister's phone number"
    assert "'phone number' (read as 'my sister's phone number')" in plan.message


def test_an_ambiguous_part_is_asked_about_and_the_others_stay(
    alice: MemoryLedger, family: dict[str, str]
) -> None:
    ids = dict(family)
    ids["elm"] = alice.remember(
        fact("home_address", "4 Elm Street", at=T0 + timedelta(days=5), turn="t4")
    ).item_id
    ids["new"] = alice.remember(
        fact("home_address", "1 New Road", at=T0 + timedelta(days=9), turn="t5")
    ).item_id
    plan = alice.plan_forget("forget my old address and my phone number")
    assert plan.status == "needs_clarification" and not plan.targets
    assert _keys(ids, [c["item_id"] for c in plan.candidates]) == {"addr", "elm"}
    assert {c["part"] for c in plan.candidates} == {0}
    assert plan.question and plan.question.startswith("About 'my old address': I found 2")
    assert "'my phone number' (1 item(s))" in plan.question
    assert _parts(ids, plan) == [
        ("my old address", "ambiguous", {"addr", "elm"}, ""),
        ("my phone number", "resolved", {"phone"}, ""),
    ]
    with pytest.raises(InvalidTransition, match="clarification"):
        alice.execute_plan(plan.plan_id)
    chosen = alice.choose_candidates(plan.plan_id, [ids["elm"]])
    assert (chosen.status, _keys(ids, chosen.targets)) == ("planned", {"elm", "phone"})
    assert [p["status"] for p in chosen.parts] == ["resolved", "resolved"]
    assert "new" in _keys(ids, chosen.keeps)

    # An erasure by another path of an item a part resolved to withdraws the question.
    asked = alice.plan_forget("forget my old address and my phone number")
    alice.forget(ids["phone"])
    assert alice.forget_plan(asked.plan_id).state == "withdrawn"


def test_the_parts_words_are_sealed_with_the_plan(
    service: MemoryService, alice: MemoryLedger, family: dict[str, str]
) -> None:
    plan = alice.plan_forget("forget my passport number and my phone number")
    with service.engine.connect() as conn:
        raw = conn.execute(plans_table.select().where(plans_table.c.plan_id == plan.plan_id)).one()
    outline = json.loads(raw.outline)
    assert [p["status"] for p in outline["parts"]] == ["not_found", "resolved"]
    assert "passport" not in raw.outline and "phone number" not in raw.outline
    assert alice.forget_plan(plan.plan_id).parts[0]["said"] == "my passport number"
    alice.execute_plan(plan.plan_id)
    closed = alice.forget_plan(plan.plan_id)
    assert [(p["said"], p["status"]) for p in closed.parts] == [
        ("", "not_found"),
        ("", "resolved"),
    ]
    assert "1 part(s)" in alice.plan_outcome(plan.plan_id).message


READER_CASES = [
    # one request: nothing to cut, or a piece that is not a part
    ("forget my phone number, please", []),
    ("forget my phone number, I don't want to be called at home", []),
    ("forget my address, not my phone number", []),
    ("delete my old phone numbers, all of them", []),
    ("把我现在的住址删掉，以前那个留着", []),
    ("我女儿的地址不用记了，删掉吧", []),
    ("forget everything about my ex, Marco", []),
    ("stop using and delete my phone number", []),
    # several parts, each read with what it shares
    ("forget my address and my phone number", [
        ("my address", "forget my address"), ("my phone number", "forget my phone number")]),
    ("forget my address as well as my email plus my birthday; and my phone number", [
        ("my address", "forget my address"), ("my email", "forget my email"),
        ("my birthday", "forget my birthday"), ("my phone number", "forget my phone number")]),
    ("forget my address and my email, keep my phone number", [
        ("my address", "forget my address"), ("my email", "forget my email")]),
    ("请把我的地址和电话号码都删掉", [
        ("我的地址", "请把我的地址 删掉"), ("电话号码", "请把我的电话号码都删掉")]),
    ("删掉我的地址、电话号码以及邮箱", [
        ("我的地址", "删掉我的地址"), ("电话号码", "删掉我的电话号码"), ("邮箱", "删掉我的邮箱")]),
    ("删除我的地址；还有我的电话，及我的生日", [
        ("我的地址", "删除我的地址"), ("我的电话", "删除我的电话"), ("我的生日", "删除我的生日")]),
    ("forget what you concluded about my diet and my allergies", [
        ("what you concluded about my diet", "forget what you concluded about my diet"),
        ("my allergies", "forget what you concluded about my allergies")]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "parts"), READER_CASES)
def test_the_reader_cuts_a_request_into_its_parts(text: str, parts: list[tuple[str, str]]) -> None:
    reading = LexiconReader().read(text, datetime(2026, 12, 1, tzinfo=UTC), ZoneInfo("UTC"))
    assert [(p.said, p.text) for p in reading.parts] == parts
    for part in reading.parts:
        assert part.reading.intent == reading.intent and not part.reading.parts
        assert len(part.reading.concepts) == 1


def test_a_conclusion_part_shares_the_frame_of_the_part_before() -> None:
    reading = LexiconReader().read(
        "forget what you concluded about my diet and my allergies",
        datetime(2026, 12, 1, tzinfo=UTC),
        ZoneInfo("UTC"),
    )
    assert [(p.reading.intent, p.reading.conclusion) for p in reading.parts] == [
        ("stop_using", True),
        ("stop_using", True),
    ]


#: Facts of distinct predicates, with how a user names each in English and Chinese.
FACTS = [
    ("home_address", "9 Oak Lane", "address", "地址"),
    ("phone", "138 0000 1111", "phone number", "电话号码"),
    ("email", "alice@example.com", "email", "邮箱"),
    ("birthday", "March 3", "birthday", "生日"),
    ("employer", "Lumen Labs", "employer", "工作单位"),
    ("passport_number", "E1234567", "passport number", "护照号码"),
    ("blood_type", "O positive", "blood type", "血型"),
    ("salary", "5000 a month", "salary", "工资"),
    ("hobby", "climbing", "hobby", "爱好"),
    ("allergy", "peanuts", "allergy", "过敏"),
]
JOINERS = {
    "en": [" and my ", ", my ", " as well as my ", " plus my "],
    "zh": ["和我的", "、我的", "以及我的", "还有我的", "，我的"],
}


@pytest.fixture
def profile(service: MemoryService, alice: MemoryLedger) -> list[str]:
    service.clock = lambda: NOW
    return [
        alice.remember(fact(p, v, at=T0 + timedelta(hours=n), turn=f"t{n}")).item_id
        for n, (p, v, _, _) in enumerate(FACTS)
    ]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    pair=st.lists(st.integers(0, len(FACTS) - 1), min_size=2, max_size=2, unique=True),
    language=st.sampled_from(["en", "zh"]),
    joiner=st.integers(0, 4),
)
def test_any_two_stored_facts_named_together_are_planned_exactly(
    alice: MemoryLedger, profile: list[str], pair: list[int], language: str, joiner: int
) -> None:
    x, y = pair
    names = [FACTS[x][2 if language == "en" else 3], FACTS[y][2 if language == "en" else 3]]
    join = JOINERS[language][joiner % len(JOINERS[language])]
    text = f"forget my {names[0]}{join}{names[1]}"
    if language == "zh":
        text = f"删掉我的{names[0]}{join}{names[1]}"
    plan = alice.plan_forget(text)
    assert plan.status == "planned", (text, plan.message)
    assert set(plan.targets) == {profile[x], profile[y]}, text
    assert [(p["status"], p["item_ids"]) for p in plan.parts] == [
        ("resolved", [profile[x]]),
        ("resolved", [profile[y]]),
    ], text


def test_the_cli_prints_every_part(where: list[str]) -> None:
    ns = ["--namespace", "acme/alice"]
    code, output = cli(
        "remember", *ns, *where, "--json", "--turn-id", "t1", "--kind", "fact",
        "--subject", "user", "--predicate", "phone", "--value", "138 0000 1111",
    )  # fmt: skip
    assert code == 0, output
    request = ["--request", "forget my passport number and my phone number"]
    code, output = cli("forget", *ns, *where, *request)
    assert code == 8, output
    assert "part of the request" in output and "not_found" in output
    assert "I could not find 'my passport number'" in output and "to go ahead" in output
    code, output = cli("forget", *ns, *where, *request, "--json")
    plan = json.loads(output)
    assert plan["status"] == "partial_match"
    assert [p["status"] for p in plan["parts"]] == ["not_found", "resolved"]
