"""Forget in one heavy namespace: does a single-item forget cost what it touches?

bench_forget.py spreads its store over many users of 50 items, so a forget's search for
the places that repeat a forgotten value (the mention step) never meets a big
namespace. Real agents have one: a user with a long multi-speaker history. Here ONE
namespace holds N items (1,000, 10,000, 100,000): turns of several speakers (the user,
staff, the agent's own log lines) and some facts. Each timed forget erases one fact
whose value is

- `single`: said nowhere else, or
- `repeated`: a phone number repeated as written, or in another form (`(206) 555-0148`
  for `206-555-0148`), in REPEATS other turns
  of the namespace (each of which the forget must find and redact),

(the `found` column: the fewest of those a forget redacted; anything under REPEATS is a
miss), interleaved, one at a time, with the same run's baseline: the bare cost of erasing one
item below every store (`EventLog.tombstone`: its key destroyed and one event appended,
nothing else). The ratio to that baseline is what the figures are compared on: absolute
times on a shared 2-core machine are noisy.

    python -m benchmarks.bench_forget_namespace                 # 1k, 10k, 100k on SQLite
    python -m benchmarks.bench_forget_namespace --quick         # 1k and 3k, a smoke run
    python -m benchmarks.bench_forget_namespace --sizes 10000 --backends sqlite,postgresql

A forget the service answers `partial` (a store to retry) is counted apart (`partial` in
the JSON, with its failed receipts) and left out of the latency figures.

Writes a table and `benchmarks/results/forget_namespace.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import add_common_options, fresh_store, machine_info, parse_common

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "forget_namespace.json"
REPEATS = 20  # other turns that repeat a repeated value (a realistic number: 2-20)
SPEAKERS = ("user", "staff", "agent")
CASES = ("single", "repeated")
DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 3_000)
DEFAULT_FORGETS = 15  # timed forgets per case and size
QUICK_FORGETS = 4
# After each single forget, the first recall (a ranked context read: the vector and keyword
# indexes catch up on the erasure first) against the next one (nothing to catch up); after
# each repeated one, the first recall too (21 vector rows erased, 20 re-embedded).
RECALL_QUERY = "what did the user say about the phone number and the meeting"
FIRST_RECALL_GOAL_MS = {100_000: 20.0}  # issue 27, first recall after a forget
GOALS_MS = {  # issue 26: single-item forget p50 in one namespace, SQLite
    ("single", 10_000): 25.0,
    ("single", 100_000): 40.0,
    ("repeated", 100_000): 60.0,
}
_PLACES = ("Birch Lodge", "the side gate", "locker B", "room 12", "the east wing", "dock 4")
_TASKS = ("cleaned", "inspected", "booked", "called about", "moved", "checked")


def _filler(rng: random.Random, n: int) -> dict[str, Any]:
    """One turn of the long history: who said what, when."""
    speaker = SPEAKERS[n % len(SPEAKERS)]
    said = {
        "user": f"can you ask someone to look at {rng.choice(_PLACES)} on day {n % 28 + 1}?",
        "staff": f"{rng.choice(_TASKS)} {rng.choice(_PLACES)} at {n % 12 + 1}pm, ticket {n}",
        "agent": f"agent log: {rng.choice(_TASKS)} {rng.choice(_PLACES)}; queue {n % 97}",
    }[speaker]
    return _turn(speaker, said, n)


def _turn(speaker: str, text: str, n: int) -> dict[str, Any]:
    return {
        "kind": "turn",
        "subject": speaker,
        "content": text,
        "origin": "explicit",
        "sensitivity": "personal",
        "provenance": _provenance(n),
    }


def _provenance(n: int) -> dict[str, Any]:
    day, second = divmod(n, 86_400)
    return {
        "writer": "agent.assistant",
        "written_at": f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T"
        f"{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z",
        "turn_id": f"t{n}",
        "session_id": f"s{n // 200}",
    }


def _target(value: str, n: int) -> dict[str, Any]:
    return {
        "kind": "fact",
        "subject": "user",
        "predicate": f"code_{n}",
        "value": value,
        "category": "general",
        "origin": "explicit",
        "sensitivity": "personal",
        "provenance": {**_provenance(n), "turn_id": f"form-{n}"},
    }


def fill(ledger: Any, size: int, forgets: int, rng: random.Random) -> dict[str, list[str]]:
    """The namespace: `size` items in all, the targets among them. Returns the target
    item ids per case (and `baseline`: throwaway items the baseline erases)."""
    values = {
        case: [
            f"{200 + n:03d}-{rng.randrange(200, 999)}-{rng.randrange(10**4):04d}"
            for n in range(forgets)
        ]
        for case in CASES
    }
    writes: list[dict[str, Any]] = []
    n = 0
    for case in CASES:
        for value in values[case]:
            writes.append(_target(value, n))
            n += 1
            if case == "repeated":
                for k in range(REPEATS):
                    area, rest = value.split("-", 1)
                    form = value if k % 2 else f"({area}) {rest}"  # another written form
                    speaker = SPEAKERS[k % len(SPEAKERS)]
                    writes.append(_turn(speaker, f"use {form} at {rng.choice(_PLACES)}", n))
                    n += 1
    writes += [_turn("agent", f"throwaway {k}", n + k) for k in range(forgets * 2)]
    n += forgets * 2
    while len(writes) < size:
        writes.append(_filler(rng, n))
        n += 1
    rng.shuffle(writes)
    ids: list[str] = []
    for start in range(0, len(writes), 500):
        ids += [r.item_id for r in ledger.remember_many(writes[start : start + 500])]
    by_value = {w.get("value"): i for w, i in zip(writes, ids, strict=True) if w["kind"] == "fact"}
    throwaway = [
        i for w, i in zip(writes, ids, strict=True) if w.get("content", "").startswith("throwaway")
    ]
    return {
        **{case: [by_value[v] for v in values[case]] for case in CASES},
        "baseline": throwaway,
    }


def bench(backend: str, pg_url: str, size: int, forgets: int, seed: int) -> dict[str, Any]:
    from memory_ledger.api import MemoryService
    from memory_ledger.crypto import MasterKey
    from memory_ledger.principal import Principal

    principal = Principal("acme", "heavy")
    with fresh_store(backend, pg_url) as store:
        service = MemoryService(store.settings, master=MasterKey.generate("benchmark"))
        try:
            ledger = service.for_principal(principal)
            start = time.perf_counter()
            targets = fill(ledger, size, forgets, random.Random(seed))
            service.runner.catch_up()
            service.vectors.catch_up()
            filled = time.perf_counter() - start
            # The first recall of a process builds the namespace's filter state (every
            # item's clear attributes, once): timed apart, not as a forget's next read.
            began = time.perf_counter()
            ledger.context(RECALL_QUERY, limit=10)
            cold_recall = time.perf_counter() - began
            timed = (*CASES, "baseline", "first_recall", "first_recall_repeated", "next_recall")
            timings: dict[str, list[float]] = {case: [] for case in timed}
            # CPU time (this process) beside wall time: the machine is shared.
            cpu: dict[str, list[float]] = {case: [] for case in timed}
            mentions: list[int] = []
            partial: list[Any] = []  # forgets answered `partial` (retryable): not timed
            for k in range(forgets):  # interleaved: baseline, single, repeated, ...
                for case in ("baseline", *CASES):
                    item = targets[case][k]
                    began, began_cpu = time.perf_counter(), time.process_time()
                    if case == "baseline":
                        service.log.tombstone([item], "benchmark_baseline")
                    else:
                        report = ledger.forget(item)
                        if report.status == "partial":  # counted apart, as bench_forget
                            partial.append(
                                [
                                    (r.store, r.action, r.evidence)
                                    for r in report.receipts
                                    if r.status != "ok"
                                ]
                            )
                            continue
                        if report.status != "completed":
                            raise SystemExit(f"forget answered {report.status}")
                        if case == "repeated":
                            mentions.append(len(report.mentions))
                    timings[case].append(time.perf_counter() - began)
                    cpu[case].append(time.process_time() - began_cpu)
                    # the next read pays the indexes' catch-up
                    reads = {
                        "single": ("first_recall", "next_recall"),
                        "repeated": ("first_recall_repeated",),
                    }
                    for timed_case in reads.get(case, ()):
                        service.context_cache.clear()  # the next one is built, not cached
                        began, began_cpu = time.perf_counter(), time.process_time()
                        ledger.context(RECALL_QUERY, limit=10)
                        timings[timed_case].append(time.perf_counter() - began)
                        cpu[timed_case].append(time.process_time() - began_cpu)
        finally:
            service.close()
    return {
        "backend": backend,
        "size": size,
        "fill_seconds": round(filled, 1),
        "cold_recall_ms": round(cold_recall * 1000, 1),
        "forgets": forgets,
        "mentions_redacted": mentions,
        "partial": partial,
        "ms": {case: _stats(values) for case, values in timings.items()},
        "cpu_ms": {case: _stats(values) for case, values in cpu.items()},
    }


def _stats(seconds: Sequence[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50": round(statistics.median(ms), 2),
        "p90": round(ms[min(len(ms) - 1, int(len(ms) * 0.9))], 2),
        "min": round(ms[0], 2),
    }


def render(runs: list[dict[str, Any]], console: Console) -> None:
    table = Table(title=f"forget in one namespace (p50 ms; a repeated value is in {REPEATS} turns)")
    columns = (
        "backend",
        "items",
        "baseline",
        "single",
        "repeated",
        "x baseline",
        "found",
        "first recall",
        "first recall (repeated)",
        "next recall",
        "CPU single / repeated",
        "goal",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for run in runs:
        p50 = {case: run["ms"][case]["p50"] for case in run["ms"]}
        goals = [
            f"{case} < {GOALS_MS[(case, run['size'])]:.0f}"
            for case in CASES
            if run["backend"] == "sqlite" and (case, run["size"]) in GOALS_MS
        ]
        if run["size"] in FIRST_RECALL_GOAL_MS:
            goals.append(f"first recall < {FIRST_RECALL_GOAL_MS[run['size']]:.0f}")
        table.add_row(
            run["backend"],
            f"{run['size']:,}",
            f"{p50['baseline']:.1f}",
            f"{p50['single']:.1f}",
            f"{p50['repeated']:.1f}",
            f"{p50['single'] / max(p50['baseline'], 1e-6):.1f}x / "
            f"{p50['repeated'] / max(p50['baseline'], 1e-6):.1f}x",
            f"{min(run['mentions_redacted'], default=0)}/{REPEATS}",
            f"{p50['first_recall']:.1f}",
            f"{p50['first_recall_repeated']:.1f}",
            f"{p50['next_recall']:.1f}",
            f"{run['cpu_ms']['single']['p50']:.1f} / {run['cpu_ms']['repeated']['p50']:.1f}",
            ", ".join(goals) or "-",
        )
    console.print(table)
    by = {(r["backend"], r["size"]): r for r in runs}
    for backend in sorted({r["backend"] for r in runs}):
        low, high = by.get((backend, 10_000)), by.get((backend, 100_000))
        if low and high:
            growth = high["ms"]["single"]["p50"] / low["ms"]["single"]["p50"]
            console.print(
                f"{backend}: single-item forget 10k -> 100k grows {growth:.2f}x (goal <= 1.5x)"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_options(parser)
    parser.add_argument("--sizes", help="comma-separated item counts of the one namespace")
    parser.add_argument("--forgets", type=int, help="timed forgets per case and size")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing:512")  # a forget embeds nothing
    sizes = (
        tuple(int(s) for s in args.sizes.split(","))
        if args.sizes
        else QUICK_SIZES
        if args.quick
        else DEFAULT_SIZES
    )
    forgets = args.forgets or (QUICK_FORGETS if args.quick else DEFAULT_FORGETS)
    console = Console()
    runs = []
    for backend in args.backends:
        for size in sizes:
            console.print(f"[dim]{backend}: filling one namespace of {size:,} items...[/]")
            runs.append(bench(backend, args.pg_url, size, forgets, args.seed))
    render(runs, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"machine": machine_info(args.backends, args.pg_url), "runs": runs}
    args.out.write_text(json.dumps(result, indent=2))
    console.print(f"[dim]wrote {args.out}[/]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
