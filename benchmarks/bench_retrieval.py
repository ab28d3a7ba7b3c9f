"""Retrieval: quality (recall@5), embedding throughput, recall latency at scale, index
rebuild and erasure cost.

Run from the repository root:

    python -m benchmarks.bench_retrieval              # default sizes, SQLite
    python -m benchmarks.bench_retrieval --quick      # smoke run, well under a minute
    python -m benchmarks.bench_retrieval --backends sqlite,postgresql

Quality uses the hand-written bilingual set (benchmarks/data/retrieval_set.json: 331
memories of 8 users, 89 queries): each query runs in its user's namespace through
`MemoryLedger.context()`, and recall@5 is the share of the query's relevant memories in
the first five items. Rankers: the default embedder alone (vector), the hashing embedder
alone, BM25 alone (keyword), and the product's default (hybrid: default embedder and
BM25 fused by reciprocal rank).

Scale stores replicate the set's users (their memories, under new namespaces) until
they hold 10,000 and 100,000 items, so every namespace looks like a real user's. A recall
is timed end to end with the cache cleared, and the query's own embedding is timed
inside it and reported apart (the goal excludes it). Baselines in the same run: the two
index lookups alone (the floor under filtering, ranking and labelling), and a naive
exact search over every vector of the store followed by a namespace filter (what an
index without per-namespace rows would cost).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import (
    Store,
    _met,
    add_common_options,
    fresh_store,
    machine_info,
    parse_common,
)
from benchmarks.retrieval_set import RetrievalSet, SetQuery, load_set, recall_at_k, to_write
from memory_ledger.api import MemoryService
from memory_ledger.crypto import MasterKey
from memory_ledger.embedders import Embedder, HashingEmbedder, UniversalSentenceEncoder
from memory_ledger.principal import Principal
from memory_ledger.projections.keyword_index import search as keyword_search

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "retrieval.json"
GOAL_MS = 15.0  # recall p50 at GOAL_ITEMS on SQLite, excluding the query's embedding
GOAL_ITEMS = 100_000
K = 5


def open_service(store: Store, embedder: Embedder) -> MemoryService:
    return MemoryService(store.settings, master=MasterKey.generate("benchmark"), embedder=embedder)


def fill(service: MemoryService, data: RetrievalSet, items: int) -> dict[str, str]:
    """Copies of the set's users until the store holds `items` memories; returns each
    copy's namespace -> the set user it copies."""
    by_user: dict[str, list[Any]] = {}
    for memory in data.memories:
        by_user.setdefault(memory.user, []).append(memory)
    copies: dict[str, str] = {}
    written, copy = 0, 0
    users = sorted(by_user)
    while written < items:
        user = users[copy % len(users)]
        namespace = f"{user}-c{copy:05d}" if copy >= len(users) else user
        writes = [to_write(m, data.base_date) for m in by_user[user]][: items - written]
        ledger = service.for_principal(Principal.from_namespace(namespace))
        ledger.remember_many(writes)
        copies[namespace] = user
        written += len(writes)
        copy += 1
    return copies


def keys_of(context: Any) -> list[str]:
    return [str(item.provenance.get("turn_id")) for item in context.items]


# -- quality ------------------------------------------------------------------------------


def quality(data: RetrievalSet, console: Console) -> dict[str, Any]:
    runs = {
        "vector (default embedder)": (UniversalSentenceEncoder(), "vector"),
        "vector (hashing embedder)": (HashingEmbedder(), "vector"),
        "keyword (BM25)": (HashingEmbedder(), "keyword"),
        "hybrid (default embedder + BM25)": (UniversalSentenceEncoder(), "hybrid"),
    }
    out: dict[str, Any] = {}
    for name, (embedder, rank) in runs.items():
        with fresh_store("sqlite", "") as store:
            service = open_service(store, embedder)
            try:
                fill(service, data, len(data.memories))
                scores: dict[str, list[float]] = {}
                for query in data.queries:
                    ledger = service.for_principal(Principal.from_namespace(query.user))
                    found = keys_of(ledger.context(query.text, rank=rank, limit=K))
                    score = recall_at_k(found, query.relevant, K)
                    scores.setdefault(query.type, []).append(score)
                    scores.setdefault("all", []).append(score)
                    scores.setdefault(f"lang:{query.lang}", []).append(score)
            finally:
                service.close()
        out[name] = {k: round(statistics.fmean(v), 3) for k, v in sorted(scores.items())}
        out[name]["queries"] = len(data.queries)
        console.log(f"quality {name}: recall@{K} {out[name]['all']:.3f}")
    return out


# -- embedding throughput -----------------------------------------------------------------


