"""A plan made from words is never wider than the words (issue 36, items 1-2).

What a user relies on when they say "forget X": only the places where X is said change.
A location phrase ("from the shared assistant memory") says where, not what; a
statement ("I am out of Grey Pine now.") says why; a person's name is not redacted
because a request mentions the person; a value said in dozens of places is asked
about, with counts and examples, never planned at a guess; a whole-namespace scope
comes only from a request for everything; "my old address" with one address on file is
asked about, naming it. Every plan states its blast radius. The property test at the
end checks the invariant over generated histories and requests.
"""

from __future__ import annotations

import re
import tempfile
from datetime import timedelta
from pathlib import Path

import pytest
from factories import T0, fact, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.forgetting.planning.bounds import MAX_EXAMPLES, MAX_PLACES, too_wide
from memory_ledger.forgetting.planning.locations import without_locations
from memory_ledger.forgetting.planning.statements import without_statements

NOW = T0 + timedelta(days=30)
EXECUTABLE = ("planned", "partial_match")
FILLER = (
    "The water bill came in higher this month.",
    "You may want to bring an umbrella.",
    "Recycling pickup moved to Tuesday.",
    "agent: saved the session summary",
    "Thanks, that helps.",
    "The rose bushes need water.",
)


def _turn(text: str, n: int, speaker: str = "user") -> dict:
    write = turn(text, turn_id=f"t{n}", session=f"s{n // 10}", at=T0 + timedelta(hours=n))
    write["subject"] = speaker
    write["origin"] = "explicit" if speaker == "user" else "observed"
    return write


def _remember(ledger: MemoryLedger, texts: list[str]) -> dict[str, str]:
    """The texts as turns (and filler between them); ids by text."""
    writes = []
    for n, text in enumerate(texts):
        writes.append(_turn(text, 2 * n, "user" if n % 2 else "manager"))
        writes.append(_turn(f"{FILLER[n % len(FILLER)]} ({n})", 2 * n + 1))
    stored = ledger.remember_many(writes)
    return {w["content"]: s.item_id for w, s in zip(writes, stored, strict=True)}


@pytest.fixture
def ledger(service: MemoryService, alice: MemoryLedger) -> MemoryLedger:
    service.clock = lambda: NOW
    return alice


def _touched(plan) -> set[str]:  # type: ignore[no-untyped-def]
    return {*plan.targets, *plan.spans_by_item, *plan.cascaded}


# -- the words that never widen ---------------------------------------------------------


def test_location_phrases_and_statements_are_cut_before_reading() -> None:
    assert without_locations("Delete Bill from the shared assistant memory.") == "Delete Bill."
    assert without_locations("把阿姨小雨从共享记忆里删掉") == "把阿姨小雨删掉"
    assert without_locations("from memory") == "from memory"  # nothing else: unchanged
    said = "I am fully out of Grey Pine now. Please delete the Grey Pine callback line."
    assert without_statements(said) == "Please delete the Grey Pine callback line."
    said = "Remove Rose's number, she no longer wants to be involved."
    assert without_statements(said) == "Remove Rose's number"
    keep = "Forget my old rent. Keep the current one."
    assert without_statements(keep) == keep  # a keep is never cut


def test_a_location_phrase_never_plans_the_whole_namespace(ledger: MemoryLedger) -> None:
    ids = _remember(
        ledger,
        [
            "Safe number for tonight: 415-555-0199.",
            "agent: saved 415-555-0199 as the temporary safe number",
            *[f"Shift note {n}: all quiet on floor {n}." for n in range(20)],
        ],
    )
    plan = ledger.plan_forget(
        "Please delete the temporary safe number 415-555-0199 from the shared assistant memory."
    )
    assert plan.status == "planned"
    assert (plan.scope or {}).get("kind") != "namespace"
    assert _touched(plan) == {
        ids["Safe number for tonight: 415-555-0199."],
        ids["agent: saved 415-555-0199 as the temporary safe number"],
    }
    assert plan.blast == {
        "places": 2, "items": 2, "namespace_items": len(ids), "share": round(2 / len(ids), 4),
        "scope": None,
    }  # fmt: skip


