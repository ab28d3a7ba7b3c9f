"""The LoCoMo benchmark's loading and scoring (benchmarks/locomo.py), on a file of
LoCoMo's shape written here (LoCoMo's own data is never committed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import locomo
from memory_ledger.embedders import HashingEmbedder

SAMPLE = Path(__file__).parent / "data" / "locomo_shaped.json"


def test_a_conversation_loads_as_turns_with_speaker_time_and_shared_photos(
    tmp_path: Path,
) -> None:
    (tmp_path / "7.json").write_text(SAMPLE.read_text())
    [conversation] = locomo.load(tmp_path)
    assert conversation.sample == "7" and conversation.speakers == ("Ana", "Ben")
    turns = {t.dia_id: t for t in conversation.turns}
    assert list(turns) == ["D1:1", "D1:2", "D2:1"]  # a session without turns adds none
    assert turns["D1:2"].text == "Look at mine! [shares a photo: a photo of a grey cat on a sofa]"
    assert turns["D1:1"].at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert turns["D1:2"].at > turns["D1:1"].at and turns["D2:1"].session == 2
    # category 5 (no evidence) is left out, as is a question whose evidence is no turn;
    # several ids in one evidence field are each evidence
    assert [(q.category, sorted(q.evidence)) for q in conversation.questions] == [
        (2, ["D1:1"]),
        (1, ["D1:2", "D2:1"]),
    ]


def test_the_list_form_names_conversations_by_their_sample_id(tmp_path: Path) -> None:
    data = json.loads(SAMPLE.read_text())
    qa = data.pop("qa")
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([{"sample_id": "conv-26", "conversation": data, "qa": qa}]))
    assert [c.sample for c in locomo.load(path)] == ["26"]


def test_scores() -> None:
    evidence = frozenset({"a", "b"})
    ranked = ["x"] * 4 + ["a"] + ["y"] * 10 + ["b"]
    s = locomo.scores(ranked, evidence)
    assert s["recall@5"] == 0.5 and s["recall@10"] == 0.5 and s["recall@25"] == 1.0
    assert s["hit@10"] == 1.0 and s["mrr@10"] == pytest.approx(1 / 5)
    assert locomo.scores(["x"] * 25, evidence)["mrr@10"] == 0.0


def test_a_conversation_runs_through_every_system(tmp_path: Path) -> None:
    """The benchmark end to end on the small file: every system answers every question,
    and the product ranks first the turn the first question is about (said by the
    speaker it names: every turn says "cat", and "adopt" is not "adopted")."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "7.json").write_text(SAMPLE.read_text())
    [conversation] = locomo.load(tmp_path / "data")
    rows = locomo.run_conversation(conversation, tmp_path / "stores", HashingEmbedder())
    assert [r["category"] for r in rows] == [2, 1]
    for system in locomo.SYSTEMS:
        assert rows[0][system]["recall@25"] == 1.0  # three turns: all are returned
    assert rows[0]["default"]["mrr@10"] == 1.0
    summary = locomo.summarise(rows)
    assert set(summary) == {"all", "temporal", "multi-hop"}
    assert "temporal (1 questions)" in locomo.table("t", summary)


def test_nothing_at_the_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no LoCoMo conversation"):
        locomo.load(tmp_path)
