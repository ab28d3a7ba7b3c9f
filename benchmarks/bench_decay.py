"""Decay pass throughput: items decided per second over one heavy store.

Run from the repository root:

    python -m benchmarks.bench_decay               # 100,000 items, one user, SQLite
    python -m benchmarks.bench_decay --quick       # 5,000 items, a smoke run

One user holds `--items` memories: observed preferences (which decay, half-life 60
days under the packaged policy) and explicit facts (which do not), half each. The
projections are caught up untimed. Then, timed:

- the first pass, 200 days on: every preference has decayed below the threshold and is
  archived (one `Archived` event each);
- a repeated pass in the same period, which must change nothing (idempotent per period),
  interleaved `--reps` times with the baseline: a plain read of the same catalog
  columns, the floor any pass that decides from the log's clear state pays.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "decay.json"


def _write(i: int) -> dict[str, Any]:
    preference = i % 2 == 0
    return {
        "kind": "preference" if preference else "fact",
        "subject": "user",
        "predicate": f"likes_{i}" if preference else f"note_{i}",
        "value": f"value {i}",
        "category": "general",
        "origin": "observed" if preference else "explicit",
        "sensitivity": "personal",
        "provenance": {
            "writer": "bench",
            "written_at": datetime.now(UTC).isoformat(),
            "turn_id": f"t{i}",
            "session_id": "s1",
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_decay")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="5,000 items")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.items = 5_000
    if not 2 <= args.items <= 10_000_000 or not 1 <= args.reps <= 100:
        parser.error("--items from 2 to 10,000,000, --reps from 1 to 100")
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    from sqlalchemy import select

    from memory_ledger.api import MemoryService
    from memory_ledger.jobs.decay import decay_pass
    from memory_ledger.principal import Principal
    from memory_ledger.projections.catalog import catalog

    console = Console()
    console.log(f"filling one user with {args.items:,} items ...")
    service = MemoryService.open(tempfile.mkdtemp(prefix="ml-bench-decay-"))
    ledger = service.for_principal(Principal("acme", "heavy"))
    for start in range(0, args.items, 500):
        ledger.remember_many([_write(i) for i in range(start, min(start + 500, args.items))])
    service.runner.catch_up()
    now = datetime.now(UTC) + timedelta(days=200)

    started = time.perf_counter()
    first = decay_pass(service.job_context, now)
    first_s = time.perf_counter() - started
    assert first["archived"] == (args.items + 1) // 2, first

    repeat_s, scan_s = [], []
    columns = [catalog.c[n] for n in ("item_id", "kind", "category", "strength", "tier")]
    for _ in range(args.reps):
        started = time.perf_counter()
        again = decay_pass(service.job_context, now + timedelta(minutes=1))
        repeat_s.append(time.perf_counter() - started)
        assert again["archived"] == again["unarchived"] == 0, again
        started = time.perf_counter()
        with service.engine.connect() as conn:
            rows = conn.execute(select(*columns)).all()
        scan_s.append(time.perf_counter() - started)
        assert len(rows) == args.items
    service.close()

    repeat, scan = statistics.median(repeat_s), statistics.median(scan_s)
    result = {
        "items": args.items,
        "archived": first["archived"],
        "first_pass_s": round(first_s, 3),
        "first_pass_items_per_s": round(args.items / first_s),
        "repeat_pass_s": round(repeat, 3),
        "repeat_pass_items_per_s": round(args.items / repeat),
        "catalog_read_s": round(scan, 3),
        "catalog_read_items_per_s": round(args.items / scan),
        "load_average": os.getloadavg(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    table = Table(title="decay pass, SQLite, one user")
    for name in ("items", "archived", "first pass items/s", "repeat pass items/s"):
        table.add_column(name, justify="right")
    table.add_column("baseline: catalog read items/s", justify="right")
    table.add_row(
        f"{args.items:,}",
        f"{first['archived']:,}",
        f"{result['first_pass_items_per_s']:,} ({first_s:.2f} s)",
        f"{result['repeat_pass_items_per_s']:,} ({repeat:.2f} s)",
        f"{result['catalog_read_items_per_s']:,} ({scan:.2f} s)",
    )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    console.log(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
