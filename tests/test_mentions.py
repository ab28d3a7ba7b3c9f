"""A value repeated in an unlinked turn is redacted there; the rest of the turn stays."""

from __future__ import annotations

from uuid import UUID

import pytest
from factories import fact, file_bytes_contain, later, sqlite_files, turn
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.forgetting.mentions import (
    REPLACEMENT,
    is_distinctive,
    mention_pattern,
    on_token_boundaries,
    searched_for,
    without_mentions,
)
from memory_ledger.forgetting.requests import plaintext_copies
from memory_ledger.text_units import written_forms

ADDRESS = "18 Haisong Road, Xihu District, Hangzhou"
ADDRESS_SCOPE = {"kind": "predicate", "subject": "user", "predicate": "home_address"}


def _redact(values: list[str], text: str) -> str:
    pattern = mention_pattern(values)
    if pattern is None:  # nothing long enough to search for: the text stays as it is
        return text
    return without_mentions({"content": text}, pattern)[0]["content"]


def test_the_whole_value_and_its_parts_with_a_digit_are_found() -> None:
    said = "Taxi to 18 HAISONG ROAD please; I love Hangzhou in spring."
    assert _redact([ADDRESS], said) == f"Taxi to {REPLACEMENT} please; I love Hangzhou in spring."
    assert _redact([ADDRESS], f"It is {ADDRESS}.") == f"It is {REPLACEMENT}."


def test_a_value_never_matches_inside_a_longer_word() -> None:
    assert _redact(["Anna"], "Annabel and Anna, and Anna's cat") == (
        f"Annabel and {REPLACEMENT}, and {REPLACEMENT}'s cat"
    )
    assert _redact(["Room 12"], "Room 123 is not Room 12.") == f"Room 123 is not {REPLACEMENT}."


def test_text_without_spaces_matches_anywhere() -> None:
    assert _redact(["海松路18号"], "请把车开到海松路18号门口") == f"请把车开到{REPLACEMENT}门口"


def test_values_too_short_to_identify_anything_are_not_searched() -> None:
    assert mention_pattern(["tea", "", "  "]) is None


def _history_with_a_repeat(alice: MemoryLedger) -> tuple[str, str, str]:
    address = alice.remember(fact("home_address", ADDRESS, category="contact")).item_id
    taxi = alice.remember(
        turn("Send the taxi to 18 Haisong Road at 7am tomorrow.", turn_id="t9", at=later(3))
    ).item_id
    other = alice.remember(turn("Annabel lives on Haisong Street.", turn_id="t10")).item_id
    return address, taxi, other


