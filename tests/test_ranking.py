"""How recall ranks (memory_ledger/retrieval/context.py, `_Ranking`): the keyword half
scaled by its best, the dense half as a fifth, a named subject's memories preferred, a
turn sharing its neighbours' relevance; and the halves still answer alone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from conftest import ALICE
from factories import T0, provenance

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.embedders import UniversalSentenceEncoder


@pytest.fixture
def alice(settings: Settings) -> Iterator[MemoryLedger]:
    """With the default embedder: the hashing one the other tests use is a bag of words,
    a second keyword half, and ranking is about how a dense half and a keyword half
    combine."""
    with MemoryService(settings, embedder=UniversalSentenceEncoder()) as service:
        yield service.for_principal(ALICE)


def said(speaker: str, text: str, n: int, session: str = "s1") -> dict:
    return {
        "kind": "turn",
        "subject": speaker,
        "content": text,
        "origin": "observed",
        "sensitivity": "personal",
        "provenance": provenance(turn=f"t{n}", session=session, at=T0 + timedelta(minutes=n)),
    }


CHAT = [
    ("Caroline", "I finally tried pottery on Saturday, it was lovely."),
    ("Melanie", "Wow Caroline, pottery sounds great! Caroline, you always find new hobbies."),
    ("Caroline", "What did you do about the noisy neighbours?"),
    ("Caroline", "Did you get a pet in the end?"),
    ("Melanie", "Yes! A guinea pig, we called him Oscar."),
    ("Caroline", "The weather is grey again today, what did you think of the forecast?"),
    ("Melanie", "My kids painted the fence blue last weekend, did I tell you?"),
    ("Caroline", "I did not sleep well, what did you dream about?"),
]


def _write(ledger: MemoryLedger, chat: list[tuple[str, str]], session: str = "s1") -> list[str]:
    return [
        ledger.remember(said(who, text, n, session)).item_id for n, (who, text) in enumerate(chat)
    ]


def test_a_named_speaker_is_matched_as_the_speaker_not_as_a_word(alice: MemoryLedger) -> None:
    ids = _write(alice, CHAT)
    query = "How was pottery for Caroline?"
    found = [i.item_id for i in alice.context(query).items]
    # Melanie's reply says "Caroline" twice and "pottery": as words it outranks
    # Caroline's own turn; with the speaker named, Caroline's turn comes first.
    assert found[0] == ids[0]
    keyword = [i.item_id for i in alice.context(query, rank="keyword").items]
    assert keyword.index(ids[0]) > keyword.index(ids[1]), "the keyword half alone is unchanged"


def test_an_answer_shares_the_relevance_of_its_question(alice: MemoryLedger) -> None:
    ids = _write(alice, CHAT)
    found = [i.item_id for i in alice.context("what pet did Melanie get", limit=3).items]
    # The answer shares no word with the query; its question, said just before, does.
    assert ids[4] in found[:2]
    assert ids[4] not in [i.item_id for i in alice.context("what pet", rank="keyword").items]


def test_neighbours_are_turns_of_the_same_session_and_skip_what_is_gone(
    alice: MemoryLedger,
) -> None:
    ids = _write(alice, CHAT)
    other = _write(alice, [("Melanie", "Oscar the guinea pig is a pet at last")], session="s2")
    alice.forget(ids[3])  # the question: the answer is left without it
    found = [i.item_id for i in alice.context("Did you get a pet in the end?", limit=10).items]
    assert ids[3] not in found
    assert other[0] in found
    ranked = alice.context("Did you get a pet in the end?", limit=10).items
    # the answer's only relevance came from its neighbour's words, now erased: what it
    # has is its own similarity (the hashing embedder here), below the other session's
    scores = {i.item_id: i.score for i in ranked}
    assert scores.get(ids[4], 0.0) < scores[other[0]]


def test_a_name_alone_is_still_searched(alice: MemoryLedger) -> None:
    ids = _write(alice, CHAT)
    found = [i.item_id for i in alice.context("Oscar").items]
    assert found[0] == ids[4]
    # a query that is only a speaker's name keeps the name as its words
    assert alice.context("Caroline").items


def test_the_halves_answer_alone(alice: MemoryLedger) -> None:
    ids = _write(alice, CHAT)
    assert alice.context("guinea pig Oscar", rank="keyword").items[0].item_id == ids[4]
    vector = alice.context("guinea pig Oscar", rank="vector")
    assert vector.items and vector.embedder != "none"
