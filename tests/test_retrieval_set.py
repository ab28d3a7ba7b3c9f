"""The bilingual retrieval set: its rules hold, its records are valid writes, and recall@k
means what its docstring says.

An evaluation reports recall against this set without looking at it again, so these
tests also make the validator refuse broken edits: a validator that accepts anything
would let a wrong relevance judgement turn into a wrong benchmark figure.
"""

from __future__ import annotations

import copy
import json
import textwrap
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from benchmarks import retrieval_set as rs
from memory_ledger.api import MemoryService
from memory_ledger.principal import Principal
from memory_ledger.write_policy import MAX_VALUE_BYTES

Data = dict[str, Any]


@pytest.fixture(scope="module")
def raw() -> Data:
    return json.loads(rs.DATA_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def the_set() -> rs.RetrievalSet:
    return rs.load_set()


# -- the file as committed ----------------------------------------------------------------


def test_file_is_in_canonical_form(the_set: rs.RetrievalSet) -> None:
    """Pretty-printed UTF-8 with the models' key order, so a review diff shows content."""
    text = rs.DATA_PATH.read_text(encoding="utf-8")
    assert text == rs.dump_set(the_set)
    assert "\\u" not in text  # Chinese stays readable in the file


def test_brief_minimums_hold(the_set: rs.RetrievalSet) -> None:
    """Recomputed here without the validator, so a loosened validator is caught too."""
    users = [u.user for u in the_set.users]
    per_user = Counter(m.user for m in the_set.memories)
    assert 6 <= len(users) <= 10
    assert set(per_user) == set(users)
    assert all(30 <= n <= 60 for n in per_user.values()), per_user
    assert len(the_set.memories) >= 320
    assert len(the_set.queries) >= 60

    kinds = Counter(m.kind for m in the_set.memories)
    total = len(the_set.memories)
    assert 0.4 <= kinds["fact"] / total <= 0.6
    assert 0.1 <= kinds["preference"] / total <= 0.3
    assert 0.2 <= kinds["turn"] / total <= 0.4

    types = Counter(q.type for q in the_set.queries)
    assert types["cross_lingual"] >= 12
    assert types["identifier"] >= 10
    assert types["same_lang_paraphrase"] >= 15
    assert types["keyword_overlap"] >= 10

    assert {m.lang for m in the_set.memories} == {"zh", "en", "mixed"}
    assert {"zh", "en"} <= {q.lang for q in the_set.queries}
    assert {u.language_profile for u in the_set.users} == {"zh", "en", "mixed"}

    flagged = [m for m in the_set.memories if m.looks_like_instruction]
    assert len(flagged) >= 5
    assert len({m.user for m in flagged}) == len(flagged)  # each in a different user


def test_keys_are_unique_and_answers_belong_to_the_querying_user(
    the_set: rs.RetrievalSet,
) -> None:
    owner = {m.key: m.user for m in the_set.memories}
    assert len(owner) == len(the_set.memories)
    assert len({q.key for q in the_set.queries}) == len(the_set.queries)
    for q in the_set.queries:
        assert q.relevant, q.key
        assert all(owner.get(k) == q.user for k in q.relevant), q.key


def test_cross_lingual_queries_really_cross(the_set: rs.RetrievalSet) -> None:
    for q in the_set.queries:
        if q.type == "cross_lingual":
            answer_langs = {the_set.memory(k).lang for k in q.relevant}
            assert answer_langs == ({"en"} if q.lang == "zh" else {"zh"}), q.key


def test_docstring_composition_matches_the_data(the_set: rs.RetrievalSet) -> None:
    block = textwrap.indent(rs.composition(the_set), "    ", lambda line: bool(line.strip()))
    assert rs.__doc__ is not None
    assert block in rs.__doc__, "paste `python -m benchmarks.retrieval_set` into the docstring"


def test_composition_counts_what_it_says(the_set: rs.RetrievalSet) -> None:
    """Guards the counting code itself, so the docstring check compares real numbers."""
    text = rs.composition(the_set)
    kinds = Counter(m.kind for m in the_set.memories)
    assert f"{len(the_set.memories)} memories of {len(the_set.users)} users" in text
    assert f"fact {kinds['fact']}, preference {kinds['preference']}, turn {kinds['turn']}" in text
    cross = sum(1 for q in the_set.queries if q.type == "cross_lingual")
    assert f"cross_lingual {cross}," in text


# -- writes ---------------------------------------------------------------------------------


def test_to_write_maps_fields_and_builds_provenance(the_set: rs.RetrievalSet) -> None:
    turn = next(m for m in the_set.memories if m.kind == "turn")
    fact = next(m for m in the_set.memories if m.kind == "fact")
    turn_write = rs.to_write(turn, the_set.base_date)
    fact_write = rs.to_write(fact, the_set.base_date)

    assert turn_write["content"] == turn.content
    assert "value" not in turn_write and "predicate" not in turn_write
    assert fact_write["value"] == fact.value and fact_write["predicate"] == fact.predicate
    assert "content" not in fact_write
    assert "namespace" not in turn_write  # the namespace comes from the principal
    provenance = turn_write["provenance"]
    expected_at = the_set.base_date + timedelta(days=turn.written_day)
    assert provenance["written_at"] == expected_at.isoformat()
    assert provenance["turn_id"] == turn.key
    assert provenance["session_id"] == f"{turn.key.split('-')[0]}-d{turn.written_day:03d}"
    assert provenance["writer"] == rs.WRITER


@pytest.mark.parametrize("backend", ["sqlite"])
def test_every_memory_is_stored_and_recalled_as_written(
    service: MemoryService, the_set: rs.RetrievalSet
) -> None:
    """Each user's memories go into that user's namespace through the public API and all
    come back: none refused, none hidden by supersession, none in another namespace."""
    for user in the_set.users:
        ledger = service.for_principal(Principal.from_namespace(user.user))
        own = the_set.memories_of(user.user)
        ledger.remember_many([rs.to_write(m, the_set.base_date) for m in own])

        recalled = ledger.recall(limit=1000)
        by_turn_id = {m.provenance["turn_id"]: m for m in recalled}
        assert len(recalled) == len(own), user.user
        assert set(by_turn_id) == {m.key for m in own}, user.user
        for memory in own:
            got = by_turn_id[memory.key]
            assert (got.kind, got.subject, got.text) == (memory.kind, memory.subject, memory.text)
            assert got.status != "conflict", memory.key


# -- the validator says no -------------------------------------------------------------------


def _first(items: list[Data], **match: Any) -> Data:
    return next(i for i in items if all(i.get(k) == v for k, v in match.items()))


def _dup_memory_key(d: Data) -> None:
    d["memories"][1]["key"] = d["memories"][0]["key"]


def _missing_answer(d: Data) -> None:
    d["queries"][0]["relevant"] = ["u01-m999"]


def _foreign_answer(d: Data) -> None:
    query = d["queries"][0]
    other = next(m for m in d["memories"] if m["user"] != query["user"])
    query["relevant"] = [other["key"]]


def _same_language_cross(d: Data) -> None:
    query = _first(d["queries"], type="cross_lingual")
    query["lang"] = "zh" if query["lang"] == "en" else "en"


def _identifier_not_verbatim(d: Data) -> None:
    _first(d["queries"], type="identifier")["text"] = "XYZ-0000"


def _paraphrase_copies_answer(d: Data) -> None:
    query = _first(d["queries"], type="same_lang_paraphrase")
    answer = _first(d["memories"], key=query["relevant"][0])
    query["text"] = answer.get("value") or answer["content"]


def _keyword_without_overlap(d: Data) -> None:
    _first(d["queries"], type="keyword_overlap")["text"] = "qqqq zzzz"


def _too_few_queries(d: Data) -> None:
    d["queries"] = d["queries"][:59]


def _too_many_answers(d: Data) -> None:
    query = d["queries"][0]
    own = [m["key"] for m in d["memories"] if m["user"] == query["user"]]
    query["relevant"] = own[:4]


def _predicate_with_space(d: Data) -> None:
    _first(d["memories"], kind="fact")["predicate"] = "home address"


def _unknown_sensitivity(d: Data) -> None:
    d["memories"][0]["sensitivity"] = "secret"


def _turn_with_value(d: Data) -> None:
    turn = _first(d["memories"], kind="turn")
    turn["value"] = turn.pop("content")


def _oversized_value(d: Data) -> None:
    _first(d["memories"], kind="fact")["value"] = "x" * (MAX_VALUE_BYTES + 1)


def _superseding_fact(d: Data) -> None:
    first, second = [m for m in d["memories"] if m["kind"] == "fact"][:2]
    second["subject"], second["predicate"] = first["subject"], first["predicate"]


def _no_instruction_flags(d: Data) -> None:
    for memory in d["memories"]:
        memory["looks_like_instruction"] = False


def _profile_drift(d: Data) -> None:
    user = _first(d["users"], language_profile="zh")
    user["language_profile"] = "en"


def _unknown_user(d: Data) -> None:
    d["memories"][0]["user"] = "acme/nobody"


BROKEN: dict[str, tuple[Callable[[Data], None], str]] = {
    "duplicate memory key": (_dup_memory_key, "used 2 times"),
    "answer that does not exist": (_missing_answer, "do not exist"),
    "answer of another user": (_foreign_answer, "belong to another user"),
    "cross_lingual in one language": (_same_language_cross, "cross_lingual needs"),
    "identifier not in the answer": (_identifier_not_verbatim, "verbatim"),
    "paraphrase that copies its answer": (_paraphrase_copies_answer, "paraphrase shares"),
    "keyword query without shared words": (_keyword_without_overlap, "no content word"),
    "too few queries": (_too_few_queries, "59 queries"),
    "four answers": (_too_many_answers, "at most 3"),
    "predicate with a space": (_predicate_with_space, "predicate"),
    "unknown sensitivity": (_unknown_sensitivity, "sensitivity"),
    "turn carrying a value": (_turn_with_value, "a turn has 'content'"),
    "value over the product's size limit": (_oversized_value, "not a valid write"),
    "fact that would supersede another": (_superseding_fact, "share subject"),
    "no instruction-like memories": (_no_instruction_flags, "instruction-like"),
    "language profile that does not match": (_profile_drift, "is 'en' but only"),
    "memory of an unlisted user": (_unknown_user, "unknown user"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_validator_refuses_a_broken_set(raw: Data, name: str) -> None:
    break_it, message = BROKEN[name]
    data = copy.deepcopy(raw)
    break_it(data)
    with pytest.raises(ValidationError, match=message):
        rs.RetrievalSet.model_validate(data)


def test_validator_accepts_the_unbroken_copy(raw: Data) -> None:
    """The refusals above are caused by the edits, not by the copy itself."""
    rs.RetrievalSet.model_validate(copy.deepcopy(raw))


# -- helpers ----------------------------------------------------------------------------------


def test_content_terms_split_words_and_chinese_bigrams() -> None:
    words = {"window", "seat", "far", "forward"}
    assert rs.content_terms("The Window seat, as far forward") == words
    assert rs.content_terms("坐飞机要靠过道") == {"坐飞", "飞机", "机要", "要靠", "靠过", "过道"}
    assert rs.content_terms("是什么") == set()


@pytest.mark.parametrize(
    ("ranked", "relevant", "k", "expected"),
    [
        (["a", "b", "c"], ["a"], 1, 1.0),
        (["b", "a"], ["a"], 1, 0.0),
        (["x", "a", "y", "b"], ["a", "b"], 2, 0.5),
        (["x", "a", "y", "b"], ["a", "b"], 4, 1.0),
        (["a"], ["a", "b"], 5, 0.5),  # a short ranking is not padded
        (["a", "a", "b"], ["a", "b"], 2, 0.5),  # a repeat takes a position, counts once
        (["a", "b"], ["a", "a"], 1, 1.0),  # repeated relevant keys count once
        ([], ["a"], 5, 0.0),
        (["a", "b", "c", "d", "e", "f"], ["f", "c", "z"], 5, 1 / 3),
    ],
)
def test_recall_at_k(ranked: list[str], relevant: list[str], k: int, expected: float) -> None:
    assert rs.recall_at_k(ranked, relevant, k) == pytest.approx(expected)


@pytest.mark.parametrize(("relevant", "k"), [([], 5), (["a"], 0), (["a"], -1)])
def test_recall_at_k_refuses_undefined_cases(relevant: list[str], k: int) -> None:
    with pytest.raises(ValueError):
        rs.recall_at_k(["a"], relevant, k)