def test_a_repeat_is_listed_by_the_dry_run_and_redacted_by_the_request(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    address, taxi, other = _history_with_a_repeat(alice)
    bobs = bob.remember(turn("My taxi goes to 18 Haisong Road too.")).item_id

    dry = alice.forget_scope(ADDRESS_SCOPE, dry_run=True)
    assert dry.targets == [address] and dry.mentions == [taxi]
    assert "1 other item(s) that repeated it redacted" in dry.message
    assert "Haisong" in (alice.get(taxi).text or "")  # a dry run changes nothing

    report = alice.forget_scope(ADDRESS_SCOPE)

    assert report.status == "completed", report.failed_stores
    assert report.mentions == [taxi] and taxi not in report.all_targets
    assert alice.get(taxi).text == f"Send the taxi to {REPLACEMENT} at 7am tomorrow."
    readable = plaintext_copies(
        service.log, service.runner, [service.log.get(UUID(taxi))]
    )  # every version
    assert readable and not [t for t in readable if "Haisong" in t]
    assert alice.get(other).text == "Annabel lives on Haisong Street."  # no digit part
    assert bob.get(bobs).text == "My taxi goes to 18 Haisong Road too."  # not Alice's
    redactions = [r for r in report.receipts if r.action == "mentions_redacted"]
    assert [(r.status, r.evidence["rewritten"]) for r in redactions] == [("ok", 1)]
    resolved = [e for e in service.ledger.entries(report.request_id) if e.entry_type == "resolved"]
    assert resolved[0].payload["mentions"] == [taxi]
    assert "Haisong" not in report.message


@pytest.mark.parametrize("backend", ["sqlite"])
def test_after_the_redaction_no_file_holds_the_repeat(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    _history_with_a_repeat(alice)

    report = alice.forget_scope(ADDRESS_SCOPE)

    assert report.status == "completed"
    _, scan = service.requests.scan_files(report.request_id)
    assert scan is not None and scan.status == "ok"
    assert file_bytes_contain(sqlite_files(settings), "18 Haisong Road") == []
    assert file_bytes_contain(sqlite_files(settings), "7am tomorrow") == []  # sealed


def test_a_retry_after_the_redaction_changes_nothing(
    alice: MemoryLedger, service: MemoryService
) -> None:
    _, taxi, _ = _history_with_a_repeat(alice)
    report = alice.forget_scope(ADDRESS_SCOPE)
    version = service.log.get(UUID(taxi)).version

    again = service.requests._execute(service.requests.report(report.request_id))

    assert again.status == "completed"
    assert service.log.get(UUID(taxi)).version == version


# -- numbers and dates: a kept text is never cut (issue 10, item 9) ----------------------

KEPT = "The agency quoted 12,150 USD, then 2,150 USD; we move on September 2, 2026 (2026-09-02)."


@pytest.mark.parametrize(
    "value",
    [
        "Rent 2,150 USD, due September 2, 2026",  # the reported case
        "2,150 USD; September 2, 2026",
        "Paid 2,150 USD on September 2, 2026 to the landlord",
        "Invoice 2,150 USD\nSeptember 2, 2026\nHangzhou",
        "150 USD",  # whole, but inside the number 2,150 here
        "2026",  # whole, but inside a date here
        "September 2",
        "09-02",
        "12,15",  # inside 12,150
        "50 USD",
        "2, 2026",
    ],
)
def test_numbers_and_dates_of_a_forgotten_value_leave_a_kept_text_byte_identical(
    value: str,
) -> None:
    assert _redact([value], KEPT) == KEPT


def test_parts_are_never_cut_out_of_a_number_or_a_date() -> None:
    value = "Rent 2,150 USD, due September 2, 2026"
    # No "150 USD", "2026", "September 2", "Rent 2"; the amount is also written "2150".
    assert searched_for([value]) == {value, "Rent 2150 USD, due September 2, 2026"}
    assert searched_for(["2,150 USD; September 2, 2026; 18 Haisong Road"]) == {
        "2,150 USD; September 2, 2026; 18 Haisong Road",
        "2150 USD; September 2, 2026; 18 Haisong Road",
        "18 Haisong Road",
    }


def test_a_match_never_starts_or_ends_inside_a_number_or_a_date() -> None:
    assert _redact(["150 USD"], "2,150 USD or 150 USD") == f"2,150 USD or {REPLACEMENT}"
    assert _redact(["2026"], "September 2, 2026; 2026-09-02; 2026年9月2日; in 2026") == (
        f"September 2, 2026; 2026-09-02; 2026年9月2日; in {REPLACEMENT}"
    )
    assert _redact(["1234"], "555-1234, 1.234, 1234.5, PIN 1234") == (
        f"555-1234, 1.234, 1234.5, PIN {REPLACEMENT}"
    )
    assert _redact(["海松路1"], "海松路18号") == "海松路18号"
    # A value holding the whole date matches it.
    assert _redact(["we move on September 2"], KEPT) == KEPT  # would cut the date
    assert _redact(["we move on September 2, 2026"], KEPT) == KEPT.replace(
        "we move on September 2, 2026", REPLACEMENT
    )


def test_the_street_and_number_of_an_address_are_still_redacted_beside_kept_numbers() -> None:
    said = "Taxi to 18 Haisong Road on September 2, 2026, fare 2,150 USD; Hangzhou is far."
    assert _redact([ADDRESS], said) == (
        f"Taxi to {REPLACEMENT} on September 2, 2026, fare 2,150 USD; Hangzhou is far."
    )
    cjk = "海松路18号，西湖区，杭州"
    assert _redact([cjk], "请在2026年9月2日把车开到海松路18号门口，杭州") == (
        f"请在2026年9月2日把车开到{REPLACEMENT}门口，杭州"
    )


@pytest.mark.parametrize(
    ("part", "distinctive"),
    [
        ("18 Haisong Road", True),  # a number of something named
        ("Building 7 Room 12", True),
        ("海松路18号", True),
        ("Hangzhou", False),  # no number: a place many share
        ("Xihu District", False),
        ("2026", False),  # a bare number
        ("2,150", False),
        ("150 USD", False),  # a quantity
        ("2,150 USD", False),
        ("Rent 2,150 USD", False),  # an amount is not identifying
        ("Room 12", False),  # a number with one word
        ("September 2", False),  # dates are not
        ("September 2, 2026", False),
        ("due September 2, 2026", False),
        ("flight on 2026-09-02", False),
        ("moved to Hangzhou in 2026", False),
        ("at 7am tomorrow", False),
        ("2026年9月2日", False),
        ("2,150美元", False),
        ("+86 138 0013 8000", False),
    ],
)
def test_which_parts_are_distinctive(part: str, distinctive: bool) -> None:
    assert is_distinctive(part) is distinctive


# -- properties --------------------------------------------------------------------------

# Kept texts are drawn from one vocabulary, unrelated values always carry a word from a
# disjoint one (every word of it has a z, q or x; no kept word does; its CJK characters
# are not among the kept ones), so neither a whole value nor any part of it that keeps
# one of those words can occur in a kept text. Numbers, amounts, dates and common words
# are shared, so values do carry pieces that a kept text repeats.
KEPT_WORDS = [
    "the", "cab", "Road", "Street", "Haisong", "District", "Shanghai", "USD", "EUR",
    "rent", "paid", "on", "at", "May", "September", "Room", "Building", "Tom", "Anna",
    "Annabel", "tomorrow", "flight", "due", "total", "am", "pm",
]  # fmt: skip
OTHER_WORDS = ["Zorvath", "Quilleby", "Xandros", "zeqo", "Maxwell", "Quinn", "Oxbridge"]
KEPT_CJK = "海松路西湖区杭州市门口请把车开到号的在"
OTHER_CJK = "龙凤鹤麟鲲鹏"
MONTHS = ["January", "March", "May", "September", "Sept.", "Dec"]
assert not [w for w in KEPT_WORDS + MONTHS if set(w.lower()) & set("zqx")]

small = st.sampled_from([2, 7, 12, 18, 150, 2150, 2026, 12150, 555])
number = st.one_of(small, st.integers(0, 10**7)).flatmap(
    lambda n: st.sampled_from([str(n), f"{n:,}", f"{n:,}.5", f"0{n}"])
)
amount = number.flatmap(lambda n: st.sampled_from([f"{n} USD", f"${n}", f"{n} EUR", f"{n}美元"]))
date = st.builds(
    lambda m, d, y, form: form.format(m=m, d=d, y=y, mm=MONTHS.index(m) + 1),
    st.sampled_from(MONTHS),
    st.integers(1, 28),
    st.sampled_from([2025, 2026, 1999]),
    st.sampled_from(
        ["{m} {d}, {y}", "{d} {m} {y}", "{m} {d}", "{y}-0{mm}-{d}", "{y}年{mm}月{d}日"]
    ),
)
kept_word = st.sampled_from(KEPT_WORDS)
kept_cjk = st.text(st.sampled_from(KEPT_CJK), min_size=1, max_size=5)
kept_token = st.one_of(
    kept_word, number, amount, date, kept_cjk, st.sampled_from(list(",.;:!?()-'\""))
)
kept_text = st.builds(
    lambda tokens, seps: "".join(t + s for t, s in zip(tokens, seps, strict=False)),
    st.lists(kept_token, min_size=1, max_size=14),
    st.lists(st.sampled_from([" ", " ", ", ", "; ", "", "\n", " - "]), min_size=14, max_size=14),
)
# A fragment has at most one word: never distinctive, whatever the kept texts hold.
fragment = st.one_of(
    number,
    amount,
    date,
    kept_word,
    kept_cjk,
    st.builds("{} {}".format, number, kept_word),
    st.builds("{} {}".format, kept_word, number),
    st.builds("{}{}".format, kept_cjk, number),
)
other = st.one_of(
    st.sampled_from(OTHER_WORDS), st.text(st.sampled_from(OTHER_CJK), min_size=2, max_size=3)
)
# A segment with a word of the other vocabulary, and no separator inside.
foreign = st.builds(
    lambda before, word, after: " ".join([*before, word, *after]),
    st.lists(st.one_of(kept_word, number, amount), max_size=2),
    other,
    st.lists(st.one_of(kept_word, number, amount), max_size=2),
)
unrelated_value = st.builds(
    lambda segments, seps: segments[0] + "".join(map(str.__add__, seps, segments[1:])),
    st.lists(st.one_of(fragment, foreign), min_size=0, max_size=4).flatmap(
        lambda segments: st.permutations([*segments, "{foreign}"])
    ),
    st.lists(st.sampled_from([", ", "; ", "\n", "，", ". ", ": "]), min_size=5, max_size=5),
).flatmap(lambda template: foreign.map(lambda f: template.replace("{foreign}", f)))


@settings(max_examples=200, deadline=None)
@given(kept=kept_text, values=st.lists(unrelated_value, min_size=1, max_size=3))
def test_unrelated_values_leave_a_kept_text_byte_identical(kept: str, values: list[str]) -> None:
    pattern = mention_pattern(values)
    assert pattern is not None  # every value carries a word of at least four bytes
    rewritten, changed = without_mentions({"content": kept}, pattern)
    assert rewritten["content"] == kept and changed == []
    assert not pattern.search(kept)


@settings(max_examples=200, deadline=None)
@given(
    left=kept_text,
    right=kept_text,
    value=st.one_of(unrelated_value, kept_text.map(str.strip)),
)
def test_a_value_that_occurs_whole_on_token_boundaries_is_removed(
    left: str, right: str, value: str
) -> None:
    """And so is each distinctive part of it."""
    pattern = mention_pattern([value])
    if pattern is None:  # shorter than the residue scan's needles: never searched
        assert len(value.strip().encode("utf-8")) < 4
        return

    def redact(t: str) -> str:
        return without_mentions({"c": t}, pattern)[0]["c"]

    for searched in searched_for([value]):
        text = f"{left} | {searched} | {right}"
        assert pattern.search(text)
        assert redact(text) == f"{redact(left)} | {REPLACEMENT} | {redact(right)}"


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(unrelated_value, kept_text))
def test_every_part_searched_for_is_distinctive_and_whole_tokens_of_the_value(
    value: str,
) -> None:
    forms = written_forms(value)  # the value as given, and as it is also written
    for part in searched_for([value]) - forms:
        assert is_distinctive(part)
        assert any(
            on_token_boundaries(whole, i, i + len(part))
            for whole in forms
            for i in range(len(whole))
            if whole.startswith(part, i)
        ), part


# -- end to end --------------------------------------------------------------------------

RENT = "Rent 2,150 USD, due September 2, 2026; 18 Haisong Road, Xihu District"
RENT_SCOPE = {"kind": "predicate", "subject": "user", "predicate": "rent"}


def test_forgetting_a_value_with_an_amount_and_a_date_keeps_other_turns_byte_identical(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(fact("rent", RENT, category="contact"))
    quoted = "The agency quoted 12,150 USD, then 2,150 USD; we move on September 2, 2026."
    kept_turn = alice.remember(turn(quoted, turn_id="t20", at=later(2))).item_id
    budget = alice.remember(fact("budget", "2,150 USD", turn="t21")).item_id
    dated = "Flight on September 2, 2026 at 7am, seat 2A, 2026 is busy."
    date_turn = alice.remember(turn(dated, turn_id="t22", at=later(3))).item_id
    taxi = "Taxi to 18 Haisong Road on September 2, 2026, fare 150 USD."
    taxi_turn = alice.remember(turn(taxi, turn_id="t23", at=later(4))).item_id

    dry = alice.forget_scope(RENT_SCOPE, dry_run=True)
    assert dry.mentions == [taxi_turn]

    report = alice.forget_scope(RENT_SCOPE)

    assert report.status == "completed", report.failed_stores
    assert report.mentions == [taxi_turn]
    assert alice.get(kept_turn).text == quoted
    assert alice.get(budget).text == "2,150 USD"
    assert alice.get(date_turn).text == dated
    assert alice.get(taxi_turn).text == (
        f"Taxi to {REPLACEMENT} on September 2, 2026, fare 150 USD."
    )


def test_a_whole_value_inside_a_kept_date_stays_and_is_reported_as_shared(
    alice: MemoryLedger, backend: str
) -> None:
    alice.remember(fact("move_day", "September 2", category="contact"))
    dated = "We fly on September 2, 2026."
    kept = alice.remember(turn(dated, turn_id="t5", at=later(2))).item_id

    report = alice.forget_scope({"kind": "predicate", "subject": "user", "predicate": "move_day"})

    assert report.status == "completed", report.failed_stores
    assert report.mentions == [] and alice.get(kept).text == dated
    if backend == "sqlite":  # the kept turn is sealed: the scan finds nothing to excuse
        _, scan = alice._service.requests.scan_files(report.request_id)
        assert scan is not None and scan.status == "ok"
