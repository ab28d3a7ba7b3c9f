"""Core benchmarks: append throughput against bare `eventsourcing`, projection catch-up
and full rebuild, on SQLite and PostgreSQL.

Run from the repository root:

    python -m benchmarks.bench_core                 # default sizes, both backends
    python -m benchmarks.bench_core --quick         # smoke run, a few seconds per backend

Every measurement runs in a fresh store of its own: a temporary data directory for
SQLite, or a scratch database `ml_bench_<random>` for PostgreSQL, created through
`--pg-url` and dropped at the end (also on errors). Results are printed as a table and
written as JSON (figures, sizes and machine info) to `--out`.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import gc
import io
import json
import os
import platform
import pstats
import random
import secrets
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from rich.console import Console
from rich.table import Table
from sqlalchemy import func, select

from memory_ledger.api import MemoryService
from memory_ledger.config import PostgresLocation, Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.principal import Principal
from memory_ledger.projections.events import decode_batch
from memory_ledger.projections.runner import DEFAULT_BATCH

BACKENDS = ("sqlite", "postgresql")
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "core.json"

RATIO_GOAL = 0.70  # remember_many throughput / bare eventsourcing throughput
REBUILD_GOAL_SQLITE = 30_000.0  # events/s for a full rebuild on SQLite
BULK_BATCH = 100  # items per remember_many call when filling the log for the rebuild part
NAMESPACES = 20  # principals the rebuild log is spread over


@dataclass(frozen=True)
class Sizes:
    batch1_items: int
    batch10_items: int
    rounds: int  # alternating ledger/bare rounds per batch size
    warmup_saves: int  # untimed saves per store before an append measurement
    events: int  # log size for catch-up and rebuild
    warmup_events: int  # log size of the untimed warm-up store for catch-up/rebuild


DEFAULT_SIZES = Sizes(2_000, 10_000, 10, 50, 100_000, 2_000)
QUICK_SIZES = Sizes(100, 500, 2, 5, 2_000, 200)


# -- realistic writes ---------------------------------------------------------------------

EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SUBJECTS = ("user", "user.partner", "user.manager", "user.child", "user.home")
FACT_PREDICATES = (
    "home_city",
    "employer",
    "job_title",
    "birthday",
    "phone_model",
    "car",
    "allergy",
    "dietary_need",
    "favourite_team",
    "gym",
    "doctor",
    "dentist",
    "bank",
    "school",
    "native_language",
    "second_language",
    "pet_name",
    "pet_species",
    "hobby",
    "instrument",
    "commute",
    "shoe_size",
    "blood_type",
    "timezone",
    "nickname",
    "partner_name",
    "anniversary",
    "favourite_food",
    "favourite_book",
    "streaming_service",
    "airline",
    "frequent_flyer",
    "hotel_chain",
    "coffee_order",
    "running_route",
    "club",
    "charity",
    "volunteering",
    "religion",
    "political_party",
)
PREFERENCE_PREDICATES = (
    "seat",
    "tone",
    "reply_length",
    "units",
    "date_format",
    "language",
    "meeting_time",
    "code_style",
    "editor",
    "notification",
)
PHRASES = (
    "Lives in Lyon near the old town",
    "Works at Northwind as an analyst",
    "Prefers oat milk in every coffee",
    "Allergic to peanuts and shellfish",
    "Supports Olympique Lyonnais FC",
    "Drives a grey 2019 Toyota Corolla",
    "Birthday is on the third of May",
    "Speaks Portuguese with her mother",
)
TURN_TEXT = (
    "Can you remind me what we decided about the quarterly budget review and who owns "
    "the follow-up with finance?"
)


def stamp(i: int) -> str:
    """A write time in the canonical event form, so both sides store identical text."""
    return (EPOCH + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Writes:
    """Deterministic write dicts, as an agent would send them (validated by the ledger)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0

    def _provenance(self) -> dict[str, Any]:
        i = self.n
        self.n += 1
        return {
            "writer": "agent.assistant",
            "written_at": stamp(i),
            "turn_id": f"turn-{i:08d}",
            "session_id": f"sess-{i // 40:06d}",
        }

    def _value(self) -> str:
        return f"{self.rng.choice(PHRASES)} #{self.n:07d}"  # ~40 characters

    def fact(self) -> dict[str, Any]:
        rng = self.rng
        return {
            "kind": "fact",
            "subject": rng.choice(SUBJECTS),
            "predicate": rng.choice(FACT_PREDICATES),
            "value": self._value(),
            "category": "profile",
            "origin": rng.choices(("explicit", "observed", "inferred"), (7, 2, 1))[0],
            "confidence": round(rng.uniform(0.6, 1.0), 2),
            "sensitivity": "personal",
            "provenance": self._provenance(),
        }

    def preference(self) -> dict[str, Any]:
        rng = self.rng
        write: dict[str, Any] = {
            "kind": "preference",
            "subject": "user",
            "predicate": rng.choice(PREFERENCE_PREDICATES),
            "value": self._value(),
            "category": "style",
            "origin": rng.choice(("explicit", "observed")),
            "sensitivity": "personal",
            "provenance": self._provenance(),
        }
        if rng.random() < 0.3:
            write["scope"] = f"workspace:ws-{rng.randrange(5)}"
            write["strength"] = round(rng.uniform(0.2, 1.0), 2)
        return write

    def turn(self) -> dict[str, Any]:
        return {
            "kind": "turn",
            "subject": self.rng.choice(("user", "assistant")),
            "content": f"{TURN_TEXT} ({self.n})",
            "category": "chat",
            "origin": "explicit",
            "sensitivity": "personal",
            "provenance": self._provenance(),
        }

    def mixed(self) -> dict[str, Any]:
        """50% facts, 20% preferences, 30% transcript turns."""
        r = self.rng.random()
        if r < 0.5:
            return self.fact()
        if r < 0.7:
            return self.preference()
        return self.turn()


