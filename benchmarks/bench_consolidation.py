"""Consolidation throughput: turns consolidated per second for one heavy user, against
the first form of the job measured in the same run on the same data.

Run from the repository root:

    python -m benchmarks.bench_consolidation                 # 5,000 turns, 3 rounds, SQLite
    python -m benchmarks.bench_consolidation --quick         # 500 turns, 2 rounds
    python -m benchmarks.bench_consolidation --turns 20000 --baseline main

The store holds one user's TURNS turns (sessions of 50), said in English and Chinese:
addresses, employers, allergies, seat requests and chit-chat, the values drawn from
small pools so that conclusions repeat (as a heavy user's do). It is filled once (this
tree's code, hashing embedder, projections caught up), closed, and copied for every
measurement. Each measurement runs in a worker process of its own, on its own copy:
it opens the service untimed, then times `Consolidator(service.job_context).run_all()` end to end,
once (a second run reads nothing, and must write nothing).

Versions, interleaved: `new` is this tree's `jobs.consolidation`; `baseline` is
`jobs/consolidation.py` as `git show REF:` gives it (`--baseline`, default the last
commit of the first form), loaded from a file by the worker, with the rest of this
tree. Round r runs baseline then new, round r+1 new then baseline, and so on, so a
change of the machine's load reaches both alike. A third case, `new + candidates`,
runs this tree's job on a copy whose turns also carry one structured candidate each
(the baseline cannot read them, so it has no pair).

The two versions do not do the same work: the baseline writes one item per match (a
repeated conclusion is written again), the new job groups evidence by canonical key,
promotes preferences on two turns, and merges into held conclusions. `written` says
what each wrote. Results: a table, and JSON at `--out`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "consolidation.json"
#: The last commit with the first form of the job (one file, phrase patterns only).
DEFAULT_BASELINE = "1d1aea0"
BASELINE_PATH = "jobs/consolidation.py"
T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
TENANT, USER = "acme", "heavy"
SESSION_TURNS = 50
REPLY = "@@bench "

CITIES = ["Hangzhou", "Oslo", "Basel", "Lisbon", "Kyoto", "Bergen"]
STREETS = ["Haisong", "Riverside", "Lakeview", "Harbour", "Maple"]
COMPANIES = ["Globex Corporation", "Initech Systems", "Umbrella Pharma", "Hooli"]
ALLERGENS = ["peanuts", "shellfish", "penicillin", "pollen"]
ZH_CITIES = ["杭州市西湖区", "上海市浦东新区", "北京市海淀区"]
ZH_ALLERGENS = ["花生", "青霉素", "海鲜"]


def _said(rng: random.Random, i: int) -> tuple[str, dict[str, Any] | None]:
    """One turn's text, and a structured candidate the agent might attach to it."""
    roll = rng.random()
    city = rng.choice(CITIES)
    if roll < 0.15:
        value = f"{rng.randint(1, 30)} {rng.choice(STREETS)} Road, {city}"
        return f"By the way, my address is {value}.", _candidate("home_address", value)
    if roll < 0.30:
        value = rng.choice(COMPANIES)
        return f"I work at {value}, as you know.", _candidate("employer", value)
    if roll < 0.45:
        value = rng.choice(ALLERGENS)
        return f"Careful: I'm allergic to {value}.", _candidate("allergy", value)
    if roll < 0.65:
        seat = rng.choice(["window", "aisle"])
        return f"Please book me a {seat} seat to {city}.", _candidate("seat", seat, "preference")
    if roll < 0.72:
        value = rng.choice(ZH_CITIES)
        return f"我住在{value}。", _candidate("home_address", value)
    if roll < 0.78:
        value = rng.choice(ZH_ALLERGENS)
        return f"我对{value}过敏。", _candidate("allergy", value)
    return f"What is the weather like in {city} this week? ({i})", None


def _candidate(predicate: str, value: str, kind: str = "fact") -> dict[str, Any]:
    return {"kind": kind, "predicate": predicate, "value": value}


def _writes(turns: int, seed: int, candidates: bool) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(turns):
        text, candidate = _said(rng, i)
        write: dict[str, Any] = {
            "kind": "turn",
            "subject": "user",
            "content": text,
            "origin": "explicit",
            "sensitivity": "personal",
            "provenance": {
                "writer": "bench",
                "written_at": (T0 + timedelta(seconds=i)).isoformat(),
                "session_id": f"s{i // SESSION_TURNS}",
                "turn_id": f"t{i}",
            },
        }
        if candidates and candidate is not None:
            write["candidates"] = [candidate]
        out.append(write)
    return out


def _fill(path: Path, turns: int, seed: int, candidates: bool) -> None:
    from memory_ledger.api import MemoryService
    from memory_ledger.principal import Principal

    with MemoryService.open(path) as service:
        ledger = service.for_principal(Principal(TENANT, USER))
        writes = _writes(turns, seed, candidates)
        for start in range(0, len(writes), 500):
            ledger.remember_many(writes[start : start + 500])
        service.runner.catch_up()
        service.vectors.catch_up()


# -- the worker --------------------------------------------------------------------------


def _load_job(version: str, source: str | None) -> Any:
    if version == "baseline":
        assert source is not None
        spec = importlib.util.spec_from_file_location("consolidation_baseline", source)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    import memory_ledger.jobs.consolidation

    return memory_ledger.jobs.consolidation