def embedding_throughput(data: RetrievalSet, quick: bool) -> dict[str, Any]:
    texts = [m.value or m.content or "" for m in data.memories]
    texts = (texts * 2)[: 128 if quick else 512]
    out: dict[str, Any] = {}
    for embedder in (UniversalSentenceEncoder(), HashingEmbedder()):
        embedder.embed(texts[:8])  # the default model loads on first use
        start = time.perf_counter()
        for batch in range(0, len(texts), 64):
            embedder.embed(texts[batch : batch + 64])
        seconds = time.perf_counter() - start
        single = []
        for text in texts[:50]:
            t = time.perf_counter()
            embedder.embed([text])
            single.append(time.perf_counter() - t)
        out[embedder.name] = {
            "texts_per_s_batch_64": round(len(texts) / seconds, 1),
            "single_text_ms_p50": round(statistics.median(single) * 1e3, 2),
        }
    return out


# -- latency at scale ---------------------------------------------------------------------


class QueryTimer:
    """Times `embed_query` inside each recall, so it can be reported apart."""

    def __init__(self, service: MemoryService) -> None:
        self.seconds = 0.0
        self.embed = service.vectors.embed_query

        def timed(text: str) -> np.ndarray:
            start = time.perf_counter()
            try:
                return self.embed(text)
            finally:
                self.seconds += time.perf_counter() - start

        service.vectors.embed_query = timed  # type: ignore[method-assign]


def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3

    return {"p50": round(at(0.5), 2), "p99": round(at(0.99), 2), "n": len(ordered)}


def latency(
    service: MemoryService,
    data: RetrievalSet,
    copies: dict[str, str],
    rng: random.Random,
    rounds: int,
) -> dict[str, Any]:
    queries_of: dict[str, list[SetQuery]] = {}
    for query in data.queries:
        queries_of.setdefault(query.user, []).append(query)
    namespaces = sorted(copies)
    timer = QueryTimer(service)
    total, embed, vector_only, keyword_only, naive = [], [], [], [], []
    matrix, owners = _all_vectors(service)
    for _ in range(rounds):
        namespace = rng.choice(namespaces)
        query = rng.choice(queries_of[copies[namespace]])
        ledger = service.for_principal(Principal.from_namespace(namespace))
        service.context_cache.clear()
        timer.seconds = 0.0
        start = time.perf_counter()
        ledger.context(query.text)
        total.append(time.perf_counter() - start)
        embed.append(timer.seconds)
        vector = timer.embed(query.text)
        start = time.perf_counter()
        service.vectors.search(namespace, vector, 50)
        vector_only.append(time.perf_counter() - start)
        with service.engine.connect() as conn:
            start = time.perf_counter()
            keyword_search(conn, service.log, namespace, query.text, 50)
            keyword_only.append(time.perf_counter() - start)
        start = time.perf_counter()
        scores = matrix @ vector
        head = np.argpartition(-scores, min(500, len(scores) - 1))[:500]
        top = head[np.argsort(-scores[head])]
        _ = [i for i in top if owners[i] == namespace][:50]
        naive.append(time.perf_counter() - start)
    return {
        "recall_total": percentiles(total),
        "query_embedding": percentiles(embed),
        "recall_excluding_embedding": percentiles(
            [t - e for t, e in zip(total, embed, strict=True)]
        ),
        "baseline_vector_search_alone": percentiles(vector_only),
        "baseline_keyword_search_alone": percentiles(keyword_only),
        "baseline_naive_full_matrix": percentiles(naive),
    }


def _all_vectors(service: MemoryService) -> tuple[np.ndarray, list[str]]:
    rows = service.vectors.snapshot()
    matrix = np.stack([r.vector for r in rows]).astype(np.float32) if rows else np.zeros((0, 1))
    return matrix, [r.namespace for r in rows]


def erasure_cost(service: MemoryService, rng: random.Random, count: int) -> dict[str, Any]:
    rows = service.vectors.snapshot()
    chosen = rng.sample([r.item_id for r in rows], min(count, len(rows)))
    vector, keyword = [], []
    keyword_store = service.stores.get("keyword_index")
    for item_id in chosen:
        start = time.perf_counter()
        receipt = service.stores.get("vector_index").erase([item_id])
        vector.append(time.perf_counter() - start)
        assert receipt.status == "ok", receipt
        start = time.perf_counter()
        keyword_store.erase([item_id])
        keyword.append(time.perf_counter() - start)
    return {"vector_index_erase": percentiles(vector), "keyword_index_erase": percentiles(keyword)}


