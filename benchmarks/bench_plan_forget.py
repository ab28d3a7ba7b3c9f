"""Forget requests in words: how often `plan_forget` reads a request exactly as meant,
and what a plan costs.

Run from the repository root:

    python -m benchmarks.bench_plan_forget              # the default embedder
    python -m benchmarks.bench_plan_forget --embedder hashing --failures

**Accuracy.** The bilingual set in `benchmarks/data/forget_requests/` (fictional
histories, and requests with the one plan each should give; see
`benchmarks/forget_requests.py`). Each history is written into a fresh SQLite store
whose clock is the history's `now`; each request is planned in the history's time zone
and scored: exact-scope rate, wider-than-asked count (goal 0), clarification rate,
false triggers (goal 0), overall, per language and per expected answer.

**Cost.** One heavy user (the history of `--heavy-history` padded with `--heavy` more
facts and turns): `plan_forget` for a few requests, interleaved with the baseline of the
same request already in explicit form (`forget_scope(..., dry_run=True)` on the scope
the plan resolved to), p50/p99 over `--rounds`. A dry run files a ledger entry; a plan
stores a sealed row; neither destroys anything.

**Plans from words at scale** (`--scale`). One namespace of `--heavy` items (the
`--scale-history` history padded with turns and facts whose texts repeat a phone number,
a name and a quoted phrase hundreds of times, as a long-lived agent's memory does), and
the requests of `benchmarks/data/plan_forget_scale.json` (a phone, a name, a quoted
phrase, a description, a time range, "old address"...): the CPU time of each plan, p50
over `--rounds`. With `--base DIR` (a checkout of other code, e.g. `git archive START |
tar -x -C /tmp/plan-base`), the same requests are planned by that code too, in its own
process on its own copy of the same store, interleaved round by round with this code's
(each round runs both, so both see the same machine load), and each plan is compared:
a digest of the whole plan (ids, spans, labels; not its id or expiry) must be the same.
Results go to `--scale-out`.

Results are printed as tables and written as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.forget_requests import (
    load_cases,
    load_histories,
    parse_time,
    score,
    summarise,
    write_history,
)

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "plan_forget.json"
SCALE_OUT = Path(__file__).resolve().parent / "results" / "plan_forget_scale.json"
SCALE_DATA = Path(__file__).resolve().parent / "data" / "plan_forget_scale.json"
HEAVY_REQUESTS = [
    "forget my old address",
    "delete my phone number",
    "把我昨天说的都删掉",
    "forget what you concluded about my diet",
]


def _open(data_dir: str, now: datetime) -> Any:
    from memory_ledger.api import open_memory
    from memory_ledger.principal import Principal

    ledger = open_memory(Principal("bench", "user"), data_dir)
    ledger.service.clock = lambda: now
    return ledger


def accuracy(cases: list[dict[str, Any]], histories: dict[str, Any]) -> dict[str, Any]:
    scores, seconds = [], []
    for name, history in histories.items():
        mine = [c for c in cases if c["history"] == name]
        if not mine:
            continue
        now = parse_time(history["now"])
        assert now is not None
        with tempfile.TemporaryDirectory() as data_dir:
            ledger = _open(data_dir, now)
            try:
                ids = write_history(ledger, history)
                for case in mine:
                    started = time.perf_counter()
                    plan = ledger.plan_forget(case["request"], timezone=history.get("timezone"))
                    seconds.append(time.perf_counter() - started)
                    scores.append(score(case, plan.to_dict(), ids))
            finally:
                ledger.close()
    return {
        "summary": summarise(scores),
        "scores": scores,
        "plan_ms": _percentiles(seconds),
    }


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50": round(statistics.median(ms), 2),
        "p99": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
        "n": len(ms),
    }


def heavy(history: dict[str, Any], extra: int, rounds: int) -> dict[str, Any]:
    """Plan cost at one heavy user, beside resolving the same scope in explicit form."""
    now = parse_time(history["now"])
    assert now is not None
    with tempfile.TemporaryDirectory() as data_dir:
        ledger = _open(data_dir, now)
        try:
            write_history(ledger, history)
            _pad(ledger, extra, now)
            ledger.service.vectors.catch_up()
            out: dict[str, Any] = {"items": len(history["items"]) + extra, "requests": {}}
            for text in HEAVY_REQUESTS:
                planned, explicit = [], []
                for _ in range(rounds):  # interleaved: the two see the same machine state
                    started = time.perf_counter()
                    plan = ledger.plan_forget(text, timezone=history.get("timezone"))
                    planned.append(time.perf_counter() - started)
                    scope = plan.scope or {"kind": "item", "item_ids": plan.targets or []}
                    if scope.get("kind") == "item" and not scope.get("item_ids"):
                        continue
                    started = time.perf_counter()
                    ledger.forget_scope(scope, dry_run=True)
                    explicit.append(time.perf_counter() - started)
                out["requests"][text] = {
                    "status": plan.status,
                    "plan_forget_ms": _percentiles(planned),
                    "forget_scope_dry_run_ms": _percentiles(explicit) if explicit else None,
                }
            return out
        finally:
            ledger.close()


def _pad(ledger: Any, extra: int, now: datetime) -> None:
    """Facts and turns about other things, over the two years before `now`."""
    writes = []
    for i in range(extra):
        at = now - timedelta(minutes=7 * (extra - i) + 1)
        source = {"writer": "bench", "written_at": at.isoformat(), "session_id": f"p{i // 20}",
                  "turn_id": f"pt{i}"}  # fmt: skip
        if i % 2:
            writes.append({"kind": "turn", "subject": "user", "content": f"note {i}: the "
                           f"meeting about project {i % 97} moved to room {i % 13}",
                           "origin": "explicit", "sensitivity": "personal",
                           "provenance": source})  # fmt: skip
        else:
            writes.append({"kind": "fact", "subject": "user", "predicate": f"note_{i}",
                           "value": f"detail {i} of project {i % 97}",
                           "origin": "observed", "sensitivity": "internal",
                           "provenance": source})  # fmt: skip
    for start in range(0, len(writes), 500):
        ledger.remember_many(writes[start : start + 500])


# -- plans from words at scale ----------------------------------------------------------


def build_scale_store(data_dir: str, history_name: str, extra: int) -> None:
    """A history padded to `extra` more items, written with this code: turns about the
    topics of `SCALE_DATA` (some repeating its phone, name and phrase) and facts."""
    spec = json.loads(SCALE_DATA.read_text())
    history = load_histories()[history_name]
    now = parse_time(history["now"])
    assert now is not None
    ledger = _open(data_dir, now)
    try:
        write_history(ledger, history)
        writes = []
        topics = spec["topics"]
        for i in range(extra):
            at = now - timedelta(minutes=7 * (extra - i) + 1)
            source = {"writer": "bench", "written_at": at.isoformat(),
                      "session_id": f"p{i // 20}", "turn_id": f"pt{i}"}  # fmt: skip
            topic = topics[i % len(topics)]
            if i % 2:
                content = f"note {i}: talked about {topic}, moved to room {i % 13}"
                for repeat in spec["repeats"]:
                    if i % repeat["every"] == repeat["at"]:
                        content += repeat["text"]
                writes.append({"kind": "turn", "subject": "user", "content": content,
                               "origin": "explicit", "sensitivity": "personal",
                               "provenance": source})  # fmt: skip
            else:
                writes.append({"kind": "fact", "subject": "user", "predicate": f"note_{i}",
                               "value": f"detail {i} of {topic}", "origin": "observed",
                               "sensitivity": "internal", "provenance": source})  # fmt: skip
        for start in range(0, len(writes), 500):
            ledger.remember_many(writes[start : start + 500])
        ledger.service.vectors.catch_up()
    finally:
        ledger.close()


def plan_digest(plan: Any) -> str:
    """The whole plan but its id, request id and expiry: equal digests, equal plans."""
    body = plan.to_dict()
    for name in ("plan_id", "request_id", "expires_at"):
        body.pop(name, None)
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def worker(data_dir: str, history_name: str, after_write: bool = False) -> None:
    """Plan the scale requests once per line read on stdin; one JSON line per round:
    each request's CPU and wall milliseconds, status, target count and digest. With
    `after_write`, a turn ("ok", dated years back, so no plan's answer changes) is
    written before each plan, untimed: as an agent does, which writes the user's turn
    and then plans the request it holds."""
    import memory_ledger

    spec = json.loads(SCALE_DATA.read_text())
    history = load_histories()[history_name]
    now = parse_time(history["now"])
    ledger = _open(data_dir, now)
    print(json.dumps({"code": str(Path(memory_ledger.__file__).parent.parent)}), flush=True)
    written = 0
    try:
        for _ in sys.stdin:
            out = {}
            for text in spec["requests"]:
                if after_write:
                    written += 1
                    source = {"writer": "bench", "session_id": "w", "turn_id": f"w{written}",
                              "written_at": "2015-01-01T00:00:00+00:00"}  # fmt: skip
                    ledger.remember({"kind": "turn", "subject": "user", "content": "ok",
                                     "origin": "explicit", "sensitivity": "personal",
                                     "provenance": source})  # fmt: skip
                    ledger.service.runner.catch_up()  # the write's own cost, not the plan's
                cpu, wall = time.process_time(), time.perf_counter()
                plan = ledger.plan_forget(text, timezone=history.get("timezone"))
                out[text] = {
                    "cpu_ms": (time.process_time() - cpu) * 1000,
                    "wall_ms": (time.perf_counter() - wall) * 1000,
                    "status": plan.status,
                    "targets": len(plan.targets or []),
                    "digest": plan_digest(plan),
                }
            print(json.dumps(out), flush=True)
    finally:
        ledger.close()


def scale(
    history_name: str, extra: int, rounds: int, base: Path | None, after_write: bool = False
) -> dict[str, Any]:
    """Both codes' plans, interleaved round by round (see the module docstring)."""
    here = Path(__file__).resolve().parent.parent
    codes = {"new": here} | ({"base": base.resolve()} if base else {})
    with tempfile.TemporaryDirectory() as root:
        store = os.path.join(root, "store")
        os.makedirs(store)
        started = time.perf_counter()
        build_scale_store(store, history_name, extra)
        built_s = time.perf_counter() - started
        procs = {}
        for name, code in codes.items():
            copy = os.path.join(root, name)
            shutil.copytree(store, copy)
            env = dict(os.environ, PYTHONPATH=str(code))
            procs[name] = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--worker", copy,
                 "--scale-history", history_name, *(["--after-write"] if after_write else [])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=code, env=env,
            )  # fmt: skip
        seen: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in codes}
        loaded = {}
        try:
            for name, proc in procs.items():
                loaded[name] = json.loads(proc.stdout.readline())["code"]  # type: ignore[union-attr]
            for round_ in range(rounds + 1):  # round 0 warms each process's caches
                for name in sorted(procs, reverse=round_ % 2 == 1):  # alternate who goes first
                    proc = procs[name]
                    proc.stdin.write("round\n")  # type: ignore[union-attr]
                    proc.stdin.flush()  # type: ignore[union-attr]
                    answer = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
                    if round_:
                        for text, r in answer.items():
                            seen[name].setdefault(text, []).append(r)
        finally:
            for proc in procs.values():
                proc.stdin.close()  # type: ignore[union-attr]
                proc.wait(timeout=60)
    requests: dict[str, Any] = {}
    for text in seen["new"]:
        row: dict[str, Any] = {}
        for name in codes:
            runs = seen[name][text]
            row[name] = {
                "status": runs[0]["status"],
                "targets": runs[0]["targets"],
                "cpu_ms": _percentiles([r["cpu_ms"] / 1000 for r in runs]),
                "wall_ms": _percentiles([r["wall_ms"] / 1000 for r in runs]),
                "digests": sorted({r["digest"] for r in runs}),
            }
        if base:
            row["same_plan"] = row["new"]["digests"] == row["base"]["digests"]
        requests[text] = row
    summary = {
        name: round(statistics.median(r[name]["cpu_ms"]["p50"] for r in requests.values()), 1)
        for name in codes
    }
    return {
        "items": len(load_histories()[history_name]["items"]) + extra,
        "rounds": rounds,
        "after_write": after_write,
        "build_s": round(built_s, 1),
        "code": loaded,
        "median_of_p50_cpu_ms": summary,
        "all_plans_same": all(r.get("same_plan", True) for r in requests.values()),
        "requests": requests,
    }


