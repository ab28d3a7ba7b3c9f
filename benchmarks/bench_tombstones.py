"""Tombstones per second: `EventLog.tombstone` (the first step of every erasure, and a
restore's replay) against the way it read its items before, in the same run.

Run from the repository root:

    python -m benchmarks.bench_tombstones                 # 100,000 items, both backends
    python -m benchmarks.bench_tombstones --items 20000 --backends sqlite
    python -m benchmarks.bench_tombstones --quick            # 10,000 items, 2 rounds

A store of `--items` facts in one namespace; then rounds of 1,000 tombstones each,
alternating between the baseline (each item read with `EventLog.get`: the library's
repository, a snapshot query and an events query per item) and `tombstone` (the items
read with `get_many`, one query per 500 ids), each round on items not erased yet. The
write (events and key destructions, one transaction) is the same in both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import add_common_options, fresh_store, parse_common
from benchmarks.bench_restore import note_fact

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "tombstones.json"
ROUND = 1_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_tombstones")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
    add_common_options(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    if args.quick:
        args.items, args.rounds = 10_000, 2
    if not 1 <= args.rounds <= 20 or not 2 * ROUND * args.rounds <= args.items <= 5_000_000:
        parser.error("1 <= --rounds <= 20, and --items from 2,000 x rounds to 5,000,000")
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    console = Console()
    results = []
    for backend in args.backends:
        with fresh_store(backend, args.pg_url) as store:
            console.log(f"{backend}: filling {args.items:,} items ...")
            results.append({"backend": backend, **run(store.settings, args.items, args.rounds)})
    table = Table(title=f"tombstones per second ({ROUND:,} per round, median)")
    for column in ("backend", "items", "per-item reads (before)", "tombstone (now)"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(r["backend"], f"{r['items']:,}", f"{r['before']:,.0f}", f"{r['now']:,.0f}")
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    console.log(f"results written to {args.out}")
    return 0


def run(settings: Any, items: int, rounds: int) -> dict[str, Any]:
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal

    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "user"))
        ids: list[str] = []
        for start in range(0, items, 500):
            writes = [note_fact(i) for i in range(start, min(items, start + 500))]
            ids += [r.item_id for r in ledger.remember_many(writes)]
        rates: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(rounds):
            for mode in ("before", "now"):
                chunk, ids = ids[:ROUND], ids[ROUND:]
                started = time.perf_counter()
                if mode == "before":
                    _per_item(service.log, chunk)
                else:
                    service.log.tombstone(chunk, "bench")
                rates[mode].append(ROUND / (time.perf_counter() - started))
    return {
        "items": items,
        "before": statistics.median(rates["before"]),
        "now": statistics.median(rates["now"]),
        "rounds": rates,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _per_item(log: Any, item_ids: list[str]) -> None:
    """The baseline: how `tombstone` read its items before (one `get` each)."""
    from memory_ledger.keystore import KeyDestruction

    items = [log.get(UUID(i)) for i in item_ids]
    pending = [i for i in items if not i.erased]
    for item in pending:
        item.erase(reason="bench", request_id=None)
    log.save_positions(pending, destroy=[KeyDestruction(str(i.id), None) for i in pending])


if __name__ == "__main__":
    raise SystemExit(main())
