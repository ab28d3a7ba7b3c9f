"""A full rebuild against its floor: reading, decoding and opening every event once.

Run from the repository root:

    python -m benchmarks.bench_rebuild                       # 10,000 events, both backends
    python -m benchmarks.bench_rebuild --backends sqlite --rounds 2
    python -m benchmarks.bench_rebuild --profile /tmp/prof   # + one profiled rebuild

One store per backend: `--events` writes (facts and transcript turns, half each) in one
namespace, caught up, so the vector index holds a row per item (the hashing embedder,
`MEMORY_LEDGER_EMBEDDER=hashing:512`, unless the environment names another). Then
rounds, each timing in turn:

- the floor: every notification read in batches, decoded and opened once
  (`decode_batch`), nothing written: what any rebuild must do at least;
- `rebuild` with one runner: `MemoryService.rebuild()` (every projection and the vector
  index, in this process: below `side_by_side.MIN_EVENTS` no second process is used);
- `rebuild` with two runner processes: every projection in one (`ProjectionRunner.
  rebuild`), the vector index in the other (`VectorIndex.rebuild`, reading and opening
  the log itself), side by side. The projections cannot be split further between
  processes: the keyword index, the mention index and the summaries read the tables of
  the transcripts, facts and preferences projections at their settle, so a process of
  theirs that ran ahead of those tables' process would index what is not there yet.

Wall time and CPU time (`time.process_time`, summed over the processes that worked) of
each; events/s and the ratio to the same round's floor, medians over the rounds. The
machine is shared, so the CPU figures are the steadier ones. Table on stdout, JSON in
`--out`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing
import os
import pstats
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import Writes, add_common_options, fresh_store, parse_common

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "rebuild.json"
#: The embedder of the filled store and of every process that rebuilds it.
EMBEDDER = "hashing:512"
FILL_CHUNK = 500


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_rebuild")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runners", default="1,2", help="runner processes to time: 1,2")
    parser.add_argument("--profile", type=Path, help="write a profiled rebuild's summary here")
    parser.add_argument("--label", default="", help="a name for this code, e.g. old / new")
    add_common_options(parser)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    if args.quick:
        args.events, args.rounds = 1_000, 1
    runners = sorted({int(r) for r in args.runners.split(",") if r.strip()})
    if not 100 <= args.events <= 2_000_000 or not 1 <= args.rounds <= 20:
        parser.error("--events from 100 to 2,000,000, --rounds from 1 to 20")
    if not runners or not set(runners) <= {1, 2}:
        parser.error("--runners takes 1, 2 or 1,2")
    os.environ.setdefault("MEMORY_LEDGER_EMBEDDER", EMBEDDER)
    os.environ["MEMORY_LEDGER_REBUILD_SIDE_BY_SIDE"] = "0"  # the runners are what is split
    console = Console()
    results = []
    for backend in args.backends:
        with fresh_store(backend, args.pg_url) as store:
            console.log(f"{backend}: filling {args.events:,} events ...")
            fill(store.settings, args.events)
            where = (str(store.data_dir), store.url)
            result = run(where, args.rounds, runners, console)
            if args.profile is not None:
                result["profile"] = profile(store.settings, args.profile, backend)
            results.append({"backend": backend, "label": args.label, **result})
    print_table(console, results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    console.log(f"results written to {args.out}")
    return 0


def fill(settings: Any, events: int) -> None:
    """`events` writes in one namespace, half facts, half turns, then caught up (the
    vector index embeds every item: its rows are present when the rebuild starts)."""
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal

    writes = Writes(39)
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "user"))
        for start in range(0, events, FILL_CHUNK):
            count = min(FILL_CHUNK, events - start)
            ledger.remember_many([writes.fact() if i % 2 else writes.turn() for i in range(count)])
        service.runner.catch_up()
        service.vectors.catch_up()


def run(
    where: tuple[str, str], rounds: int, runners: list[int], console: Console
) -> dict[str, Any]:
    """`where`: the store's data directory and URL (settings are resolved in each process)."""
    from memory_ledger.api import MemoryService

    settings = _settings(where)
    with MemoryService(settings) as service:
        events = service.log.max_position()
        names = [p.name for p in service.runner.projections]
    measured: dict[str, list[dict[str, float]]] = {"floor": []}
    measured.update({f"runners_{n}": [] for n in runners})
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        # Each worker opens the store once, untimed, as a long-running runner would.
        list(pool.map(_warm, [where] * 2))
        for r in range(rounds):
            measured["floor"].append(floor(settings))
            for n in runners:
                if n == 1:
                    timed = pool.submit(_rebuild, where, None, True).result()
                else:
                    started = time.perf_counter()
                    parts = [
                        pool.submit(_rebuild, where, names, False),
                        pool.submit(_rebuild, where, [], True),
                    ]
                    done = [p.result() for p in parts]
                    timed = {
                        "wall": time.perf_counter() - started,
                        "cpu": sum(d["cpu"] for d in done),
                    }
                measured[f"runners_{n}"].append(timed)
            console.log(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]}" for k, v in measured.items()))
    out: dict[str, Any] = {"events": events, "rounds": measured}
    floor_wall = statistics.median(m["wall"] for m in measured["floor"])
    floor_cpu = statistics.median(m["cpu"] for m in measured["floor"])
    out["floor"] = {
        "events_per_s_wall": events / floor_wall,
        "events_per_s_cpu": events / floor_cpu,
    }
    for n in runners:
        got = measured[f"runners_{n}"]
        ratios_wall = [f["wall"] / g["wall"] for f, g in zip(measured["floor"], got, strict=True)]
        ratios_cpu = [f["cpu"] / g["cpu"] for f, g in zip(measured["floor"], got, strict=True)]
        out[f"runners_{n}"] = {
            "events_per_s_wall": events / statistics.median(g["wall"] for g in got),
            "events_per_s_cpu": events / statistics.median(g["cpu"] for g in got),
            "ratio_wall": statistics.median(ratios_wall),
            "ratio_cpu": statistics.median(ratios_cpu),
        }
    return out