def render_scale(results: dict[str, Any], console: Console) -> None:
    names = list(results["code"])
    when = ", each after a write" if results["after_write"] else ""
    table = Table(title=f"plans from words at {results['items']} items{when}, CPU ms p50 (p99)")
    table.add_column("request")
    table.add_column("status, targets")
    for name in names:
        table.add_column(name, justify="right")
    if "base" in names:
        table.add_column("same plan")
    for text, row in results["requests"].items():
        cells = [text, f"{row['new']['status']}, {row['new']['targets']}"]
        cells += [f"{row[n]['cpu_ms']['p50']} ({row[n]['cpu_ms']['p99']})" for n in names]
        if "base" in names:
            cells.append("yes" if row["same_plan"] else "NO")
        table.add_row(*cells)
    console.print(table)
    console.print(f"median of the requests' p50 CPU ms: {results['median_of_p50_cpu_ms']}")


def render(results: dict[str, Any], console: Console, failures: bool) -> None:
    summary = results["accuracy"]["summary"]
    table = Table(title=f"plan_forget on the evaluation set ({results['embedder']} embedder)")
    for column in ("set", "cases", "exact", "wider", "clarified", "false triggers"):
        table.add_column(column, justify="right" if column != "set" else "left")
    rows = [("all", summary)] + [(f"lang {k}", v) for k, v in summary["per_language"].items()]
    rows += [(f"expected {k}", v) for k, v in summary["per_status"].items()]
    for name, r in rows:
        table.add_row(
            name,
            str(r["cases"]),
            f"{r['exact_rate']:.1%}",
            str(r["wider_count"]),
            f"{r['clarification_rate']:.1%}",
            str(r["false_trigger_count"]),
        )
    console.print(table)
    ms = results["accuracy"]["plan_ms"]
    console.print(f"plan_forget latency on the set: p50 {ms['p50']} ms, p99 {ms['p99']} ms")
    if "heavy" in results:
        h = results["heavy"]
        cost = Table(title=f"one heavy user: {h['items']} items")
        for column in ("request", "status", "plan p50/p99 ms", "explicit dry run p50/p99 ms"):
            cost.add_column(column)
        for text, r in h["requests"].items():
            base = r["forget_scope_dry_run_ms"]
            cost.add_row(
                text,
                r["status"],
                f"{r['plan_forget_ms']['p50']} / {r['plan_forget_ms']['p99']}",
                f"{base['p50']} / {base['p99']}" if base else "-",
            )
        console.print(cost)
    if failures:
        for s in results["accuracy"]["scores"]:
            if not s["exact"]:
                console.print(f"[yellow]{s['id']}[/]: {s['why']}", highlight=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default=None, help="default | hashing")
    parser.add_argument("--heavy", type=int, default=10_000, help="extra items at the heavy user")
    parser.add_argument("--heavy-history", default="mei")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="no heavy user")
    parser.add_argument("--failures", action="store_true", help="print every inexact case")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--scale", action="store_true", help="plans from words at scale only")
    parser.add_argument("--scale-history", default="tom")
    parser.add_argument("--base", type=Path, default=None, help="other code to compare with")
    parser.add_argument("--scale-out", type=Path, default=SCALE_OUT)
    parser.add_argument("--after-write", action="store_true", help="a write before each plan")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.scale_history, args.after_write)
        return 0
    if args.scale:
        found = scale(args.scale_history, args.heavy, args.rounds, args.base, args.after_write)
        render_scale(found, Console(width=160))
        args.scale_out.parent.mkdir(parents=True, exist_ok=True)
        args.scale_out.write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
        return 0
    if args.embedder:
        os.environ["MEMORY_LEDGER_EMBEDDER"] = args.embedder
    histories = load_histories()
    cases = load_cases(histories=histories)
    results: dict[str, Any] = {
        "embedder": os.environ.get("MEMORY_LEDGER_EMBEDDER", "default"),
        "accuracy": accuracy(cases, histories),
    }
    if not args.quick:
        results["heavy"] = heavy(histories[args.heavy_history], args.heavy, args.rounds)
    render(results, Console(), args.failures)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
