"""Backup and restore times, and the tombstone replay's rate, for one store (SQLite).

Run from the repository root:

    python -m benchmarks.bench_restore                 # 100,000 items, 1,000 erased after
    python -m benchmarks.bench_restore --quick         # 5,000 items, 100 erased

A store of `--items` facts in 20 namespaces is filled and caught up (untimed); a backup
is taken (timed); `--erase` of the items are then forgotten (untimed: that is the
forget path, measured elsewhere); the event store is lost and the backup restored
(timed end to end: checks, load, replay, rebuild of every projection and the vector
index, verification). The replay step alone is timed too, against the issue's goal of
>= 5,000 tombstones/s; then a drill on the same backup (a restore into a scratch copy
plus its checks and scans), against the goal of 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "restore.json"
USERS = 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_restore")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--erase", type=int, default=1_000)
    parser.add_argument("--quick", action="store_true", help="5,000 items, 100 erased")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.items, args.erase = 5_000, 100
    if not 1 <= args.erase <= args.items <= 10_000_000:
        parser.error("1 <= --erase <= --items <= 10,000,000")
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    import restore.restore as restoring
    from memory_ledger.api import MemoryService
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.principal import Principal
    from restore.backup import create

    console = Console()
    root = Path(tempfile.mkdtemp(prefix="ml-bench-restore-"))
    service = MemoryService.open(root / "data")
    console.log(f"filling {args.items:,} items ...")
    ids: list[str] = []
    for user in range(USERS):
        ledger = service.for_principal(Principal("acme", f"user{user}"))
        share = range(user, args.items, USERS)
        for start in range(0, len(share), 500):
            writes = [_fact(i) for i in share[start : start + 500]]
            ids += [(r.item_id, ledger) for r in ledger.remember_many(writes)]  # type: ignore[misc]
    service.runner.catch_up()
    service.vectors.catch_up()
    started = time.perf_counter()
    made = create(
        service.settings, service.log.master, service.ledger, datetime.now(UTC), root / "bk"
    )
    backup_s = time.perf_counter() - started
    for item_id, ledger in ids[:: max(1, len(ids) // args.erase)][: args.erase]:  # type: ignore[misc]
        ledger.forget(item_id)
    settings, master = service.settings, service.log.master
    service.close()
    for name in ("events.sqlite", "events.sqlite-wal", "events.sqlite-shm"):
        (settings.data_dir / name).unlink(missing_ok=True)

    replay = {"s": 0.0}
    original = _timed_tombstone(replay)
    started = time.perf_counter()
    with LifecycleLedger(settings) as ledger:
        result = restoring.restore(made.path, settings, master, ledger, datetime.now(UTC))
    restore_s = time.perf_counter() - started
    original()
    assert result.verified and result.erased_again == args.erase, result.to_dict()
    from restore.drill import drill

    with MemoryService(settings, master) as service:
        started = time.perf_counter()
        report = drill(service, datetime.now(UTC), made.path)
        drill_s = time.perf_counter() - started
    assert report.passed, report.findings
    shutil.rmtree(root, ignore_errors=True)

    rows = {
        "items": args.items,
        "tombstones_replayed": result.erased_again,
        "backup_s": round(backup_s, 3),
        "restore_s": round(restore_s, 3),
        "replay_s": round(replay["s"], 4),
        "replay_tombstones_per_s": round(result.erased_again / replay["s"]),
        "drill_s": round(drill_s, 3),
        "restore_steps_s": result.seconds,
        "load_average": os.getloadavg(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    table = Table(title="backup and restore, SQLite")
    columns = ("items", "tombstones", "backup s", "restore s", "replay tombstones/s", "drill s")
    for name in columns:
        table.add_column(name, justify="right")
    table.add_row(
        f"{args.items:,}",
        f"{result.erased_again:,}",
        f"{backup_s:.2f}",
        f"{restore_s:.2f}",
        f"{rows['replay_tombstones_per_s']:,} (goal >= 5,000)",
        f"{drill_s:.2f} (goal < 30)",
    )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2))
    console.log(f"results written to {args.out}")
    return 0


def _timed_tombstone(replay: dict[str, float]):  # type: ignore[no-untyped-def]
    """Time EventLog.tombstone (the replay's step) while the restore runs; returns the
    function that puts the original back."""
    from memory_ledger.event_log import EventLog

    original = EventLog.tombstone

    def timed(self, item_ids, reason, **options):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        try:
            return original(self, item_ids, reason, **options)
        finally:
            replay["s"] += time.perf_counter() - started

    EventLog.tombstone = timed  # type: ignore[method-assign]

    def undo() -> None:
        EventLog.tombstone = original  # type: ignore[method-assign]

    return undo


def _fact(i: int) -> dict:
    return {
        "kind": "fact",
        "subject": "user",
        "predicate": f"note_{i}",
        "value": f"note {i}: {i * 7919 % 1000003}",
        "category": "general",
        "origin": "explicit",
        "sensitivity": "personal",
        "provenance": {
            "writer": "bench",
            "written_at": datetime.now(UTC).isoformat(),
            "turn_id": f"t{i}",
            "session_id": "s1",
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