# -- the bare eventsourcing baseline --------------------------------------------------------


class BareMemoryItem(Aggregate):
    """The same clear fields as memory_ledger's MemoryItem.Recorded, value in plaintext."""

    @event("Recorded")
    def __init__(
        self,
        *,
        namespace: str,
        kind: str,
        subject: str,
        predicate: str,
        category: str,
        origin: str,
        confidence: float,
        sensitivity: str,
        provenance: dict[str, Any],
        retention: dict[str, Any],
        redaction: dict[str, Any],
        derived_from: list[dict[str, Any]],
        scope: str,
        strength: float,
        valid_from: str,
        valid_to: str | None,
        key_generation: int,
        value: str,
    ) -> None:
        self.namespace = namespace
        self.kind = kind
        self.subject = subject
        self.predicate = predicate
        self.category = category
        self.origin = origin
        self.confidence = confidence
        self.sensitivity = sensitivity
        self.provenance = provenance
        self.retention = retention
        self.redaction = redaction
        self.derived_from = derived_from
        self.scope = scope
        self.strength = strength
        self.valid_from = valid_from
        self.valid_to = valid_to
        self.key_generation = key_generation
        self.value = value


class BareLog(Application[UUID]):
    name = "bare_log"
    is_snapshotting_enabled = False


def bare_item(namespace: str, write: dict[str, Any]) -> BareMemoryItem:
    """The event the ledger would record for `write`, built without validation or crypto."""
    prov = write["provenance"]
    strength = write.get("strength")
    if strength is None:
        strength = 1.0 if write["origin"] == "explicit" else 0.3
    return BareMemoryItem(
        namespace=namespace,
        kind=write["kind"],
        subject=write["subject"],
        predicate=write.get("predicate") or "turn",
        category=write.get("category", "general"),
        origin=write["origin"],
        confidence=write.get("confidence", 1.0),
        sensitivity=write["sensitivity"],
        provenance={
            "writer": prov["writer"],
            "written_at": prov["written_at"],
            "turn_id": prov.get("turn_id"),
            "session_id": prov.get("session_id"),
            "tool_call_id": prov.get("tool_call_id"),
            "consent_ref": prov.get("consent_ref"),
        },
        retention={"basis": "indefinite", "expires_at": None},
        redaction={"state": "none", "fields": []},
        derived_from=[],
        scope=write.get("scope", "global"),
        strength=strength,
        valid_from=write.get("valid_from") or prov["written_at"],
        valid_to=write.get("valid_to"),
        key_generation=1,
        value=write.get("value") or write["content"],
    )


