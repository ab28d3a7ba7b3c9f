"""Recall latency for ONE heavy user: `MemoryLedger.context()` in a single namespace
holding 1,000, 10,000 and 100,000 items (issue 11's goals: p50 excluding the query's
embedding < 3 ms at 1k, < 5 ms at 10k, < 15 ms at 100k, on SQLite).

Run from the repository root:

    python -m benchmarks.bench_recall_heavy                # SQLite, 1k, 10k and 100k
    python -m benchmarks.bench_recall_heavy --quick        # 200 and 1,000 items, a smoke run
    python -m benchmarks.bench_recall_heavy --backends sqlite,postgresql --sizes 1000,10000

`bench_retrieval` replicates many small users (about 41 items per namespace), so its
recall cost stays flat however large the store grows. Here one namespace, `acme/heavy`,
holds N items, and the set's 8 users (331 items) sit beside it in namespaces of their own.

The heavy user's items are the bilingual set's memories (benchmarks/data/retrieval_set.json,
all 8 users' memories, so the facts/preferences/turns mix stays the set's: about 51/20/29 %),
cycled: copy 0 is the memory as written, copy c > 0 the same memory with a numbered
variation of its wording in its own language (a prefix or suffix naming a session, a week,
a mention count) and a later write time. Facts and preferences get a numbered predicate
when their (subject, predicate) is already taken in the namespace, so no fact supersedes
another and every one of the N items stays live (the run checks this). Writes go in
`remember_many` batches of FILL_BATCH; then the projections and the vector index catch up.

Embedder: the product's default (`load_embedder()`: USE multilingual v3, 512 dimensions)
both to fill the vector index and to embed the queries, so the vector search works on the
vectors the product would hold. Filling is bounded by its embedding (a few hundred to
about 2,000 texts/s on 2 vCPUs), which is paid once per store, untimed. `--embedder
hashing` fills and recalls with the hashing embedder instead (256 dimensions; faster
fills, smaller vectors); the output says which one ran.

Every store stays open for the whole run, and recalls are interleaved across sizes (one
schedule mixing every size's rounds evenly), so a load spike from another process hits
every size alike. `--runs` (default 2) repeats the whole interleaved pass; each run is
reported on its own. A recall is one of the set's 89 queries (random, seeded), timed end
to end through `context(query)` with the context cache cleared first; the query's own
embedding is timed inside it and reported apart (the goal excludes it), as in
bench_retrieval. Baseline in the same round: the two index lookups alone in that
namespace, the vector search (k=50, no allowed-set filter) and the keyword search (k=50),
on the query's vector computed outside the timing; and the keyword search as it was
before issue 37, every posting scored. `--queries common` recalls with
benchmarks/data/keyword_topk_queries.json's common-word queries instead of the set's.

One extra recall at the largest size runs under cProfile (not part of the timed figures):
its top functions by cumulative and by own time show where the time goes.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import random
import sys
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import (
    Store,
    add_common_options,
    fresh_store,
    machine_info,
    parse_common,
    profile_rows,
)
from benchmarks.bench_forget import source_state
from benchmarks.bench_retrieval import QueryTimer
from benchmarks.retrieval_set import RetrievalSet, SetMemory, load_set, to_write
from memory_ledger.api import MemoryService
from memory_ledger.crypto import MasterKey
from memory_ledger.embedders import load_embedder
from memory_ledger.principal import Principal
from memory_ledger.projections.keyword_index import TopK, hasher_of, ranked, tokenize
from memory_ledger.projections.keyword_index import search as keyword_search
from memory_ledger.retrieval.context import ContextRequest, _Filter
from memory_ledger.times import canonical_time

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "recall_heavy.json"
HEAVY = "acme/heavy"
FILL_BATCH = 500  # items per remember_many call
GOALS_MS = {1_000: 3.0, 10_000: 5.0, 100_000: 15.0}  # SQLite p50, excluding embedding
DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (200, 1_000)
K = 50  # what context() asks each index for with the default limit (max(20 * 4, 50))
#: The keyword search before issue 37, every posting scored: timed beside the new one.
EVERY_POSTING = TopK(full_postings=sys.maxsize, essential_postings=0, window_postings=0)
#: `--queries common`: bench_keyword_topk's common-word queries instead of the set's.
COMMON_QUERIES = Path(__file__).resolve().parent / "data" / "keyword_topk_queries.json"

# Numbered variations of a memory's wording, in its language. {c} is the copy number.
EN_VARIATIONS = (
    "{t} (mentioned again in session {c})",
    "As noted in week {c}: {t}",
    "{t}, still true as of check-in {c}",
    "Reminder #{c}: {t}",
    "{t} (repeated on day {c})",
    "Update {c} says the same: {t}",
)
ZH_VARIATIONS = (
    "{t}（第{c}次提到）",
    "第{c}周记录：{t}",
    "{t}，第{c}次确认仍然如此",
    "提醒{c}：{t}",
    "{t}（第{c}天又说了一遍）",
    "更新{c}：{t}",
)


# -- the heavy user's writes --------------------------------------------------------------


def vary(memory: SetMemory, copy: int) -> str:
    text = memory.value or memory.content or ""
    if copy == 0:
        return text
    templates = ZH_VARIATIONS if memory.lang == "zh" else EN_VARIATIONS
    return templates[(copy + hash_of(memory.key)) % len(templates)].format(t=text, c=copy)


def hash_of(key: str) -> int:
    return sum(key.encode())  # stable across processes, unlike hash()


def heavy_writes(data: RetrievalSet, count: int) -> Iterator[dict[str, Any]]:
    """`count` writes for one namespace: the set's memories cycled, varied per copy."""
    memories = sorted(data.memories, key=lambda m: (m.written_day, m.key))
    taken: set[tuple[str, str]] = set()
    for n in range(count):
        copy, memory = divmod(n, len(memories))
        memory = memories[memory]
        # Later copies are written later: spread over about two years before the base date.
        base = data.base_date - timedelta(hours=(copy * 7) % 17_000)
        write = to_write(memory, base)
        write["provenance"]["turn_id"] = f"{memory.key}-c{copy:04d}"
        write["provenance"]["session_id"] = f"heavy-s{copy:04d}-d{memory.written_day:03d}"
        text = vary(memory, copy)
        if memory.kind == "turn":
            write["content"] = text
        else:
            write["value"] = text
            predicate = str(write["predicate"])
            if (write["subject"], predicate) in taken:
                predicate = f"{predicate}_{copy:04d}_{memory.key.rsplit('-', 1)[0]}"
            taken.add((write["subject"], predicate))
            write["predicate"] = predicate
        yield write