def floor(settings: Any) -> dict[str, float]:
    """Read, decode and open every event once, in the runner's batches; write nothing."""
    from memory_ledger.api import MemoryService
    from memory_ledger.projections.events import decode_batch
    from memory_ledger.projections.runner import DEFAULT_BATCH

    with MemoryService(settings) as service:
        log = service.log
        wall, cpu = time.perf_counter(), time.process_time()
        position, opened = 0, 0
        while True:
            batch = log.notifications(position, DEFAULT_BATCH)
            if not batch:
                break
            opened += sum(e.fields is not None for e in decode_batch(log, batch))
            position = batch[-1].id
        took = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
    assert opened > 0
    return took


_SERVICE: Any = None


def _settings(where: tuple[str, str]) -> Any:
    from memory_ledger.config import Settings

    return Settings.resolve(Path(where[0]), where[1])


def _warm(where: tuple[str, str]) -> None:
    """In a worker: open the store once; later calls reuse it."""
    global _SERVICE
    from memory_ledger.api import MemoryService

    if _SERVICE is None:
        _SERVICE = MemoryService(_settings(where))


def _rebuild(where: tuple[str, str], names: list[str] | None, vectors: bool) -> dict[str, float]:
    """In a worker: rebuild `names` (all, with the vector index, when None), or these
    projections and, with `vectors`, the vector index; the worker's wall and CPU time."""
    _warm(where)
    service = _SERVICE
    wall, cpu = time.perf_counter(), time.process_time()
    if names is None:
        service.rebuild()
    else:
        if names:
            service.runner.only(names).rebuild(names)
        if vectors:
            service.vectors.rebuild()
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}


def profile(settings: Any, directory: Path, backend: str) -> list[str]:
    """One more full rebuild in this process under cProfile: the top entries by own time."""
    from memory_ledger.api import MemoryService

    directory.mkdir(parents=True, exist_ok=True)
    with MemoryService(settings) as service:
        profiler = cProfile.Profile()
        profiler.enable()
        service.rebuild()
        profiler.disable()
    profiler.dump_stats(str(directory / f"rebuild-{backend}.prof"))
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(45)
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
    (directory / f"rebuild-{backend}.txt").write_text(text.getvalue())
    return text.getvalue().splitlines()[:120]


def print_table(console: Console, results: list[dict[str, Any]]) -> None:
    console.width = max(console.width, 120)
    table = Table(title="rebuild against its floor (read + decode + open each event once)")
    for column in (
        "backend",
        "label",
        "events",
        "what",
        "ev/s wall",
        "ev/s CPU",
        "x floor (wall)",
        "x floor (CPU)",
    ):
        table.add_column(column, justify="right")
    for r in results:
        f = r["floor"]
        table.add_row(
            r["backend"],
            r["label"],
            f"{r['events']:,}",
            "floor",
            f"{f['events_per_s_wall']:,.0f}",
            f"{f['events_per_s_cpu']:,.0f}",
            "1",
            "1",
        )
        for key in ("runners_1", "runners_2"):
            if key not in r:
                continue
            g = r[key]
            table.add_row(
                r["backend"],
                r["label"],
                f"{r['events']:,}",
                f"rebuild, {key[-1]} runner(s)",
                f"{g['events_per_s_wall']:,.0f}",
                f"{g['events_per_s_cpu']:,.0f}",
                f"{g['ratio_wall']:.3f}",
                f"{g['ratio_cpu']:.3f}",
            )
    console.print(table)


if __name__ == "__main__":
    raise SystemExit(main())
