"""A phrase the request names as words to find, and a value said across two turns.

"...and delete the phrase copper finch" names a literal as surely as quotes do: it is
found where it is said, in any case and in the forms the mention lookup reads as the
same ("Copper Finch", "copper-finch"), and nowhere else (not in "the copper kettle" or
"a finch sighting"). A value whose pieces are said in two consecutive turns of one
session ("my number is 415-555", then "0199, call after six"; "...the word is blue",
then "heron, that is the safe word") is found in both turns and planned for both, each
side redacted as written there; the same pieces that are not said one turn after the
other (another turn between, another session) are not.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from factories import T0, turn

from memory_ledger.api import MemoryLedger, MemoryService

#: (key, speaker, session, text): a dozen and more turns of three speakers and an agent;
#: the distractors share one word (or one half) of a value with it.
HISTORY = [
    ("standup", "user", "s1", "We moved the standup to 9:30."),
    ("kettle", "concierge", "s1", "The copper kettle in the lounge is broken."),
    ("phrase1", "user", "s1", "My backup phrase is copper finch, keep it safe."),
    ("finch", "agent", "s1", "agent: logged a finch sighting from the garden"),
    ("phrase2", "concierge", "s1", "Noted: Copper Finch is the backup phrase."),
    ("phrase3", "agent", "s1", "agent: stored copper-finch as the recovery phrase"),
    ("number_a", "user", "s2", "my number is 415-555"),
    ("number_b", "user", "s2", "0199, call after six"),
    ("desk", "concierge", "s2", "The front desk is 415-555-0100."),
    ("thanks", "user", "s2", "Thanks, that helps."),
    ("word_a", "agent", "s2", "agent: the word is blue"),
    ("word_b", "user", "s2", "heron, that is the safe word"),
    ("boat", "manager", "s2", "Blue heron is the name of the boat."),
    ("sky", "user", "s2", "The sky was blue over the harbour today."),
    ("apart_a", "user", "s3", "the old number was 415-555"),
    ("between", "manager", "s3", "Lift inspection moved to Friday."),
    ("apart_b", "user", "s3", "0199 was the extension"),
    ("other_a", "agent", "s4", "agent: the colour is blue"),
    ("other_b", "user", "s5", "heron nests by the pier"),
    ("bridge", "user", "s5", "我们在青石小桥见面。"),
    ("road", "concierge", "s5", "青石路今天封路。"),
    ("zh_a", "user", "s6", "暗号的前半是青石"),
    ("zh_b", "user", "s6", "小桥，别告诉别人"),
    ("zh_c", "concierge", "s6", "小桥那边的灯坏了。"),
]


@pytest.fixture
def said(service: MemoryService, alice: MemoryLedger) -> dict[str, str]:
    service.clock = lambda: T0 + timedelta(days=2)
    writes = []
    for n, (key, speaker, session, text) in enumerate(HISTORY):
        write = turn(text, turn_id=key, session=session, at=T0 + timedelta(minutes=n))
        write["subject"] = speaker
        write["origin"] = "explicit" if speaker == "user" else "observed"
        writes.append(write)
    stored = alice.remember_many(writes)
    return {key: s.item_id for (key, *_), s in zip(HISTORY, stored, strict=True)}


def _planned(alice: MemoryLedger, ids: dict[str, str], request: str) -> set[str]:
    plan = alice.plan_forget(request)
    assert plan.status == "planned", (plan.status, plan.pieces)
    names = {v: k for k, v in ids.items()}
    return {names[pl["item_id"]] for p in plan.pieces for pl in p["places"]}


def _texts(alice: MemoryLedger, ids: dict[str, str]) -> dict[str, str | None]:
    return {key: alice.get(item_id).text for key, item_id in ids.items()}


@pytest.mark.parametrize(
    "request_text",
    [
        "Keep my standup time, and delete the phrase copper finch",
        "please forget the backup phrase copper finch",
        "Delete the exact words Copper Finch from memory",
    ],
)
def test_a_phrase_named_without_quotes_is_found_where_it_is_said(
    alice: MemoryLedger, said: dict[str, str], request_text: str
) -> None:
    assert _planned(alice, said, request_text) == {"phrase1", "phrase2", "phrase3"}


def test_the_named_phrase_is_gone_after_execution_and_its_words_elsewhere_stay(
    alice: MemoryLedger, said: dict[str, str]
) -> None:
    before = _texts(alice, said)
    plan = alice.plan_forget("Keep my standup time, and delete the phrase copper finch")
    assert alice.execute_plan(plan.plan_id).status == "completed"
    after = _texts(alice, said)
    for key in ("phrase1", "phrase2", "phrase3"):
        assert "finch" not in (after[key] or "").lower(), key
    assert after["phrase1"] == "My backup phrase is [redacted], keep it safe."
    assert {k: v for k, v in after.items() if not k.startswith("phrase")} == {
        k: v for k, v in before.items() if not k.startswith("phrase")
    }
    assert alice.plan_forget("delete the phrase copper finch").status == "nothing_matched"


def test_a_chinese_phrase_named_without_quotes_is_a_literal(
    alice: MemoryLedger, said: dict[str, str]
) -> None:
    """Said whole in one turn, and broken at a turn boundary in another session; not
    "青石路", nor "小桥" at the start of a turn that does not follow "青石"."""
    assert _planned(alice, said, "把短语青石小桥删掉") == {"bridge", "zh_a", "zh_b"}


def test_a_value_said_across_two_consecutive_turns_is_planned_for_both(
    alice: MemoryLedger, said: dict[str, str]
) -> None:
    """Not the desk's 415-555-0100, not the halves with a turn between them (s3)."""
    assert _planned(alice, said, "forget my number 415-555-0199") == {"number_a", "number_b"}
    # a phrase broken at the turn boundary; said whole elsewhere too; not "blue" in the
    # middle of a turn, nor the halves said in two sessions (s4, s5)
    assert _planned(alice, said, "delete the phrase blue heron") == {"word_a", "word_b", "boat"}
    plan = alice.plan_forget("forget my number 415-555-0199")
    [piece] = plan.pieces  # reported as said apart, with its two turns in order
    assert piece["said_apart"] == [[said["number_a"], said["number_b"]]]
    whole = alice.plan_forget("delete the phrase blue heron").pieces[0]
    assert whole["said_apart"] == [[said["word_a"], said["word_b"]]]  # and whole in "boat"
    assert "said_apart" not in alice.plan_forget("forget 415-555-0100").pieces[0]
    assert alice.execute_plan(plan.plan_id).status == "completed"
    after = _texts(alice, said)
    assert (after["number_a"], after["number_b"]) == (
        "my number is [redacted]",
        "[redacted], call after six",
    )
    assert after["apart_a"] == "the old number was 415-555"
    assert after["apart_b"] == "0199 was the extension"
    assert after["desk"] == "The front desk is 415-555-0100."
