"""The HTTP layer's cost: remember and context over HTTP against the same operations
through the Python API, and server-sent-event delivery lag.

Run from the repository root:

    python -m benchmarks.bench_http              # 8 clients, 20 s per phase, ~3 min
    python -m benchmarks.bench_http --quick      # 4 clients, 3 s per phase

One heavy user (`--items` facts written first, default 5,000) in a fresh SQLite store.
Each round runs the HTTP phase against a real `memory-ledger serve` process on loopback
(`--clients` threads, each with its own keep-alive connection, for `--seconds`; one
untimed context call between the two operations lets the indexes catch up with the
writes, in both phases), then
stops the server and runs the same operations through `MemoryLedger` with as many
threads in this process: the baseline, interleaved with the HTTP phases over `--rounds`
rounds. Throughput and p50/p99 latency per operation, and the HTTP/API throughput ratio
(per round, and over all rounds: 1.0 would be a service that adds nothing). Then the
change feed: a client follows `/v1/feed` while this process writes `--writes` memories
one at a time over HTTP; the lag is the notice's arrival minus the moment the write's
response arrived (p50/p99).

Results are printed as a table and written as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from memory_ledger.http.local import serve_locally

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "http.json"
ROOT = Path(__file__).resolve().parent.parent
QUERIES = ["home address", "project meeting room", "detail of project 12", "where I work"]


def _write(i: int, tag: str) -> dict[str, Any]:
    return {
        "kind": "fact", "subject": "user", "predicate": f"{tag}_{i}",
        "value": f"detail {i} of project {i % 97}", "origin": "observed",
        "sensitivity": "internal",
        "provenance": {"writer": "bench", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": f"s{i // 50}", "turn_id": f"t{i}"},
    }  # fmt: skip


def _load(clients: int, seconds: float, call: Callable[[int, int], None]) -> dict[str, Any]:
    """`clients` threads calling `call(client, n)` for `seconds`; latencies in ms."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def run(client: int) -> None:
        n = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                call(client, n)
            except Exception:
                with lock:
                    errors[0] += 1
                continue
            with lock:
                latencies.append((time.perf_counter() - started) * 1000)
            n += 1

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {
        "ops": len(ordered),
        "ops_per_s": round(len(ordered) / elapsed, 1),
        "p50_ms": round(statistics.median(ordered), 2) if ordered else None,
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2)
        if ordered
        else None,
        "errors": errors[0],
    }


def http_phase(base: str, token: str, clients: int, seconds: float, round_: int) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    sessions = [httpx.Client(base_url=base, headers=headers, timeout=60) for _ in range(clients)]

    def remember(client: int, n: int) -> None:
        r = sessions[client].post("/v1/memories", json=_write(n, f"h{round_}c{client}"))
        r.raise_for_status()

    def context(client: int, n: int) -> None:
        r = sessions[client].post("/v1/context", json={"query": QUERIES[n % len(QUERIES)]})
        r.raise_for_status()

    try:
        written = _load(clients, seconds, remember)
        context(0, 0)  # untimed: the indexes catch up with what was just written
        return {"remember": written, "context": _load(clients, seconds, context)}
    finally:
        for s in sessions:
            s.close()


def api_phase(data_dir: Path, clients: int, seconds: float, round_: int) -> dict:
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal

    with MemoryService.open(data_dir) as service:
        ledger = service.for_principal(Principal("bench", "user"))

        def remember(client: int, n: int) -> None:
            ledger.remember(_write(n, f"a{round_}c{client}"))

        def context(client: int, n: int) -> None:
            ledger.context(QUERIES[n % len(QUERIES)])

        written = _load(clients, seconds, remember)
        context(0, 0)  # untimed: the indexes catch up with what was just written
        return {"remember": written, "context": _load(clients, seconds, context)}


