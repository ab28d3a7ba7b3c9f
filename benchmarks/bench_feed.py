"""Change feed: delivery lag, throughput, and forget-to-completed with acking subscribers,
on SQLite (polling) and PostgreSQL (LISTEN/NOTIFY).

Run from the repository root:

    python -m benchmarks.bench_feed              # both backends
    python -m benchmarks.bench_feed --quick      # fewer writes and events

Per backend, in a fresh store (bench_core's: a temporary directory, or a scratch
database dropped at the end):

- **lag**: a consumer in another process follows the feed; this process writes one
  memory at a time, `--writes` times, and the consumer records when each notice
  arrived. Lag is arrival minus the moment `remember` returned (so it excludes the
  write itself): p50 and p99.
- **throughput**: `--events` memories are written first; then 1 and then 10 consumer
  processes read the whole feed from the start, at the same time. Events/s per
  consumer and in all, beside the baseline of reading the same notifications from the
  log without making notices (`EventLog.notifications`), in the same run.
- **forget to completed**: with 0 (the baseline), 1 and 3 registered subscribers, each
  a process that follows the feed and acknowledges every erasure notice it sees: the
  time from `forget` to the request's `completed` status, median of `--forgets`.

Results are printed as a table and written as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import Store, add_common_options, fresh_store, parse_common
from benchmarks.bench_restore import note_fact

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "feed.json"

_FOLLOW = textwrap.dedent("""
    import json, sys, time
    from memory_ledger.api import MemoryService
    from memory_ledger.config import Settings
    data_dir, url, mode, name, cursor = json.loads(sys.argv[1])
    with MemoryService(Settings.resolve(data_dir, url)) as service:
        feed = service.feed
        count, started = 0, time.time()
        print("ready", flush=True)
        for notice in feed.subscribe(cursor, subscriber=name, timeout=3 if mode == "read" else 20):
            count += notice.type == "memory_recorded"
            if mode == "lag" and notice.type == "memory_recorded":
                print(notice.item_id, time.time(), flush=True)
            elif mode == "ack" and notice.type == "item_erased":
                try:
                    service.subscribers.ack(service, name, notice.request_id)
                except Exception as exc:
                    print("ack failed", type(exc).__name__, exc, file=sys.stderr, flush=True)
                    raise
            elif mode == "read" and notice.type == "memory_recorded":
                last = time.time()
        if mode == "read":
            print("read", count, last - started, flush=True)