# -- stores -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Store:
    backend: str
    data_dir: Path
    url: str  # sqlite:///<data dir> or postgresql://.../ml_bench_<random>

    @property
    def settings(self) -> Settings:
        return Settings.resolve(self.data_dir, self.url)


def pg_location(url: str) -> PostgresLocation:
    location = Settings.resolve(tempfile.gettempdir(), url).postgres
    if location is None:
        raise SystemExit(f"--pg-url must be a postgresql:// URL, got {url!r}")
    return location


def pg_connect(location: PostgresLocation) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=location.host,
        port=location.port,
        dbname=location.dbname,
        user=location.user,
        password=location.password or None,
        autocommit=True,
        connect_timeout=5,
    )


@contextlib.contextmanager
def fresh_store(backend: str, pg_url: str) -> Iterator[Store]:
    data_dir = Path(tempfile.mkdtemp(prefix="ml_bench_"))
    try:
        if backend == "sqlite":
            yield Store(backend, data_dir, f"sqlite:///{data_dir}")
            return
        admin = pg_location(pg_url)
        name = f"ml_bench_{secrets.token_hex(6)}"
        with pg_connect(admin) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            parts = urlsplit(pg_url)
            url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))
            yield Store(backend, data_dir, url)
        finally:
            with pg_connect(admin) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def open_service(store: Store) -> MemoryService:
    return MemoryService(store.settings, master=MasterKey.generate("benchmark"))


def open_bare(store: Store) -> BareLog:
    """The baseline on the same persistence as the ledger, minus its key-keeping recorder."""
    env = {
        **store.settings.event_store_env(),
        "APPLICATION_RECORDER_TOPIC": "",
        "IS_SNAPSHOTTING_ENABLED": "no",
    }
    if store.backend == "sqlite":
        env["SQLITE_DBNAME"] = str(store.data_dir / "bare.sqlite")
    return BareLog(env=env)


# -- measurements -------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def chunked(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def rate_summary(count: int, seconds: Sequence[float], unit: str) -> dict[str, Any]:
    total = sum(seconds)
    per_round = count / len(seconds)
    return {
        unit: count,
        "seconds": total,
        f"{unit}_per_s": count / total,
        "rounds": [{"seconds": s, f"{unit}_per_s": per_round / s} for s in seconds],
    }


