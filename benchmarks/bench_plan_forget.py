"""Forget requests in words: how often `plan_forget` reads a request exactly as meant,
and what a plan costs.

Run from the repository root:

    python -m benchmarks.bench_plan_forget              # the default embedder
    python -m benchmarks.bench_plan_forget --embedder hashing --failures

**Accuracy.** The bilingual set in `benchmarks/data/forget_requests/` (fictional
histories, and requests with the one plan each should give; see
`benchmarks/forget_requests.py`). Each history is written into a fresh SQLite store
whose clock is the history's `now`; each request is planned in the history's time zone
and scored: exact-scope rate, wider-than-asked count (goal 0), clarification rate,
false triggers (goal 0), overall, per language and per expected answer.

**Cost.** One heavy user (the history of `--heavy-history` padded with `--heavy` more
facts and turns): `plan_forget` for a few requests, interleaved with the baseline of the
same request already in explicit form (`forget_scope(..., dry_run=True)` on the scope
the plan resolved to), p50/p99 over `--rounds`. A dry run files a ledger entry; a plan
stores a sealed row; neither destroys anything.

Results are printed as tables and written as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.forget_requests import (
    load_cases,
    load_histories,
    parse_time,
    score,
    summarise,
    write_history,
)

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "plan_forget.json"
HEAVY_REQUESTS = [
    "forget my old address",
    "delete my phone number",
    "把我昨天说的都删掉",
    "forget what you concluded about my diet",
]


def _open(data_dir: str, now: datetime) -> Any:
    from memory_ledger.api import open_memory
    from memory_ledger.principal import Principal

    ledger = open_memory(Principal("bench", "user"), data_dir)
    ledger.service.clock = lambda: now
    return ledger


def accuracy(cases: list[dict[str, Any]], histories: dict[str, Any]) -> dict[str, Any]:
    scores, seconds = [], []
    for name, history in histories.items():
        mine = [c for c in cases if c["history"] == name]
        if not mine:
            continue
        now = parse_time(history["now"])
        assert now is not None
        with tempfile.TemporaryDirectory() as data_dir:
            ledger = _open(data_dir, now)
            try:
                ids = write_history(ledger, history)
                for case in mine:
                    started = time.perf_counter()
                    plan = ledger.plan_forget(case["request"], timezone=history.get("timezone"))
                    seconds.append(time.perf_counter() - started)
                    scores.append(score(case, plan.to_dict(), ids))
            finally:
                ledger.close()
    return {
        "summary": summarise(scores),
        "scores": scores,
        "plan_ms": _percentiles(seconds),
    }


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50": round(statistics.median(ms), 2),
        "p99": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
        "n": len(ms),
    }


def heavy(history: dict[str, Any], extra: int, rounds: int) -> dict[str, Any]:
    """Plan cost at one heavy user, beside resolving the same scope in explicit form."""
    now = parse_time(history["now"])
    assert now is not None
    with tempfile.TemporaryDirectory() as data_dir:
        ledger = _open(data_dir, now)
        try:
            write_history(ledger, history)
            _pad(ledger, extra, now)
            ledger.service.vectors.catch_up()
            out: dict[str, Any] = {"items": len(history["items"]) + extra, "requests": {}}
            for text in HEAVY_REQUESTS:
                planned, explicit = [], []
                for _ in range(rounds):  # interleaved: the two see the same machine state
                    started = time.perf_counter()
                    plan = ledger.plan_forget(text, timezone=history.get("timezone"))
                    planned.append(time.perf_counter() - started)
                    scope = plan.scope or {"kind": "item", "item_ids": plan.targets or []}
                    if scope.get("kind") == "item" and not scope.get("item_ids"):
                        continue
                    started = time.perf_counter()
                    ledger.forget_scope(scope, dry_run=True)
                    explicit.append(time.perf_counter() - started)
                out["requests"][text] = {
                    "status": plan.status,
                    "plan_forget_ms": _percentiles(planned),
                    "forget_scope_dry_run_ms": _percentiles(explicit) if explicit else None,
                }
            return out
        finally:
            ledger.close()


def _pad(ledger: Any, extra: int, now: datetime) -> None:
    """Facts and turns about other things, over the two years before `now`."""
    writes = []
    for i in range(extra):
        at = now - timedelta(minutes=7 * (extra - i) + 1)
        source = {"writer": "bench", "written_at": at.isoformat(), "session_id": f"p{i // 20}",
                  "turn_id": f"pt{i}"}  # fmt: skip
        if i % 2:
            writes.append({"kind": "turn", "subject": "user", "content": f"note {i}: the "
                           f"meeting about project {i % 97} moved to room {i % 13}",
                           "origin": "explicit", "sensitivity": "personal",
                           "provenance": source})  # fmt: skip
        else:
            writes.append({"kind": "fact", "subject": "user", "predicate": f"note_{i}",
                           "value": f"detail {i} of project {i % 97}",
                           "origin": "observed", "sensitivity": "internal",
                           "provenance": source})  # fmt: skip
    for start in range(0, len(writes), 500):
        ledger.remember_many(writes[start : start + 500])


def render(results: dict[str, Any], console: Console, failures: bool) -> None:
    summary = results["accuracy"]["summary"]
    table = Table(title=f"plan_forget on the evaluation set ({results['embedder']} embedder)")
    for column in ("set", "cases", "exact", "wider", "clarified", "false triggers"):
        table.add_column(column, justify="right" if column != "set" else "left")
    rows = [("all", summary)] + [(f"lang {k}", v) for k, v in summary["per_language"].items()]
    rows += [(f"expected {k}", v) for k, v in summary["per_status"].items()]
    for name, r in rows:
        table.add_row(
            name,
            str(r["cases"]),
            f"{r['exact_rate']:.1%}",
            str(r["wider_count"]),
            f"{r['clarification_rate']:.1%}",
            str(r["false_trigger_count"]),
        )
    console.print(table)
    ms = results["accuracy"]["plan_ms"]
    console.print(f"plan_forget latency on the set: p50 {ms['p50']} ms, p99 {ms['p99']} ms")
    if "heavy" in results:
        h = results["heavy"]
        cost = Table(title=f"one heavy user: {h['items']} items")
        for column in ("request", "status", "plan p50/p99 ms", "explicit dry run p50/p99 ms"):
            cost.add_column(column)
        for text, r in h["requests"].items():
            base = r["forget_scope_dry_run_ms"]
            cost.add_row(
                text,
                r["status"],
                f"{r['plan_forget_ms']['p50']} / {r['plan_forget_ms']['p99']}",
                f"{base['p50']} / {base['p99']}" if base else "-",
            )
        console.print(cost)
    if failures:
        for s in results["accuracy"]["scores"]:
            if not s["exact"]:
                console.print(f"[yellow]{s['id']}[/]: {s['why']}", highlight=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default=None, help="default | hashing")
    parser.add_argument("--heavy", type=int, default=10_000, help="extra items at the heavy user")
    parser.add_argument("--heavy-history", default="mei")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="no heavy user")
    parser.add_argument("--failures", action="store_true", help="print every inexact case")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.embedder:
        os.environ["MEMORY_LEDGER_EMBEDDER"] = args.embedder
    histories = load_histories()
    cases = load_cases(histories=histories)
    results: dict[str, Any] = {
        "embedder": os.environ.get("MEMORY_LEDGER_EMBEDDER", "default"),
        "accuracy": accuracy(cases, histories),
    }
    if not args.quick:
        results["heavy"] = heavy(histories[args.heavy_history], args.heavy, args.rounds)
    render(results, Console(), args.failures)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
