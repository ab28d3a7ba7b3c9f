"""Keyword top-k in one large namespace (issue 37): common words against rare ones, the
bounded search (`projections.keyword_index.ranked`, default `TopK`) against full BM25
scoring of every posting (the search as it was: `TopK` limits nothing can exceed).

Goal: at 100k items in one namespace, keyword search p50 < 20 ms with common-word
queries (the issue measured 151 ms CPU with common words against 14 ms with rare ones).

Run from the repository root:

    python -m benchmarks.bench_keyword_topk                      # SQLite, 10k and 100k
    python -m benchmarks.bench_keyword_topk --quick              # 1,000 and 5,000 items
    python -m benchmarks.bench_keyword_topk --backends sqlite,postgresql --sizes 10000

The namespace's documents are bench_recall_heavy's heavy user's items (the retrieval set's
memories cycled with numbered variations of their wording), written straight into the
keyword index through its projection's own indexing (`_index`), as the catch-up would
index them: no event log, no embedding, so 100k items fill in seconds (on PostgreSQL,
then VACUUM ANALYZE, as autovacuum would). Only the keyword index is measured.

Queries (benchmarks/data/keyword_topk_queries.json): 'common' (the variations' words,
each in about a tenth of the documents), 'rare', 'mixed' (a rare word among common
ones) and the retrieval set's 89 questions ('set'). Every round draws a size and a
query, and runs the bounded search and the full scoring on it in random order (k=50,
what context() asks for), timed wall and CPU (process CPU: on PostgreSQL the server's
work is not in it, so read the wall figures there). Each answer is compared with the
full scoring's: an exact one must be equal (counted), a 'window' one (common words
only, not proven) reports how many of the full top 50 it holds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import (
    add_common_options,
    fresh_store,
    machine_info,
    parse_common,
)
from benchmarks.bench_forget import source_state
from benchmarks.bench_recall_heavy import HEAVY, heavy_writes, percentiles
from benchmarks.retrieval_set import RetrievalSet, load_set
from memory_ledger.api import MemoryService
from memory_ledger.crypto import MasterKey
from memory_ledger.projections.keyword_index import (
    SETTLE_CHUNK,
    KeywordIndexProjection,
    LiveText,
    TermHasher,
    TopK,
    hasher_of,
    ranked,
    tokenize,
)

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "keyword_topk.json"
QUERIES = Path(__file__).resolve().parent / "data" / "keyword_topk_queries.json"
DEFAULT_SIZES = (10_000, 100_000)
QUICK_SIZES = (1_000, 5_000)
GROUPS = ("common", "rare", "mixed", "set")
K = 50
GOAL_MS = 20.0  # at 100k, common words, p50
#: The search as it was: every posting of the query's terms scored.
EVERY_POSTING = TopK(full_postings=sys.maxsize, essential_postings=0, window_postings=0)


def load_queries(data: RetrievalSet) -> dict[str, list[str]]:
    raw = json.loads(QUERIES.read_text(encoding="utf-8"))
    missing = [g for g in GROUPS[:-1] if not raw.get(g)]
    if missing:
        raise ValueError(f"{QUERIES}: no queries for group(s) {', '.join(missing)}")
    return {**{g: list(raw[g]) for g in GROUPS[:-1]}, "set": [q.text for q in data.queries]}


def fill(service: MemoryService, data: RetrievalSet, size: int) -> tuple[TermHasher, float]:
    """The heavy namespace's `size` items, indexed as the catch-up indexes them (a fact
    or preference as "<predicate>: <value>", a turn by its content)."""
    start = time.perf_counter()
    hasher = hasher_of(service.log, HEAVY, create=True)
    assert hasher is not None
    projection = KeywordIndexProjection(service.log)
    live: dict[str, LiveText] = {}
    for n, write in enumerate(heavy_writes(data, size)):
        if write["kind"] == "turn":
            text = str(write["content"])
        else:
            text = f"{str(write['predicate']).replace('_', ' ')}: {write['value']}"
        live[f"heavy-{n:07d}"] = LiveText(HEAVY, text)
    items = sorted(live.items())
    with service.engine.begin() as conn:
        for at in range(0, len(items), SETTLE_CHUNK):
            projection._index(conn, dict(items[at : at + SETTLE_CHUNK]), {HEAVY: hasher})
    if service.engine.dialect.name == "postgresql":
        # The steady state autovacuum reaches after such a load: planner statistics, and
        # a visibility map that lets the counts be index-only scans.
        with service.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in ("keyword_postings", "keyword_docs", "keyword_namespaces"):
                conn.exec_driver_sql(f"VACUUM ANALYZE {table}")
    return hasher, time.perf_counter() - start


class Subject:
    """One store of one size, and what its rounds measured."""

    def __init__(self, size: int, service: MemoryService, hasher: TermHasher) -> None:
        self.size, self.service, self.hasher = size, service, hasher
        self.reset()

    def reset(self) -> None:
        """Forget what was measured (after the warm-up)."""
        self.timings: dict[tuple[str, str], list[tuple[float, float]]] = {}
        self.paths: dict[str, dict[str, int]] = {}
        self.unequal: dict[str, int] = {}
        self.overlap: dict[str, list[int]] = {}
        #: A window answer's summed scores over the full top k's: how much worse it is.
        self.share: dict[str, list[float]] = {}

    def run(self, group: str, query: str, rng: random.Random) -> None:
        words = sorted(set(tokenize(query)))
        answers: dict[str, Any] = {}
        order = ["bounded", "full"]
        rng.shuffle(order)
        with self.service.engine.connect() as conn:
            for which in order:
                limits = TopK() if which == "bounded" else EVERY_POSTING
                wall, cpu = time.perf_counter(), time.process_time()
                answers[which] = ranked(conn, self.hasher, HEAVY, words, K, None, limits)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                self.timings.setdefault((group, which), []).append((wall, cpu))
        bounded, full = answers["bounded"], answers["full"]
        paths = self.paths.setdefault(group, {})
        paths[bounded.how] = paths.get(bounded.how, 0) + 1
        mine, theirs = [i for i, _ in bounded.rows], [i for i, _ in full.rows]
        if bounded.exact:
            self.unequal[group] = self.unequal.get(group, 0) + (mine != theirs)
        else:
            self.overlap.setdefault(group, []).append(len(set(mine) & set(theirs)))
            best = sum(v for _, v in full.rows)
            share = sum(v for _, v in bounded.rows) / best if best else 1.0
            self.share.setdefault(group, []).append(share)

    def take(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for group in GROUPS:
            entry: dict[str, Any] = {"paths": self.paths.get(group, {})}
            for which in ("bounded", "full"):
                rows = self.timings.get((group, which), [])
                entry[which] = {
                    "rounds": len(rows),
                    "wall_ms": percentiles([w for w, _ in rows]),  # seconds in, ms out
                    "cpu_ms": percentiles([c for _, c in rows]),
                }
            entry["exact_but_unequal"] = self.unequal.get(group, 0)
            overlaps = self.overlap.get(group, [])
            entry["window_overlap_of_full_top_k"] = {
                "answers": len(overlaps),
                "mean": round(sum(overlaps) / len(overlaps), 1) if overlaps else None,
                "k": K,
            }
            shares = self.share.get(group, [])
            entry["window_score_share_of_full"] = (
                round(sum(shares) / len(shares), 3) if shares else None
            )
            out[group] = entry
        return out


def run_backend(
    backend: str, args: argparse.Namespace, data: RetrievalSet, console: Console
) -> dict[str, Any]:
    queries = load_queries(data)
    rng = random.Random(37)
    with contextlib.ExitStack() as stack:
        subjects: list[Subject] = []
        fills: dict[int, float] = {}
        for size in args.sizes:
            store = stack.enter_context(fresh_store(backend, args.pg_url))
            service = stack.enter_context(
                MemoryService(store.settings, master=MasterKey.generate("benchmark"))
            )
            console.log(f"{backend} {size:,}: indexing ...")
            hasher, seconds = fill(service, data, size)
            fills[size] = round(seconds, 1)
            subjects.append(Subject(size, service, hasher))
        for subject in subjects:  # warm: each query once, untimed
            for group in GROUPS:
                for query in queries[group]:
                    subject.run(group, query, rng)
            subject.reset()
        schedule = [(s, g) for s in subjects for g in GROUPS for _ in range(args.rounds)]
        rng.shuffle(schedule)
        console.log(f"{backend}: {len(schedule)} interleaved rounds ...")
        for subject, group in schedule:
            subject.run(group, rng.choice(queries[group]), rng)
        return {
            "fill_seconds": fills,
            "sizes": {str(s.size): s.take() for s in subjects},
        }


def render(results: dict[str, Any], console: Console) -> None:
    for backend, res in results["backends"].items():
        table = Table(
            title=f"{backend}: keyword search p50, ms, wall / CPU (k={K}); "
            "full = every posting scored (the search before issue 37), same run"
        )
        for column in ("size", "queries", "bounded", "full", "speed-up (wall)", "paths", "check"):
            table.add_column(column, justify="right" if column != "paths" else "left")
        for size, groups in res["sizes"].items():
            for group, entry in groups.items():
                b, f = entry["bounded"], entry["full"]
                speed = f["wall_ms"]["p50"] / b["wall_ms"]["p50"] if b["wall_ms"]["p50"] else 0.0
                overlap = entry["window_overlap_of_full_top_k"]
                check = f"unequal {entry['exact_but_unequal']}"
                if overlap["answers"]:
                    share = entry["window_score_share_of_full"]
                    ids = f"{overlap['mean']}/{K}"
                    check += f", window: {ids} of full's ids, {share:.1%} of its score"
                table.add_row(
                    f"{int(size):,}",
                    group,
                    f"{b['wall_ms']['p50']:.1f} / {b['cpu_ms']['p50']:.1f}",
                    f"{f['wall_ms']['p50']:.1f} / {f['cpu_ms']['p50']:.1f}",
                    f"{speed:.1f}x",
                    ", ".join(f"{k} {v}" for k, v in sorted(entry["paths"].items())),
                    check,
                )
        console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_keyword_topk",
        description="Keyword top-k: bounded search vs full BM25 scoring, one large namespace.",
    )
    add_common_options(parser)
    parser.set_defaults(backends="sqlite")
    parser.add_argument("--sizes", help="comma-separated namespace sizes (default 10000,100000)")
    parser.add_argument("--rounds", type=int, default=100, help="rounds per size and group")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    sizes = args.sizes.split(",") if args.sizes else (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    args.sizes = [int(s) for s in sizes]
    if any(s <= 0 for s in args.sizes) or args.rounds <= 0:
        parser.error("sizes and --rounds must be positive")
    if args.quick:
        args.rounds = min(args.rounds, 20)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 200))
    data = load_set()
    started = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "keyword_topk",
        "machine": machine_info(args.backends, args.pg_url),
        "source": source_state(),
        "namespace": HEAVY,
        "k": K,
        "limits": TopK()._asdict(),
        "goal": f"p50 < {GOAL_MS} ms with common words at 100k",
        "backends": {b: run_backend(b, args, data, console) for b in args.backends},
    }
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    render(results, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    console.print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
