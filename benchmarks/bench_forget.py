"""Forget latency: one item, one predicate, one whole user (50 items), one heavy user
(1,000 items), end to end, on SQLite and PostgreSQL, in stores of 10,000 and 100,000
items; two code versions measured in the same run, their forgets interleaved.

Run from the repository root:

    python -m benchmarks.bench_forget                  # this tree, default sizes, both backends
    python -m benchmarks.bench_forget --quick          # smoke run, seconds per backend
    python -m benchmarks.bench_forget --code old=/path/to/other/checkout --code new=.

Each `--code LABEL=DIR` is measured in a worker process of its own that imports
`memory_ledger`, `projections`, `jobs` and `restore` from DIR (and this benchmark from
this tree); the worker prints which `memory_ledger` it imported. For every backend and
size, each worker fills its own store with the same seed, one after the other; then
the forgets alternate between the workers, one at a time, the order flipping each
round (A B, B A, A B, ...), so a change in the machine's load reaches every version
alike. The benchmark feature-detects the forget flow it measures:

- `key proof` (sealed everywhere): `completed` with an `ok` receipt from every store,
  and on SQLite the key store's `key_bytes_gone` receipt `checked` with no key found;
  the byte scan of every file is scheduled (`ForgetRequests.scan_files`), not waited
  for, and is timed on its own after the single-item forgets, outside their latency.
- `byte scan` (the older flow): `completed` with an `ok` receipt from every store and,
  on SQLite, the residue scan of the data directory ran inside the call.

A forget is timed from the call (`MemoryLedger.forget(id)` or `forget_scope(scope)`) to
the returned RequestReport. A forget the service answers `partial` is counted apart and
left out of the latency figures; any other answer stops the run.

Stores: users of ITEMS_PER_USER items each (mixed facts/preferences/turns plus three
`home_address` facts) and HEAVY_USERS users of HEAVY_ITEMS items, spread through the
fill, written ITEMS_PER_USER per `remember_many` call, the total being the store's size.
Then the projections and the vector index are caught up (the embedder: `--embedder`,
default `hashing:512`, the product's dimension: a forget embeds nothing), the store is
settled (see `settle`), and every case runs on that store, each forget on a user no
other forget touches.

Where the time goes: the benchmark wraps the service's own steps (each store's erase,
ledger appends, key capture, the key proof and the checkpoints inside it, compaction,
the old byte scan, ...) with timers, so every forget reports its steps. One extra
single-item forget per version and backend at the largest size runs under cProfile.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import io
import json
import os
import pstats
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from unittest import mock

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import (
    Store,
    Writes,
    _met,
    add_common_options,
    fresh_store,
    machine_info,
    open_service,
    parse_common,
    pg_connect,
    pg_location,
    profile_rows,
    timed,
)

# Nothing from memory_ledger is imported here: a worker imports it from its --code DIR
# (see WORKER_BOOT) before it imports this module's worker functions' dependencies.

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "forget.json"

GOAL_ITEM_SECONDS = 0.025  # issue 11: single-item forget p50 at GOAL_ITEMS on SQLite
GOAL_GROWTH = 1.5  # ... growing at most 1.5x from 10,000 to GOAL_ITEMS items
GOAL_HEAVY_SECONDS = 0.500  # ... and a whole user of HEAVY_ITEMS items under 500 ms
GOAL_ITEMS = 100_000
GROWTH_FROM = 10_000
ITEMS_PER_USER = 50  # one remember_many call per ITEMS_PER_USER items fills the store
HEAVY_ITEMS = 1_000  # a heavy user's items
ADDRESSES_PER_USER = 3  # facts (user, home_address): the target of a predicate forget
TENANT = "acme"
CASES = ("item", "predicate", "user", "heavy")
CASE_LABELS = {
    "item": "one item (by id)",
    "predicate": "one predicate (3 items)",
    "user": f"one whole user ({ITEMS_PER_USER} items)",
    "heavy": f"one whole user ({HEAVY_ITEMS:,} items)",
}
DEFAULT_EMBEDDER = "hashing:512"
EMBEDDER_ENV = "MEMORY_LEDGER_EMBEDDER"
REPLY = "@@bench "  # prefix of a worker's reply lines on its stdout


@dataclass(frozen=True)
class Sizes:
    totals: tuple[int, ...]  # items per store, one store per size, backend and code
    repeats: dict[str, int]  # timed forgets per case and size, each on its own user
    warmup: int  # untimed forgets per case before the timed ones
    scans: int  # scheduled scans timed after the single-item forgets


DEFAULT_SIZES = Sizes(
    (10_000, 100_000), {"item": 30, "predicate": 20, "user": 10, "heavy": 5}, 1, 10
)
QUICK_SIZES = Sizes((3_000,), {"item": 5, "predicate": 3, "user": 2, "heavy": 1}, 1, 3)


# -- in-call attribution ------------------------------------------------------------------


#: Suffix of a step timed on another thread than the caller's: it overlaps the caller's
#: steps, so it is reported but not subtracted when `other` is worked out.
BESIDE = " (beside)"
#: Prefix of a step timed inside another timed step (a checkpoint inside the key proof):
#: reported, and already counted in its outer step.
INSIDE = "  in "


class Spans:
    """Timers around the service's own steps. Only the outermost wrapped call counts,
    so the buckets never overlap: a catch-up inside a projection's erase belongs to that
    erase. Whatever no bucket covers is reported as `other`. A step a worker thread runs
    (the older code's vector index erase, beside the scan) is counted per thread and
    named with BESIDE. A step wrapped `inner` is timed wherever it runs and named with
    INSIDE and its outer step: it is part of that step, and shown to say how much."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.missing: list[str] = []  # steps not found in the code measured
        self._local = threading.local()

    def reset(self) -> None:
        self.seconds = {}

    def _add(self, key: str, seconds: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds

    def wrap(self, name: str, fn: Callable[..., Any], inner: bool = False) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed_step(*args: Any, **kwargs: Any) -> Any:
            outer = getattr(self._local, "outer", None)
            if outer is not None:
                if not inner:
                    return fn(*args, **kwargs)
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    self._add(f"{INSIDE}{outer}: {name}", time.perf_counter() - start)
            self._local.outer = name
            main = threading.current_thread() is threading.main_thread()
            key = name if main else name + BESIDE
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._add(key, time.perf_counter() - start)
                self._local.outer = None

        return timed_step


def in_line(stages: dict[str, float]) -> float:
    """The steps that add up to the caller's time (neither beside nor inside another)."""
    return sum(v for k, v in stages.items() if not k.endswith(BESIDE) and not k.startswith(INSIDE))


@contextlib.contextmanager
def instrumented(service: Any, inner: bool = False) -> Iterator[Spans]:
    """Wrap the steps of a forget request on this service instance (and functions of
    `memory_ledger.forgetting.requests` and `key_proof`, as requests.py calls them);
    a step the code measured does not have is skipped and listed in `missing`.
    `inner`: also time the steps that run inside others (named with INSIDE)."""
    from memory_ledger.forgetting import requests as forget_requests

    key_proof = _optional_module("memory_ledger.forgetting.key_proof")
    key_bytes = getattr(key_proof, "KeyBytes", None)
    spans = Spans()
    targets: list[tuple[Any, str, str, bool]] = [
        (forget_requests, "resolve", "resolve", False),
        (forget_requests, "plaintext_copies", "plaintext copies", False),
        (forget_requests, "prove_keys_gone", "key proof (key_proof.prove)", False),
        (forget_requests, "confirm_targets", "confirm targets", False),
        (forget_requests, "identifiers_repeating", "values in identifiers", False),
        (forget_requests, "clear_strings", "scan needles: clear_strings", False),
        (forget_requests, "fragments", "scan needles: fragments", False),
        (key_bytes, "capture", "key capture (KeyBytes.capture)", False),
        (service.log, "get", "log.get", False),
        (service.runner, "catch_up", "catch-up", False),
        (service.ledger, "append", "ledger appends", False),
        (service.ledger, "append_many", "ledger appends", False),
        (service, "compact", "compact (service.compact)", False),
        (service.runner, "compact", "runner.compact (projections WAL)", False),
        (service.log, "compact", "log.compact (event store WAL)", True),
        (service.requests.residue, "after_erasure", "byte scan (residue.after_erasure)", False),
        (service.requests.residue, "keep", "fingerprints kept (residue.keep)", False),
        (service.requests, "_mentions", "mentions", False),
        (service.requests, "_destroy_index_keys", "index keys destroyed", False),
        *((store, "erase", f"erase: {store.name}", False) for store in service.stores),
    ]
    with contextlib.ExitStack() as stack:
        for obj, attr, name, nested in targets:
            if nested and not inner:
                continue
            original = getattr(obj, attr, None) if obj is not None else None
            if original is None:
                spans.missing.append(name)
                continue
            stack.enter_context(mock.patch.object(obj, attr, spans.wrap(name, original, nested)))
        yield spans


def _optional_module(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# -- filling a store ----------------------------------------------------------------------


def user_principal(index: int) -> Any:
    from memory_ledger.principal import Principal

    return Principal(TENANT, f"user-{index:05d}")


def user_writes(gen: Writes, count: int) -> list[dict[str, Any]]:
    """One user's items: mixed facts/preferences/turns, with three successive
    `home_address` facts spread among them (so the facts projection supersedes them)."""
    writes: list[dict[str, Any]] = []
    slots = {count * (k + 1) // (ADDRESSES_PER_USER + 1) for k in range(ADDRESSES_PER_USER)}
    for i in range(count):
        if i in slots:
            write = gen.fact()
            write.update(
                subject="user",
                predicate="home_address",
                origin="explicit",
                value=f"{gen.rng.randrange(1, 200)} Rue des Lilas, Lyon #{gen.n:07d}",
            )
        else:
            write = gen.mixed()
        writes.append(write)
    return writes


@dataclass(frozen=True)
class Plan:
    """Who is in the store and who each case forgets; the same for every code version."""

    users: int  # users of ITEMS_PER_USER items: 0 .. users-1
    heavy: list[int]  # users of HEAVY_ITEMS items: users .. users+len(heavy)-1
    by_case: dict[str, list[int]]  # warm-up users first
    profile_user: int | None

    @property
    def fill_order(self) -> list[tuple[int, int]]:
        """(user, items), the heavy users spread evenly through the normal ones."""
        order = [(u, ITEMS_PER_USER) for u in range(self.users)]
        for k, user in enumerate(self.heavy):
            order.insert((k + 1) * len(order) // (len(self.heavy) + 1), (user, HEAVY_ITEMS))
        return order

    def to_dict(self) -> dict[str, Any]:
        return {
            "users": self.users,
            "heavy": self.heavy,
            "by_case": self.by_case,
            "profile_user": self.profile_user,
        }


def make_plan(total_items: int, sizes: Sizes, profile: bool, seed: int) -> Plan:
    needed = {case: sizes.repeats[case] + sizes.warmup for case in CASES}
    heavy_items = needed["heavy"] * HEAVY_ITEMS
    users = (total_items - heavy_items) // ITEMS_PER_USER
    wanted = sum(n for c, n in needed.items() if c != "heavy") + (1 if profile else 0)
    if users < wanted or (total_items - heavy_items) % ITEMS_PER_USER:
        raise SystemExit(
            f"{total_items:,} items hold {needed['heavy']} users of {HEAVY_ITEMS:,} and "
            f"{max(users, 0)} of {ITEMS_PER_USER}; the cases need {wanted}: use a larger size"
        )
    rng = random.Random(seed)
    chosen = rng.sample(range(users), wanted)
    by_case: dict[str, list[int]] = {}
    for case in CASES:
        if case == "heavy":
            by_case[case] = list(range(users, users + needed[case]))
        else:
            by_case[case], chosen = chosen[: needed[case]], chosen[needed[case] :]
    return Plan(users, by_case["heavy"], by_case, chosen[0] if profile else None)


@dataclass
class Filled:
    seconds: float
    kinds: dict[str, int]
    kept: dict[int, list[tuple[str, str, str]]]  # user -> (item id, kind, predicate)


def fill_store(service: Any, plan: Plan, seed: int) -> Filled:
    gen = Writes(seed)
    kinds = {"fact": 0, "preference": 0, "turn": 0}
    keep = {u for us in plan.by_case.values() for u in us} | {plan.profile_user}
    kept: dict[int, list[tuple[str, str, str]]] = {}
    spent = 0.0
    for user, count in plan.fill_order:
        writes = user_writes(gen, count)
        ledger = service.for_principal(user_principal(user))
        for start_at in range(0, count, ITEMS_PER_USER):
            chunk = writes[start_at : start_at + ITEMS_PER_USER]
            for w in chunk:
                kinds[w["kind"]] += 1
            start = time.perf_counter()
            remembered = ledger.remember_many(chunk)
            spent += time.perf_counter() - start
            if user in keep:
                kept.setdefault(user, []).extend(
                    (r.item_id, r.kind, w.get("predicate") or "turn")
                    for r, w in zip(remembered, chunk, strict=True)
                )
    return Filled(spent, kinds, kept)


def data_dir_bytes(store: Store) -> tuple[int, int]:
    from memory_ledger.residue import files_under

    paths = files_under(store.data_dir)
    return len(paths), sum(p.stat().st_size for p in paths if p.exists())


# -- the cases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    case: str
    user: int
    call: Callable[[Any], Any]
    expected_targets: int
    kind: str | None = None
    item_id: str | None = None


def make_jobs(case: str, users: Sequence[int], filled: Filled, rng: random.Random) -> list[Job]:
    jobs = []
    for user in users:
        if case == "item":
            item_id, kind, _ = rng.choice([t for t in filled.kept[user] if t[2] != "home_address"])
            jobs.append(
                Job(case, user, lambda led, i=item_id: led.forget(i), 1, kind=kind, item_id=item_id)
            )
        elif case == "predicate":
            scope = {"kind": "predicate", "subject": "user", "predicate": "home_address"}
            jobs.append(Job(case, user, lambda led, s=scope: led.forget_scope(s), 3))
        else:
            scope = {"kind": "namespace"}
            count = HEAVY_ITEMS if case == "heavy" else ITEMS_PER_USER
            jobs.append(Job(case, user, lambda led, s=scope: led.forget_scope(s), count))
    return jobs


def flow_of(report: Any) -> str:
    """Which forget flow answered: `key proof` (a key_store/key_bytes_gone receipt) or
    `byte scan` (the older flow, the residue scan inside the call)."""
    proof = any(r.store == "key_store" and r.action == "key_bytes_gone" for r in report.receipts)
    return "key proof" if proof else "byte scan"


def check_report(service: Any, job: Job, report: Any, expect_proof: bool | None = None) -> str:
    """A forget counts as done only when `completed` with an ok receipt from every
    store, plus, on SQLite, the key store's proof that the destroyed keys' bytes are
    gone (key-proof flow) or a residue scan that ran (byte-scan flow). `partial` is kept
    and reported: it is the service saying that it is not done yet. Anything else stops
    the run. `expect_proof`: the code measured has the key proof (None: see whether
    the imported memory_ledger has it)."""
    if expect_proof is None:
        expect_proof = _optional_module("memory_ledger.forgetting.key_proof") is not None
    erased = len(report.targets) + len(report.cascaded)
    if erased != job.expected_targets:
        raise RuntimeError(
            f"{job.case} forget of user {job.user}: erased {erased} items, "
            f"expected {job.expected_targets}"
        )
    if report.status == "partial":
        return str(report.status)
    sqlite = service.settings.postgres is None
    stores = {*service.stores.names(), "files"}
    received = {r.store for r in report.receipts}
    bad = [f"{r.store}/{r.action}" for r in report.receipts if r.status != "ok"]
    if expect_proof:
        proofs = [
            r for r in report.receipts if r.store == "key_store" and r.action == "key_bytes_gone"
        ]
        ev = proofs[0].evidence if proofs else {}
        # checked is False on PostgreSQL by design: the server's files are not ours.
        proven = bool(proofs) and (
            (ev.get("checked") is True and ev.get("keys_found") == 0) if sqlite else True
        )
        why = f"key proof {ev or 'missing'}"
    else:
        proven = bool(report.residue_checked) or not sqlite
        why = f"residue scan ran: {report.residue_checked}"
    if report.status != "completed" or bad or not stores <= received or not proven:
        raise RuntimeError(
            f"{job.case} forget of user {job.user}: status {report.status}, failed {bad}, "
            f"missing receipts {sorted(stores - received)}, {why}"
        )
    return str(report.status)


def run_job(service: Any, spans: Spans, job: Job, expect_proof: bool) -> dict[str, Any]:
    ledger = service.for_principal(user_principal(job.user))
    spans.reset()
    seconds, report = timed(functools.partial(job.call, ledger))
    status = check_report(service, job, report, expect_proof)
    stages = dict(spans.seconds)
    stages["other"] = max(0.0, seconds - in_line(stages))
    run: dict[str, Any] = {
        "user": job.user,
        "request_id": report.request_id,
        "status": status,
        "flow": flow_of(report),
        "seconds": seconds,
        "targets": len(report.targets),
        "cascaded": len(report.cascaded),
        "stages": stages,
        "residue_checked": report.residue_checked,
        "residue_scan": report.residue_scan[:80],
    }
    proof = next((r for r in report.receipts if r.action == "key_bytes_gone"), None)
    if proof is not None:
        run["key_proof"] = {
            k: proof.evidence.get(k)
            for k in ("checked", "keys_searched", "keys_found", "bytes_read")
        }
    if status != "completed":
        run["failed_stores"] = report.failed_stores
        run["residue_files"] = [Path(f).name for f in report.residue_files]
    if job.kind is not None:
        run["kind"] = job.kind
    return run


def time_scan(service: Any, request_id: str) -> dict[str, Any]:
    """The scheduled verification scan of one request (jobs/verification_scan.py runs
    the same call): timed alone, not part of any forget's latency."""
    seconds, (outcome, receipt) = timed(functools.partial(service.requests.scan_files, request_id))
    sqlite = service.settings.postgres is None
    if sqlite and (receipt is None or receipt.status != "ok"):
        raise RuntimeError(
            f"verification scan of {request_id}: receipt "
            f"{None if receipt is None else (receipt.status, receipt.evidence)}, {outcome.how}"
        )
    return {
        "request_id": request_id,
        "seconds": seconds,
        "status": None if receipt is None else receipt.status,
        "files_scanned": outcome.scanned,
        "files_rebuilt": outcome.rebuilt,
        "how": outcome.how[:120],
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def distribution(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "max": max(values),
        "min": min(values),
        "mean": statistics.fmean(values),
    }


def summarize(all_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency figures over the completed forgets; partial ones are counted apart."""
    runs = [r for r in all_runs if r["status"] == "completed"]
    partial = [r for r in all_runs if r["status"] != "completed"]
    out: dict[str, Any] = {
        "n": len(runs),
        "partial": len(partial),
        "partial_seconds": [r["seconds"] for r in partial],
    }
    if not runs:
        return out
    out |= {
        "flow": sorted({r["flow"] for r in runs}),
        "items_per_forget": statistics.fmean(r["targets"] + r["cascaded"] for r in runs),
        "total": distribution([r["seconds"] for r in runs]),
        "stages_p50": {
            name: percentile([r["stages"].get(name, 0.0) for r in runs], 0.5)
            for name in sorted({k for r in runs for k in r["stages"]})
        },
    }
    return out


def profile_one(service: Any, job: Job, expect_proof: bool, top: int = 25) -> dict[str, Any]:
    """One extra forget under cProfile (not part of the timed figures)."""
    ledger = service.for_principal(user_principal(job.user))
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    report = job.call(ledger)
    profiler.disable()
    wall = time.perf_counter() - start
    check_report(service, job, report, expect_proof)
    return {
        "profiler": profiler,
        "wall_seconds_under_profiler": wall,
        **profile_rows(profiler, top),
    }


def settle(service: Any, store: Store) -> list[str]:
    """Bring a freshly filled store to a steady state before timing: (SQLite) its WAL
    checkpointed and a file whose pages are a fifth free rebuilt, as `memory-ledger run`'s
    hourly job would have by then; (PostgreSQL) vacuumed, analyzed and checkpointed, as
    autovacuum and the checkpointer would have. Otherwise they run during the timed
    forgets."""
    import psycopg

    from memory_ledger.jobs.file_vacuum import vacuum_fragmented

    steps: list[str] = service.compact()
    steps.extend(
        f"VACUUM of {s.path.name} ({s.free_pages} of {s.pages} pages free)"
        # the jobs' context, or the whole service in a checkout older than it (issue 38)
        for s in vacuum_fragmented(getattr(service, "job_context", service))
    )
    if store.backend == "postgresql":
        with pg_connect(pg_location(store.url)) as conn:
            conn.execute("VACUUM (ANALYZE)")
            steps.append("VACUUM (ANALYZE) of the database")
            try:
                conn.execute("CHECKPOINT")
                steps.append("CHECKPOINT")
            except psycopg.errors.InsufficientPrivilege:
                steps.append("CHECKPOINT refused (not a superuser or pg_checkpoint)")
    return steps


# -- a worker: one code version, one store ------------------------------------------------

#: Run by `python -c` in a worker: import the measured code from argv[1] (first on
#: sys.path, so neither the current directory nor an editable install shadows it), then
#: this benchmark from argv[2] (the `benchmarks` package only; the code's own copy of
#: the benchmarks is never imported).
WORKER_BOOT = """
import sys
code, bench = sys.argv[1], sys.argv[2]
sys.path.insert(0, code)
import memory_ledger.api, projections, jobs
try:
    import memory_ledger.restore
except ImportError:
    pass
sys.path.insert(0, bench)
import benchmarks
sys.path.remove(bench)
from benchmarks.bench_forget import worker
sys.exit(worker(sys.stdin, sys.stdout))
"""


def code_state(root: Path) -> dict[str, Any]:
    """Which code was measured: the commit and whether the working tree differs from it
    (read-only git queries; no index refresh)."""
    out: dict[str, Any] = {"dir": str(root)}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        git = ["git", "--no-optional-locks", "-C", str(root)]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
        out["commit"] = head.stdout.strip() or None
        status = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        )
        out["modified_files"] = [line[3:] for line in status.stdout.splitlines()]
    return out


def source_state() -> dict[str, Any]:
    """This tree's commit and modified files (bench_mem0 and bench_recall_heavy use it)."""
    return code_state(ROOT)


class Worker:
    """The state of one worker: its store, its service, its jobs."""

    def __init__(self) -> None:
        import memory_ledger

        self.console = Console(stderr=True)
        self.stack = contextlib.ExitStack()
        self.key_proof = _optional_module("memory_ledger.forgetting.key_proof") is not None
        self.imported = str(Path(memory_ledger.__file__).resolve())
        self.service: Any = None
        self.spans: Spans | None = None
        self.jobs: dict[str, list[Job]] = {}
        self.profile_job: Job | None = None
        self.runs: dict[str, list[dict[str, Any]]] = {}

    def hello(self, _: dict[str, Any]) -> dict[str, Any]:
        code = Path(self.imported).parent.parent
        return {
            "memory_ledger": self.imported,
            "code": code_state(code),
            "flow": "key proof" if self.key_proof else "byte scan",
            "embedder": os.environ.get(EMBEDDER_ENV),
            "pid": os.getpid(),
        }

    def setup(self, cmd: dict[str, Any]) -> dict[str, Any]:
        backend, total = cmd["backend"], cmd["items"]
        p = cmd["plan"]
        plan = Plan(p["users"], p["heavy"], p["by_case"], p["profile_user"])
        store = self.stack.enter_context(fresh_store(backend, cmd["pg_url"]))
        self.store = store
        service = self.service = open_service(store)
        self.stack.callback(service.close)
        filled = fill_store(service, plan, seed=cmd["seed"])
        if service.log.max_position() != total:
            raise RuntimeError(f"log holds {service.log.max_position()} events, not {total}")
        out: dict[str, Any] = {
            "users": plan.users,
            "heavy_users": len(plan.heavy),
            "fill": {
                "batch": ITEMS_PER_USER,
                "kinds": filled.kinds,
                "seconds": filled.seconds,
                "items_per_s": total / filled.seconds,
            },
        }
        catch_s, applied = timed(service.runner.catch_up)
        out["catch_up"] = {"events": applied, "seconds": catch_s}
        # The vector index embeds only when asked: a forget must find it full, as in a
        # store whose agent has been recalling all along.
        embed_s, embedded = timed(service.vectors.catch_up)
        out["vector_index"] = {"rows": embedded, "seconds": embed_s}
        settle_s, steps = timed(functools.partial(settle, service, store))
        out["settle"] = {"seconds": settle_s, "steps": steps}
        if backend == "sqlite":
            files, size = data_dir_bytes(store)
            out["data_dir"] = {"files": files, "bytes": size}
        rng = random.Random(cmd["seed"])
        self.jobs = {c: make_jobs(c, plan.by_case[c], filled, rng) for c in CASES}
        if plan.profile_user is not None:
            self.profile_job = make_jobs("item", [plan.profile_user], filled, rng)[0]
        self.spans = self.stack.enter_context(instrumented(service, inner=True))
        out["steps_not_instrumented"] = self.spans.missing
        return out

    def forget(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.spans is not None
        job = self.jobs[cmd["case"]][cmd["index"]]
        run = run_job(self.service, self.spans, job, self.key_proof)
        if not cmd.get("warmup"):
            self.runs.setdefault(job.case, []).append(run)
        return run

    def scan(self, cmd: dict[str, Any]) -> dict[str, Any]:
        if not hasattr(self.service.requests, "scan_files"):
            return {"scans": [], "note": "no scheduled scan in this code (scan in the call)"}
        if self.service.settings.postgres is not None:
            return {"scans": [], "note": "no file scan on PostgreSQL (the server's files)"}
        ids = [r["request_id"] for r in self.runs.get("item", [])][: cmd["count"]]
        return {"scans": [time_scan(self.service, i) for i in ids]}

    def profile(self, cmd: dict[str, Any]) -> dict[str, Any]:
        if self.profile_job is None:
            return {}
        result = profile_one(self.service, self.profile_job, self.key_proof)
        profiler = result.pop("profiler")
        if cmd.get("path"):
            path = Path(cmd["path"])
            path.parent.mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(str(path.with_suffix(".prof")))
            text = io.StringIO()
            stats = pstats.Stats(profiler, stream=text).strip_dirs()
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(60)
            path.with_suffix(".txt").write_text(text.getvalue())
            result["stats_file"] = str(path.with_suffix(".prof"))
        return result

    def close(self, _: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.service is not None and self.store.backend == "sqlite":
            files, size = data_dir_bytes(self.store)
            out["data_dir_after"] = {"files": files, "bytes": size}
        self.stack.close()
        return out


def worker(stdin: IO[str], stdout: IO[str]) -> int:
    """Answer the driver's commands, one JSON line each, until `close` or end of input.
    Replies go to stdout prefixed with REPLY; the log goes to stderr."""
    state = Worker()
    for line in stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            reply = {"ok": True, "result": getattr(state, op)(cmd)}
        except Exception as exc:  # reported to the driver, which stops the run
            import traceback

            traceback.print_exc()
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        stdout.write(REPLY + json.dumps(reply) + "\n")
        stdout.flush()
        if op == "close" or not reply["ok"]:
            break
    with contextlib.suppress(Exception):
        state.stack.close()
    return 0


# -- the driver ---------------------------------------------------------------------------


class WorkerProcess:
    """A worker subprocess for one code version: commands in, one reply line out."""

    def __init__(self, label: str, code: Path, env: dict[str, str]) -> None:
        self.label = label
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER_BOOT, str(code), str(ROOT)],
            cwd=str(ROOT),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def call(self, op: str, **fields: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(REPLY):
                reply = json.loads(line[len(REPLY) :])
                if not reply["ok"]:
                    raise RuntimeError(f"worker {self.label}: {op}: {reply['error']}")
                return reply["result"]
            sys.stderr.write(line)  # anything else the code printed
        raise RuntimeError(f"worker {self.label}: exited during {op} ({self.proc.wait()})")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def bench_size(
    codes: list[tuple[str, Path]],
    backend: str,
    pg_url: str,
    total_items: int,
    sizes: Sizes,
    console: Console,
    profile_dir: Path | None,
    profile: bool,
    seed: int,
    env: dict[str, str],
) -> dict[str, Any]:
    plan = make_plan(total_items, sizes, profile, seed)
    result: dict[str, Any] = {"items": total_items, "plan": plan.to_dict(), "codes": {}}
    workers = [WorkerProcess(label, code, env) for label, code in codes]
    try:
        for w in workers:
            info = w.call("hello")
            console.log(
                f"{backend} {total_items:,} ({w.label}): memory_ledger from "
                f"{info['memory_ledger']} ({info['flow']} flow, "
                f"commit {(info['code'].get('commit') or '?')[:7]})",
                highlight=False,
            )
            result["codes"][w.label] = {"worker": info, "cases": {}}
        for w in workers:  # one fill at a time: the machine has two cores
            console.log(f"{backend} {total_items:,} ({w.label}): filling ...")
            setup = w.call(
                "setup",
                backend=backend,
                pg_url=pg_url,
                items=total_items,
                seed=seed,
                plan=plan.to_dict(),
            )
            result["codes"][w.label]["setup"] = setup
            console.log(
                f"{backend} {total_items:,} ({w.label}): filled at "
                f"{setup['fill']['items_per_s']:,.0f} items/s, caught up in "
                f"{setup['catch_up']['seconds']:.1f} s, {setup['vector_index']['rows']:,} "
                f"vectors in {setup['vector_index']['seconds']:.1f} s",
                highlight=False,
            )
        load: dict[str, list[float]] = {}
        for case in CASES:
            runs: dict[str, list[dict[str, Any]]] = {w.label: [] for w in workers}
            count = sizes.warmup + sizes.repeats[case]
            if hasattr(os, "getloadavg"):
                load[case] = list(os.getloadavg())
            for index in range(count):
                # A B, then B A, ...: neither version always goes first.
                order = workers if index % 2 == 0 else workers[::-1]
                for w in order:
                    warm = index < sizes.warmup
                    run = w.call("forget", case=case, index=index, warmup=warm)
                    if not warm:
                        runs[w.label].append(run)
            for w in workers:
                summary = summarize(runs[w.label])
                result["codes"][w.label]["cases"][case] = {
                    "summary": summary,
                    "runs": runs[w.label],
                }
                t = summary.get("total", {})
                console.log(
                    f"{backend} {total_items:,} ({w.label}): {CASE_LABELS[case]}: p50 "
                    f"{ms(t.get('p50', 0))} ms, p95 {ms(t.get('p95', 0))} ms "
                    f"(n={summary['n']} completed, {summary['partial']} partial)",
                    highlight=False,
                )
        result["load_average_before_case"] = load
        for w in workers:
            scans = w.call("scan", count=sizes.scans)
            if scans["scans"]:
                result["codes"][w.label]["scheduled_scan"] = {
                    "summary": distribution([s["seconds"] for s in scans["scans"]]),
                    "runs": scans["scans"],
                }
                console.log(
                    f"{backend} {total_items:,} ({w.label}): verification scan (scheduled): "
                    f"p50 {ms(result['codes'][w.label]['scheduled_scan']['summary']['p50'])} ms",
                    highlight=False,
                )
        if profile:
            for w in workers:
                path = None
                if profile_dir is not None:
                    path = str(profile_dir / f"forget-{backend}-{total_items}-{w.label}")
                result["codes"][w.label]["profile"] = w.call("profile", path=path)
        for w in workers:
            result["codes"][w.label] |= w.call("close")
    finally:
        for w in workers:
            w.stop()
    return result


# -- report -------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}"


def _p50(results: dict[str, Any], backend: str, size: int, label: str, case: str) -> float | None:
    res = results.get(backend, {}).get(str(size))
    if res is None or label not in res["codes"]:
        return None
    s = res["codes"][label]["cases"][case]["summary"]
    return s["total"]["p50"] if s.get("n") else None


def goals_of(results: dict[str, Any], labels: Sequence[str]) -> list[dict[str, Any]]:
    """Issue 11's goals, for every code version measured (SQLite)."""
    goals = []
    for label in labels:
        item = _p50(results, "sqlite", GOAL_ITEMS, label, "item")
        small = _p50(results, "sqlite", GROWTH_FROM, label, "item")
        heavy = _p50(results, "sqlite", GOAL_ITEMS, label, "heavy")
        if item is not None:
            goals.append(
                {
                    "code": label,
                    "goal": f"single-item forget p50 at {GOAL_ITEMS:,} items (SQLite)",
                    "target": f"< {ms(GOAL_ITEM_SECONDS)} ms",
                    "value": f"{ms(item)} ms",
                    "met": item < GOAL_ITEM_SECONDS,
                }
            )
        if item is not None and small:
            goals.append(
                {
                    "code": label,
                    "goal": f"growth of that p50 from {GROWTH_FROM:,} to {GOAL_ITEMS:,} items",
                    "target": f"<= {GOAL_GROWTH}x",
                    "value": f"{item / small:.2f}x",
                    "met": item / small <= GOAL_GROWTH,
                }
            )
        if heavy is not None:
            goals.append(
                {
                    "code": label,
                    "goal": f"whole-user forget, {HEAVY_ITEMS:,} items, p50 at {GOAL_ITEMS:,}",
                    "target": f"< {ms(GOAL_HEAVY_SECONDS)} ms",
                    "value": f"{ms(heavy)} ms",
                    "met": heavy < GOAL_HEAVY_SECONDS,
                }
            )
    return goals


def render(results: dict[str, Any], labels: Sequence[str], console: Console) -> None:
    table = Table(title="memory-ledger forget latency (ms), versions interleaved in one run")
    table.add_column("Backend", no_wrap=True)
    table.add_column("Items", justify="right", no_wrap=True)
    table.add_column("Case", no_wrap=True)
    for label in labels:
        for col in ("n", "p50", "p95", "max"):
            table.add_column(f"{label} {col}", justify="right", no_wrap=True)
    for backend, by_size in results.items():
        for size, res in by_size.items():
            for case in CASES:
                row = [backend, f"{int(size):,}", CASE_LABELS[case]]
                for label in labels:
                    s = res["codes"][label]["cases"][case]["summary"]
                    if not s["n"]:
                        row += ["0", "", "", ""]
                        continue
                    n = str(s["n"]) + (f" ({s['partial']} partial)" if s["partial"] else "")
                    t = s["total"]
                    row += [n, ms(t["p50"]), ms(t["p95"]), ms(t["max"])]
                table.add_row(*row)
            table.add_section()
    table.caption = (
        "Call to a completed RequestReport with every store's receipt (and the key proof "
        "or, older flow, the byte scan). n: completed forgets; partial ones are not in "
        "the figures."
    )
    console.print(table)

    scans = Table(title="verification scan (scheduled, not in the forget), ms")
    for name in ("Backend", "Items", "Code", "n", "p50", "p95", "files", "data dir MB"):
        scans.add_column(name, justify="left" if name in ("Backend", "Code") else "right")
    for backend, by_size in results.items():
        for size, res in by_size.items():
            for label in labels:
                sc = res["codes"][label].get("scheduled_scan")
                if not sc:
                    continue
                after = res["codes"][label].get("data_dir_after", {})
                scans.add_row(
                    backend,
                    f"{int(size):,}",
                    label,
                    str(len(sc["runs"])),
                    ms(sc["summary"]["p50"]),
                    ms(sc["summary"]["p95"]),
                    str(sc["runs"][0]["files_scanned"]),
                    f"{after['bytes'] / 1e6:,.0f}" if after else "-",
                )
    console.print(scans)

    for case in ("item", "heavy"):
        stages = Table(title=f"{CASE_LABELS[case]}: p50 per step inside the call (ms)")
        columns = [
            (b, size, label)
            for b, by_size in results.items()
            for size in by_size
            for label in labels
        ]
        names = sorted(
            {
                k
                for b, size, label in columns
                for k in results[b][size]["codes"][label]["cases"][case]["summary"].get(
                    "stages_p50", {}
                )
            },
            key=lambda k: (k == "other", k.startswith(INSIDE), k),
        )
        stages.add_column("Step", no_wrap=True)
        for b, size, label in columns:
            stages.add_column(f"{b} {int(size) // 1000}k {label}", justify="right", no_wrap=True)
        for name in names:
            cells = []
            for b, size, label in columns:
                st = results[b][size]["codes"][label]["cases"][case]["summary"].get("stages_p50")
                cells.append(ms(st[name]) if st and name in st else "")
            stages.add_row(name, *cells)
        console.print(stages)


def parse_code(value: str) -> tuple[str, Path]:
    label, sep, where = value.partition("=")
    if not sep or not label or not where:
        raise argparse.ArgumentTypeError("--code takes LABEL=DIR")
    path = Path(where).expanduser().resolve()
    if not (path / "memory_ledger" / "__init__.py").exists():
        raise argparse.ArgumentTypeError(f"{path} holds no memory_ledger package")
    return label, path


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_forget",
        description="End-to-end forget latency: one item, one predicate, one whole user.",
    )
    add_common_options(parser)
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated store sizes in items (default 10000,100000; 3000 with --quick)",
    )
    parser.add_argument(
        "--code",
        action="append",
        type=parse_code,
        default=None,
        metavar="LABEL=DIR",
        help="a code version to measure: a checkout holding memory_ledger/; repeat to "
        "compare versions in one run, their forgets interleaved (default: this tree, "
        "labelled 'this')",
    )
    parser.add_argument(
        "--embedder",
        default=DEFAULT_EMBEDDER,
        help=f"{EMBEDDER_ENV} for the workers, which fill the vector index with it "
        f"(default {DEFAULT_EMBEDDER}: the product's dimension; a forget embeds nothing)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="JSON results path (default: benchmarks/results/forget.json)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the cProfile stats of the profiled forget (one per version and "
        "backend, largest size) to DIR; a summary is always in the JSON",
    )
    args = parse_common(parser, argv)
    if args.sizes is not None:
        try:
            args.sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
        except ValueError:
            parser.error("--sizes must be comma-separated integers")
        if not args.sizes or any(s < 1 or s % ITEMS_PER_USER for s in args.sizes):
            parser.error(f"--sizes must be positive multiples of {ITEMS_PER_USER}")
    args.code = args.code or [("this", ROOT)]
    if len({label for label, _ in args.code}) != len(args.code):
        parser.error("--code labels must differ")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    base = QUICK_SIZES if args.quick else DEFAULT_SIZES
    sizes = Sizes(args.sizes or base.totals, base.repeats, base.warmup, base.scans)
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 200))

    if "postgresql" in args.backends:
        import psycopg

        try:
            with pg_connect(pg_location(args.pg_url)):
                pass
        except psycopg.Error as exc:
            console.print(f"[red]cannot connect to {pg_location(args.pg_url).masked()}: {exc}")
            return 2

    started = time.perf_counter()
    machine = machine_info(args.backends, args.pg_url)
    machine["benchmark_source"] = source_state()
    if hasattr(os, "getloadavg"):
        machine["load_average_at_start"] = list(os.getloadavg())
    env = {**os.environ, EMBEDDER_ENV: args.embedder}
    labels = [label for label, _ in args.code]
    results: dict[str, Any] = {}
    largest = max(sizes.totals)
    for backend in args.backends:
        console.rule(backend)
        results[backend] = {}
        for n, total_items in enumerate(sizes.totals):
            results[backend][str(total_items)] = bench_size(
                args.code,
                backend,
                args.pg_url,
                total_items,
                sizes,
                console,
                args.profile,
                profile=total_items == largest,
                seed=1000 + n,
                env=env,
            )
    total = time.perf_counter() - started

    render(results, labels, console)
    goals = goals_of(results, labels)
    for g in goals:
        console.print(
            f"goal ({g['code']}) {g['goal']}: {g['value']} (target {g['target']}) -> "
            f"{_met(g['met'])}",
            highlight=False,
        )
    if not goals:
        console.print(
            f"goal: defined at {GOAL_ITEMS:,} items on SQLite; not measured in this run",
            highlight=False,
        )
    if hasattr(os, "getloadavg"):
        machine["load_average_at_end"] = list(os.getloadavg())
    report = {
        "benchmark": "forget",
        "command": " ".join(
            ["python -m benchmarks.bench_forget", *(sys.argv[1:] if argv is None else argv)]
        ),
        "quick": args.quick,
        "codes": {label: str(path) for label, path in args.code},
        "interleaving": "per forget: each round runs one forget on every version's store, "
        "the order flipping each round (A B, B A, ...); stores filled one at a time",
        "embedder": args.embedder,
        "sizes": {
            "totals": list(sizes.totals),
            "repeats": sizes.repeats,
            "warmup": sizes.warmup,
            "scheduled_scans": sizes.scans,
            "items_per_user": ITEMS_PER_USER,
            "heavy_user_items": HEAVY_ITEMS,
            "home_address_facts_per_user": ADDRESSES_PER_USER,
        },
        "machine": machine,
        "results": results,
        "goals": goals,
        "total_seconds": total,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"total {total:.1f} s; results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
