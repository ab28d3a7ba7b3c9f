"""The scale benchmark: 1,000 users of 1,000 items and one user of 100,000 (1.1M items)
on PostgreSQL, with several processes (issue 39, item 5).

Run from the repository root (the defaults are the 1M run; scale down to develop):

    python -m benchmarks.bench_scale                                   # 1.1M items
    python -m benchmarks.bench_scale --users 20 --per-user 1000 --heavy 10000
    python -m benchmarks.bench_scale --reuse-db ml_scale_1m            # keep the fill
    python -m benchmarks.bench_scale --skip http,rebuild

The store is a fresh database `ml_bench_<random>` (dropped at the end), or with
`--reuse-db NAME` the database NAME, filled on the first run and kept: the fill is the
slow part. Items are realistic: multi-speaker turns (bench_forget_namespace's filler) and
facts, each with provenance and a consent expiry spread over 100 days after 2031-01-01
(1% of the store per day), so each run's retention sweep erases a known 1% (the next
day's share: a reused database sweeps day 1, then day 2, ...). The fill runs in
`--writers` processes (`remember_many` in batches of `--batch`), then the projections
catch up in two runner processes and the vector index (hashing embedder) in this one;
each rate is printed.

Parts (each can be left out with `--skip`):
- `recall`: `ledger.context(query, limit=10)` (no filters) in random 1k users and in the
  heavy user: the first call in a namespace (cold) apart from the next ones, the query's
  embedding timed apart, and `ledger.recall(limit=10)` beside it (the API has no
  `ledger.search`).
- `forget`: a single-item forget of a random live fact in a random 1k user and in the
  heavy user, interleaved with the same run's baseline (`service.log.tombstone([item])`:
  the key destroyed and one event appended, nothing else).
- `sweep`: `jobs.retention.expire_due` once, items/s.
- `rebuild`: `memory-ledger rebuild --projection ...` of every projection in one runner
  process, then split over two processes side by side (the projections that read other
  projections' tables stay with them: see RUNNER_GROUPS).
- `http`: remember and context requests/s with 1, 2 and 4 `memory-ledger serve`
  processes on loopback against the same database (`--clients` threads, each with its
  own user's token and keep-alive connection, spread over the servers), and the same
  operations through the Python API in this process with as many threads. Every
  request asks a new query (the context cache serves none); the writes go to the
  first `--clients` users (a reused database grows by them). The servers start from
  this host's vector files (hard links) and are retired as hosts when they stop.

Every figure has wall time and CPU time (time.process_time, or the children's rusage):
the machine is shared. Output: a table and `benchmarks/results/scale.json` (`--out`).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import (
    DEFAULT_PG_URL,
    FACT_PREDICATES,
    PHRASES,
    SUBJECTS,
    Store,
    fresh_store,
    machine_info,
    pg_connect,
    pg_location,
)
from benchmarks.bench_forget_namespace import _filler, _provenance

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "scale.json"
ROOT = Path(__file__).resolve().parent.parent
TENANT = "scale"
HEAVY_USER = "heavy"
PARTS = ("recall", "forget", "sweep", "rebuild", "http")
FACT_SHARE = 0.3  # the rest are turns of several speakers
EXPIRY_T0 = datetime(2031, 1, 1, tzinfo=UTC)  # after any real clock: reads see items live
SWEEP_DAYS = 100  # item n of a user expires on day 1 + n % SWEEP_DAYS: 1% per day
FOLLOW_PAUSE = 0.5  # seconds between a following runner's catch-ups during the fill
FOLLOW_IDLE = 600.0  # a following runner gives up when the log stops growing this long
META_TABLE = "bench_scale_fill"  # in the benchmark's own database: sizes, key, sweeps
DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Two runner processes: mention_index reads nothing but the log; the keyword index and
# the summaries read the tables of transcripts, facts, preferences and catalog, so they
# are replayed beside them (a rebuild of one beside a concurrent rebuild of a table it
# reads would see that table half replayed).
RUNNER_GROUPS: tuple[tuple[str, ...], ...] = (
    ("transcripts", "facts", "preferences", "memory_files", "catalog", "keyword_index",
     "summaries"),
    ("mention_index",),
)  # fmt: skip
RECALL_QUERIES = (
    "what did the user say about the phone number and the meeting",
    "where does the user work and what is the job title",
    "who cleaned the side gate last week",
    "which allergy and dietary need should I remember",
    "ticket for room 12 in the east wing",
)
GOAL_FORGET_MS = 100.0
GOAL_RECALL_MS = 20.0
GOAL_HTTP_SCALING = 3.0  # 4 servers over 1 server
SERVER_COUNTS = (1, 2, 4)


@dataclass(frozen=True)
class Plan:
    users: int
    per_user: int
    heavy: int
    seed: int

    @property
    def items(self) -> int:
        return self.users * self.per_user + self.heavy


# -- the items ----------------------------------------------------------------------------


def user_name(index: int) -> str:
    """User `index` of the 1k users; -1 is the heavy user."""
    return HEAVY_USER if index < 0 else f"u{index:05d}"


def namespace_of(index: int) -> str:
    return f"{TENANT}/{user_name(index)}"


def writes_for(user: int, start: int, count: int, seed: int) -> list[dict[str, Any]]:
    """Items start..start+count of one user, the same on every run for the same seed."""
    rng = random.Random(f"{seed}:{user}:{start}")
    out = []
    for n in range(start, start + count):
        if rng.random() < FACT_SHARE:
            write: dict[str, Any] = {
                "kind": "fact",
                "subject": rng.choice(SUBJECTS),
                # one fact per predicate: none supersedes another, every fact stays live
                "predicate": f"{rng.choice(FACT_PREDICATES)}_{n}",
                "value": f"{rng.choice(PHRASES)} #{n:07d}",
                "category": "profile",
                # no `inferred`: the default policy gives those 90 days, and the sweep
                # (in 2031) would find them all due, not the day's known share
                "origin": rng.choices(("explicit", "observed"), (8, 2))[0],
                "confidence": round(rng.uniform(0.6, 1.0), 2),
                "sensitivity": "personal",
                "provenance": _provenance(n),
            }
        else:
            write = _filler(rng, n)
        expires = EXPIRY_T0 + timedelta(days=1 + n % SWEEP_DAYS, seconds=rng.randrange(3600))
        write["retention"] = {"basis": "consent", "expires_at": expires.isoformat()}
        out.append(write)
    return out


def fill_tasks(plan: Plan, chunk: int) -> list[tuple[int, int, int]]:
    """(user, start, count): the heavy user in chunks, each 1k user whole (a task each)."""
    tasks = [(-1, s, min(chunk, plan.heavy - s)) for s in range(0, plan.heavy, chunk)]
    tasks += [(u, 0, plan.per_user) for u in range(plan.users)]
    return tasks


# -- worker processes (writers and runners) ----------------------------------------------

_SERVICE: dict[str, Any] = {}


def _worker_init(env: dict[str, str], root: str, url: str) -> None:
    """Each worker opens its service before any task: tasks started together run
    together, not after one another's start-up."""
    os.environ.update(env)
    _worker_service(root, url)


