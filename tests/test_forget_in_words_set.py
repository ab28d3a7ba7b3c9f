"""The "forget in words" set (benchmarks/data/forget_in_words): its composition, that
its ground truth agrees with its histories, that the generator reproduces it byte for
byte, that the scorer scores a perfect execution `exact` and an empty one `narrower`,
and that the runner runs. Nothing here judges the planner: it is being rebuilt."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime

import pytest

from benchmarks import forget_in_words as runner
from benchmarks import forget_in_words_gen as gen
from memory_ledger.identifiers import is_identifier
from memory_ledger.write_policy import parse_write

PRINCIPAL_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


@pytest.fixture(scope="module")
def histories() -> dict:
    return runner.load_histories()


@pytest.fixture(scope="module")
def cases(histories) -> list:
    return runner.load_cases(histories=histories)


def _planned(cases):
    return [c for c in cases if c["expected"]["status"] == "planned"]


# -- composition -----------------------------------------------------------------------


def test_composition(histories, cases):
    assert len(cases) >= 300
    assert len(histories) >= 30
    for history in histories.values():
        assert 100 <= len(history["turns"]) <= 200, history["id"]
        assert len(history["speakers"]) >= 3, history["id"]
        assert len(history["facts"]) <= 6, history["id"]  # few facts: mostly turns
    multi = [c for c in cases if "multi_part" in c["shapes"]]
    assert len(multi) * 3 >= len(cases)
    assert all(len({n["slot"] for n in c["named"]}) >= 2 for c in multi)
    languages = Counter(c["language"] for c in cases)
    assert languages["en"] and languages["zh"] and languages["mixed"]
    assert (languages["zh"] + languages["mixed"]) * 2 >= len(cases)  # half Chinese or mixed
    assert {h["language"] for h in histories.values()} == {"en", "zh"}
    shapes = Counter(s for c in cases for s in c["shapes"])
    for shape in gen.SHAPES:
        assert shapes[shape] >= 15, shape
    statuses = Counter(c["expected"]["status"] for c in cases)
    assert set(statuses) == set(gen.STATUSES)


def test_ids_and_references(histories, cases):
    assert len({c["id"] for c in cases}) == len(cases)
    for case in cases:
        history = histories[case["history"]]
        keys = set(runner.item_texts(history))
        assert {p["item"] for p in case["expected"]["places"]} <= keys, case["id"]
        for keep in case["expected"]["keeps"]:
            assert set(keep["items"]) <= keys, case["id"]
        assert 2 <= len(case["attack_queries"]) <= 3, case["id"]
        assert case["language"] in gen.LANGUAGES
        assert case["request"].strip() == case["request"] and case["request"]


def test_histories_are_valid_writes(histories):
    """Every turn and fact is a write the store accepts, in time order, before `now`."""
    for history in histories.values():
        assert PRINCIPAL_PART.fullmatch(history["tenant"])
        assert PRINCIPAL_PART.fullmatch(history["user"])
        now = datetime.fromisoformat(history["now"])
        assert now.utcoffset() is not None
        times = [datetime.fromisoformat(t["written_at"]) for t in history["turns"]]
        assert times == sorted(times)
        assert max(times) < now
        assert all(is_identifier(s) for s in history["speakers"])
        for _, write in runner.history_writes(history):
            parse_write(write)


# -- the ground truth ------------------------------------------------------------------


def test_every_place_span_is_in_its_item(histories, cases):
    for case in cases:
        texts = runner.item_texts(histories[case["history"]])
        for place in case["expected"]["places"]:
            text = texts[place["item"]]
            assert place["span"] in text, (case["id"], place)
            if place["action"] == "erase":
                assert place["item"].startswith("f") and place["span"] == text
            else:
                assert place["action"] == "redact"


def test_places_are_every_occurrence_of_the_named_values(histories, cases):
    """Recomputed from the text: each named value, in every format, wherever it is."""
    for case in _planned(cases):
        texts = runner.item_texts(histories[case["history"]])
        forms = [f for n in case["named"] for f in n["forms"]]
        found = {
            (key, text[i:j]) for key, text in texts.items() for i, j in gen.find_spans(text, forms)
        }
        assert found == {(p["item"], p["span"]) for p in case["expected"]["places"]}, case["id"]


def test_values_repeat_across_speakers(histories, cases):
    for history in histories.values():
        turns = history["turns"]
        for value in history["values"]:
            assert 2 <= value["occurrences"] <= 20, (history["id"], value["value"])
            speakers = {t["speaker"] for t in turns if gen.contains(t["text"], value["forms"])}
            assert len(speakers) >= 2, (history["id"], value["value"])
    for case in cases:
        if "repeated_literal" in case["shapes"]:
            assert len(case["expected"]["places"]) >= 2, case["id"]


def test_keeps_are_present_and_look_alikes_are_not_places(histories, cases):
    for case in cases:
        texts = runner.item_texts(histories[case["history"]])
        places = {(p["item"], p["span"]) for p in case["expected"]["places"]}
        for keep in case["expected"]["keeps"]:
            assert keep["items"], case["id"]
            for key in keep["items"]:
                assert keep["text"] in texts[key], (case["id"], keep)
                assert (key, keep["text"]) not in places, (case["id"], keep)
        if "look_alike" in case["shapes"]:
            assert case["expected"]["keeps"], case["id"]


def test_non_plans_name_no_places(cases):
    for case in cases:
        if case["expected"]["status"] != "planned":
            assert case["expected"]["places"] == [], case["id"]
        else:
            assert case["expected"]["places"], case["id"]
        if case["expected"]["status"] == "needs_clarification":
            assert len(case["expected"]["candidates"]) >= 2, case["id"]


def test_boundaries():
    assert gen.find_spans("code 7142 and locker 71420", ["7142"]) == [(5, 9)]
    assert gen.find_spans("3,150 EUR and 150 EUR", ["150 EUR"]) == [(14, 21)]
    assert gen.find_spans("ticket INC-4471", ["4471"]) == []
    assert gen.find_spans("call +1 206 555 0148 now", ["206 555 0148", "+1 206 555 0148"]) == [
        (5, 20)
    ]
    assert gen.find_spans("Copper Finch, again", ["copper finch"]) == [(0, 12)]
    assert not gen.byte_pattern("7142").search(b"9f3e-7142-4b1c")
    assert gen.byte_pattern("7142").search(b'"gate 7142"')


def test_generator_reproduces_the_committed_files():
    histories_text, cases_text = gen.rendered()
    assert gen.HISTORIES_PATH.read_bytes() == histories_text.encode("utf-8")
    assert gen.CASES_PATH.read_bytes() == cases_text.encode("utf-8")


# -- the scorer ------------------------------------------------------------------------


def _perfect(case, texts):
    """What an ideal execution leaves: spans replaced by a marker, erased facts gone."""
    after = {key: runner.After(text, False, False) for key, text in texts.items()}
    spans: dict[str, list[str]] = {}
    for place in case["expected"]["places"]:
        if place["action"] == "erase":
            after[place["item"]] = runner.After(None, True, False)
        else:
            spans.setdefault(place["item"], []).append(place["span"])
    for key, item_spans in spans.items():
        text = texts[key]
        for i, j in reversed(gen.find_spans(text, item_spans)):
            text = text[:i] + "[forgotten]" + text[j:]
        after[key] = runner.After(text, False, False)
    return after


def test_a_perfect_execution_scores_exact_and_leaves_no_value(histories, cases):
    for case in cases:
        texts = runner.item_texts(histories[case["history"]])
        after = _perfect(case, texts)
        status = case["expected"]["status"]
        result = runner.score(case, texts, after, status, None)
        want = "exact" if status == "planned" else "correct"
        assert result["outcome"] == want, (case["id"], result)
        assert result["keeps_lost"] == [] and not result["damaging"]
        forms = [f for n in case["named"] if n["stored"] for f in n["forms"]]
        if status == "planned":
            assert not any(gen.contains(a.text or "", forms) for a in after.values()), case["id"]


def test_the_scorer_tells_wider_from_narrower(histories, cases):
    case = next(c for c in _planned(cases) if c["expected"]["keeps"])
    texts = runner.item_texts(histories[case["history"]])
    untouched = {k: runner.After(t, False, False) for k, t in texts.items()}
    assert runner.score(case, texts, untouched, "planned", None)["outcome"] == "narrower"
    assert runner.score(case, texts, untouched, "needs_clarification", None)["outcome"] == "asked"
    assert runner.score(case, texts, untouched, "not_a_request", None)["outcome"] == "nothing"
    everything = {k: runner.After(None, True, False) for k in texts}
    result = runner.score(case, texts, everything, "planned", None)
    assert result["outcome"] == "wider" and result["keeps_lost"]
    whole_turns = _perfect(case, texts)
    for place in case["expected"]["places"]:
        whole_turns[place["item"]] = runner.After(None, True, False)
    assert runner.score(case, texts, whole_turns, "planned", None)["outcome"] == "wider"


def test_redaction_states():
    before = "The gate code is 7142, not 71420."
    assert (
        runner.redaction_state(before, "The gate code is [forgotten], not 71420.", ["7142"])
        == "done"
    )
    assert runner.redaction_state(before, "The gate code is , not 71420.", ["7142"]) == "done"
    assert runner.redaction_state(before, before, ["7142"]) == "unchanged"
    assert (
        runner.redaction_state(before, "The gate code is [forgotten], not [forgotten].", ["7142"])
        == "mangled"
    )
    assert runner.redaction_state(before, "[redacted]", ["7142"]) == "mangled"
    phone = "Call (206) 555-0148 today."
    assert (
        runner.redaction_state(phone, "Call (206) [forgotten] today.", ["(206) 555-0148"])
        == "partial"
    )


# -- the runner ------------------------------------------------------------------------


def test_the_runner_measures_a_handful_of_cases(histories, cases):
    """A quick run: every field is there and the outcome counts add up. It does not
    judge the planner's answers."""
    wanted = {"building-2-01", "building-2-02", "building-2-11", "building-2-12"}
    chosen = [c for c in cases if c["id"] in wanted]
    results = runner.run(chosen, histories, embedder_spec="hashing")
    json.dumps(results)  # the document is JSON
    assert set(results) >= {"run", "set", "baseline", "totals", "by_language", "by_shape", "cases"}
    assert results["run"]["cases_run"] == len(chosen)
    assert results["baseline"]["histories_not_read_back_as_written"] == []
    totals = results["totals"]
    outcomes = runner.PLAN_OUTCOMES + runner.NONPLAN_OUTCOMES
    assert sum(totals[o] for o in outcomes) == totals["cases"] == len(chosen)
    for result in results["cases"]:
        assert result["outcome"] in outcomes
        assert result["status"] is not None or result["error"] is not None
        case = next(c for c in chosen if c["id"] == result["id"])
        places = {p["item"] for p in case["expected"]["places"]}
        assert set(result["place_states"]) == places
        if case["expected"]["status"] == "planned":
            assert set(result["leaks"]) >= {*runner.CHANNELS, "any"}
        if result["executed"]:
            assert result["outcome_status"] is not None or result["error"] is not None
    assert runner.table(results)
    assert len(runner.quick_selection(cases, histories)) == 30