""")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_feed")
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--forgets", type=int, default=20)
    add_common_options(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    if args.quick:
        args.writes, args.events, args.forgets = 50, 2_000, 5
    for name, low, high in (
        ("writes", 10, 10_000),
        ("events", 100, 1_000_000),
        ("forgets", 1, 500),
    ):
        if not low <= getattr(args, name) <= high:
            parser.error(f"--{name} must be from {low:,} to {high:,}")
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    from memory_ledger.crypto import MASTER_KEY_ENV, MasterKey

    os.environ[MASTER_KEY_ENV] = base64.b64encode(MasterKey.generate().material).decode()
    console = Console()
    results = []
    for backend in args.backends:
        with fresh_store(backend, args.pg_url) as store:
            console.log(f"{backend}: lag, throughput, forget to completed ...")
            results.append(run(store, args.writes, args.events, args.forgets))
    table = Table(title="change feed")
    for column in ("backend", "lag p50 ms", "lag p99 ms", "1 consumer ev/s", "10 consumers ev/s",
                   "log read ev/s", "forget 0/1/3 subscribers ms"):  # fmt: skip
        table.add_column(column, justify="right")
    for r in results:
        ten = r["throughput"]["10"]
        table.add_row(
            r["backend"],
            f"{r['lag_ms']['p50']:.1f}",
            f"{r['lag_ms']['p99']:.1f}",
            f"{r['throughput']['1']['per_consumer']:,.0f}",
            f"{ten['total']:,.0f} ({ten['per_consumer']:,.0f} each)",
            f"{r['throughput']['log_read']:,.0f}",
            " / ".join(f"{r['forget_ms'][k]:.0f}" for k in ("0", "1", "3")),
        )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    console.log(f"results written to {args.out}")
    return 0


def run(store: Store, writes: int, events: int, forgets: int) -> dict[str, Any]:
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal

    settings = store.settings
    url = store.url if settings.postgres else None
    where = [str(settings.data_dir), url]
    out: dict[str, Any] = {"backend": store.backend, "date": _now()}
    with MemoryService(settings) as service:
        alice = service.for_principal(Principal("acme", "alice"))
        # -- lag ---------------------------------------------------------------------
        consumer = _start(where, "lag", None, service.feed.head())
        returned: dict[str, float] = {}
        for i in range(writes):
            item_id = alice.remember(note_fact(i)).item_id
            returned[item_id] = time.time()
            time.sleep(0.01)
        arrived = _collect(consumer, writes)
        lags = sorted((arrived[i] - returned[i]) * 1000 for i in returned if i in arrived)
        out["lag_ms"] = {"p50": _pct(lags, 50), "p99": _pct(lags, 99), "n": len(lags)}
        # -- throughput --------------------------------------------------------------
        bob = service.for_principal(Principal("acme", "bob"))
        for start in range(0, events, 500):
            bob.remember_many([note_fact(i) for i in range(start, min(events, start + 500))])
        total = service.log.max_position()
        started = time.perf_counter()
        position = 0
        while position < total:
            batch = service.log.notifications(position, 500)
            position = batch[-1].id
        out["throughput"] = {"events": total, "log_read": total / (time.perf_counter() - started)}
        for n in (1, 10):
            readers = [_start(where, "read", None, None) for _ in range(n)]
            rates = [_read_rate(r) for r in readers]
            out["throughput"][str(n)] = {
                "per_consumer": statistics.median(rates),
                "total": sum(rates),
            }
        # -- forget to completed -----------------------------------------------------
        out["forget_ms"] = {}
        for n in (0, 1, 3):
            names = [f"bench{n}x{k}" for k in range(n)]
            for name in names:
                service.subscribers.add(name, ["acme/alice"], added_by="bench")
            ackers = [_start(where, "ack", name, service.feed.head()) for name in names]
            times = []
            for i in range(forgets):
                item_id = alice.remember(note_fact(10_000_000 + i)).item_id
                started = time.perf_counter()
                report = alice.forget(item_id)
                while service.ledger.latest_status(report.request_id) != "completed":
                    time.sleep(0.002)
                times.append((time.perf_counter() - started) * 1000)
            out["forget_ms"][str(n)] = statistics.median(times)
            for name in names:
                service.subscribers.retire(service, name, retired_by="bench")
            for acker in ackers:
                acker.kill()
                acker.wait()
    return out


def _start(where: list[str | None], mode: str, name: str | None, cursor: str | None) -> Any:
    process = subprocess.Popen(
        [sys.executable, "-c", _FOLLOW, json.dumps([*where, mode, name, cursor])],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def _collect(process: Any, expected: int) -> dict[str, float]:
    arrived: dict[str, float] = {}
    for line in process.stdout:
        item_id, at = line.split()
        arrived[item_id] = float(at)
        if len(arrived) >= expected:
            break
    process.kill()
    process.wait()
    return arrived


def _read_rate(process: Any) -> float:
    for line in process.stdout:
        if line.startswith("read"):
            _, count, seconds = line.split()
            process.wait()
            return int(count) / max(float(seconds), 1e-9)
    raise RuntimeError("a reader ended without a result")


def _pct(values: list[float], pct: int) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, round(pct / 100 * (len(values) - 1)))]


def _now() -> str:
    return datetime.now(UTC).isoformat()


if __name__ == "__main__":
    raise SystemExit(main())