def bench_append(
    backend: str, pg_url: str, plan: Sequence[tuple[int, int]], sizes: Sizes, console: Console
) -> list[dict[str, Any]]:
    """remember_many against bare Application.save: the same write dicts on both sides,
    in alternating rounds, each side in a store of its own. `plan`: (batch, items).
    The ratio is the median over rounds of (remember_many rate / bare rate)."""
    namespace = Principal("acme", "alice").namespace
    gen = Writes(seed=1000)
    out = []
    with fresh_store(backend, pg_url) as ledger_store, fresh_store(backend, pg_url) as bare_store:
        service = open_service(ledger_store)
        ledger = service.for_principal(Principal("acme", "alice"))
        bare = open_bare(bare_store)
        try:

            def run_ledger(chunks: list[Sequence[dict[str, Any]]]) -> None:
                for chunk in chunks:
                    ledger.remember_many(chunk)

            def run_bare(chunks: list[Sequence[dict[str, Any]]]) -> None:
                for chunk in chunks:
                    bare.save(*[bare_item(namespace, w) for w in chunk])

            expected = 0
            for batch, items in plan:
                per_round = max(batch, items // sizes.rounds // batch * batch)
                warmup = [gen.fact() for _ in range(sizes.warmup_saves * batch)]
                run_ledger(chunked(warmup, batch))
                run_bare(chunked(warmup, batch))

                ledger_s: list[float] = []
                bare_s: list[float] = []
                for r in range(sizes.rounds):
                    chunks = chunked([gen.fact() for _ in range(per_round)], batch)
                    order = [(run_ledger, ledger_s), (run_bare, bare_s)]
                    if r % 2:
                        order.reverse()
                    for run, sink in order:
                        seconds, _ = timed(functools.partial(run, chunks))
                        sink.append(seconds)

                expected += len(warmup) + per_round * sizes.rounds
                got = (service.log.max_position(), int(bare.recorder.max_notification_id() or 0))
                if got != (expected, expected):
                    raise RuntimeError(f"append check: expected {expected} events, got {got}")

                total = per_round * sizes.rounds
                remember = rate_summary(total, ledger_s, "items")
                baseline = rate_summary(total, bare_s, "items")
                # Each round's pair ran back to back, so its ratio cancels slow drifts in
                # machine load; the median of the pairs is the reported ratio.
                pair_ratios = [b / r for r, b in zip(ledger_s, bare_s, strict=True)]
                ratio = statistics.median(pair_ratios)
                console.log(
                    f"{backend}: batch {batch}: remember_many {remember['items_per_s']:,.0f} "
                    f"items/s, bare {baseline['items_per_s']:,.0f} items/s, ratio {ratio:.2f}"
                )
                out.append(
                    {
                        "batch": batch,
                        "items": total,
                        "saves": total // batch,
                        "warmup_items": len(warmup),
                        "remember_many": remember,
                        "bare_eventsourcing": baseline,
                        "ratio": ratio,
                        "ratio_per_round": pair_ratios,
                        "ratio_of_totals": remember["items_per_s"] / baseline["items_per_s"],
                    }
                )
        finally:
            service.close()
            bare.close()
    return out


def fill_log(service: MemoryService, events: int, seed: int) -> tuple[float, dict[str, int]]:
    """Append `events` mixed writes in batches of BULK_BATCH; returns the seconds spent
    inside remember_many (generation of the dicts is not counted) and the kind mix."""
    ledgers = [service.for_principal(Principal("acme", f"user-{k:02d}")) for k in range(NAMESPACES)]
    gen = Writes(seed)
    kinds = {"fact": 0, "preference": 0, "turn": 0}
    spent = 0.0
    done = 0
    calls = 0
    while done < events:
        writes = [gen.mixed() for _ in range(min(BULK_BATCH, events - done))]
        for w in writes:
            kinds[w["kind"]] += 1
        start = time.perf_counter()
        ledgers[calls % NAMESPACES].remember_many(writes)
        spent += time.perf_counter() - start
        done += len(writes)
        calls += 1
    return spent, kinds


def projection_rows(service: MemoryService) -> dict[str, int]:
    with service.engine.connect() as conn:
        return {
            p.name: int(conn.execute(select(func.count()).select_from(p.table)).scalar_one())
            for p in service.runner.projections
        }


def bench_projections(
    backend: str, pg_url: str, sizes: Sizes, console: Console, profile_dir: Path | None
) -> dict[str, Any]:
    # Warm-up on a small store of its own, so the measured store starts at position zero.
    with fresh_store(backend, pg_url) as store:
        service = open_service(store)
        try:
            fill_log(service, sizes.warmup_events, seed=7)
            service.runner.catch_up()
            service.rebuild()
        finally:
            service.close()

    events = sizes.events
    result: dict[str, Any] = {"events": events, "warmup_events": sizes.warmup_events}
    with fresh_store(backend, pg_url) as store:
        service = open_service(store)
        try:
            console.log(f"{backend}: filling the log with {events:,} events ...")
            append_s, kinds = fill_log(service, events, seed=42)
            if service.log.max_position() != events:
                raise RuntimeError(f"log holds {service.log.max_position()} events, not {events}")
            result["kinds"] = kinds
            result["bulk_append"] = {
                "batch": BULK_BATCH,
                "items": events,
                "seconds": append_s,
                "items_per_s": events / append_s,
            }
            console.log(
                f"{backend}: bulk append (batch {BULK_BATCH}): {events / append_s:,.0f} items/s"
            )

            catch_s, applied = timed(service.runner.catch_up)
            rows = projection_rows(service)
            result["catch_up"] = {
                "events": applied,
                "seconds": catch_s,
                "events_per_s": applied / catch_s,
            }
            console.log(f"{backend}: catch-up from zero: {applied / catch_s:,.0f} events/s")

            # The vector index's first build embeds every text: that is the embedder's
            # cost, measured apart. A rebuild then finds the rows present and reuses them.
            embed_s, _ = timed(service.vectors.catch_up)
            vectors = len(service.vectors.snapshot())
            result["vector_index_first_build"] = {
                "rows": vectors,
                "seconds": embed_s,
                "rows_per_s": vectors / embed_s if embed_s else 0.0,
            }
            console.log(f"{backend}: vector index first build (the embedder): {embed_s:.1f} s")

            rebuild_s, rebuilt = timed(service.rebuild)
            result["rebuild"] = {
                "events": rebuilt,
                "seconds": rebuild_s,
                "events_per_s": rebuilt / rebuild_s,
                "vector_rows_present": vectors,
            }
            console.log(f"{backend}: full rebuild: {rebuilt / rebuild_s:,.0f} events/s")

            rows_after = projection_rows(service)
            result["projection_rows"] = rows
            if applied != events or rebuilt != events or rows_after != rows:
                raise RuntimeError(
                    f"projection check failed: caught up {applied}, rebuilt {rebuilt}, "
                    f"rows {rows} then {rows_after}"
                )

            result["stages"] = {}
            for stage in STAGES:
                seconds, count = timed(functools.partial(read_pass, service, stage))
                result["stages"][stage] = {
                    "events": count,
                    "seconds": seconds,
                    "events_per_s": count / seconds,
                }
            console.log(
                f"{backend}: read-only stages: "
                + ", ".join(f"{k} {v['events_per_s']:,.0f}/s" for k, v in result["stages"].items())
            )

            if profile_dir is not None:
                result["profile"] = profile_rebuild(service, backend, profile_dir, console)
        finally:
            service.close()
    return result


STAGES = {
    "read": "stage: read only",
    "read+decode": "stage: read + library decode",
    "read+decode+open": "stage: read + decode_batch",
}


def read_pass(service: MemoryService, stage: str) -> int:
    """The first stages of a catch-up alone, writing nothing: where the ceiling lies."""
    log = service.log
    position = count = 0
    while True:
        batch = log.notifications(position, DEFAULT_BATCH)
        if not batch:
            return count
        if stage == "read+decode":
            for notification in batch:
                log.decode(notification)
        elif stage == "read+decode+open":
            decode_batch(log, batch)
        count += len(batch)
        position = batch[-1].id


def profile_rows(profiler: cProfile.Profile, top: int = 25) -> dict[str, Any]:
    """The profiled time and the top functions by own and by cumulative time (seconds,
    and each one's share of the profiled total), for a benchmark's JSON and table."""
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]

    def rows(key: int) -> list[dict[str, Any]]:
        entries = sorted(
            stats.stats.items(),  # type: ignore[attr-defined]
            key=lambda kv: kv[1][key],
            reverse=True,
        )[:top]
        return [
            {
                "function": f"{Path(f).parent.name}/{Path(f).name}:{line}({name})",
                "ncalls": nc,
                "tottime": tt,
                "cumtime": ct,
                "cum_share": ct / total if total else 0.0,
            }
            for (f, line, name), (_, nc, tt, ct, _) in entries
        ]

    return {"profiled_seconds": total, "by_tottime": rows(2), "by_cumtime": rows(3)}


