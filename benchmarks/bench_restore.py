"""Backup, restore and drill times, and the tombstone replay's rate, on SQLite and
PostgreSQL.

Run from the repository root:

    python -m benchmarks.bench_restore                 # 100,000 items, 1,000 erased after
    python -m benchmarks.bench_restore --quick         # 5,000 items, 100 erased
    python -m benchmarks.bench_restore --backends sqlite

Per backend, a fresh store (a temporary directory, or a scratch database `ml_bench_...`
created through `--pg-url` and dropped at the end) of `--items` facts in 20 namespaces
is filled and caught up (untimed); a backup is taken (timed); `--erase` of the items
are then forgotten (untimed: that is the forget path, measured elsewhere); the event
store is lost and the backup restored (timed end to end: checks, load, replay, rebuild
of every projection and the vector index, verification, with each step's time). The
replay step alone is timed too, against the issue's goal of >= 5,000 tombstones/s;
then a drill on the same backup (a restore into a scratch copy plus its checks and
scans), against the goal of 30 s on SQLite.
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
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import Store, add_common_options, fresh_store, parse_common, pg_connect

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "restore.json"
USERS = 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_restore")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--erase", type=int, default=1_000)
    add_common_options(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    if args.quick:
        args.items, args.erase = 5_000, 100
    if not 1 <= args.erase <= args.items <= 10_000_000:
        parser.error("1 <= --erase <= --items <= 10,000,000")
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    console = Console()
    results = []
    for backend in args.backends:
        with fresh_store(backend, args.pg_url) as store:
            results.append(run(store, args.items, args.erase, console))
    table = Table(title="backup, restore and drill")
    columns = ("backend", "items", "tombstones", "backup s", "restore s", "rebuild s")
    for name in (*columns, "replay tombstones/s", "drill s"):
        table.add_column(name, justify="right")
    for rows in results:
        table.add_row(
            rows["backend"],
            f"{rows['items']:,}",
            f"{rows['tombstones_replayed']:,}",
            f"{rows['backup_s']:.2f}",
            f"{rows['restore_s']:.2f}",
            f"{rows['restore_steps_s'].get('rebuilt', 0):.2f}",
            f"{rows['replay_tombstones_per_s']:,} (goal >= 5,000)",
            f"{rows['drill_s']:.2f}" + (" (goal < 30)" if rows["backend"] == "sqlite" else ""),
        )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    console.log(f"results written to {args.out}")
    return 0


def run(store: Store, items: int, erase: int, console: Console) -> dict[str, Any]:
    import memory_ledger.restore.restore as restoring
    from memory_ledger.api import MemoryService
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.principal import Principal
    from memory_ledger.restore.backup import create
    from memory_ledger.restore.drill import drill

    service = MemoryService(store.settings)
    console.log(f"{store.backend}: filling {items:,} items ...")
    ids: list[tuple[str, Any]] = []
    for user in range(USERS):
        ledger = service.for_principal(Principal("acme", f"user{user}"))
        share = range(user, items, USERS)
        for start in range(0, len(share), 500):
            writes = [note_fact(i) for i in share[start : start + 500]]
            ids += [(r.item_id, ledger) for r in ledger.remember_many(writes)]
    service.runner.catch_up()
    service.vectors.catch_up()
    backups = Path(tempfile.mkdtemp(prefix="ml_bench_backups_"))  # outside the data
    started = time.perf_counter()
    made = create(service.settings, service.log.master, service.ledger, datetime.now(UTC), backups)
    backup_s = time.perf_counter() - started
    for item_id, ledger in ids[:: max(1, len(ids) // erase)][:erase]:
        ledger.forget(item_id)
    settings, master = service.settings, service.log.master
    service.close()
    _lose_the_event_store(store)

    replay = {"s": 0.0}
    undo = _timed_tombstone(replay)
    started = time.perf_counter()
    with LifecycleLedger(settings) as ledger:
        result = restoring.restore(
            made.path, settings, master, ledger, datetime.now(UTC), open_store=MemoryService
        )
    restore_s = time.perf_counter() - started
    undo()
    assert result.verified and result.erased_again == erase, result.to_dict()
    with MemoryService(settings, master) as service:
        started = time.perf_counter()
        report = drill(service, datetime.now(UTC), made.path, open_store=MemoryService)
        drill_s = time.perf_counter() - started
    assert report.passed, report.findings
    shutil.rmtree(backups, ignore_errors=True)
    return {
        "backend": store.backend,
        "items": items,
        "tombstones_replayed": result.erased_again,
        "backup_s": round(backup_s, 3),
        "restore_s": round(restore_s, 3),
        "restore_steps_s": result.seconds,
        "replay_s": round(replay["s"], 4),
        "replay_tombstones_per_s": round(result.erased_again / replay["s"]),
        "drill_s": round(drill_s, 3),
        "load_average": os.getloadavg(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _lose_the_event_store(store: Store) -> None:
    """The store's data is lost; the lifecycle ledger, kept apart, is not."""
    settings = store.settings
    if settings.postgres is None:
        for name in ("events.sqlite", "events.sqlite-wal", "events.sqlite-shm"):
            (settings.data_dir / name).unlink(missing_ok=True)
        return
    schema = settings.postgres.schema
    with pg_connect(settings.postgres) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    shutil.rmtree(settings.data_dir / "vectors", ignore_errors=True)


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


def note_fact(i: int) -> dict:
    """Fact number `i` of a filled store (the restore, feed and tombstone benchmarks')."""
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
