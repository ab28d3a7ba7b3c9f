"""Retention sweep throughput: items erased per second when a tenth of a store is due.

Run from the repository root:

    python -m benchmarks.bench_retention              # 100,000 items, 10% due, SQLite
    python -m benchmarks.bench_retention --quick      # 5,000 items, a smoke run
    python -m benchmarks.bench_retention --items 20000 --due 0.25
    python -m benchmarks.bench_retention --users 1    # one heavy user: requests of 10,000

The store holds 20 users' facts (one namespace each), a `--due` share of them with an
`expires_at` before the sweep's `now`, the rest far later or never. The projections and
the vector index (hashing embedder: a sweep embeds nothing) are caught up untimed; then
`jobs.retention.expire_due(service, now)` runs once, timed end to end: one forget
request per namespace, through the same path as a user's forget. Every request must end
`completed`, and a second sweep must find nothing due. Baseline in the same run: the
same due items forgotten by a user's request per namespace (`forget_scope` of kind
`item`) in an identical second store, so the figure shows what the sweep adds to a
forget, not the forget itself. Issue 12's goal: >= 20,000 items/s on SQLite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

USERS = 20
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "retention.json"


def _writes(n: int, due: float, seed: int, users: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    per_user: list[list[dict[str, Any]]] = [[] for _ in range(users)]
    for i in range(n):
        expires = T0 + timedelta(days=1 if rng.random() < due else 3650)
        per_user[i % users].append(
            {
                "kind": "fact",
                "subject": "user",
                "predicate": f"note_{i}",
                "value": f"note {i}: {rng.randrange(10**9)}",
                "category": "general",
                "origin": "explicit",
                "sensitivity": "personal",
                "provenance": {
                    "writer": "bench",
                    "written_at": T0.isoformat(),
                    "turn_id": f"t{i}",
                    "session_id": "s1",
                },
                "retention": {"basis": "consent", "expires_at": expires.isoformat()},
            }
        )
    return per_user


def _fill(n: int, due: float, seed: int, users: int) -> Any:
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal

    service = MemoryService.open(tempfile.mkdtemp(prefix="ml-bench-retention-"))
    for user, writes in enumerate(_writes(n, due, seed, users)):
        ledger = service.for_principal(Principal("acme", f"user{user}"))
        for start in range(0, len(writes), 500):
            ledger.remember_many(writes[start : start + 500])
    service.runner.catch_up()
    service.vectors.catch_up()
    return service


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_retention")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--due", type=float, default=0.1)
    parser.add_argument("--users", type=int, default=USERS, help="namespaces (1: one heavy user)")
    parser.add_argument("--quick", action="store_true", help="5,000 items")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.items = 5_000
    if not 1 <= args.items <= 10_000_000 or not 0 < args.due <= 1 or not 1 <= args.users <= 1000:
        parser.error("--items from 1 to 10,000,000, --due above 0 up to 1, --users 1 to 1,000")
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    from memory_ledger.forgetting.scope import MAX_SCOPE_ITEMS
    from memory_ledger.jobs.retention import due_items, expire_due
    from memory_ledger.principal import Principal

    console = Console()
    now = T0 + timedelta(days=2)
    console.log(f"filling two stores of {args.items:,} items ({args.due:.0%} due) ...")
    fill = (args.items, args.due, 1, args.users)
    sweep_store, user_store = _fill(*fill), _fill(*fill)
    due = due_items(sweep_store.job_context, now)
    count = sum(len(ids) for ids in due.values())

    started = time.perf_counter()
    reports = expire_due(sweep_store.job_context, now)
    sweep_s = time.perf_counter() - started
    assert all(r.completed for r in reports), [r.status for r in reports]
    assert expire_due(sweep_store.job_context, now) == [], "a second sweep must find nothing due"

    baseline_due = due_items(user_store.job_context, now)
    started = time.perf_counter()
    for namespace, ids in baseline_due.items():
        ledger = user_store.for_principal(Principal(*namespace.split("/", 1)))
        for start in range(0, len(ids), MAX_SCOPE_ITEMS):  # as the sweep splits them
            chunk = ids[start : start + MAX_SCOPE_ITEMS]
            assert ledger.forget_scope({"kind": "item", "item_ids": chunk}).completed
    baseline_s = time.perf_counter() - started

    rows = {
        "items": args.items,
        "due": count,
        "requests": len(reports),
        "sweep_s": round(sweep_s, 3),
        "sweep_items_per_s": round(count / sweep_s),
        "user_forget_s": round(baseline_s, 3),
        "user_forget_items_per_s": round(count / baseline_s),
        "load_average": os.getloadavg(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    rows["users"] = args.users
    table = Table(title=f"retention sweep, SQLite, {args.users} namespace(s)")
    for name in ("items", "due", "requests", "sweep_s", "sweep_items_per_s"):
        table.add_column(name, justify="right")
    table.add_column("user forget of the same items, items/s", justify="right")
    table.add_column("goal >= 20,000 items/s")
    table.add_row(
        *(f"{rows[k]:,}" for k in ("items", "due", "requests")),
        f"{sweep_s:.2f}",
        f"{rows['sweep_items_per_s']:,}",
        f"{rows['user_forget_items_per_s']:,}",
        "met" if rows["sweep_items_per_s"] >= 20_000 else "NOT met",
    )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    console.log(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
