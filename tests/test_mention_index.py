"""The mention index: every item the matcher finds a value in is among the index's
candidates (a property over the one tokenizer), a forget opens only the candidates,
and a value is found in every form it is written in, never inside another."""

from __future__ import annotations

import secrets

from factories import fact, later, turn
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryService
from memory_ledger.forgetting.mentions import REPLACEMENT, MentionPattern, mention_pattern
from memory_ledger.principal import Principal
from memory_ledger.projections.mention_index import candidates
from memory_ledger.text_units import lookup_units, units, written_forms

ALICE = Principal("acme", "alice")

_PIECES = st.sampled_from(
    [
        "gate", "Code", "CODE", "relay-17", "7142", "71420", "206-555-0148", "(206)",
        "555-0148", "2065550148", "3,150", "150", "EUR", "€", "Birch", "Lodge", "Wren",
        "海松路", "18号", "门口", "请", "ｃｏｄｅ", "７１４２", "straße", "İstanbul", "naïve",
        "e12345678", "a.b", "x_y", "2026-09-02", "7am", "'copper", "finch'", "-", ",", ".",
        ";", ":", "/", "(", ")", "!", "?", "，", "。",
    ]
)  # fmt: skip
_SPACES = st.sampled_from([" ", "", "  ", "\n", "\u00a0"])


@st.composite
def _text_and_value(draw: st.DrawFn) -> tuple[str, str]:
    pieces = draw(st.lists(st.tuples(_PIECES, _SPACES), min_size=1, max_size=14))
    text = "".join(p + s for p, s in pieces)
    start = draw(st.integers(0, len(text) - 1))
    end = draw(st.integers(start + 1, len(text)))
    return text, text[start:end]


@settings(max_examples=600, deadline=None)
@given(_text_and_value())
def test_every_exact_match_is_among_the_index_candidates(case: tuple[str, str]) -> None:
    """For each literal the matcher searches for, a text it matches in holds every unit
    a lookup asks for: the index can narrow a search, never miss a mention."""
    text, value = case
    pattern = mention_pattern([value])
    if pattern is None:
        return
    for literal in pattern.searched:
        if not MentionPattern([literal]).search(text):
            continue
        wanted = lookup_units(literal)
        assert wanted is None or wanted <= units(text), (literal, wanted - units(text))


def test_numbers_are_units_whatever_their_punctuation() -> None:
    assert "2065550148" in units("call 206-555-0148") & units("or 2065550148")
    assert units("3,150 EUR") == {"3150", "eur"} and "150" not in units("3,150 EUR")
    assert {"海松", "松路"} <= units("请把车开到海松路18号门口")
    assert written_forms("206-555-0148") >= {"(206) 555-0148", "2065550148", "206.555.0148"}
    assert written_forms("3,400 EUR") == {"3,400 EUR", "3400 EUR"}
    assert written_forms("2026-09-02") == {"2026-09-02"}  # a date is not a phone number


def test_a_phone_number_is_forgotten_in_every_form_and_never_inside_another(
    service: MemoryService,
) -> None:
    alice = service.for_principal(ALICE)
    phone = alice.remember(fact("phone", "206-555-0148", category="contact", turn="form")).item_id
    said = [
        "call me at (206) 555-0148 after six",
        "my number is 2065550148",
        "staff: left a voicemail on 206.555.0148",
        "agent: dialled 206 555 0148, no answer",
        "not this one: 206-555-01489",
        "nor 1206-555-0148x",
    ]
    turns = [
        alice.remember(turn(t, turn_id=f"t{i}", at=later(i + 1))).item_id
        for i, t in enumerate(said)
    ]
    report = alice.forget(phone)
    assert report.completed
    assert sorted(report.mentions) == sorted(turns[:4])
    for item_id, text in zip(turns[:4], said[:4], strict=True):
        kept = alice.get(item_id).text or ""
        assert REPLACEMENT in kept and "555" not in kept and text.split()[0] in kept
    assert [alice.get(t).text for t in turns[4:]] == said[4:]


def test_a_forget_opens_only_the_candidates(service: MemoryService) -> None:
    """In a namespace of many turns, the index names the few that mention the value."""
    alice = service.for_principal(ALICE)
    code = f"gate-{secrets.randbelow(9000) + 1000}"
    alice.remember_many(
        [
            turn(f"note {n}: the lobby was cleaned at {n % 12}am", turn_id=f"n{n}")
            for n in range(300)
        ]
    )
    repeats = [
        alice.remember(turn(f"use {code} at the side door", turn_id=f"r{n}")).item_id
        for n in range(5)
    ]
    target = alice.remember(fact("door_code", code, turn="form")).item_id
    service.runner.catch_up()
    with service.engine.connect() as conn:
        found = candidates(conn, service.log, ALICE.namespace, [code])
    assert found is not None and set(repeats) | {target} <= found and len(found) <= 10
    report = alice.forget(target)
    assert report.completed and sorted(report.mentions) == sorted(repeats)
    service.runner.catch_up()
    with service.engine.connect() as conn:  # the rewritten turns no longer hold it
        assert candidates(conn, service.log, ALICE.namespace, [code]) == set()


def test_an_amount_is_not_found_inside_a_larger_one(service: MemoryService) -> None:
    alice = service.for_principal(ALICE)
    small = alice.remember(fact("refund", "150 EUR", turn="form")).item_id
    larger = alice.remember(turn("the deposit is 3,150 EUR", turn_id="t2")).item_id
    same = alice.remember(turn("refund of 150 EUR approved", turn_id="t3")).item_id
    report = alice.forget(small)
    assert report.mentions == [same]
    assert alice.get(larger).text == "the deposit is 3,150 EUR"