def fill(service: MemoryService, data: RetrievalSet, size: int) -> dict[str, Any]:
    start = time.perf_counter()
    heavy = service.for_principal(Principal.from_namespace(HEAVY))
    batch: list[dict[str, Any]] = []
    kinds: dict[str, int] = {}
    for write in heavy_writes(data, size):
        kinds[write["kind"]] = kinds.get(write["kind"], 0) + 1
        batch.append(write)
        if len(batch) == FILL_BATCH:
            heavy.remember_many(batch)
            batch = []
    if batch:
        heavy.remember_many(batch)
    others: dict[str, list[dict[str, Any]]] = {}
    for memory in data.memories:
        others.setdefault(memory.user, []).append(to_write(memory, data.base_date))
    for user, writes in sorted(others.items()):
        service.for_principal(Principal.from_namespace(user)).remember_many(writes)
    appended = time.perf_counter() - start
    start = time.perf_counter()
    service.runner.catch_up()
    projections = time.perf_counter() - start
    start = time.perf_counter()
    vectors = service.vectors.catch_up()
    index = time.perf_counter() - start
    return {
        "heavy_items": size,
        "heavy_kinds": kinds,
        "other_namespaces": len(others),
        "other_items": sum(len(w) for w in others.values()),
        "append_seconds": round(appended, 1),
        "projection_catch_up_seconds": round(projections, 1),
        "vector_index_build_seconds": round(index, 1),
        "vector_rows": vectors,
    }


def live_in_namespace(service: MemoryService, namespace: str) -> int:
    """The namespace's usable items, as context() would filter them: every item of the
    namespace's recall state passed through the context builder's own filter."""
    request = ContextRequest(query="count")
    policy = service.retention
    position = service.log.max_position()
    service.runner.catch_up()
    with service.engine.connect() as conn:
        state = service.context_cache.states.state(conn, service.log, namespace, policy, position)
    usable = _Filter(state, request, canonical_time(datetime.now(UTC)))
    return sum(1 for item_id in state.entries if usable.accept(item_id))


# -- timing -------------------------------------------------------------------------------