def _worker_service(root: str, url: str) -> Any:
    """One service per worker process, in a data directory of its own (it holds no
    vectors, so it never registers as a host)."""
    if "service" not in _SERVICE:
        from memory_ledger.api import MemoryService

        _SERVICE["service"] = MemoryService.open(Path(root) / f"worker-{os.getpid()}", url)
    return _SERVICE["service"]


def _fill_task(root: str, url: str, task: tuple[int, int, int], seed: int, batch: int) -> dict:
    from memory_ledger.principal import Principal

    user, start, count = task
    service = _worker_service(root, url)
    ledger = service.for_principal(Principal(TENANT, user_name(user)))
    writes = writes_for(user, start, count, seed)
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(writes), batch):
        ledger.remember_many(writes[i : i + batch])
    return {
        "items": count,
        "seconds": time.perf_counter() - wall,
        "cpu_seconds": time.process_time() - cpu,
    }


def _runner_task(
    root: str, url: str, names: tuple[str, ...], rebuild: bool, until: int | None = None
) -> dict:
    """A runner of just `names` (as `memory-ledger run --projection` runs them): a
    catch-up, or a rebuild (drop, replay); with `until`, it follows the log as writers
    fill it, until its projections reach that position (or the log stops growing for
    FOLLOW_IDLE seconds: a writer failed). Times are wall clock, to compare processes."""
    service = _worker_service(root, url)
    runner = service.runner.only(list(names))
    began, cpu = time.time(), time.process_time()
    read = runner.rebuild(list(names)) if rebuild else runner.catch_up()
    if until is not None:
        head, moved = service.log.max_position(), time.monotonic()
        while min(runner.positions().values()) < until:
            time.sleep(FOLLOW_PAUSE)
            read += runner.catch_up()
            if (now := service.log.max_position()) != head:
                head, moved = now, time.monotonic()
            elif time.monotonic() - moved > FOLLOW_IDLE:
                break
    return {
        "projections": list(names),
        "events": read,
        "began": began,
        "ended": time.time(),
        "seconds": time.time() - began,
        "cpu_seconds": time.process_time() - cpu,
    }


def run_runners(
    bench: Bench, groups: Sequence[tuple[str, ...]], *, rebuild: bool
) -> dict[str, Any]:
    """One process per group, side by side; the span from the first start to the last end."""
    root, url = str(bench.root), bench.store.url
    context = get_context("spawn")
    with ProcessPoolExecutor(len(groups), context, _worker_init, (bench.env, root, url)) as pool:
        futures = [pool.submit(_runner_task, root, url, g, rebuild) for g in groups]
        runners = [f.result() for f in futures]
    seconds = max(r["ended"] for r in runners) - min(r["began"] for r in runners)
    events = max(r["events"] for r in runners)
    for leftover in bench.root.glob("worker-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    return {
        "events": events,
        "seconds": seconds,
        "cpu_seconds": sum(r["cpu_seconds"] for r in runners),
        "events_per_s": events / seconds if seconds else 0.0,
        "runners": runners,
    }


# -- the store ----------------------------------------------------------------------------


@dataclass
class Bench:
    store: Store
    root: Path  # data directories: this process's (vectors), workers', servers'
    env: dict[str, str]  # what every process of the run needs: URL, master key, embedder
    meta: dict[str, Any]


