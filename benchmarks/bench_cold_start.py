"""Cold start (issue 37): the first recall of a fresh process, and a CLI listing's CPU.

Run from the repository root:

    python -m benchmarks.bench_cold_start                       # 1k, 10k and 100k items
    python -m benchmarks.bench_cold_start --sizes 1000,10000
    python -m benchmarks.bench_cold_start --quick               # 200 and 1,000 items
    python -m benchmarks.bench_cold_start --keep /tmp/cold      # reuse (or keep) the stores

Each size is one SQLite store whose namespace `acme/heavy` holds N items, filled as in
bench_recall_heavy (the bilingual set's memories, cycled and varied; the set's 8 users
beside it), with the product's default embedder unless `--embedder` says otherwise. The
fill is paid once, untimed; `--keep DIR` keeps the stores in DIR (`heavy-<N>/`) and
reuses them on the next run.

Then, per round, every case of every size runs once in a fresh process, in an order
shuffled per round (seeded), so a burst of load on the machine falls on all alike:

- `first recall`: a child opens the store, embeds one text (the model is loaded
  outside the timing: the server does that at start), then times its first
  `context(query)`: CPU (`process_time`) and wall. In the same process, after it, a
  second `context` of another query with the context cache cleared: the same-run
  baseline, what a warm process pays;
- `first recall, no state files`: the same, after removing the recall state files
  (`recall/`) and the search codes files (`vector-codes/`): the recall state is read whole
  from the projections and the namespace's vectors are all opened, as every first recall
  did before issue 37 (and as the first after an erasure does);
- `cli recall` and `python -c pass`: `memory-ledger recall --limit 20 --json` on the
  store, and the interpreter's floor, by the CPU the child used (user + system, from
  the children's rusage) and wall.

Prints a table of medians and writes `benchmarks/results/cold_start.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "cold_start.json"
HEAVY = "acme/heavy"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (200, 1_000)
GOAL_FIRST_RECALL_S = 1.0  # at 100,000 items
GOAL_CLI_RECALL_CPU_S = 0.5
FILLED = "bench-filled.json"  # in a kept store: the fill finished, and what it was
CASES = ("first recall", "first recall, no state files", "cli recall", "python -c pass")


# -- the stores -----------------------------------------------------------------------------


def ensure_store(directory: Path, size: int, embedder: str) -> dict[str, Any]:
    """The store of `size` items in `directory`, filled now unless a finished fill of the
    same size and embedder is there."""
    marker = directory / FILLED
    if marker.exists():
        done = json.loads(marker.read_text())
        if done.get("heavy_items") == size and done.get("embedder") == embedder:
            return dict(done)
    shutil.rmtree(directory, ignore_errors=True)
    code = (
        "import json, sys\n"
        "from benchmarks.bench_recall_heavy import fill\n"
        "from benchmarks.retrieval_set import load_set\n"
        "from memory_ledger.api import MemoryService\n"
        "with MemoryService.open(sys.argv[1]) as service:\n"
        "    print(json.dumps(fill(service, load_set(), int(sys.argv[2]))))\n"
    )
    start = time.perf_counter()
    filled = _child(code, [str(directory), str(size)], embedder, f"filling {size} items")
    filled.update(embedder=embedder, fill_seconds=round(time.perf_counter() - start, 1))
    marker.write_text(json.dumps(filled))
    return dict(filled)


def _env(embedder: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MEMORY_LEDGER_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(PYTHONPATH=str(ROOT), MEMORY_LEDGER_EMBEDDER=embedder, COLUMNS="120")
    return env


# -- the children ---------------------------------------------------------------------------

_FIRST_RECALL = """
import json, sys, time
from memory_ledger.api import MemoryService
from memory_ledger.principal import Principal
started = time.perf_counter()
service = MemoryService.open(sys.argv[1], create=False)
ledger = service.for_principal(Principal.from_namespace(sys.argv[2]))
service.vectors.embed_query("warm up")  # the model, outside the timing
opened = time.perf_counter() - started
cpu, wall = time.process_time(), time.perf_counter()
first = ledger.context(sys.argv[3])
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
service.context_cache.clear()
cpu2, wall2 = time.process_time(), time.perf_counter()
ledger.context(sys.argv[4])
cpu2, wall2 = time.process_time() - cpu2, time.perf_counter() - wall2
print(json.dumps({"cpu": cpu, "wall": wall, "second_cpu": cpu2, "second_wall": wall2,
                  "open_and_model": opened, "items": len(first.items)}))
service.close()
"""


def first_recall(store: Path, embedder: str, queries: tuple[str, str]) -> dict[str, float]:
    out: dict[str, float] = _child(
        _FIRST_RECALL, [str(store), HEAVY, *queries], embedder, "a first recall"
    )
    return out


def _child(code: str, args: list[str], embedder: str, what: str) -> Any:
    """Run `code` in a fresh interpreter; its last line of output is its JSON result."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=_env(embedder),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spawned(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """A child's CPU (user + system, from the children's rusage) and wall."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed:\n{done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall}