def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3

    return {"p50": round(at(0.5), 2), "p95": round(at(0.95), 2), "n": len(ordered)}


class Subject:
    """One open store and its samples."""

    def __init__(self, size: int, service: MemoryService, filled: dict[str, Any]) -> None:
        self.size = size
        self.service = service
        self.filled = filled
        self.ledger = service.for_principal(Principal.from_namespace(HEAVY))
        self.timer = QueryTimer(service)
        self.samples: dict[str, list[float]] = {}

    def recall(self, query: str) -> None:
        service = self.service
        service.context_cache.clear()
        self.timer.seconds = 0.0
        start = time.perf_counter()
        self.ledger.context(query)
        total = time.perf_counter() - start
        embed = self.timer.seconds
        vector = self.timer.embed(query)
        start = time.perf_counter()
        service.vectors.search(HEAVY, vector, K)
        vector_s = time.perf_counter() - start
        with service.engine.connect() as conn:
            start = time.perf_counter()
            keyword_search(conn, service.log, HEAVY, query, K)
            keyword_s = time.perf_counter() - start
            hasher = hasher_of(service.log, HEAVY, create=False)
            assert hasher is not None
            words = sorted(set(tokenize(query)))
            start = time.perf_counter()
            ranked(conn, hasher, HEAVY, words, K, None, EVERY_POSTING)
            full_s = time.perf_counter() - start
        for name, value in (
            ("recall_total", total),
            ("query_embedding", embed),
            ("recall_excluding_embedding", total - embed),
            ("vector_search_alone", vector_s),
            ("keyword_search_alone", keyword_s),
            ("keyword_full_scoring_alone", full_s),
            ("both_lookups", vector_s + keyword_s),
        ):
            self.samples.setdefault(name, []).append(value)

    def take(self) -> dict[str, Any]:
        out = {name: percentiles(values) for name, values in self.samples.items()}
        self.samples = {}
        return out


def schedule(rounds: dict[int, int], rng: random.Random) -> list[int]:
    """Every size's rounds spread evenly over one pass (ties broken at random)."""
    slots = [((i + rng.random()) / n, size) for size, n in rounds.items() for i in range(n)]
    return [size for _, size in sorted(slots)]


def default_rounds(size: int, quick: bool) -> int:
    if quick:
        return 20
    return 200 if size <= 1_000 else 100 if size <= 10_000 else 40


def profile_recall(subject: Subject, query: str, top: int = 25) -> dict[str, Any]:
    """One extra recall under cProfile (not part of the timed figures)."""
    subject.service.context_cache.clear()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    subject.ledger.context(query)
    profiler.disable()
    wall = time.perf_counter() - start
    return {
        "items": subject.size,
        "query": query,
        "wall_seconds_under_profiler": wall,
        **profile_rows(profiler, top),
    }


def run_backend(
    backend: str, args: argparse.Namespace, data: RetrievalSet, console: Console
) -> dict[str, Any]:
    rng = random.Random(11)
    queries = [q.text for q in data.queries]
    if args.queries == "common":
        queries = list(json.loads(COMMON_QUERIES.read_text(encoding="utf-8"))["common"])
    with contextlib.ExitStack() as stack:
        subjects: list[Subject] = []
        for size in args.sizes:
            store: Store = stack.enter_context(fresh_store(backend, args.pg_url))
            embedder = load_embedder(args.embedder)
            service = MemoryService(
                store.settings, master=MasterKey.generate("benchmark"), embedder=embedder
            )
            stack.callback(service.close)
            console.log(f"{backend} {size:,}: filling (embedder {embedder.name}) ...")
            filled = fill(service, data, size)
            filled["live_items_in_heavy_namespace"] = live_in_namespace(service, HEAVY)
            if filled["live_items_in_heavy_namespace"] != size:
                live = filled["live_items_in_heavy_namespace"]
                raise RuntimeError(f"the heavy namespace holds {live} live items, not {size}")
            console.log(
                f"{backend} {size:,}: appended in {filled['append_seconds']} s, projections "
                f"{filled['projection_catch_up_seconds']} s, vector index "
                f"{filled['vector_index_build_seconds']} s ({filled['vector_rows']:,} rows)"
            )
            subject = Subject(size, service, filled)
            for query in queries[:5]:  # warm-up: model loaded, files and pages read once
                subject.recall(query)
            subject.take()
            subjects.append(subject)
        by_size = {s.size: s for s in subjects}
        rounds = {s.size: args.rounds or default_rounds(s.size, args.quick) for s in subjects}
        runs: list[dict[str, Any]] = []
        for run in range(args.runs):
            started = time.perf_counter()
            for size in schedule(rounds, rng):
                by_size[size].recall(rng.choice(queries))
            results = {str(s.size): s.take() for s in subjects}
            seconds = round(time.perf_counter() - started, 1)
            runs.append({"run": run + 1, "seconds": seconds, "sizes": results})
            summary = ", ".join(
                f"{size}: {r['recall_excluding_embedding']['p50']} ms"
                for size, r in results.items()
            )
            console.log(f"{backend} run {run + 1}: p50 excl. embedding {summary}")
        largest = max(subjects, key=lambda s: s.size)
        profile = profile_recall(largest, rng.choice(queries))
        return {
            "embedder": largest.service.vectors.embedder_name,
            "stores": {str(s.size): s.filled for s in subjects},
            "rounds_per_run": {str(k): v for k, v in rounds.items()},
            "runs": runs,
            "profile": profile,
        }