def worker(store: str, version: str, source: str | None) -> dict[str, Any]:
    """One measurement on one copy of the store, in this (fresh) process."""
    from memory_ledger.api import MemoryService

    job = _load_job(version, source)
    with MemoryService.open(store) as service:
        consolidator = job.Consolidator(service.job_context)
        started = time.perf_counter()
        written, refused = consolidator.run_all()
        seconds = time.perf_counter() - started
        again = consolidator.run_all()
        from memory_ledger.principal import Principal

        ledger = service.for_principal(Principal(TENANT, USER))
        held = len(ledger.recall(kind="fact", limit=10_000)) + len(
            ledger.recall(kind="preference", limit=10_000)
        )
    return {
        "seconds": seconds,
        "written": written,
        "refused": refused,
        "second_run_written": again[0],
        "live_conclusions": held,
    }


def _run_worker(store: Path, version: str, source: Path | None) -> dict[str, Any]:
    env = {**os.environ, "MEMORY_LEDGER_EMBEDDER": "hashing", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "benchmarks.bench_consolidation", "--worker", version]
    command += ["--store", str(store)] + (["--source", str(source)] if source else [])
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    replies = [line for line in done.stdout.splitlines() if line.startswith(REPLY)]
    if done.returncode != 0 or not replies:
        raise SystemExit(f"worker {version} failed:\n{done.stderr[-3000:]}")
    return json.loads(replies[-1].removeprefix(REPLY))  # type: ignore[no-any-return]


# -- the driver --------------------------------------------------------------------------


def _baseline_source(ref: str, into: Path) -> Path:
    done = subprocess.run(
        ["git", "show", f"{ref}:{BASELINE_PATH}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"--baseline {ref}: git show {ref}:{BASELINE_PATH} failed: {done.stderr}")
    path = into / "consolidation_baseline.py"
    path.write_text(done.stdout, encoding="utf-8")
    return path


def _summary(turns: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in runs]
    return {
        "runs": len(runs),
        "seconds": [round(s, 3) for s in seconds],
        "median_s": round(statistics.median(seconds), 3),
        "turns_per_s": round(turns / statistics.median(seconds)),
        "best_turns_per_s": round(turns / min(seconds)),
        "written": runs[0]["written"],
        "refused": runs[0]["refused"],
        "second_run_written": max(r["second_run_written"] for r in runs),
        "live_conclusions": runs[0]["live_conclusions"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_consolidation")
    parser.add_argument("--turns", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git ref of the baseline")
    parser.add_argument("--quick", action="store_true", help="500 turns, 2 rounds")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--worker", choices=("baseline", "new"), help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--source", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(REPLY + json.dumps(worker(args.store, args.worker, args.source)), flush=True)
        return 0
    if args.quick:
        args.turns, args.rounds = 500, 2
    if not 1 <= args.turns <= 10_000 or not 1 <= args.rounds <= 50:
        # The baseline reads at most 10,000 turns of a namespace per run.
        parser.error("--turns from 1 to 10,000, --rounds from 1 to 50")
    os.environ["MEMORY_LEDGER_EMBEDDER"] = "hashing"
    from benchmarks.bench_core import machine_info

    console = Console()
    scratch = Path(tempfile.mkdtemp(prefix="ml-bench-consolidation-"))
    try:
        source = _baseline_source(args.baseline, scratch)
        templates = {"phrases": scratch / "phrases", "candidates": scratch / "candidates"}
        for name, path in templates.items():
            console.log(f"filling a store of {args.turns:,} turns ({name}) ...")
            _fill(path, args.turns, args.seed, candidates=name == "candidates")
        runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "new": [], "new+candidates": []}
        for r in range(args.rounds):
            order = ["baseline", "new"] if r % 2 == 0 else ["new", "baseline"]
            for version in [*order, "new+candidates"]:
                template = templates["candidates" if version == "new+candidates" else "phrases"]
                copy = scratch / f"run-{r}-{version}"
                shutil.copytree(template, copy)
                kind = "baseline" if version == "baseline" else "new"
                result = _run_worker(copy, kind, source if kind == "baseline" else None)
                runs[version].append(result)
                shutil.rmtree(copy, ignore_errors=True)
                console.log(
                    f"round {r + 1}: {version}: {args.turns / result['seconds']:,.0f} turns/s"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results = {name: _summary(args.turns, r) for name, r in runs.items()}
    report = {
        "benchmark": "consolidation",
        "turns": args.turns,
        "rounds": args.rounds,
        "baseline_ref": args.baseline,
        "backend": "sqlite",
        "results": results,
        "speedup": round(results["new"]["turns_per_s"] / results["baseline"]["turns_per_s"], 2),
        "machine": machine_info(("sqlite",), ""),
    }
    table = Table(title=f"consolidation of one user's {args.turns:,} turns, SQLite")
    for column in ("version", "turns/s (median)", "best", "median s", "written", "live after"):
        table.add_column(column, justify="right")
    table.add_column("second run wrote", justify="right")
    for name, row in results.items():
        label = f"{name} ({args.baseline})" if name == "baseline" else name
        table.add_row(
            label,
            f"{row['turns_per_s']:,}",
            f"{row['best_turns_per_s']:,}",
            f"{row['median_s']:.2f}",
            f"{row['written']:,}",
            f"{row['live_conclusions']:,}",
            f"{row['second_run_written']:,}",
        )
    console.print(table)
    console.print(f"new / baseline: {report['speedup']}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    console.log(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
