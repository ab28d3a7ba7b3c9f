"""What an agent's own work costs: memory-file commands and run transitions, against a
plain `remember` of one fact in the same store, interleaved round by round.

Run from the repository root:

    python -m benchmarks.bench_agent_state
    python -m benchmarks.bench_agent_state --files 10,199 --operations 0,500 --rounds 200

**Memory files.** A namespace already holding `--files` files (the limit is 200): the
latency of `view` (a file), `str_replace` and `create` (the 200th file), each of which opens the
namespace's paths (one sealed cell per file).

**Runs.** A run whose state already records `--operations` operations (the limit is
1,000): the latency of `set_state` (one compare-and-set transition, which re-seals the
whole state) and of a recorded `operation` (read the state, find the result).

The heavy user's other memories are there too (`--memories`, default 5,000 facts), so
the numbers are those of a namespace in use, not of an empty store. Each round writes one
fact (the baseline) and then times the projections' catch-up that the next reader pays
for it (the heavy user's profile summary is rebuilt), apart from the commands. Results are printed
as a table and written as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "agent_state.json"


def _fact(i: int) -> dict[str, Any]:
    return {
        "kind": "fact", "subject": "user", "predicate": f"note_{i}", "value": f"value {i}",
        "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "bench", "written_at": "2026-12-01T09:00:00+00:00",
                       "session_id": "s1"},
    }  # fmt: skip


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
    }


def _time(call: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    call(*args)
    return time.perf_counter() - start


def _zero() -> dict[str, int]:
    return {"n": 0}


def run(files: list[int], operations: list[int], rounds: int, memories: int) -> dict[str, Any]:
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal

    results: dict[str, Any] = {"rounds": rounds, "memories": memories, "cases": []}
    for n_files in files:
        for n_ops in operations:
            with tempfile.TemporaryDirectory() as tmp, MemoryService.open(tmp) as service:
                ledger = service.for_principal(Principal("acme", "heavy"))
                case = _measure(ledger, n_files, n_ops, rounds, memories)
                results["cases"].append({"files": n_files, "operations": n_ops, **case})
    return results


def _measure(ledger: Any, n_files: int, n_ops: int, rounds: int, memories: int) -> dict[str, Any]:
    """One store: fill it, then time each operation once per round, in turn."""
    for start in range(0, memories, 500):
        ledger.remember_many([_fact(i) for i in range(start, start + 500)])
    fs, runs = ledger.files, ledger.runs
    src = fs.source("bench", session_id="s1", turn_id="t1")
    for i in range(n_files):
        fs.create(f"/memories/d{i % 10}/f{i}.md", f"note {i}\nline two", src)
    run_id = runs.start("bench run", src).run_id
    runs.begin_step(run_id, runs.get(run_id).version, "s")
    for i in range(n_ops):
        runs.operation(run_id, "s", f"op{i}", lambda i=i: {"n": i})
    target = "/memories/d0/f0.md"
    names = ("remember (baseline)", "catch-up after it", "file view", "file str_replace",
             "file create", "run set_state", "run operation (recorded)")  # fmt: skip
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        samples["remember (baseline)"].append(_time(ledger.remember, _fact(memories + r)))
        # Whoever reads next applies the write to the projections (a heavy user's profile
        # summary among them): timed apart, so each command below is timed on its own.
        samples["catch-up after it"].append(_time(ledger.service.runner.catch_up))
        if n_files:
            samples["file view"].append(_time(fs.view, target, src))
            old, new = ("line two", "line 2") if r % 2 == 0 else ("line 2", "line two")
            samples["file str_replace"].append(_time(fs.str_replace, target, old, new, src))
        samples["file create"].append(_time(fs.create, "/memories/bench.md", f"round {r}", src))
        current = runs.get(run_id).version
        samples["run set_state"].append(_time(runs.set_state, run_id, current, {"r": r}))
        op = "op0" if n_ops else "first"
        samples["run operation (recorded)"].append(_time(runs.operation, run_id, "s", op, _zero))
    return {k: _ms(v) for k, v in samples.items() if v}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", default="10,199")
    parser.add_argument("--operations", default="0,500")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    files = [int(x) for x in args.files.split(",")]
    operations = [int(x) for x in args.operations.split(",")]
    results = run(files, operations, args.rounds, args.memories)
    table = Table(title=f"agent state: p50 / p99 ms over {args.rounds} rounds")
    names = [k for k in results["cases"][0] if k not in ("files", "operations")]
    table.add_column("files · operations")
    for name in names:
        table.add_column(name)
    for case in results["cases"]:
        table.add_row(
            f"{case['files']} · {case['operations']}",
            *(f"{case[n]['p50_ms']} / {case[n]['p99_ms']}" if n in case else "-" for n in names),
        )
    Console().print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