def scale(
    backend: str, pg_url: str, size: int, data: RetrievalSet, rounds: int, console: Console
) -> dict[str, Any]:
    rng = random.Random(size)
    with fresh_store(backend, pg_url) as store:
        service = open_service(store, UniversalSentenceEncoder())
        try:
            start = time.perf_counter()
            copies = fill(service, data, size)
            filled = time.perf_counter() - start
            start = time.perf_counter()
            service.runner.catch_up()
            projections = time.perf_counter() - start
            start = time.perf_counter()
            embedded = service.vectors.catch_up()
            index_build = time.perf_counter() - start
            console.log(
                f"{backend} {size:,}: filled in {filled:.1f} s, projections {projections:.1f} s,"
                f" vector index built from the log in {index_build:.1f} s ({embedded:,} rows)"
            )
            result: dict[str, Any] = {
                "items": size,
                "namespaces": len(copies),
                "fill_seconds": round(filled, 1),
                "projection_catch_up_seconds": round(projections, 1),
                "vector_index_build_seconds": round(index_build, 1),
                "vector_rows": embedded,
            }
            start = time.perf_counter()
            service.runner.rebuild(["keyword_index"])
            result["keyword_index_rebuild_seconds"] = round(time.perf_counter() - start, 2)
            result["latency_ms"] = latency(service, data, copies, rng, rounds)
            result["erasure_ms"] = erasure_cost(service, rng, 20)
            lat = result["latency_ms"]["recall_excluding_embedding"]
            console.log(f"{backend} {size:,}: recall p50 {lat['p50']} ms excl. embedding")
            return result
        finally:
            service.close()


# -- output -------------------------------------------------------------------------------


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title=f"retrieval quality: recall@{K} on the bilingual set")
    types = ["all", "same_lang_paraphrase", "cross_lingual", "identifier", "keyword_overlap"]
    table.add_column("ranker")
    for name in types:
        table.add_column(name, justify="right")
    for ranker, scores in results["quality"].items():
        table.add_row(ranker, *(f"{scores.get(t, 0):.2f}" for t in types))
    console.print(table)
    table = Table(title="embedding throughput")
    for column in ("embedder", "texts/s (batches of 64)", "one text p50 (ms)"):
        table.add_column(column)
    for name, r in results["embedding"].items():
        table.add_row(name, f"{r['texts_per_s_batch_64']:,}", f"{r['single_text_ms_p50']}")
    console.print(table)
    table = Table(title="recall latency (ms): p50 / p99")
    for column in (
        "backend",
        "items",
        "recall",
        "excl. query embedding",
        "query embedding",
        "vector search alone",
        "keyword search alone",
        "naive full matrix",
        "goal",
    ):
        table.add_column(column, justify="right")
    costs = Table(title="index costs")
    for column in (
        "backend",
        "items",
        "vector index build (s)",
        "keyword rebuild (s)",
        "vector erase p50 (ms)",
        "keyword erase p50 (ms)",
    ):
        costs.add_column(column, justify="right")
    for backend, sizes in results["scale"].items():
        for r in sizes:
            lat, er = r["latency_ms"], r["erasure_ms"]
            goal = ""
            if backend == "sqlite" and r["items"] == GOAL_ITEMS:
                goal = _met(lat["recall_excluding_embedding"]["p50"] < GOAL_MS)
            table.add_row(
                backend,
                f"{r['items']:,}",
                *(
                    f"{lat[k]['p50']} / {lat[k]['p99']}"
                    for k in (
                        "recall_total",
                        "recall_excluding_embedding",
                        "query_embedding",
                        "baseline_vector_search_alone",
                        "baseline_keyword_search_alone",
                        "baseline_naive_full_matrix",
                    )
                ),
                goal,
            )
            costs.add_row(
                backend,
                f"{r['items']:,}",
                str(r["vector_index_build_seconds"]),
                str(r["keyword_index_rebuild_seconds"]),
                str(er["vector_index_erase"]["p50"]),
                str(er["keyword_index_erase"]["p50"]),
            )
    console.print(table)
    console.print(costs)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_retrieval",
        description="Retrieval quality, embedding throughput, recall latency, index costs.",
    )
    add_common_options(parser)
    parser.set_defaults(backends="sqlite")
    parser.add_argument("--sizes", default=None, help="store sizes (default 10000,100000)")
    parser.add_argument("--rounds", type=int, default=None, help="recalls timed per store")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    return parse_common(parser, argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    sizes = [int(s) for s in (args.sizes or ("2000" if args.quick else "10000,100000")).split(",")]
    rounds = args.rounds or (30 if args.quick else 300)
    data = load_set()
    started = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "retrieval",
        "machine": machine_info(args.backends, args.pg_url),
        "quality": quality(data, console),
        "embedding": embedding_throughput(data, args.quick),
        "scale": {
            backend: [scale(backend, args.pg_url, n, data, rounds, console) for n in sizes]
            for backend in args.backends
        },
    }
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    render(results, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    console.print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
