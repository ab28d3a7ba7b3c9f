"""Erasure in bulk (issue 27): tombstones, whole-user forgets and retention sweeps as set
operations, against raw key deletes in the same store.

One SQLite store holds `--users` namespaces of `--per-user` facts each (default 10 x
1,000) and one heavy namespace of `--heavy` facts (default 20,000), a tenth of every
namespace past its expiry. Timed, one after the other, in the same store:

- `tombstones`: `EventLog.tombstone` of 2,000 of the heavy namespace's items (what a
  restore's replay does per tombstone: key destroyed, `Erased` appended), against the
  baseline: raw `UPDATE memory_keys SET wrapped = NULL` of 2,000 other items' keys, one
  statement per 500 ids and one commit (the least any erasure must do);
- `whole_user`: a whole-user forget (`forget_scope({"kind": "namespace"})`) of each of
  three 1,000-item users, to `completed` (every store's receipt, the key proof);
- `sweep`: the retention sweep (`jobs.retention.expire_due`) of the heavy namespace's due
  items, to `completed`.

Wall and CPU seconds are both recorded: on a shared 2-core machine the CPU time of the
process is the steadier figure. To compare two versions of the code in one session, run
this file by path with the other version first on PYTHONPATH, alternately:

    python -m benchmarks.bench_erasure --label new
    PYTHONPATH=/tmp/old python benchmarks/bench_erasure.py --label old
    python -m benchmarks.bench_erasure --quick      # small, for the test run

Writes a table and `benchmarks/results/erasure-LABEL.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.append(str(Path(__file__).resolve().parents[1]))  # by path: after PYTHONPATH

from benchmarks.bench_retention import T0, _writes

RESULTS = Path(__file__).resolve().parent / "results"
GOALS = {
    "tombstones": "replay >= 50,000 tombstones/s",
    "whole_user": "< 500 ms",
    "sweep": ">= 20,000 items/s",
}


def _timed(call: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def _fill(service: Any, namespace: str, n: int, seed: int) -> list[str]:
    from memory_ledger.principal import Principal

    ledger = service.for_principal(Principal(*namespace.split("/", 1)))
    ids: list[str] = []
    for writes in _writes(n, 0.1, seed, 1):
        for start in range(0, len(writes), 500):
            ids += [r.item_id for r in ledger.remember_many(writes[start : start + 500])]
    return ids


def run(users: int, per_user: int, heavy: int, tombstones: int) -> dict[str, Any]:
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    from memory_ledger.api import MemoryService
    from memory_ledger.jobs.retention import expire_due
    from memory_ledger.principal import Principal

    service = MemoryService.open(tempfile.mkdtemp(prefix="ml-bench-erasure-"))
    for u in range(users):
        _fill(service, f"acme/user{u}", per_user, u + 1)
    heavy_ids = _fill(service, "acme/heavy", heavy, 99)
    service.runner.catch_up()
    service.vectors.catch_up()
    out: dict[str, Any] = {"users": users, "per_user": per_user, "heavy": heavy}

    # Tombstones below every store, against raw key deletes of as many other items.
    doomed, raw = heavy_ids[:tombstones], heavy_ids[-tombstones:]
    wall, cpu, _ = _timed(lambda: service.log.tombstone(doomed, "benchmark"))
    out["tombstones"] = {"n": len(doomed), "wall_s": wall, "cpu_s": cpu}

    service.runner.catch_up()

    forgets = []
    for u in range(min(users, 3)):
        ledger = service.for_principal(Principal("acme", f"user{u}"))
        wall, cpu, report = _timed(lambda ledger=ledger: ledger.forget_scope({"kind": "namespace"}))
        assert report.completed, report.status
        forgets.append((wall, cpu))
    out["whole_user"] = {
        "n": per_user,
        "wall_s": statistics.median(w for w, _ in forgets),
        "cpu_s": statistics.median(c for _, c in forgets),
    }

    now = T0 + timedelta(days=2)
    wall, cpu, reports = _timed(lambda: expire_due(service.job_context, now))
    assert all(r.completed for r in reports), [r.status for r in reports]
    swept = sum(len(r.all_targets) for r in reports)
    out["sweep"] = {"n": swept, "wall_s": wall, "cpu_s": cpu}

    # Last: keys destroyed without tombstones leave items no store can read.
    def raw_deletes() -> None:
        with sqlite3.connect(service.settings.events_path) as conn:
            for start in range(0, len(raw), 500):
                chunk = raw[start : start + 500]
                conn.execute(
                    "UPDATE memory_keys SET wrapped = NULL WHERE item_id IN "
                    f"({', '.join('?' * len(chunk))})",
                    chunk,
                )

    wall, cpu, _ = _timed(raw_deletes)
    out["raw_key_deletes"] = {"n": len(raw), "wall_s": wall, "cpu_s": cpu}
    service.close()
    return out


def render(label: str, rows: dict[str, Any], console: Console) -> None:
    table = Table(title=f"erasure in bulk, SQLite ({label})")
    for column in (
        "measure",
        "items",
        "wall s",
        "cpu s",
        "items/s (wall)",
        "items/s (cpu)",
        "goal",
    ):
        table.add_column(column, justify="right" if column != "measure" else "left")
    for name in ("tombstones", "raw_key_deletes", "whole_user", "sweep"):
        r = rows[name]
        table.add_row(
            name,
            f"{r['n']:,}",
            f"{r['wall_s']:.3f}",
            f"{r['cpu_s']:.3f}",
            f"{r['n'] / r['wall_s']:,.0f}",
            f"{r['n'] / r['cpu_s']:,.0f}" if r["cpu_s"] else "-",
            GOALS.get(name, "baseline"),
        )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_erasure")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--per-user", type=int, default=1_000)
    parser.add_argument("--heavy", type=int, default=20_000)
    parser.add_argument("--tombstones", type=int, default=2_000)
    parser.add_argument("--quick", action="store_true", help="3 users of 100, heavy 1,000")
    parser.add_argument("--label", default="current")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.users, args.per_user, args.heavy, args.tombstones = 3, 100, 1_000, 200
    limits = (
        1 <= args.users <= 100,
        10 <= args.per_user <= 100_000,
        100 <= args.heavy <= 1_000_000,
    )
    if not all(limits) or not 1 <= 2 * args.tombstones <= args.heavy // 2:
        parser.error(
            "--users 1-100, --per-user 10-100,000, --heavy 100-1,000,000, "
            "--tombstones at most a quarter of --heavy"
        )
    rows = run(args.users, args.per_user, args.heavy, args.tombstones)
    import memory_ledger

    rows |= {
        "label": args.label,
        "code": str(Path(memory_ledger.__file__).parent.parent),  # which tree was measured
        "load_average": os.getloadavg(),
        "argv": list(argv or sys.argv[1:]),
    }
    render(args.label, rows, Console())
    out = args.out or RESULTS / f"erasure-{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