def profile_rebuild(
    service: MemoryService, backend: str, profile_dir: Path, console: Console
) -> dict[str, Any]:
    """One more (untimed) rebuild under cProfile; the figures above are not affected."""
    profile_dir.mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile()
    profiler.enable()
    service.rebuild()
    profiler.disable()
    path = profile_dir / f"rebuild-{backend}.prof"
    profiler.dump_stats(str(path))
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text).strip_dirs()
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)
    (profile_dir / f"rebuild-{backend}.txt").write_text(text.getvalue())
    console.log(f"{backend}: rebuild profile written to {path}")
    return {"stats_file": str(path), "summary_file": str(profile_dir / f"rebuild-{backend}.txt")}


# -- report -------------------------------------------------------------------------------


def _version(package: str) -> str | None:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _memory_gib() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def machine_info(backends: Sequence[str], pg_url: str) -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "memory_gib": _memory_gib(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "sqlite": sqlite3.sqlite_version,
        "packages": {
            name: _version(name)
            for name in ("eventsourcing", "sqlalchemy", "pydantic", "cryptography", "psycopg")
        },
    }
    if "postgresql" in backends:
        with pg_connect(pg_location(pg_url)) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            info["postgresql"] = row[0] if row else None
    return info


def goals_of(results: dict[str, Any]) -> list[dict[str, Any]]:
    goals = []
    for backend, res in results.items():
        for a in res["append"]:
            goals.append(
                {
                    "backend": backend,
                    "goal": f"remember_many / bare eventsourcing, batch {a['batch']}",
                    "target": RATIO_GOAL,
                    "value": a["ratio"],
                    "met": a["ratio"] >= RATIO_GOAL,
                }
            )
        if backend == "sqlite":
            rate = res["projections"]["rebuild"]["events_per_s"]
            goals.append(
                {
                    "backend": backend,
                    "goal": "full rebuild events/s",
                    "target": REBUILD_GOAL_SQLITE,
                    "value": rate,
                    "met": rate >= REBUILD_GOAL_SQLITE,
                }
            )
    return goals