# -- output -------------------------------------------------------------------------------


def goal_mark(backend: str, size: int, p50: float) -> str:
    goal = GOALS_MS.get(size)
    if backend != "sqlite" or goal is None:
        return ""
    return f"< {goal:g} ms: {'met' if p50 < goal else 'NOT met'}"


def render(results: dict[str, Any], console: Console) -> None:
    for backend, res in results["backends"].items():
        table = Table(
            title=f"{backend}: recall in one namespace, ms, p50 / p95 (embedder {res['embedder']})"
        )
        for column in (
            "items",
            "run",
            "n",
            "recall",
            "excl. query embedding",
            "query embedding",
            "vector search alone",
            "keyword search alone",
            "keyword, every posting",
            "both lookups",
            "goal (p50)",
        ):
            table.add_column(column, justify="right")
        for size in res["stores"]:
            for run in res["runs"]:
                r = run["sizes"][size]
                p50 = r["recall_excluding_embedding"]["p50"]
                table.add_row(
                    f"{int(size):,}",
                    str(run["run"]),
                    str(r["recall_total"]["n"]),
                    *(
                        f"{r[k]['p50']} / {r[k]['p95']}"
                        for k in (
                            "recall_total",
                            "recall_excluding_embedding",
                            "query_embedding",
                            "vector_search_alone",
                            "keyword_search_alone",
                            "keyword_full_scoring_alone",
                            "both_lookups",
                        )
                    ),
                    goal_mark(backend, int(size), p50),
                )
        console.print(table)
        prof = res["profile"]
        table = Table(
            title=f"{backend}: one recall at {prof['items']:,} items under cProfile "
            f"({prof['profiled_seconds'] * 1e3:.1f} ms profiled), top by cumulative time"
        )
        for column in ("function", "calls", "cumulative ms", "share", "own ms"):
            table.add_column(column, justify="right" if column != "function" else "left")
        for row in prof["by_cumtime"][:20]:
            table.add_row(
                row["function"],
                str(row["ncalls"]),
                f"{row['cumtime'] * 1e3:.2f}",
                f"{row['cum_share']:.0%}",
                f"{row['tottime'] * 1e3:.2f}",
            )
        console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_recall_heavy",
        description="Recall latency in one namespace holding 1k, 10k and 100k items.",
    )
    add_common_options(parser)
    parser.set_defaults(backends="sqlite")
    parser.add_argument("--sizes", default=None, help="heavy namespace sizes (1000,10000,100000)")
    parser.add_argument("--rounds", type=int, default=None, help="recalls timed per size and run")
    parser.add_argument("--runs", type=int, default=2, help="interleaved passes (default 2)")
    parser.add_argument(
        "--embedder",
        default="use",
        help="embedder spec as MEMORY_LEDGER_EMBEDDER takes it (default: use, the product's)",
    )
    parser.add_argument(
        "--queries",
        choices=("set", "common"),
        default="set",
        help="the set's 89 questions, or bench_keyword_topk's common-word queries",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    sizes = args.sizes.split(",") if args.sizes else (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    args.sizes = [int(s) for s in sizes]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 200))
    data = load_set()
    started = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "recall_heavy",
        "machine": machine_info(args.backends, args.pg_url),
        "source": source_state(),
        "namespace": HEAVY,
        "queries": args.queries,
        "sizes": args.sizes,
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
