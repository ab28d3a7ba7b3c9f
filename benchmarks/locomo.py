"""LoCoMo: recall on long conversations nobody here wrote (issue 37).

LoCoMo (Maharana et al., 2024; github.com/snap-research/locomo) holds ten long
conversations between two people (about 600 turns over up to 35 sessions each) and
1,986 questions, each with the turns ("D3:7") that hold its evidence. The repository
states no licence, so its data is never committed here: bring it with the search tool's
fetch (`github:snap-research/locomo`, `data/locomo10.zip` unzipped, or
`data/locomo10.json`) and pass its path.

    python -m benchmarks.locomo --data /path/to/locomo10_v2          # a folder of NN.json
    python -m benchmarks.locomo --data /path/to/locomo10.json         # the list form
    python -m benchmarks.locomo --data ... --half dev                  # 26, 30, 41, 42, 43 only

What runs, per conversation: a fresh embedded store (SQLite, temporary), one namespace,
every turn written as a `turn` memory (subject: its speaker; written at its session's
date and time; an image a speaker shared is part of the turn as
"[shares a photo: <caption>]", as an agent receiving an image description would keep
it). Each question of categories 1-4 (single-hop, temporal, multi-hop, open-domain; 5 is
adversarial, with no evidence to find) is asked of, in the same run:

- `context` with the default ranking (`hybrid`), and with `rank="keyword"` and
  `rank="vector"`: the product's two halves, read through the same path;
- BM25 over the same turns (`rank_bm25.BM25Okapi`, lower-cased word tokens): the plain
  keyword baseline (install it with `pip install rank-bm25`);
- exact dense cosine over the same turns with the same embedder (USE multilingual v3):
  what Mem0 with faiss returns here (identical lists, issue 37).

Reported per half (dev: conversations 26, 30, 41, 42, 43, on which ranking may be
tuned; held out: 44, 47, 48, 49, 50, never tuned on) and per category: evidence
recall@5/10/25 (the share of a question's evidence turns in the top k, averaged over
questions), hit@10 (at least one evidence turn in the top 10) and MRR@10. A table on
stdout, JSON in benchmarks/results/locomo.json.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

DEV = ("26", "30", "41", "42", "43")
HELD_OUT = ("44", "47", "48", "49", "50")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 25)
SYSTEMS = ("default", "keyword", "vector", "bm25", "dense")
RESULTS = Path(__file__).parent / "results" / "locomo.json"
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    at: datetime
    session: int


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    sample: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]


# -- loading ---------------------------------------------------------------------------


def load(path: Path) -> list[Conversation]:
    """Every conversation at `path`: a folder of `<id>.json` (the zip's form) or the list
    in `locomo10.json` (each with a `sample_id` such as "conv-26")."""
    if path.is_dir():
        raw = [(f.stem, json.loads(f.read_text())) for f in sorted(path.glob("*.json"))]
    else:
        raw = [
            (str(c["sample_id"]).rpartition("-")[2], c["conversation"] | {"qa": c["qa"]})
            for c in json.loads(path.read_text())
        ]
    if not raw:
        raise SystemExit(f"no LoCoMo conversation found at {path}")
    return [_conversation(sample, data) for sample, data in raw]


def _conversation(sample: str, data: Mapping[str, Any]) -> Conversation:
    turns: list[Turn] = []
    number = 1
    while f"session_{number}" in data:
        at = _session_time(data[f"session_{number}_date_time"])
        for offset, t in enumerate(data[f"session_{number}"]):
            text = str(t["text"])
            if t.get("blip_caption"):
                text = f"{text} [shares a photo: {t['blip_caption']}]"
            # turns of one session a second apart, so their order is kept
            stamp = at.replace(second=0).timestamp() + offset
            when = datetime.fromtimestamp(stamp, UTC)
            turns.append(Turn(str(t["dia_id"]), str(t["speaker"]), text, when, number))
        number += 1
    known = {t.dia_id for t in turns}
    questions = []
    for qa in data["qa"]:
        category = int(qa["category"])
        if category not in CATEGORIES:
            continue
        # a few evidence fields hold several ids in one string ("D8:6; D9:17")
        ids = {e for field in qa.get("evidence", []) for e in re.findall(r"D\d+:\d+", field)}
        evidence = frozenset(ids & known)
        if evidence:
            questions.append(Question(str(qa["question"]), category, evidence))
    return Conversation(sample, (data["speaker_a"], data["speaker_b"]), turns, questions)


def _session_time(text: str) -> datetime:
    """ "1:56 pm on 8 May, 2023" as an aware time (the data names no zone: UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


# -- the systems -----------------------------------------------------------------------


Ranker = Callable[[str, int], list[str]]


def _tokens(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def bm25_ranker(turns: Sequence[Turn]) -> Ranker:
    from rank_bm25 import BM25Okapi

    index = BM25Okapi([_tokens(t.text) for t in turns])

    def rank(query: str, k: int) -> list[str]:
        scores = index.get_scores(_tokens(query))
        order = np.argsort(-scores, kind="stable")[:k]
        return [turns[i].dia_id for i in order]

    return rank


def dense_ranker(turns: Sequence[Turn], embedder: Any) -> Ranker:
    matrix = _unit(np.asarray(embedder.embed([t.text for t in turns]), dtype=np.float32))

    def rank(query: str, k: int) -> list[str]:
        q = _unit(np.asarray(embedder.embed([query]), dtype=np.float32))[0]
        order = np.argsort(-(matrix @ q), kind="stable")[:k]
        return [turns[i].dia_id for i in order]

    return rank


def _unit(m: np.ndarray) -> np.ndarray:
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


class Store:
    """One conversation in a fresh embedded store, one namespace."""

    def __init__(self, conversation: Conversation, root: Path, embedder: Any) -> None:
        from memory_ledger.api import MemoryService
        from memory_ledger.config import Settings
        from memory_ledger.principal import Principal

        settings = Settings.resolve(root / conversation.sample)
        self.service = MemoryService(settings, embedder=embedder)
        self.ledger = self.service.for_principal(Principal("locomo", f"conv-{conversation.sample}"))
        writes = [_write(t) for t in conversation.turns]
        stored = self.ledger.remember_many(writes)
        self.service.runner.catch_up()
        self.service.vectors.catch_up()
        self.dia_of = {s.item_id: t.dia_id for s, t in zip(stored, conversation.turns, strict=True)}
        last = max(t.at for t in conversation.turns)
        self.service.clock = lambda: last  # the conversation's own "now"

    def ranker(self, rank: str) -> Ranker:
        def run(query: str, k: int) -> list[str]:
            context = self.ledger.context(query, limit=k, token_budget=200_000, rank=rank)
            return [self.dia_of[i.item_id] for i in context.items]

        return run

    def close(self) -> None:
        self.service.close()


def _write(turn: Turn) -> dict[str, Any]:
    return {
        "kind": "turn",
        "subject": turn.speaker,
        "content": turn.text,
        "origin": "observed",
        "sensitivity": "personal",
        "provenance": {
            "writer": "locomo",
            "written_at": turn.at.isoformat(),
            "session_id": f"session-{turn.session}",
            "turn_id": turn.dia_id.replace(":", "-"),
        },
    }


# -- measuring -------------------------------------------------------------------------


def scores(ranked: Sequence[str], evidence: frozenset[str]) -> dict[str, float]:
    out = {f"recall@{k}": len(evidence.intersection(ranked[:k])) / len(evidence) for k in KS}
    out["hit@10"] = float(bool(evidence.intersection(ranked[:10])))
    first = next((n for n, d in enumerate(ranked[:10], 1) if d in evidence), None)
    out["mrr@10"] = 0.0 if first is None else 1.0 / first
    return out


def run_conversation(conversation: Conversation, root: Path, embedder: Any) -> list[dict[str, Any]]:
    started = time.perf_counter()
    store = Store(conversation, root, embedder)
    rankers: dict[str, Ranker] = {
        "default": store.ranker("hybrid"),
        "keyword": store.ranker("keyword"),
        "vector": store.ranker("vector"),
        "bm25": bm25_ranker(conversation.turns),
        "dense": dense_ranker(conversation.turns, embedder),
    }
    rows = []
    try:
        for q in conversation.questions:
            row: dict[str, Any] = {"sample": conversation.sample, "category": q.category}
            for name, rank in rankers.items():  # interleaved: every system on each question
                row[name] = scores(rank(q.text, max(KS)), q.evidence)
            rows.append(row)
    finally:
        store.close()
    print(
        f"  conversation {conversation.sample}: {len(conversation.turns)} turns, "
        f"{len(rows)} questions, {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return rows


def summarise(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """{group: {system: {metric: mean}}}, the groups being every category and "all"."""
    groups: dict[str, list[Mapping[str, Any]]] = {"all": []}
    for row in rows:
        groups["all"].append(row)
        groups.setdefault(CATEGORIES[row["category"]], []).append(row)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for group, members in groups.items():
        out[group] = {
            system: {
                metric: round(float(np.mean([m[system][metric] for m in members])), 3)
                for metric in members[0][system]
            }
            | {"questions": len(members)}
            for system in SYSTEMS
        }
    return out


def table(title: str, summary: Mapping[str, Mapping[str, Mapping[str, float]]]) -> str:
    lines = [f"\n{title}", ""]
    metrics = ("recall@5", "recall@10", "recall@25", "hit@10", "mrr@10")
    for group, systems in summary.items():
        questions = int(next(iter(systems.values()))["questions"])
        lines.append(f"{group} ({questions} questions)")
        lines.append(f"  {'system':<9}" + "".join(f"{m:>10}" for m in metrics))
        for system, values in systems.items():
            lines.append(f"  {system:<9}" + "".join(f"{values[m]:>10.3f}" for m in metrics))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="LoCoMo folder or locomo10.json")
    parser.add_argument("--half", choices=("dev", "held-out", "both"), default="both")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from memory_ledger.embedders import load_embedder

    conversations = {c.sample: c for c in load(args.data)}
    halves = {"dev": DEV, "held-out": HELD_OUT}
    wanted = halves if args.half == "both" else {args.half: halves[args.half]}
    embedder = load_embedder()
    report: dict[str, Any] = {"embedder": embedder.name, "halves": {}}
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        for half, samples in wanted.items():
            print(f"{half}: conversations {', '.join(samples)}", flush=True)
            rows = [
                row
                for sample in samples
                if sample in conversations
                for row in run_conversation(conversations[sample], Path(tmp), embedder)
            ]
            if rows:
                report["halves"][half] = summarise(rows)
    for half, summary in report["halves"].items():
        print(table(f"LoCoMo, {half} half", summary))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