def run_case(case: str, store: Path, embedder: str, rng: random.Random, queries: list[str]) -> Any:
    if case.startswith("first recall"):
        if case.endswith("no state files"):
            shutil.rmtree(store / "recall", ignore_errors=True)
            shutil.rmtree(store / "vector-codes", ignore_errors=True)
        pair = rng.sample(queries, 2)
        return first_recall(store, embedder, (pair[0], pair[1]))
    if case == "cli recall":
        args = ["recall", "--namespace", HEAVY, "--data-dir", str(store), "--limit", "20"]
        return spawned([sys.executable, "-m", "memory_ledger.cli", *args, "--json"], _env(embedder))
    return spawned([sys.executable, "-c", "pass"], _env(embedder))


# -- the run --------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated item counts (default 1k,10k,100k)")
    parser.add_argument("--quick", action="store_true", help="200 and 1,000 items, 2 rounds")
    parser.add_argument("--rounds", type=int, help="rounds of every case (default 5; quick 2)")
    parser.add_argument("--embedder", default="use", help="MEMORY_LEDGER_EMBEDDER (use)")
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the stores in this dir")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    try:
        sizes = (
            tuple(int(s) for s in args.sizes.split(","))
            if args.sizes
            else (QUICK_SIZES if args.quick else DEFAULT_SIZES)
        )
    except ValueError:
        parser.error(f"--sizes: comma-separated whole numbers, not {args.sizes!r}")
    if any(s < 1 for s in sizes):
        parser.error("--sizes: every size must be at least 1")
    rounds = args.rounds or (2 if args.quick else 5)
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    console = Console()
    from benchmarks.retrieval_set import load_set  # the set's 89 queries

    queries = [q.text for q in load_set().queries]
    scratch = None if args.keep else Path(tempfile.mkdtemp(prefix="ml_cold_"))
    base = args.keep or scratch
    assert base is not None
    try:
        stores: dict[int, Path] = {}
        filled: dict[int, dict[str, Any]] = {}
        for size in sizes:
            stores[size] = base / f"heavy-{size}"
            console.print(f"store of {size:,} items in {stores[size]} ...")
            filled[size] = ensure_store(stores[size], size, args.embedder)
        rng = random.Random(args.seed)
        samples: dict[tuple[int, str], list[dict[str, float]]] = {}
        for size in sizes:  # untimed: bytecode caches, state files, page cache
            for case in CASES:
                run_case(case, stores[size], args.embedder, rng, queries)
        for round_ in range(rounds):
            order = [(size, case) for size in sizes for case in CASES]
            rng.shuffle(order)
            for size, case in order:
                found = run_case(case, stores[size], args.embedder, rng, queries)
                samples.setdefault((size, case), []).append(found)
            console.print(f"round {round_ + 1}/{rounds} done")
        results = report(console, sizes, samples)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from benchmarks.bench_core import machine_info

    payload = {
        "benchmark": "cold_start",
        "issue": 37,
        "embedder": args.embedder,
        "rounds": rounds,
        "seed": args.seed,
        "goals": {
            "first_recall_at_100k_s": GOAL_FIRST_RECALL_S,
            "cli_recall_cpu_s": GOAL_CLI_RECALL_CPU_S,
        },
        "machine": machine_info(("sqlite",), ""),
        "fills": {str(s): filled[s] for s in sizes},
        "results": results,
    }
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


def report(
    console: Console,
    sizes: tuple[int, ...],
    samples: dict[tuple[int, str], list[dict[str, float]]],
) -> dict[str, Any]:
    table = Table(title="Cold start (medians; seconds)")
    for column in ("items", "case", "CPU", "wall", "same process, 2nd recall CPU", "2nd wall"):
        table.add_column(column, justify="right" if column != "case" else "left")
    results: dict[str, Any] = {}
    for size in sizes:
        per_size: dict[str, Any] = {}
        for case in CASES:
            found = samples.get((size, case), [])
            row = {key: median([f[key] for f in found]) for key in (found[0] if found else {})}
            row["n"] = len(found)
            per_size[case] = row
            second = (
                (f"{row['second_cpu']:.3f}", f"{row['second_wall']:.3f}")
                if "second_cpu" in row
                else ("", "")
            )
            table.add_row(
                f"{size:,}", case, f"{row.get('cpu', 0):.3f}", f"{row.get('wall', 0):.3f}", *second
            )
        results[str(size)] = per_size
    console.print(table)
    return results


if __name__ == "__main__":
    raise SystemExit(main())