def test_a_statement_is_not_a_piece(ledger: MemoryLedger) -> None:
    ids = _remember(
        ledger,
        [
            "Grey Pine callback line is 312-555-0139.",
            "agent: saved Grey Pine callback (312) 555-0139",
            "Grey Pine moved pickups to room 9.",
            "I signed up for Grey Pine in March.",
        ],
    )
    plan = ledger.plan_forget(
        "I am fully out of Grey Pine now. Please delete the Grey Pine callback line and the "
        "room 9 note."
    )
    assert plan.status == "planned"
    spans = {s for v in plan.spans_by_item.values() for s in v}
    assert not any("Grey Pine" in s for s in spans)  # the name stays; the values go
    assert {"312-555-0139", "(312) 555-0139", "room 9"} <= spans
    assert ids["I signed up for Grey Pine in March."] not in _touched(plan)


def test_a_name_is_found_as_a_name_not_as_the_common_word(ledger: MemoryLedger) -> None:
    ids = _remember(
        ledger,
        [
            "Bill from the board called about the leak.",
            "Bill's number is 415-555-0152.",
            "agent: called Bill at 415-555-0152",
        ],
    )
    plan = ledger.plan_forget("Delete Bill and his number 415-555-0152 from the shared memory.")
    assert plan.status == "planned"
    bills = [i for t, i in ids.items() if "bill" in t.lower() and "Bill" not in t]
    assert bills and not set(bills) & _touched(plan)  # "the water bill" is not Bill
    assert ids["Bill from the board called about the leak."] in _touched(plan)


@pytest.mark.parametrize(
    "request_text", ["Delete 415-555-0199 and the alias May", "forget the name May"]
)
def test_a_short_name_that_is_a_month_is_found_where_it_names_someone(
    ledger: MemoryLedger, request_text: str
) -> None:
    """ "May" is too short for the mention index and is also a month: named as a
    literal, it is looked up as said (never read as a date first, never "nothing
    matched"), and the places that use it as a date are not its places."""
    ids = _remember(
        ledger,
        [
            "If the front desk calls, ask for May.",
            "Ask for May at reception, she has the keys. My cell is 415-555-0199.",
            "The rent is due in May.",
            "We drive to the coast on May 3 every year.",
        ],
    )
    plan = ledger.plan_forget(request_text)
    assert plan.status == "planned", plan.message
    may = {i for t, i in ids.items() if "for May" in t}
    months = {ids["The rent is due in May."], ids["We drive to the coast on May 3 every year."]}
    assert may <= set(plan.spans_by_item) and not months & _touched(plan)


def test_a_quoted_mapping_resolves_through_its_sides(ledger: MemoryLedger) -> None:
    ids = _remember(
        ledger,
        [
            "Project Birch is the code name, keep it quiet.",
            "Copper Mutual signed the letter of intent.",
            "agent: noted Project Birch = Copper Mutual",
        ],
    )
    plan = ledger.plan_forget("Do not retain the explicit note 'Project Birch = Copper Mutual'.")
    assert plan.status == "planned" and plan.intent in ("redact", "delete")
    assert _touched(plan) == set(ids[t] for t in ids if "Birch" in t or "Copper" in t)


# -- "old" with one on file: the seed's example --------------------------------------


@pytest.mark.parametrize("request_text", ["Please delete my old home address.", "把我的旧住址删掉"])
def test_old_with_one_on_file_asks_naming_it(ledger: MemoryLedger, request_text: str) -> None:
    [stored] = ledger.remember_many([fact("home_address", "12 Birch Road", category="contact")])
    plan = ledger.plan_forget(request_text)
    assert plan.status == "needs_clarification", plan.message
    assert [c["item_id"] for c in plan.candidates] == [stored.item_id]
    assert "12 Birch Road" in (plan.question or "")
    chosen = ledger.choose_candidates(plan.plan_id, [stored.item_id])
    assert chosen.status == "planned" and stored.item_id in chosen.targets


@pytest.mark.parametrize(
    "request_text", ["I moved, please delete my old home address.", "我搬家了，把我的旧住址删掉"]
)
def test_old_with_one_on_file_is_planned_when_it_moved(
    ledger: MemoryLedger, request_text: str
) -> None:
    [stored] = ledger.remember_many([fact("home_address", "12 Birch Road", category="contact")])
    plan = ledger.plan_forget(request_text)
    assert plan.status == "planned", plan.message
    assert stored.item_id in plan.targets
    assert plan.blast is not None and plan.blast["items"] >= 1


# -- bounds: too wide becomes a question; everything only when asked -----------------


