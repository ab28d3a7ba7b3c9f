"""CLI start-up (issue 28): how long `memory-ledger` takes to answer, beside `python -c
pass`.

Each case is a fresh process, timed from spawn to exit (wall) and by the CPU time it used
(user + system, from the children's rusage: the steadier figure on a shared machine):

- `python -c pass` and `python -c "import memory_ledger"`: the floor, and the package;
- `--help`, `recall --help`, a usage error (`recall --no-such-option`, exit 2) and
  `--version`: what must not load the service stack;
- `requests` on a small store (a few facts, made once before timing): a real read, which
  does load it.

Each case runs once untimed first, so that the bytecode caches exist (as in any
installed copy; PYTHONDONTWRITEBYTECODE is dropped from the children's environment).
Then the runs are interleaved: every round runs every case of every tree once, in an order
shuffled per round (seeded), so a burst of load on the machine falls on all of them
alike. The CLI runs as `python -m memory_ledger.cli` (what the `memory-ledger` script
does) with PYTHONPATH set to the tree measured, so one interpreter and one environment
measure an older tree beside this one:

    git worktree add /tmp/wt-cli-old d87db89
    python -m benchmarks.bench_cli_start --tree before=/tmp/wt-cli-old --tree after=.
    python -m benchmarks.bench_cli_start --quick      # small, for the test run

Writes a table (p50 and p95 wall, p50 CPU, in ms) and `benchmarks/results/cli-start.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
#: (name, arguments after the interpreter, or after `-m memory_ledger.cli` when `cli`).
CASES: list[tuple[str, bool, list[str]]] = [
    ("python -c pass", False, ["-c", "pass"]),
    ("import memory_ledger", False, ["-c", "import memory_ledger"]),
    ("--help", True, ["--help"]),
    ("recall --help", True, ["recall", "--help"]),
    ("usage error", True, ["recall", "--no-such-option"]),
    ("--version", True, ["--version"]),
    ("requests (small store)", True, ["requests", "--data-dir", "{store}"]),
]


def _env(tree: Path) -> dict[str, str]:
    # Bytecode caches are written and used, as in any installed copy: without them every
    # start compiles typer, rich and the CLI from source (some sandboxes set this).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MEMORY_LEDGER_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPATH"] = str(tree)
    env["COLUMNS"] = "120"
    return env


def _command(cli: bool, args: list[str], store: Path) -> list[str]:
    filled = [a.replace("{store}", str(store)) for a in args]
    return [sys.executable, *(["-m", "memory_ledger.cli"] if cli else []), *filled]


def _timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def _small_store(tree: Path, store: Path, facts: int, cwd: Path) -> None:
    for n in range(facts):
        args = [
            "remember", "--namespace", "acme/alice", "--kind", "fact", "--subject", "user",
            "--predicate", f"p{n}", "--value", f"value {n}", "--session-id", "s1",
            "--turn-id", f"t{n}", "--data-dir", str(store),
        ]  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "memory_ledger.cli", *args],
            env=_env(tree),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise SystemExit(f"could not make the small store: {done.stderr[-2000:]}")


def _code_of(tree: Path, cwd: Path) -> str:
    """Which memory_ledger a run with this tree imports (cwd: the runs' own)."""
    done = subprocess.run(
        [sys.executable, "-c", "import memory_ledger; print(memory_ledger.__file__)"],
        env=_env(tree),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout.strip()


def run(trees: dict[str, Path], runs: int, facts: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="bench-cli-start-") as scratch:
        cwd = Path(scratch) / "cwd"  # an empty working directory: no ./.memory-ledger
        cwd.mkdir()
        store = Path(scratch) / "store"
        _small_store(next(iter(trees.values())), store, facts, cwd)
        codes = {label: _code_of(tree, cwd) for label, tree in trees.items()}
        samples: dict[str, dict[str, list[tuple[float, float, int]]]] = {
            label: {name: [] for name, _, _ in CASES} for label in trees
        }
        jobs = [(label, case) for label in trees for case in CASES]
        for label, (_, cli, args) in jobs:  # untimed: the bytecode caches are written
            _timed(_command(cli, args, store), _env(trees[label]), cwd)
        for _ in range(runs):
            rng.shuffle(jobs)
            for label, (name, cli, args) in jobs:
                command = _command(cli, args, store)
                samples[label][name].append(_timed(command, _env(trees[label]), cwd))
    rows: dict[str, Any] = {"code": codes}
    for label, cases in samples.items():
        rows[label] = {}
        for name, found in cases.items():
            walls = sorted(w for w, _, _ in found)
            cpus = sorted(c for _, c, _ in found)
            rows[label][name] = {
                "runs": len(found),
                "wall_p50_ms": 1000 * statistics.median(walls),
                "wall_p95_ms": 1000 * _percentile(walls, 0.95),
                "cpu_p50_ms": 1000 * statistics.median(cpus),
                "exit_codes": sorted({rc for _, _, rc in found}),
            }
    return rows


def _percentile(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile of sorted values."""
    rank = max(1, min(len(ordered), round(share * len(ordered) + 0.5)))
    return ordered[rank - 1]


def render(rows: dict[str, Any], console: Console) -> None:
    labels = list(rows)
    table = Table(title="CLI start-up, ms per fresh process (p50 / p95 wall, p50 CPU)")
    table.add_column("case")
    for label in labels:
        table.add_column(f"{label} wall p50", justify="right")
        table.add_column(f"{label} p95", justify="right")
        table.add_column(f"{label} cpu", justify="right")
    for name, _, _ in CASES:
        cells = []
        for label in labels:
            r = rows[label][name]
            expected = [2] if name == "usage error" else [0]
            codes = ",".join(map(str, r["exit_codes"]))
            note = "" if r["exit_codes"] == expected else f" (exit {codes})"
            cells += [f"{r['wall_p50_ms']:.0f}{note}", f"{r['wall_p95_ms']:.0f}"]
            cells.append(f"{r['cpu_p50_ms']:.0f}")
        table.add_row(name, *cells)
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_cli_start")
    parser.add_argument(
        "--tree",
        action="append",
        default=None,
        metavar="LABEL=PATH",
        help="a source tree to measure (repeat to compare); default: current=this tree",
    )
    parser.add_argument("--runs", type=int, default=20, help="rounds, 1 to 1000")
    parser.add_argument("--facts", type=int, default=5, help="facts in the small store")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--quick", action="store_true", help="2 rounds, 1 fact")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.facts = 2, 1
    trees: dict[str, Path] = {}
    for spec in args.tree or [f"current={ROOT}"]:
        label, sep, path = spec.partition("=")
        if not sep or not label or not (Path(path) / "memory_ledger").is_dir():
            parser.error(f"--tree LABEL=PATH, PATH a source tree with memory_ledger/: {spec}")
        trees[label] = Path(path).resolve()
    if not 1 <= args.runs <= 1000 or not 1 <= args.facts <= 100:
        parser.error("--runs 1-1000, --facts 1-100")
    load_before = os.getloadavg()
    rows = run(trees, args.runs, args.facts, args.seed)
    codes = rows.pop("code")
    result = {
        "trees": {label: {"path": str(p), "code": codes[label]} for label, p in trees.items()},
        "cases": rows,
        "runs": args.runs,
        "facts": args.facts,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "argv": list(argv if argv is not None else sys.argv[1:]),
    }
    render(rows, Console())
    print(
        "load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}"
        .format(*load_before, *result["load_average_after"])
    )  # fmt: skip
    out = args.out or RESULTS / "cli-start.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