def _met(ok: bool) -> str:
    return "[green]yes[/green]" if ok else "[red]NO[/red]"


def render(results: dict[str, Any], console: Console) -> None:
    table = Table(title="memory-ledger core benchmark")
    for name, justify in (
        ("Backend", "left"),
        ("Measurement", "left"),
        ("Size", "right"),
        ("Time s", "right"),
        ("Rate /s", "right"),
        ("Bare es /s", "right"),
        ("Ratio", "right"),
        ("Goal", "right"),
        ("Met", "center"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for backend, res in results.items():
        for a in res["append"]:
            rm, bare = a["remember_many"], a["bare_eventsourcing"]
            table.add_row(
                backend,
                f"remember_many, batch {a['batch']}",
                f"{a['items']:,}",
                f"{rm['seconds']:.2f}",
                f"{rm['items_per_s']:,.0f}",
                f"{bare['items_per_s']:,.0f}",
                f"{a['ratio']:.3f}",
                f">= {RATIO_GOAL:.2f}",
                _met(a["ratio"] >= RATIO_GOAL),
            )
        p = res["projections"]
        bulk = p["bulk_append"]
        table.add_row(
            backend,
            f"remember_many, batch {bulk['batch']}",
            f"{bulk['items']:,}",
            f"{bulk['seconds']:.2f}",
            f"{bulk['items_per_s']:,.0f}",
            "",
            "",
            "",
            "",
        )
        for key, label in (("catch_up", "catch-up from zero"), ("rebuild", "full rebuild")):
            m = p[key]
            goal = met = ""
            if key == "rebuild" and backend == "sqlite":
                goal = f">= {REBUILD_GOAL_SQLITE:,.0f}"
                met = _met(m["events_per_s"] >= REBUILD_GOAL_SQLITE)
            table.add_row(
                backend,
                label,
                f"{m['events']:,}",
                f"{m['seconds']:.2f}",
                f"{m['events_per_s']:,.0f}",
                "",
                "",
                goal,
                met,
            )
        for stage, label in STAGES.items():
            m = p["stages"][stage]
            table.add_row(
                backend,
                f"[dim]{label}[/dim]",
                f"{m['events']:,}",
                f"{m['seconds']:.2f}",
                f"{m['events_per_s']:,.0f}",
                "",
                "",
                "",
                "",
            )
        table.add_section()
    table.caption = (
        "Size: items appended or events projected. Rate: items/s for appends, events/s for "
        "projections. Bare es: the same writes through a plain eventsourcing Application. "
        "Stage rows: the read/decode steps of a catch-up alone, writing nothing (decode_batch "
        "adds the key lookup, unwrap and unseal)."
    )
    console.print(table)


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Options every benchmark in this folder takes: --quick, --backends, --pg-url."""
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--backends",
        default="sqlite,postgresql",
        help="comma-separated: sqlite,postgresql (default: both)",
    )
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="PostgreSQL server URL, used only to create and drop scratch "
        f"databases ml_bench_<random> (default: {DEFAULT_PG_URL})",
    )


def parse_common(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, and turn --backends into a checked list."""
    args = parser.parse_args(argv)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backends if b not in BACKENDS]
    if unknown or not args.backends:
        parser.error(
            f"unknown backend(s) {', '.join(unknown) or '(none)'}; use {','.join(BACKENDS)}"
        )
    return args


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_core",
        description="Append throughput vs bare eventsourcing, projection catch-up and rebuild.",
    )
    add_common_options(parser)
    parser.add_argument(
        "--events",
        type=int,
        default=None,
        help="log size for catch-up and rebuild (default 100000; 2000 with --quick)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="JSON results path (default: benchmarks/results/core.json)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="also run one extra rebuild under cProfile and write the stats to DIR",
    )
    args = parse_common(parser, argv)
    if args.events is not None and args.events < 1:
        parser.error("--events must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    base = QUICK_SIZES if args.quick else DEFAULT_SIZES
    sizes = Sizes(**{**base.__dict__, "events": args.events or base.events})
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 120))

    if "postgresql" in args.backends:
        try:
            with pg_connect(pg_location(args.pg_url)):
                pass
        except psycopg.Error as exc:
            console.print(f"[red]cannot connect to {pg_location(args.pg_url).masked()}: {exc}")
            return 2

    started = time.perf_counter()
    machine = machine_info(args.backends, args.pg_url)
    results: dict[str, Any] = {}
    for backend in args.backends:
        console.rule(f"{backend}")
        results[backend] = {
            "append": bench_append(
                backend,
                args.pg_url,
                [(1, sizes.batch1_items), (10, sizes.batch10_items)],
                sizes,
                console,
            ),
            "projections": bench_projections(backend, args.pg_url, sizes, console, args.profile),
        }
    total = time.perf_counter() - started

    render(results, console)
    goals = goals_of(results)
    for g in goals:
        value = f"{g['value']:.3f}" if g["target"] < 10 else f"{g['value']:,.0f}"
        target = f"{g['target']:.2f}" if g["target"] < 10 else f"{g['target']:,.0f}"
        console.print(
            f"goal {g['backend']}: {g['goal']}: {value} (target >= {target}) -> {_met(g['met'])}",
            highlight=False,
        )
    report = {
        "benchmark": "core",
        "command": " ".join(
            ["python -m benchmarks.bench_core", *(sys.argv[1:] if argv is None else argv)]
        ),
        "quick": args.quick,
        "sizes": sizes.__dict__,
        "bulk_batch": BULK_BATCH,
        "namespaces_in_rebuild_log": NAMESPACES,
        "machine": machine,
        "results": results,
        "goals": goals,
        "total_seconds": total,
    }
    if hasattr(os, "getloadavg"):
        machine["load_average_at_end"] = list(os.getloadavg())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"total {total:.1f} s; results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