def _db_url(pg_url: str, name: str) -> str:
    parts = urlsplit(pg_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))


def _read_meta(url: str) -> dict[str, Any] | None:
    with pg_connect(pg_location(url)) as conn:
        row = conn.execute(f"SELECT to_regclass('{META_TABLE}')").fetchone()
        if row is None or row[0] is None:
            return None
        found = conn.execute(f"SELECT info FROM {META_TABLE} WHERE id = 1").fetchone()
        return dict(found[0]) if found else None


def _write_meta(url: str, meta: dict[str, Any]) -> None:
    with pg_connect(pg_location(url)) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (id int PRIMARY KEY, info jsonb)")
        conn.execute(
            f"INSERT INTO {META_TABLE} VALUES (1, %s) "
            "ON CONFLICT (id) DO UPDATE SET info = EXCLUDED.info",
            (json.dumps(meta),),
        )


@contextlib.contextmanager
def open_bench(pg_url: str, reuse: str | None, plan: Plan) -> Iterator[Bench]:
    """A fresh database (dropped at the end), or the kept database `reuse`: its master
    key and sizes are in its META_TABLE (a scratch database's key beside its data is
    no secret worth keeping); a database of that name holding anything else is refused."""
    if reuse is None:
        with fresh_store("postgresql", pg_url) as store:
            key = base64.b64encode(secrets.token_bytes(32)).decode()
            yield Bench(store, store.data_dir, _env(store.url, key), {"key": key})
        return
    url = _db_url(pg_url, reuse)
    with pg_connect(pg_location(pg_url)) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (reuse,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{reuse}"')
    meta = _read_meta(url) if exists else None
    if exists and meta is None:
        raise SystemExit(
            f"database {reuse} exists but holds no completed bench_scale fill: "
            f'drop it (DROP DATABASE "{reuse}") or choose another name'
        )
    if meta is not None and meta["plan"] != asdict(plan):
        raise SystemExit(
            f"database {reuse} holds a fill of {meta['plan']}, not {asdict(plan)}: "
            "run with those sizes, or choose another name"
        )
    key = meta["key"] if meta else base64.b64encode(secrets.token_bytes(32)).decode()
    root = Path(tempfile.gettempdir()) / f"ml_bench_scale_{reuse}"
    root.mkdir(parents=True, exist_ok=True)
    yield Bench(Store("postgresql", root, url), root, _env(url, key), meta or {"key": key})


def _env(url: str, key: str) -> dict[str, str]:
    return {
        "MEMORY_LEDGER_URL": url,
        "MEMORY_LEDGER_MASTER_KEY": key,
        "MEMORY_LEDGER_EMBEDDER": os.environ.get("MEMORY_LEDGER_EMBEDDER", "hashing:512"),
    }


def fill(bench: Bench, plan: Plan, writers: int, batch: int, console: Console) -> dict[str, Any]:
    """Write the plan's items in `writers` processes while one runner process per
    RUNNER_GROUPS entry follows the log (as `memory-ledger run --projection` would), so
    the projections are caught up soon after the last write. The vector index is caught
    up by the caller's service (it is this host's)."""
    tasks = fill_tasks(plan, chunk=max(batch, 5_000))
    root, url = str(bench.root), bench.store.url
    context = get_context("spawn")  # a fresh interpreter: no engine or lock inherited
    out: dict[str, Any] = {"writers": writers, "batch": batch}
    init = (bench.env, root, url)
    with (
        ProcessPoolExecutor(len(RUNNER_GROUPS), context, _worker_init, init) as runner_pool,
        ProcessPoolExecutor(writers, context, _worker_init, init) as pool,
    ):
        began = time.time()
        following = [
            runner_pool.submit(_runner_task, root, url, g, False, plan.items) for g in RUNNER_GROUPS
        ]
        wall = time.perf_counter()
        futures = [pool.submit(_fill_task, root, url, t, plan.seed, batch) for t in tasks]
        items = 0
        cpu = 0.0
        for done, future in enumerate(futures, 1):
            result = future.result()
            items += result["items"]
            cpu += result["cpu_seconds"]
            if done % max(1, len(tasks) // 10) == 0:
                rate = items / (time.perf_counter() - wall)
                console.log(f"fill: {items:,}/{plan.items:,} items, {rate:,.0f} items/s")
        seconds = time.perf_counter() - wall
        written = time.time()
        out["append"] = {
            "items": items,
            "seconds": seconds,
            "items_per_s": items / seconds,
            "writer_cpu_seconds": cpu,
        }
        console.log(f"fill: {items:,} items in {seconds:.0f} s, {items / seconds:,.0f} items/s")
        runners = [f.result() for f in following]
    ended = max(r["ended"] for r in runners)
    out["projections_catch_up"] = {
        "events": plan.items,
        "seconds": ended - began,
        "after_last_write_seconds": max(0.0, ended - written),
        "cpu_seconds": sum(r["cpu_seconds"] for r in runners),
        "events_per_s": plan.items / (ended - began),
        "runners": runners,
        "following_the_writers": True,
    }
    for leftover in bench.root.glob("worker-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    console.log(
        f"fill: projections caught up {ended - written:.0f} s after the last write "
        f"({plan.items / (ended - began):,.0f} ev/s from the first write)"
    )
    return out


# -- measurements -------------------------------------------------------------------------


def stats_ms(seconds: Sequence[float]) -> dict[str, float] | None:
    if not seconds:
        return None
    ms = sorted(s * 1000 for s in seconds)
    return {
        "n": len(ms),
        "p50": round(statistics.median(ms), 2),
        "p90": round(ms[min(len(ms) - 1, int(len(ms) * 0.9))], 2),
        "max": round(ms[-1], 2),
    }


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU seconds of one call, and its result."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def random_facts(service: Any, namespace: str, count: int, rng: random.Random) -> list[str]:
    """`count` live facts of a namespace at random (read untimed, from the catalog)."""
    from sqlalchemy import text

    query = text(
        "SELECT item_id FROM catalog WHERE namespace = :ns AND kind = 'fact' "
        "AND NOT suppressed ORDER BY md5(item_id || :salt) LIMIT :n"
    )
    with service.engine.connect() as conn:
        found = [
            r[0] for r in conn.execute(query, {"ns": namespace, "salt": rng.random(), "n": count})
        ]
    if len(found) < count:
        raise SystemExit(f"{namespace} has {len(found)} live facts, {count} needed")
    return found


def bench_recall(service: Any, plan: Plan, rounds: int, rng: random.Random) -> dict[str, Any]:
    """context(query, limit=10) with no filters, and recall(limit=10): the first call in a
    namespace (its filter state is built: cold) apart from the calls after it."""
    from memory_ledger.principal import Principal

    out: dict[str, Any] = {}
    for label, users in (("1k user", list(range(plan.users))), ("heavy user", [-1])):
        if not users or (label == "heavy user" and not plan.heavy):
            continue
        sink: dict[str, list[float]] = {
            k: [] for k in ("cold", "context", "context_cpu", "embed", "without_embed", "recall")
        }
        for r in range(rounds):
            ledger = service.for_principal(Principal(TENANT, user_name(rng.choice(users))))
            for k, query in enumerate(RECALL_QUERIES):
                embed_s, _, _ = timed(partial(service.vectors.embed_query, query))
                service.context_cache.clear()  # built, not served from the cache
                wall, cpu, _ = timed(partial(ledger.context, query, limit=10))
                if k == 0 and (label == "1k user" or r == 0):
                    sink["cold"].append(wall)
                    continue
                sink["context"].append(wall)
                sink["context_cpu"].append(cpu)
                sink["embed"].append(embed_s)
                sink["without_embed"].append(max(0.0, wall - embed_s))
            sink["recall"].append(timed(partial(ledger.recall, limit=10))[0])
        out[label] = {key: stats_ms(values) for key, values in sink.items()}
    return out


def bench_forget(service: Any, plan: Plan, forgets: int, rng: random.Random) -> dict[str, Any]:
    """Single-item forgets interleaved with the baseline, each in its own random user
    (1k users) or in the heavy user; a `partial` answer is counted apart, not timed."""
    from memory_ledger.principal import Principal

    cases = [("1k user", u) for u in rng.sample(range(plan.users), min(forgets, plan.users))]
    cases = (cases * (forgets // max(1, len(cases)) + 1))[:forgets] if plan.users else []
    cases += [("heavy user", -1)] * (forgets if plan.heavy else 0)
    picks: dict[str, list[str]] = {}
    for _, user in cases:
        ns = namespace_of(user)
        if ns not in picks:
            need = 2 * sum(1 for _, u in cases if u == user)
            picks[ns] = random_facts(service, ns, need, rng)
    sink: dict[str, dict[str, list[float]]] = {}
    partials: list[dict[str, Any]] = []
    # interleaved: each case's baseline then its forget; a 1k user, then the heavy user
    order = sorted(range(len(cases)), key=lambda i: (i % forgets, i // forgets))
    for i in order:
        label, user = cases[i]
        ns = namespace_of(user)
        ledger = service.for_principal(Principal(TENANT, user_name(user)))
        target, throwaway = picks[ns].pop(), picks[ns].pop()
        into = sink.setdefault(label, {"baseline": [], "baseline_cpu": [], "forget": [],
                                       "forget_cpu": []})  # fmt: skip
        wall, cpu, _ = timed(partial(service.log.tombstone, [throwaway], "benchmark_baseline"))
        into["baseline"].append(wall)
        into["baseline_cpu"].append(cpu)
        wall, cpu, report = timed(partial(ledger.forget, target))
        if report.status == "partial":
            partials.append({"namespace": ns, "failed": sorted(report.failed_stores)})
            continue
        if report.status != "completed":
            raise SystemExit(f"forget in {ns} answered {report.status}")
        into["forget"].append(wall)
        into["forget_cpu"].append(cpu)
    out: dict[str, Any] = {
        label: {k: stats_ms(v) for k, v in values.items()} for label, values in sink.items()
    }
    out["partial"] = partials
    return out


def bench_sweep(service: Any, bench: Bench, plan: Plan) -> dict[str, Any]:
    """The next day's share expires: one sweep, timed, must erase every due item."""
    from jobs.retention import due_items, expire_due

    day = int(bench.meta.get("sweeps", 0)) + 1
    if day > SWEEP_DAYS:
        raise SystemExit(f"every one of the {SWEEP_DAYS} expiry days was swept: refill")
    now = EXPIRY_T0 + timedelta(days=day, hours=2)
    context = service.job_context
    due = sum(len(ids) for ids in due_items(context, now).values())  # also catches up
    wall, cpu, reports = timed(lambda: expire_due(context, now))
    statuses = sorted({r.status for r in reports})
    left = sum(len(ids) for ids in due_items(context, now).values())
    bench.meta["sweeps"] = day
    return {
        "day": day,
        "items_in_store": plan.items,
        "due": due,
        "due_share": due / plan.items if plan.items else 0.0,
        "requests": len(reports),
        "statuses": statuses,
        "left_due_after": left,
        "seconds": wall,
        "cpu_seconds": cpu,
        "items_per_s": due / wall if wall else 0.0,
    }


def bench_rebuild(service: Any, bench: Bench, console: Console) -> dict[str, Any]:
    """Every projection rebuilt (dropped, replayed) by one runner process, then by
    RUNNER_GROUPS in one process each, side by side: runners of just their projections,
    the `memory-ledger run --projection` shape. (`memory-ledger rebuild --projection`
    is not that shape: it replays through the all-projection runner, whose catch-up
    locks every projection's tracking row, so two of them take turns.)"""
    service.runner.catch_up()
    out: dict[str, Any] = {"events": service.log.max_position()}
    for runners, groups in ((1, (tuple(sum(RUNNER_GROUPS, ())),)), (2, RUNNER_GROUPS)):
        out[f"{runners}_runner"] = result = run_runners(bench, groups, rebuild=True)
        behind = [s.name for s in service.runner.status() if s.behind > 0]
        if behind:
            raise SystemExit(f"after the rebuild with {runners} runner(s), behind: {behind}")
        console.log(f"rebuild, {runners} runner(s): {result['events_per_s']:,.0f} events/s")
    return out


# -- HTTP ---------------------------------------------------------------------------------


def _http_write(n: int, tag: str) -> dict[str, Any]:
    return {
        "kind": "turn",
        "subject": "user",
        "content": f"can you ask someone to look at the side gate, note {tag}-{n}?",
        "origin": "explicit",
        "sensitivity": "personal",
        "provenance": {
            "writer": "agent.assistant",
            "written_at": datetime.now(UTC).isoformat(),
            "turn_id": f"{tag}-{n}",
            "session_id": f"{tag}",
        },
    }


def load_query(client: int, n: int) -> str:
    """A query no earlier request asked: the context cache serves none of the load."""
    return f"{RECALL_QUERIES[n % len(RECALL_QUERIES)]} (client {client}, turn {n})"


def _load(clients: int, seconds: float, call: Callable[[int, int], None]) -> dict[str, Any]:
    """`clients` threads calling `call(client, n)` for `seconds`: requests/s, latency,
    and this process's CPU (the load generator's own cost)."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def run(client: int) -> None:
        n = 0
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            try:
                call(client, n)
            except Exception as exc:  # counted and shown, never hidden
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                n += 1
                continue
            with lock:
                latencies.append(time.perf_counter() - began)
            n += 1

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    cpu, wall = time.process_time(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - wall
    return {
        "requests": len(latencies),
        "requests_per_s": len(latencies) / elapsed,
        "seconds": elapsed,
        "client_cpu_seconds": time.process_time() - cpu,
        "latency_ms": stats_ms(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def _each(clients: int, call: Callable[[int, int], None]) -> None:
    """One call per client (untimed warm-ups)."""
    for client in range(clients):
        call(client, 0)


def _pid_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux /proc)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _seed_server_dir(source: Path, target: Path) -> None:
    """A server's data directory starts with this host's vector files, hard-linked (every
    write of the index renames a new file into place, so none is changed in place): it
    does not embed 1M items again. Not the lock file, the host id or the instance file:
    each server is a host of its own."""
    for sub in ("vectors", "vector-codes", "recall"):
        if not (source / sub).is_dir():
            continue
        (target / sub).mkdir(parents=True, exist_ok=True)
        for path in (source / sub).iterdir():
            if path.is_file() and not path.name.startswith("."):
                try:
                    os.link(path, target / sub / path.name)
                except OSError:
                    shutil.copy2(path, target / sub / path.name)


def bench_http(
    service: Any, bench: Bench, plan: Plan, clients: int, seconds: float, console: Console
) -> dict[str, Any]:
    from memory_ledger.access import TokenStore
    from memory_ledger.http.instance import INSTANCE_FILE
    from memory_ledger.http.instance import read as read_instance
    from memory_ledger.http.local import serve_locally
    from memory_ledger.principal import Principal
    from memory_ledger.times import now

    users = [u for u in range(min(clients, plan.users))] or [-1]
    client_user = [users[c % len(users)] for c in range(clients)]
    tokens = TokenStore(service.settings, now)
    try:
        token_of = {
            u: tokens.create(namespace_of(u), "agent", label="bench_scale")[1] for u in users
        }
    finally:
        tokens.close()
    env = {**os.environ, **bench.env, "PYTHONPATH": str(ROOT), "MEMORY_LEDGER_LOG_LEVEL": "warning"}
    stamp = secrets.token_hex(3)
    service.vectors.catch_up()
    out: dict[str, Any] = {"clients": clients, "seconds_per_phase": seconds, "users": len(users)}

    # the Python API in this process: the same operations, as many threads
    ledgers = {u: service.for_principal(Principal(TENANT, user_name(u))) for u in users}
    for u in users:
        ledgers[u].context(RECALL_QUERIES[0], limit=10)  # untimed: filter state built
    out["api"] = {
        "remember": _load(
            clients,
            seconds,
            lambda c, n: ledgers[client_user[c]].remember(_http_write(n, f"api{stamp}c{c}")),
        )
    }
    service.runner.catch_up()  # untimed, as over HTTP: the indexes catch up on the writes
    service.vectors.catch_up()
    for u in users:
        ledgers[u].context(RECALL_QUERIES[0], limit=10)
    out["api"]["context"] = _load(
        clients,
        seconds,
        lambda c, n: ledgers[client_user[c]].context(load_query(c, n), limit=10),
    )
    console.log(
        f"http: Python API remember {out['api']['remember']['requests_per_s']:,.0f}/s, "
        f"context {out['api']['context']['requests_per_s']:,.0f}/s"
    )

    hosts: list[str] = []
    try:
        for count in SERVER_COUNTS:
            dirs = [bench.root / f"serve-{count}-{k}" for k in range(count)]
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
                _seed_server_dir(bench.root, d)
            with contextlib.ExitStack() as stack:
                began = time.perf_counter()
                bases = [stack.enter_context(serve_locally(d, env=env)) for d in dirs]
                started_s = time.perf_counter() - began
                pids = [i.pid for d in dirs if (i := read_instance(d / INSTANCE_FILE))]
                sessions = [
                    httpx.Client(
                        base_url=bases[c % count],
                        headers={"Authorization": f"Bearer {token_of[client_user[c]]}"},
                        timeout=120,
                    )
                    for c in range(clients)
                ]
                for session in sessions:
                    stack.callback(session.close)

                def context(c: int, n: int, sessions: list[httpx.Client] = sessions) -> None:
                    answer = sessions[c].post(
                        "/v1/context",
                        json={"query": load_query(c, n), "limit": 10},
                    )
                    answer.raise_for_status()

                def remember(
                    c: int,
                    n: int,
                    tag: str = f"h{count}{stamp}",
                    sessions: list[httpx.Client] = sessions,
                ) -> None:
                    answer = sessions[c].post("/v1/memories", json=_http_write(n, f"{tag}c{c}"))
                    answer.raise_for_status()

                warm_s, _, _ = timed(partial(_each, clients, context))
                server_cpu = [_pid_cpu(p) for p in pids]
                result: dict[str, Any] = {"remember": _load(clients, seconds, remember)}
                for c in range(clients):  # untimed: the indexes catch up on the writes
                    context(c, 0)  # (each client keeps its server and its user)
                result["context"] = _load(clients, seconds, context)
                result["server_cpu_seconds"] = sum(
                    _pid_cpu(p) - c for p, c in zip(pids, server_cpu, strict=True)
                )
                result["start_seconds"] = started_s
                result["warm_up_seconds"] = warm_s
                out[f"{count}_servers"] = result
                console.log(
                    f"http: {count} server(s): remember "
                    f"{result['remember']['requests_per_s']:,.0f}/s, context "
                    f"{result['context']['requests_per_s']:,.0f}/s"
                )
            for d in dirs:
                with contextlib.suppress(OSError, ValueError):
                    hosts.append(json.loads((d / "host.json").read_text())["host"])
    finally:
        # the servers' indexes are gone with them: retired, so no later forget waits for them
        retire_hosts(service, hosts)
        for d in bench.root.glob("serve-*"):
            shutil.rmtree(d, ignore_errors=True)
    for op in ("remember", "context"):
        one = out["1_servers"][op]["requests_per_s"]
        out[f"{op}_scaling_4_over_1"] = out["4_servers"][op]["requests_per_s"] / one if one else 0
        api = out["api"][op]["requests_per_s"]
        out[f"{op}_1_server_over_api"] = one / api if api else 0.0
    return out


def retire_hosts(service: Any, names: Sequence[str]) -> list[str]:
    """Retire registered hosts (this benchmark's servers, gone): their pending acks end."""
    active = {s.name for s in service.subscribers.active()}
    retired = []
    for name in names:
        if name in active and name != str(service.subscribers.local):
            service.operations.retire_subscriber(name, retired_by="bench_scale")
            retired.append(name)
    return retired


# -- report -------------------------------------------------------------------------------


def _met(ok: bool) -> str:
    return "[green]yes[/green]" if ok else "[red]NO[/red]"


def render(report: dict[str, Any], console: Console) -> None:
    plan = report["plan"]
    table = Table(
        title=f"memory-ledger at scale, PostgreSQL: {plan['users']:,} users x "
        f"{plan['per_user']:,} + one of {plan['heavy']:,} = {report['items']:,} items"
    )
    for name in (
        "part",
        "measure",
        "p50 / value",
        "p90",
        "same-run baseline",
        "CPU",
        "goal",
        "met",
    ):
        table.add_column(name, justify="left" if name in ("part", "measure") else "right")

    def row(part: str, measure: str, *cells: str) -> None:
        table.add_row(part, measure, *cells, *([""] * (6 - len(cells))))

    if fill := report.get("fill"):
        a, p = fill["append"], fill["projections_catch_up"]
        row(
            "fill",
            f"remember_many, {fill['writers']} writers, batch {fill['batch']}",
            f"{a['items_per_s']:,.0f} items/s",
            "",
            "",
            f"{a['writer_cpu_seconds']:.0f} s",
        )
        row(
            "fill",
            f"projections, {len(p['runners'])} runners following the writers",
            f"{p['events_per_s']:,.0f} ev/s",
            f"+{p.get('after_last_write_seconds', 0):.0f} s",
            "",
            f"{p['cpu_seconds']:.0f} s",
        )
    if vec := report.get("vector_catch_up"):
        row(
            "fill",
            "vector index catch-up (hashing)",
            f"{vec['rows_per_s']:,.0f} ev/s",
            "",
            "",
            f"{vec['cpu_seconds']:.0f} s",
        )
    table.add_section()
    for label, r in report.get("recall", {}).items():
        ctx, cpu = r["context"], r["context_cpu"]
        if ctx:
            row(
                "recall",
                f"context(limit=10), {label}",
                f"{ctx['p50']:.1f} ms",
                f"{ctx['p90']:.1f} ms",
                "",
                f"{cpu['p50']:.1f} ms",
                f"< {GOAL_RECALL_MS:.0f} ms",
                _met(ctx["p50"] < GOAL_RECALL_MS),
            )
            row(
                "recall",
                f"  of which query embedding, {label}",
                f"{r['embed']['p50']:.2f} ms",
                f"{r['embed']['p90']:.2f} ms",
            )
            row(
                "recall",
                f"  without the embedding, {label}",
                f"{r['without_embed']['p50']:.1f} ms",
                f"{r['without_embed']['p90']:.1f} ms",
            )
        if r["cold"]:
            row(
                "recall",
                f"first context in the namespace, {label}",
                f"{r['cold']['p50']:.1f} ms",
                f"{r['cold']['p90']:.1f} ms",
            )
        if r["recall"]:
            row(
                "recall",
                f"recall(limit=10), {label}",
                f"{r['recall']['p50']:.1f} ms",
                f"{r['recall']['p90']:.1f} ms",
            )
    table.add_section()
    for label, r in report.get("forget", {}).items():
        if label == "partial" or not r["forget"]:
            continue
        f, b = r["forget"], r["baseline"]
        row(
            "forget",
            f"single item, {label}",
            f"{f['p50']:.1f} ms",
            f"{f['p90']:.1f} ms",
            f"{b['p50']:.1f} ms ({f['p50'] / max(b['p50'], 1e-6):.0f}x)",
            f"{r['forget_cpu']['p50']:.1f} ms",
            f"< {GOAL_FORGET_MS:.0f} ms",
            _met(f["p50"] < GOAL_FORGET_MS),
        )
    if s := report.get("sweep"):
        table.add_section()
        row(
            "sweep",
            f"retention, {s['due']:,} due ({s['due_share']:.1%}), {s['requests']} req",
            f"{s['items_per_s']:,.0f} items/s",
            "",
            "",
            f"{s['cpu_seconds']:.1f} s",
        )
    if rb := report.get("rebuild"):
        table.add_section()
        for runners in (1, 2):
            m = rb[f"{runners}_runner"]
            row(
                "rebuild",
                f"{rb['events']:,} events, {runners} runner process(es)",
                f"{m['events_per_s']:,.0f} ev/s",
                "",
                "",
                f"{m['cpu_seconds']:.0f} s",
            )
    if h := report.get("http"):
        table.add_section()
        for op in ("remember", "context"):
            api = h["api"][op]
            row(
                "http",
                f"{op}, Python API, {h['clients']} threads",
                f"{api['requests_per_s']:,.0f} req/s",
                f"{api['latency_ms']['p90']:.0f} ms",
                "",
                f"{api['client_cpu_seconds']:.0f} s",
            )
            for count in SERVER_COUNTS:
                m = h[f"{count}_servers"][op]
                goal = met = ""
                if count == SERVER_COUNTS[-1]:
                    goal = f">= {GOAL_HTTP_SCALING:.0f}x 1 server"
                    met = _met(h[f"{op}_scaling_4_over_1"] >= GOAL_HTTP_SCALING)
                ratio = m["requests_per_s"] / max(h["1_servers"][op]["requests_per_s"], 1e-9)
                row(
                    "http",
                    f"{op}, {count} server(s), {h['clients']} clients",
                    f"{m['requests_per_s']:,.0f} req/s ({ratio:.2f}x)",
                    f"{m['latency_ms']['p90'] if m['latency_ms'] else 0:.0f} ms",
                    f"API {api['requests_per_s']:,.0f}",
                    f"{h[f'{count}_servers']['server_cpu_seconds']:.0f} s srv",
                    goal,
                    met,
                )
    table.caption = (
        "Projections: events/s from the first write to caught up, and how long after the "
        "last write. p90 of HTTP rows: request latency. CPU: this process's CPU per call (recall, "
        "forget), the sweep's, the runner or writer processes', the servers' over both "
        "phases. Forget baseline: EventLog.tombstone of one item (key destroyed, one event)."
    )
    console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--users", type=int, default=1000, help="users of --per-user items")
    parser.add_argument("--per-user", type=int, default=1000)
    parser.add_argument("--heavy", type=int, default=100_000, help="items of the one heavy user")
    parser.add_argument("--skip", default="", help=f"comma-separated parts: {','.join(PARTS)}")
    parser.add_argument("--reuse-db", metavar="NAME", help="keep the filled database NAME")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="server URL (admin database)")
    parser.add_argument("--writers", type=int, default=2, help="writer processes for the fill")
    parser.add_argument("--batch", type=int, default=500, help="items per remember_many")
    parser.add_argument("--forgets", type=int, default=15, help="timed forgets per user kind")
    parser.add_argument("--recall-rounds", type=int, default=10, help="users tried per kind")
    parser.add_argument("--clients", type=int, default=8, help="HTTP load threads")
    parser.add_argument("--http-seconds", type=float, default=10.0, help="per phase")
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.skip = {p.strip() for p in args.skip.split(",") if p.strip()}
    if unknown := args.skip - set(PARTS):
        parser.error(f"--skip: unknown part(s) {', '.join(sorted(unknown))}; use {','.join(PARTS)}")
    if args.users < 0 or args.heavy < 0 or args.per_user < 1 or args.users + args.heavy == 0:
        parser.error("--users and --heavy at least 0 (not both 0), --per-user at least 1")
    if not 1 <= args.writers <= 16 or not 1 <= args.batch <= 1000:
        parser.error("--writers from 1 to 16, --batch from 1 to 1000")
    if args.forgets < 1 or args.recall_rounds < 1 or args.clients < 1 or args.http_seconds <= 0:
        parser.error("--forgets, --recall-rounds and --clients at least 1, --http-seconds > 0")
    if args.reuse_db is not None and not DB_NAME.fullmatch(args.reuse_db):
        parser.error("--reuse-db: a database name of [a-z_][a-z0-9_]*, at most 63 characters")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", "hashing:512")  # a 1M fill embeds all
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 140))
    try:
        with pg_connect(pg_location(args.pg_url)):
            pass
    except psycopg.Error as exc:
        console.print(f"[red]cannot connect to {pg_location(args.pg_url).masked()}: {exc}")
        return 2
    plan = Plan(args.users, args.per_user, args.heavy, args.seed)
    rng = random.Random(args.seed)
    machine = machine_info(["postgresql"], args.pg_url)
    started = time.perf_counter()
    report: dict[str, Any] = {
        "benchmark": "scale",
        "command": " ".join(
            ["python -m benchmarks.bench_scale", *(sys.argv[1:] if argv is None else argv)]
        ),
        "plan": asdict(plan),
        "items": plan.items,
        "skipped": sorted(args.skip),
        "embedder": os.environ["MEMORY_LEDGER_EMBEDDER"],
        "machine": machine,
        "search": "MemoryLedger has no search(): context and recall are measured",
    }
    with open_bench(args.pg_url, args.reuse_db, plan) as bench:
        os.environ.update(bench.env)
        report["reused_db"] = "fill" in bench.meta
        if "fill" not in bench.meta:
            console.log(f"filling {plan.items:,} items with {args.writers} writer process(es)")
            report["fill"] = fill(bench, plan, args.writers, args.batch, console)
            bench.meta.update({"plan": asdict(plan), "fill": report["fill"]})
            if args.reuse_db:
                _write_meta(bench.store.url, bench.meta)
        else:
            console.log(f"reusing database {args.reuse_db}: {plan.items:,} items")
            report["fill_when_made"] = bench.meta["fill"]
        from memory_ledger.api import MemoryService

        service = MemoryService.open(bench.root, bench.store.url)
        try:
            service.runner.catch_up()
            wall, cpu, read = timed(service.vectors.catch_up)
            report["vector_catch_up"] = {
                "events": read,
                "seconds": wall,
                "cpu_seconds": cpu,
                "rows_per_s": read / wall if wall else 0.0,
            }
            console.log(f"vector index caught up: {read:,} events in {wall:.0f} s")
            # a host of an earlier run that is gone would hold every forget `partial`
            stale = [s.name for s in service.subscribers.active() if s.name.startswith("host-")]
            report["retired_stale_hosts"] = retire_hosts(service, stale)
            if "recall" not in args.skip:
                report["recall"] = bench_recall(service, plan, args.recall_rounds, rng)
                console.log("recall measured")
            if "forget" not in args.skip:
                report["forget"] = bench_forget(service, plan, args.forgets, rng)
                console.log("forget measured")
            if "sweep" not in args.skip:
                report["sweep"] = bench_sweep(service, bench, plan)
                if args.reuse_db:
                    _write_meta(bench.store.url, bench.meta)
                console.log(f"sweep: {report['sweep']['items_per_s']:,.0f} items/s")
            if "rebuild" not in args.skip:
                report["rebuild"] = bench_rebuild(service, bench, console)
            if "http" not in args.skip:
                report["http"] = bench_http(
                    service, bench, plan, args.clients, args.http_seconds, console
                )
        finally:
            service.close()
    report["total_seconds"] = time.perf_counter() - started
    machine["load_average_at_end"] = list(os.getloadavg())
    render(report, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"total {report['total_seconds']:.0f} s; results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
