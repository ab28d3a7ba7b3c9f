"""Forgetting in one language what the memory says in another.

A user who writes in Chinese about a memory kept in English (or the reverse) names
things by their own words: "储藏室密码" for what the staff wrote as "Code 4417 for the
storage room", "the visitor Wi-Fi password" for "访客WiFi密码是“晚风轻拂”". What users rely
on: the thing is found through the words that name it in both languages (a concept
vocabulary, lexicon.toml `[information.concepts]`), its value is then taken out of
every place it is said, like a value the request names literally; "old" picks the
superseded one; two different things that fit are asked about; and a thing the memory
never mentions (a bank card, a passport) is not stored, and nothing changes.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from factories import T0, turn

from memory_ledger.api import MemoryLedger, MemoryService

NOW = T0 + timedelta(days=30)
FILLER_EN = (
    "Is the pool open on Sunday?",
    "agent: reminder set for Thursday at 9 am",
    "Thanks, that helps.",
    "The window cleaners come next week.",
)
FILLER_ZH = ("好的,谢谢。", "周四下午有人在吗?", "agent: 已设置周五上午的提醒", "电梯明天检修。")
ENGLISH = [  # (key, speaker, text)
    ("e_room1", "user", "The guest room is Maple Loft."),
    ("e_room2", "concierge", "Towels for Maple Loft were delivered."),
    ("e_room3", "agent", "agent: booked a late checkout at Maple Loft"),
    ("e_store1", "concierge", "Code 4417 for the storage room, as of today."),
    ("e_store2", "user", "Tested 4417 on the storage room keypad, all good."),
    ("e_store3", "agent", "agent: logged entry using 4417"),
    ("e_store4", "manager", "The storage room code changed from 4417 to 9063."),
    ("e_store5", "concierge", "I punched in 9063 at the storage room and it opened."),
    ("e_flor1", "user", "The florist's number is 303-555-0162."),
    ("e_flor2", "agent", "agent: called 303-555-0162, no answer"),
    ("e_pack1", "manager", "Invoice sent: packing fee, 640 USD."),
    ("e_pack2", "user", "We paid 640 USD yesterday."),
    ("e_key1", "concierge", "The key fee is 75 USD."),
]
CHINESE = [
    ("z_wifi1", "user", "访客WiFi密码是“晚风轻拂”。"),
    ("z_wifi2", "concierge", "有人问晚风轻拂是不是还能用。"),
    ("z_nick1", "user", "这是我的外号:小满。"),
    ("z_nick2", "concierge", "小满今天来取快递了。"),
    ("z_fee1", "manager", "签证费是480元。"),
    ("z_fee2", "agent", "agent: 已记录付款480元"),
    ("z_fee3", "user", "押金是2000元。"),
]


def _write(alice: MemoryLedger, said: list[tuple[str, str, str]], filler: tuple) -> dict:
    writes: list[tuple[str, dict]] = []
    for n, (key, speaker, text) in enumerate(said):
        for k, t in ((key, text), (f"f{n}", filler[n % len(filler)])):
            at = T0 + timedelta(hours=2 * n + (k != key))
            write = turn(t, turn_id=k, session=f"s{n // 6}", at=at)
            write["subject"] = speaker if k == key else "user"
            write["origin"] = "explicit" if write["subject"] == "user" else "observed"
            writes.append((k, write))
    stored = alice.remember_many([w for _, w in writes])
    return {key: s.item_id for (key, _), s in zip(writes, stored, strict=True)}


@pytest.fixture
def english(service: MemoryService, alice: MemoryLedger) -> dict[str, str]:
    service.clock = lambda: NOW
    return _write(alice, ENGLISH, FILLER_EN)


@pytest.fixture
def chinese(service: MemoryService, alice: MemoryLedger) -> dict[str, str]:
    service.clock = lambda: NOW
    return _write(alice, CHINESE, FILLER_ZH)


def _places(ids: dict[str, str], plan) -> set[str]:  # type: ignore[no-untyped-def]
    names = {v: k for k, v in ids.items()}
    return {names[pl["item_id"]] for p in plan.pieces for pl in p["places"]}


def _texts(alice: MemoryLedger, ids: dict[str, str]) -> dict[str, str | None]:
    out = {}
    for key, item_id in ids.items():
        state = alice.get(item_id)
        out[key] = None if state.erased else state.text
    return out


def _holds(text: str | None, value: str) -> bool:
    if not text:
        return False
    return re.search(rf"(?<![\w,.-]){re.escape(value)}(?![\w]|[,.-]\d)", text, re.I) is not None


def test_a_chinese_label_finds_the_english_one_and_every_place_of_its_value(
    alice: MemoryLedger, english: dict[str, str]
) -> None:
    """ "客房" is the guest room the memory names in English: the name goes from every
    turn that says it, also those that never say "guest room"."""
    plan = alice.plan_forget("把客房从记忆里删掉")
    assert plan.status == "planned", plan.message
    assert _places(english, plan) == {"e_room1", "e_room2", "e_room3"}
    alice.execute_plan(plan.plan_id)
    after = _texts(alice, english)
    assert not any(_holds(t, "Maple Loft") for t in after.values())
    assert after["e_room2"] and after["e_room2"].startswith("Towels for")


def test_what_a_label_is_of_finds_its_value_beside_it_and_old_picks_the_earlier(
    alice: MemoryLedger, english: dict[str, str]
) -> None:
    """ "原来的储藏室密码": the memory says "Code 4417 for the storage room" and how it
    changed; the earlier code goes everywhere (also "logged entry using 4417"), the
    current one stays."""
    plan = alice.plan_forget("请清除原来的储藏室密码")
    assert plan.status == "planned", plan.message
    assert _places(english, plan) == {"e_store1", "e_store2", "e_store3", "e_store4"}
    alice.execute_plan(plan.plan_id)
    after = _texts(alice, english)
    assert not any(_holds(t, "4417") for t in after.values())
    assert _holds(after["e_store5"], "9063") and _holds(after["e_store4"], "9063")


@pytest.mark.parametrize(
    ("request_text", "places", "value"),
    [
        ("花艺师电话不要再提了", {"e_flor1", "e_flor2"}, "303-555-0162"),
        ("打包费视为已删除", {"e_pack1", "e_pack2"}, "640 USD"),
    ],
)
def test_a_chinese_description_of_a_number_or_an_amount_over_english(
    alice: MemoryLedger,
    english: dict[str, str],
    request_text: str,
    places: set[str],
    value: str,
) -> None:
    """Who a number is of ("花艺师", the florist) or what a fee is for ("打包", packing),
    beside a value of the label's shape; the key fee (another amount) is not touched."""
    plan = alice.plan_forget(request_text)
    assert plan.status == "planned", plan.message
    assert _places(english, plan) == places
    alice.execute_plan(plan.plan_id)
    after = _texts(alice, english)
    assert not any(_holds(t, value) for t in after.values())
    assert after["e_key1"] == "The key fee is 75 USD."