def feed_lag(base: str, token: str, writes: int) -> dict[str, Any]:
    """Notice arrival minus write response, for writes made one at a time."""
    headers = {"Authorization": f"Bearer {token}"}
    arrived: dict[str, float] = {}
    ready = threading.Event()

    def follow() -> None:
        # from the end of the feed: the backlog (the fill) is not what is measured
        params = {"wait": 5, **({"after": end} if end else {})}
        with httpx.stream(
            "GET", f"{base}/v1/feed", headers=headers, params=params, timeout=120
        ) as r:
            ready.set()
            for line in r.iter_lines():
                if line.startswith("data: "):
                    item = json.loads(line[6:]).get("item_id")
                    if item:
                        arrived[item] = time.perf_counter()

    end = None
    with httpx.stream(
        "GET", f"{base}/v1/feed", headers=headers, params={"wait": 0.2}, timeout=300
    ) as r:  # drain the backlog to find the end
        for line in r.iter_lines():
            if line.startswith("id: "):
                end = line[4:]
    with httpx.Client(base_url=base, headers=headers) as client:
        last = client.get("/v1/summary")  # warm the connection
        last.raise_for_status()
        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        ready.wait(10)
        time.sleep(0.5)
        written: dict[str, float] = {}
        for i in range(writes):
            r = client.post("/v1/memories", json=_write(i, "feed"))
            written[r.json()["memories"][0]["item_id"]] = time.perf_counter()
            time.sleep(0.05)
        deadline = time.time() + 10
        while len(set(written) & set(arrived)) < len(written) and time.time() < deadline:
            time.sleep(0.05)
    lags = sorted((arrived[i] - t) * 1000 for i, t in written.items() if i in arrived)
    return {
        "writes": writes,
        "delivered": len(lags),
        "p50_ms": round(statistics.median(lags), 2) if lags else None,
        "p99_ms": round(lags[min(len(lags) - 1, int(len(lags) * 0.99))], 2) if lags else None,
    }


def _ratio(http: list[dict[str, Any]], api: list[dict[str, Any]]) -> float | None:
    """HTTP throughput over the API's, summed over phases: 1.0 means the service adds
    nothing; the issue's goal is at least 0.5."""
    over = sum(a["ops_per_s"] for a in api)
    return round(sum(h["ops_per_s"] for h in http) / over, 2) if over else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--writes", type=int, default=100)
    parser.add_argument("--port", type=int, default=18765)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds, args.rounds, args.items, args.writes = 4, 3.0, 1, 500, 20
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing")
    from memory_ledger.access import TokenStore
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal
    from memory_ledger.times import now

    results: dict[str, Any] = {"clients": args.clients, "seconds": args.seconds, "rounds": []}
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        with MemoryService.open(data_dir) as service:
            ledger = service.for_principal(Principal("bench", "user"))
            for start in range(0, args.items, 500):
                ledger.remember_many(
                    [_write(i, "fill") for i in range(start, min(start + 500, args.items))]
                )
            service.vectors.catch_up()
            tokens = TokenStore(service.settings, now)
            token = tokens.create("bench/user", "agent", ["forget"])[1]
            tokens.close()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        for round_ in range(args.rounds):
            with serve_locally(data_dir, port=args.port, env=env) as base:
                http = http_phase(base, token, args.clients, args.seconds, round_)
            api = api_phase(data_dir, args.clients, args.seconds, round_)
            ratio = {op: _ratio([http[op]], [api[op]]) for op in ("remember", "context")}
            results["rounds"].append({"http": http, "api": api, "ratio": ratio})
        results["ratio"] = {
            op: _ratio([r["http"][op] for r in results["rounds"]],
                       [r["api"][op] for r in results["rounds"]])
            for op in ("remember", "context")
        }  # fmt: skip
        with serve_locally(data_dir, port=args.port, env=env) as base:
            results["feed"] = feed_lag(base, token, args.writes)
    render(results, Console())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title=f"HTTP against the Python API ({results['clients']} clients)")
    for column in ("round", "operation", "HTTP ops/s", "HTTP p50/p99 ms", "API ops/s",
                   "API p50/p99 ms", "HTTP/API throughput"):  # fmt: skip
        table.add_column(column)
    for n, r in enumerate(results["rounds"], 1):
        for op in ("remember", "context"):
            h, a = r["http"][op], r["api"][op]
            table.add_row(
                str(n), op, str(h["ops_per_s"]), f"{h['p50_ms']} / {h['p99_ms']}",
                str(a["ops_per_s"]), f"{a['p50_ms']} / {a['p99_ms']}", f"{r['ratio'][op]}x",
            )  # fmt: skip
    console.print(table)
    console.print(
        "HTTP/API throughput over all rounds (goal >= 0.5x): "
        + ", ".join(f"{op} {ratio}x" for op, ratio in results["ratio"].items())
    )
    f = results["feed"]
    console.print(
        f"SSE delivery lag: p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms "
        f"({f['delivered']}/{f['writes']} delivered)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