def test_a_value_said_too_often_is_asked_about_with_counts(ledger: MemoryLedger) -> None:
    texts = [f"Ticket {n}: parked in the Harbor lot." for n in range(MAX_PLACES + 5)]
    ids = _remember(ledger, texts)
    plan = ledger.plan_forget("Delete the phrase 'Harbor lot'.")
    assert plan.status == "needs_clarification"
    assert 1 <= len(plan.candidates) <= MAX_EXAMPLES
    assert str(MAX_PLACES + 5) in (plan.question or "")  # the count is said
    assert plan.blast is not None and plan.blast["places"] == MAX_PLACES + 5
    picked = plan.candidates[0]["item_id"]
    chosen = ledger.choose_candidates(plan.plan_id, [picked])
    assert chosen.status == "planned"
    assert _touched(chosen) == {picked}
    assert set(_touched(chosen)) <= set(ids.values())


@pytest.mark.parametrize(
    "request_text", ["Forget everything you know about me.", "删除我的所有记忆"]
)
def test_everything_is_planned_only_when_asked_and_names_its_scope(
    ledger: MemoryLedger, request_text: str
) -> None:
    ids = _remember(ledger, [f"Note {n} about the garden." for n in range(15)])
    plan = ledger.plan_forget(request_text)
    assert plan.status == "planned"
    assert plan.blast is not None
    assert plan.blast["scope"] == "namespace"
    assert plan.blast["items"] == plan.blast["namespace_items"] == len(ids)


def test_bounds() -> None:
    assert not too_wide(11, 20)  # few places: a specific value, even in a small memory
    assert too_wide(12, 40) and not too_wide(12, 100)
    assert too_wide(MAX_PLACES + 1, 100_000)


# -- the property: planned targets are places of what the request names ----------------

NAMES = ("Bill", "May", "June", "Rose", "Grant", "Harriet Vell", "Teodor", "Larch House")
TEMPLATES = (
    "Please call {v} tomorrow.",
    "agent: saved {v} to contacts",
    "Confirming {v} for the file.",
    "{v} was mentioned at the desk.",
)
LOCATIONS = ("", " from the shared assistant memory", " from your notes", " from memory")


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Values (codes, phones, names, some common words too) each said in one to five
    turns, among filler that says the common words ("bill", "may", "rose")."""
    codes = draw(st.lists(st.integers(1000, 99999), min_size=1, max_size=3, unique=True))
    phones = [f"415-555-{n:04d}" for n in draw(st.lists(st.integers(100, 9999), max_size=2))]
    names = draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))
    values = [*(str(c) for c in codes), *phones, *names]
    texts: list[str] = []
    for value in values:
        times = draw(st.integers(1, 5))
        for k in range(times):
            texts.append(TEMPLATES[(k + len(texts)) % len(TEMPLATES)].format(v=value))
    texts += [FILLER[n % len(FILLER)] + f" ({n})" for n in range(draw(st.integers(0, 12)))]
    return values, draw(st.permutations(texts))


def _said_in(text: str, value: str) -> bool:
    flags = 0 if value[:1].isupper() else re.IGNORECASE
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w])", text, flags) is not None


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=histories(), draw=st.data())
def test_property_plans_from_words_touch_only_named_places(
    data: tuple[list[str], list[str]], draw: st.DataObject
) -> None:
    values, texts = data
    named = draw.draw(st.lists(st.sampled_from(values), min_size=1, max_size=2, unique=True))
    where = draw.draw(st.sampled_from(LOCATIONS))
    verb = draw.draw(st.sampled_from(("Delete", "Please forget", "Do not retain", "Erase")))
    request = f"{verb} {' and '.join(named)}{where}."
    with tempfile.TemporaryDirectory() as tmp, MemoryService(Settings.resolve(Path(tmp))) as svc:
        svc.clock = lambda: NOW
        from conftest import ALICE

        ledger = svc.for_principal(ALICE)
        stored = ledger.remember_many(
            [_turn(t, n, "user" if n % 2 else "manager") for n, t in enumerate(texts)]
        )
        by_id = {s.item_id: t for s, t in zip(stored, texts, strict=True)}
        plan = ledger.plan_forget(request)
        if plan.status not in EXECUTABLE:
            return
        places = {i for i, t in by_id.items() if any(_said_in(t, v) for v in named)}
        assert _touched(plan) <= places, (request, [by_id[i] for i in _touched(plan) - places])
        assert plan.blast is not None
        assert plan.blast["scope"] is None  # no whole scope without "everything"
        assert plan.blast["items"] <= len(places)
        for piece in plan.pieces:
            assert not too_wide(len(piece["places"]), len(by_id))