@pytest.mark.parametrize(
    ("request_text", "places", "value"),
    [
        ("Delete the visitor Wi-Fi password.", {"z_wifi1", "z_wifi2"}, "晚风轻拂"),
        ("My nickname should not be restated.", {"z_nick1", "z_nick2"}, "小满"),
        ("The visa fee should not be recalled.", {"z_fee1", "z_fee2"}, "480元"),
    ],
)
def test_an_english_description_over_a_chinese_memory(
    alice: MemoryLedger,
    chinese: dict[str, str],
    request_text: str,
    places: set[str],
    value: str,
) -> None:
    """ "Visitor Wi-Fi password" is "访客WiFi密码" ("Wi-Fi" is no name), "nickname" is
    "外号", "visa fee" is "签证费": each value goes from every place, the deposit stays."""
    plan = alice.plan_forget(request_text)
    assert plan.status == "planned", plan.message
    assert _places(chinese, plan) == places
    alice.execute_plan(plan.plan_id)
    after = _texts(alice, chinese)
    assert not any(value in (t or "") for t in after.values())
    assert after["z_fee3"] == "押金是2000元。"


def test_two_different_things_of_one_concept_are_asked_about(
    service: MemoryService, alice: MemoryLedger
) -> None:
    """Two storage rooms, two codes, no change between them: "储藏室密码" fits both, so
    the answer is a question, and nothing changes until it is answered."""
    service.clock = lambda: NOW
    ids = _write(
        alice,
        [
            ("a1", "concierge", "Code 2290 for the storage room on level 1."),
            ("a2", "user", "Tested 2290 on the storage room keypad."),
            ("b1", "manager", "Code 6614 for the storage room on level 3."),
            ("b2", "agent", "agent: logged entry at the storage room using 6614"),
        ],
        FILLER_EN,
    )
    before = _texts(alice, ids)
    plan = alice.plan_forget("删掉储藏室密码")
    assert plan.status == "needs_clarification", plan.message
    assert _texts(alice, ids) == before


@pytest.mark.parametrize("request_text", ["把我的银行卡密码从记忆里抹掉", "删掉我的护照号"])
def test_a_thing_the_memory_never_mentions_is_not_stored(
    alice: MemoryLedger, english: dict[str, str], request_text: str
) -> None:
    """No bank card and no passport in this memory: nothing matches (never "which of
    these codes?" about codes the request does not name), and nothing changes."""
    before = _texts(alice, english)
    plan = alice.plan_forget(request_text)
    assert plan.status == "nothing_matched", (plan.status, plan.message)
    assert _texts(alice, english) == before
