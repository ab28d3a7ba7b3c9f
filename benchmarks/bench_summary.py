"""Summaries after one write (issue 27): one user with 5,000 (and 20,000) facts writes one
more, then reads its profile summary; and a forget of 500 of its facts, with what the
summary costs in it. Goal: the next read after one write < 5 ms at 5,000 facts; a
forget's summary cost follows the items forgotten, not the user's live facts.

Run from the repository root:

    python -m benchmarks.bench_summary                      # SQLite, 5,000 and 20,000 facts
    python -m benchmarks.bench_summary --quick              # 500 facts, 10 rounds: a smoke run
    git archive 364cb6b | tar -x -C /tmp/base               # the code before issue 27 ...
    python -m benchmarks.bench_summary --baseline-tree /tmp/base   # ... run beside this tree

Each store is filled by a worker process of its own: N facts in the namespace
`acme/heavy` (distinct predicates, so every one stays live), written with
`remember_many`, then caught up and summarised once (untimed). A round then times, in
that worker:

- `write`: `remember(fact)`, the bare write through the log: no projection catches up.
  This is the same-run baseline every round carries: what a write costs before anything
  reads it;
- `next read`: `summary()` right after it: the projections catch up on that one event
  (every projection: facts, catalog, keyword and mention indexes, summaries) and the
  stored summary is opened. This is the figure the goal is about;
- `of which summaries`: the summaries projection's own share of that catch-up
  (`apply` + `settle`);
- `repeat read`: `summary()` again, nothing new: the read alone.

The context builder reads the same `summary()` for a query about the user as a whole,
so this is the summary's part of such a context. With `--baseline-tree`, a second worker
runs the same rounds on another source tree (the code before issue 27, say), and the
rounds of both workers are interleaved (alternating which goes first), so a load spike
from another process hits both alike. Then each worker forgets the 500 newest facts
(`forget(*ids)`, one request: every input of the profile and 300 below them), timed
whole and for the summaries projection's share (`apply`, `settle`, `purge`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "summary.json"
HEAVY = "acme/heavy"
DEFAULT_SIZES = (5_000, 20_000)
QUICK_SIZES = (500,)
FILL_BATCH = 500
GOAL_MS = 5.0


# -- the worker: one store, one source tree ---------------------------------------------


def _fact(i: int) -> dict[str, Any]:
    return {
        "kind": "fact",
        "subject": "user",
        "predicate": f"note_{i}",
        "value": f"note number {i}: the blue folder on shelf {i % 97}",
        "category": ("general", "work", "travel", "contact")[i % 4],
        "origin": "explicit",
        "sensitivity": "personal",
        "provenance": {
            "writer": "bench-summary",
            "written_at": datetime.now(UTC).isoformat(),
            "turn_id": f"t{i}",
            "session_id": "s1",
        },
    }


class Worker:
    """Runs in a process of its own, importing memory_ledger from its source tree."""

    def __init__(self, data_dir: str, url: str | None) -> None:
        import memory_ledger
        from memory_ledger.api import MemoryService
        from memory_ledger.config import Settings
        from memory_ledger.crypto import MasterKey
        from memory_ledger.principal import Principal
        from memory_ledger.projections.summaries import SummariesProjection

        self.code = str(Path(memory_ledger.__file__).resolve().parent.parent)
        self.spent = 0.0
        for name in ("apply", "settle", "purge"):
            self._time(SummariesProjection, name)
        self.service = MemoryService(
            Settings.resolve(Path(data_dir), url), master=MasterKey.generate("benchmark")
        )
        self.ledger = self.service.for_principal(Principal.from_namespace(HEAVY))
        self.ids: list[str] = []
        self.next = 0

    def _time(self, cls: type, name: str) -> None:
        """Add the time spent in `cls.name` to `self.spent`."""
        original = getattr(cls, name)
        worker = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                worker.spent += time.perf_counter() - start

        setattr(cls, name, timed)

    def setup(self, size: int) -> dict[str, Any]:
        start = time.perf_counter()
        for first in range(0, size, FILL_BATCH):
            writes = [_fact(i) for i in range(first, min(size, first + FILL_BATCH))]
            self.ids.extend(s.item_id for s in self.ledger.remember_many(writes))
        appended = time.perf_counter() - start
        start = time.perf_counter()
        summary = self.ledger.summary()
        self.next = size
        return {
            "code": self.code,
            "append_seconds": round(appended, 2),
            "first_catch_up_seconds": round(time.perf_counter() - start, 2),
            "summary_inputs": len(summary.inputs) if summary else 0,
        }

    def round(self) -> dict[str, Any]:
        write = _fact(self.next)
        self.next += 1
        start = time.perf_counter()
        self.ids.append(self.ledger.remember(write).item_id)
        wrote = time.perf_counter()
        self.spent = 0.0
        summary = self.ledger.summary()
        read = time.perf_counter()
        spent = self.spent
        again = self.ledger.summary()
        repeat = time.perf_counter() - read
        assert summary is not None and again is not None
        assert write["value"] in summary.text, "the new fact is in the summary"
        return {
            "write_ms": (wrote - start) * 1e3,
            "read_ms": (read - wrote) * 1e3,
            "summaries_ms": spent * 1e3,
            "repeat_read_ms": repeat * 1e3,
        }

    def forget(self, count: int) -> dict[str, Any]:
        targets = self.ids[-count:]
        self.spent = 0.0
        start = time.perf_counter()
        report = self.ledger.forget(*targets)
        seconds = time.perf_counter() - start
        summary = self.ledger.summary()
        left = {i for i, _ in summary.inputs} if summary else set()
        return {
            "items": len(targets),
            "completed": bool(report.completed),
            "seconds": round(seconds, 3),
            "summaries_seconds": round(self.spent, 4),
            "targets_left_in_summary": len(left & set(targets)),
            "summary_inputs_after": len(left),
        }


def worker_main(data_dir: str, url: str | None) -> int:
    """Answer one JSON command per line on stdin with one JSON line on stdout."""
    worker = Worker(data_dir, url)
    for line in sys.stdin:
        command = json.loads(line)
        name = command.pop("do")
        if name == "quit":
            worker.service.close()
            break
        answer = getattr(worker, name)(**command)
        print(json.dumps(answer), flush=True)
    return 0


# -- the driver -----------------------------------------------------------------------


class Remote:
    """A worker process on one source tree and one fresh store."""

    def __init__(self, label: str, tree: Path, data_dir: Path, url: str | None) -> None:
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(tree)}
        args = [sys.executable, str(Path(__file__).resolve()), "--worker", str(data_dir)]
        if url is not None:
            args += ["--worker-url", url]
        self.process = subprocess.Popen(
            args, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def ask(self, do: str, **kwargs: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"do": do, **kwargs}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} worker stopped (exit {self.process.wait()})")
        return dict(json.loads(line))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"do": "quit"}) + "\n")
        self.process.stdin.close()
        self.process.wait(timeout=120)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": round(at(0.5), 2), "p95": round(at(0.95), 2), "n": len(ordered)}


def run_size(
    backend: str, size: int, args: argparse.Namespace, trees: dict[str, Path]
) -> dict[str, Any]:
    from benchmarks.bench_core import fresh_store

    with contextlib.ExitStack() as stack:
        remotes: list[Remote] = []
        setup: dict[str, Any] = {}
        for label, tree in trees.items():
            store = stack.enter_context(fresh_store(backend, args.pg_url))
            url = None if backend == "sqlite" else store.url
            remote = Remote(label, tree, store.data_dir, url)
            stack.callback(remote.close)
            setup[label] = remote.ask("setup", size=size)
            remotes.append(remote)
        rounds: dict[str, list[dict[str, Any]]] = {r.label: [] for r in remotes}
        for i in range(args.rounds):
            for remote in remotes if i % 2 == 0 else remotes[::-1]:
                rounds[remote.label].append(remote.ask("round"))
        forgets = {r.label: r.ask("forget", count=min(args.forget, size)) for r in remotes}
    out: dict[str, Any] = {}
    for label, done in rounds.items():
        out[label] = {
            "setup": setup[label],
            **{key: percentiles([d[key] for d in done]) for key in done[0]},
            "forget": forgets[label],
        }
    return out


def render(results: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    table = Table(title="Summaries after one write (issue 27): ms, p50 / p95")
    for column in (
        "backend",
        "facts",
        "code",
        "write (baseline)",
        "next read",
        "of which summaries",
        "repeat read",
        f"goal < {GOAL_MS:g} ms",
        "forget: items",
        "forget: s",
        "of which summaries: s",
    ):
        table.add_column(column, justify="left" if column in ("backend", "code") else "right")
    for backend, sizes in results["backends"].items():
        for size, codes in sizes.items():
            for label, r in codes.items():
                f = r["forget"]
                table.add_row(
                    backend,
                    f"{int(size):,}",
                    label,
                    f"{r['write_ms']['p50']:.2f} / {r['write_ms']['p95']:.2f}",
                    f"{r['read_ms']['p50']:.2f} / {r['read_ms']['p95']:.2f}",
                    f"{r['summaries_ms']['p50']:.2f} / {r['summaries_ms']['p95']:.2f}",
                    f"{r['repeat_read_ms']['p50']:.2f} / {r['repeat_read_ms']['p95']:.2f}",
                    "met" if r["read_ms"]["p50"] < GOAL_MS else "not met",
                    str(f["items"]),
                    f"{f['seconds']:.2f}",
                    f"{f['summaries_seconds']:.3f}",
                )
    console.print(table)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from benchmarks.bench_core import add_common_options, parse_common

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_summary",
        description="Write one fact, then read the profile summary; and a forget's summary cost.",
    )
    add_common_options(parser)
    parser.set_defaults(backends="sqlite")
    parser.add_argument("--sizes", default=None, help="facts of the user (5000,20000)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per size (50)")
    parser.add_argument("--forget", type=int, default=None, help="facts forgotten (500)")
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        default=None,
        help="another source tree (e.g. `git archive 364cb6b`), run interleaved as a baseline",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parse_common(parser, argv)
    sizes = args.sizes.split(",") if args.sizes else (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    args.sizes = [int(s) for s in sizes]
    args.rounds = args.rounds or (10 if args.quick else 50)
    args.forget = args.forget or (50 if args.quick else 500)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        url = argv[3] if argv[2:3] == ["--worker-url"] else None
        return worker_main(argv[1], url)
    from rich.console import Console

    from benchmarks.bench_core import machine_info
    from benchmarks.bench_forget import source_state

    args = parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 200))
    trees = {"this tree": ROOT}
    if args.baseline_tree is not None:
        trees["baseline"] = args.baseline_tree.resolve()
    started = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "summary",
        "machine": machine_info(args.backends, args.pg_url),
        "source": source_state(),
        "baseline_tree": str(args.baseline_tree) if args.baseline_tree else None,
        "namespace": HEAVY,
        "rounds": args.rounds,
        "backends": {
            b: {str(size): run_size(b, size, args, trees) for size in args.sizes}
            for b in args.backends
        },
    }
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    render(results, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False))
    console.print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
