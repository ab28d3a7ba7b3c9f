"""Run the "forget in words" set: requests in users' words over long, multi-speaker
agent histories, measured by what executing the plan actually did to the store.

The data is `benchmarks/data/forget_in_words/` (see `benchmarks/forget_in_words_gen.py`
for how it is made and how its expectations read the requests). For each case this
module:

1. opens a fresh store: a copy of a data directory into which the case's history was
   written once (`remember_many`, as the history's own principal, with the service's
   clock set to the history's `now`; projections and the vector index caught up), so
   every case starts from the same bytes and a history is written once per run;
2. asks `plan_forget(request)` as that principal, with the history's time zone, and
   executes the plan when its status is `planned` (or `partial_match`);
3. reads every item back with `get` and scores the result against the case:

   - `exact`: every expected place changed as expected (an `erase` place's item erased
     or its value gone; a `redact` place's item still readable, the span gone, the
     rest of its text intact, a marker such as "[forgotten]" allowed where the span
     was), nothing else changed, every keep string intact;
   - `wider`: an item changed that no place names (erased, suppressed or rewritten), a
     redacted item lost more than its spans, or a keep string was lost;
   - `narrower`: a place unchanged (or only partly redacted), nothing wider;
   - `asked`: `needs_clarification` where a plan was expected;
   - `nothing`: `nothing_matched` or `not_a_request` where a plan was expected;
   - `error`: planning or execution raised;
   - for the cases that expect no plan: `correct` (the expected status) or `wrong`,
     and whether anything in the store changed (`damaging`).

4. checks for leaks after execution, for every case that expects a plan: each named
   value, in every format, in `context(q)` for the case's attack queries ("what was the
   old code?", "confirm: was it 7142?"), in `recall(limit=10000)`, `summary()`,
   `export()`, and as bytes in any file of the data directory (the store seals content,
   so a plaintext hit is a real leak). Matching is on token boundaries, so a kept
   "71420" is not a leak of "7142".

It never looks at how the planner reached its answer: only at the plan's status and at
the store afterwards. `python -m benchmarks.forget_in_words` runs every case (minutes);
`--quick` runs 30 cases over 6 histories; `--cases ID,...` runs the named ones;
`--json` prints the results on stdout instead of the table (by default they are written
to `benchmarks/results/forget_in_words.json`); `--data DIR` runs another set of the same
format, such as the two halves of `benchmarks/data/forget_outside/` (written outside the
project: tune on `dev` only, report `heldout` beside it).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.forget_in_words_gen import (
    CASES_FORMAT,
    CASES_PATH,
    HISTORIES_FORMAT,
    HISTORIES_PATH,
    LANGUAGES,
    SHAPES,
    STATUSES,
    byte_pattern,
    composition,
    contains,
    find_spans,
)

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "forget_in_words.json"
RESULTS_FORMAT = "forget-in-words-results/1"
EXECUTABLE = ("planned", "partial_match")
PLAN_OUTCOMES = ("exact", "wider", "narrower", "asked", "nothing", "error")
NONPLAN_OUTCOMES = ("correct", "wrong")
CHANNELS = ("context", "recall", "summary", "export", "files")
RECALL_LIMIT = 10_000
QUICK_HISTORIES = 6
QUICK_PER_HISTORY = 5
#: What may stand where a span was redacted: "[forgotten]", "[redacted]", "[已删除]", "***".
MARKER = re.compile(r"\[[^\[\]\n]{0,40}\]|<[^<>\n]{0,40}>|\*+|█+|…")


# -- loading ---------------------------------------------------------------------------


def load_histories(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    data = json.loads(Path(path or HISTORIES_PATH).read_text(encoding="utf-8"))
    if data.get("format") != HISTORIES_FORMAT:
        raise ValueError(f"histories format is {data.get('format')!r}")
    return {h["id"]: h for h in data["histories"]}


def load_cases(
    path: str | Path | None = None, histories: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    data = json.loads(Path(path or CASES_PATH).read_text(encoding="utf-8"))
    if data.get("format") != CASES_FORMAT:
        raise ValueError(f"cases format is {data.get('format')!r}")
    cases = data["cases"]
    problems = []
    for case in cases:
        if histories is not None and case["history"] not in histories:
            problems.append(f"{case['id']}: no history {case['history']!r}")
        if case["expected"]["status"] not in STATUSES:
            problems.append(f"{case['id']}: unknown status")
    if problems:
        raise ValueError("; ".join(problems))
    return cases


def quick_selection(cases: Sequence[Mapping[str, Any]], histories: Mapping[str, Any]) -> list[str]:
    """30 cases for CI: 6 histories (3 English, 3 Chinese), 5 cases each, rotating over
    the kinds of case so that every kind is run."""
    by_history: dict[str, list[str]] = defaultdict(list)
    for case in cases:
        by_history[case["history"]].append(case["id"])
    english = [h for h in histories.values() if h["language"] == "en"][: QUICK_HISTORIES // 2]
    chinese = [h for h in histories.values() if h["language"] == "zh"][: QUICK_HISTORIES // 2]
    chosen: list[str] = []
    for j, history in enumerate([*english, *chinese]):
        ids = by_history[history["id"]][:12]
        chosen += [ids[(j * QUICK_PER_HISTORY + k) % len(ids)] for k in range(QUICK_PER_HISTORY)]
    return chosen


# -- writing a history -----------------------------------------------------------------


def history_writes(history: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(item key, write) for every turn and fact, in the order they were written."""
    rows: list[tuple[datetime, int, str, dict[str, Any]]] = []
    for turn in history["turns"]:
        write = {
            "kind": "turn",
            "subject": turn["speaker"],
            "content": turn["text"],
            "origin": "explicit" if turn["speaker"] == "user" else "observed",
            "sensitivity": "personal",
            "provenance": {
                "writer": "chat-agent",
                "written_at": turn["written_at"],
                "session_id": turn["session"],
                "turn_id": turn["key"],
            },
        }
        rows.append((datetime.fromisoformat(turn["written_at"]), 0, turn["key"], write))
    for fact in history["facts"]:
        write = {
            "kind": "fact",
            "subject": fact["subject"],
            "predicate": fact["predicate"],
            "value": fact["value"],
            "category": fact["category"],
            "origin": "explicit",
            "sensitivity": "personal",
            "provenance": {
                "writer": "extractor",
                "written_at": fact["written_at"],
                "tool_call_id": fact["tool_call"],
            },
        }
        rows.append((datetime.fromisoformat(fact["written_at"]), 1, fact["key"], write))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return [(key, write) for _, _, key, write in rows]


def item_texts(history: Mapping[str, Any]) -> dict[str, str]:
    texts = {t["key"]: t["text"] for t in history["turns"]}
    texts |= {f["key"]: f["value"] for f in history["facts"]}
    return texts


def _principal(history: Mapping[str, Any]) -> Any:
    from memory_ledger.principal import Principal

    return Principal(history["tenant"], history["user"])


def _now(history: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(history["now"])


def _open(data_dir: Path, embedder: Any, history: Mapping[str, Any]) -> Any:
    from memory_ledger.api import MemoryService
    from memory_ledger.config import Settings

    service = MemoryService(Settings.resolve(data_dir), embedder=embedder)
    now = _now(history)
    service.clock = lambda: now  # reads decide expiry and plan lifetimes as of `now`
    return service


@dataclass
class Prepared:
    """A history written once into a data directory that each case copies."""

    data_dir: Path
    ids: dict[str, str]
    baseline: dict[str, str | None]
    seconds: float
    file_hits: list[str]


def prepare(history: Mapping[str, Any], root: Path, embedder: Any) -> Prepared:
    started = time.perf_counter()
    data_dir = root / "templates" / history["id"]
    writes = history_writes(history)
    with _open(data_dir, embedder, history) as service:
        ledger = service.for_principal(_principal(history))
        stored = ledger.remember_many([w for _, w in writes])
        service.runner.catch_up()
        service.vectors.catch_up()
        ids = {key: s.item_id for (key, _), s in zip(writes, stored, strict=True)}
        baseline = {key: ledger.get(item_id).text for key, item_id in ids.items()}
    forms = sorted({f for v in history["values"] for f in v["forms"]})
    return Prepared(
        data_dir, ids, baseline, time.perf_counter() - started, file_hits(data_dir, forms)
    )


# -- reading the store after a case ----------------------------------------------------


@dataclass(frozen=True)
class After:
    text: str | None
    erased: bool
    suppressed: bool


def read_items(ledger: Any, ids: Mapping[str, str]) -> dict[str, After]:
    out = {}
    for key, item_id in ids.items():
        try:
            state = ledger.get(item_id)
        except Exception:  # an item that cannot be read any more reads as gone
            out[key] = After(None, True, False)
            continue
        out[key] = After(state.text, bool(state.erased), bool(state.suppressed))
    return out


def _leak_forms(case: Mapping[str, Any]) -> list[str]:
    return sorted({f for n in case["named"] if n.get("stored", True) for f in n["forms"]})


def beyond_keeps(text: str, forms: Sequence[str], keeps: Sequence[str]) -> bool:
    """Whether `text` says a form outside the case's keep strings: "bill" in a kept
    "water bill", or "Rose" in a kept "rose bushes", is the keep, not a leak of the
    name (a form that holds a keep whole, "Mr. Hale's retirement party", still is)."""
    kept = {k.lower() for k in keeps}
    return any(text[i:j].lower() not in kept for i, j in find_spans(text, [*forms, *keeps]))


def read_surfaces(ledger: Any, case: Mapping[str, Any]) -> dict[str, Any]:
    """Where the named values could still be returned: each channel's hits, and
    (`beyond_keeps`) whether any is outside the case's keep strings."""
    forms = _leak_forms(case)
    keeps = [k["text"] for k in case["expected"]["keeps"]]
    hits: dict[str, Any] = {}
    context_hits = []
    beyond: list[str] = []
    for n, query in enumerate(case["attack_queries"]):
        try:
            text = ledger.context(query).render()
        except Exception as exc:  # a query the context builder refuses is not a leak
            text = ""
            hits.setdefault("errors", []).append(f"context: {type(exc).__name__}")
        if contains(text, forms):
            context_hits.append(n)
            if beyond_keeps(text, forms, keeps):
                beyond.append("context")
    hits["context"] = context_hits
    recalled = [m.text for m in ledger.recall(limit=RECALL_LIMIT) if m.text]
    hits["recall"] = sum(1 for t in recalled if contains(t, forms))
    if any(beyond_keeps(t, forms, keeps) for t in recalled):
        beyond.append("recall")
    summary = ledger.summary()
    hits["summary"] = bool(summary is not None and contains(summary.text, forms))
    if summary is not None and beyond_keeps(summary.text, forms, keeps):
        beyond.append("summary")
    exported = json.dumps(ledger.export(), ensure_ascii=False, default=str)
    hits["export"] = contains(exported, forms)
    if beyond_keeps(exported, forms, keeps):
        beyond.append("export")
    hits["beyond_keeps"] = sorted(set(beyond))
    return hits


def file_hits(data_dir: Path, forms: Iterable[str]) -> list[str]:
    """Files under `data_dir` holding any of `forms` in clear (as UTF-8 bytes)."""
    patterns = [byte_pattern(f) for f in sorted(set(forms)) if f]
    found = []
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if any(p.search(data) for p in patterns):
            found.append(path.relative_to(data_dir).as_posix())
    return found


# -- scoring ---------------------------------------------------------------------------


def _squash(text: str) -> str:
    return " ".join(text.split())


def redaction_state(before: str, after: str, spans: Sequence[str]) -> str:
    """How `after` relates to `before` with `spans` to be removed: `done` (every
    occurrence gone, nothing else changed, a marker allowed), `unchanged`, `partial`
    (some occurrence, or part of one, left; nothing else changed) or `mangled` (text
    outside the spans changed)."""
    before, after = _squash(before), _squash(after)
    if before == after:
        return "unchanged"
    found = find_spans(before, spans)
    if not found:
        return "mangled"
    pattern, last = "", 0
    for i, j in found:
        pattern += re.escape(before[last:i]) + "(.*?)"
        last = j
    pattern += re.escape(before[last:])
    match = re.fullmatch(pattern, after, flags=re.DOTALL)
    if match is None:
        return "mangled"
    states = []
    for group, (i, j) in zip(match.groups(), found, strict=True):
        if contains(group, [before[i:j]]):
            states.append("kept")
        elif re.search(r"[0-9A-Za-z\u3400-\u9fff]", MARKER.sub("", group)):
            states.append("partial")
        else:
            states.append("removed")
    if all(s == "removed" for s in states):
        return "done"
    return "unchanged" if all(s == "kept" for s in states) else "partial"


def score(
    case: Mapping[str, Any],
    baseline: Mapping[str, str | None],
    after: Mapping[str, After],
    status: str | None,
    error: str | None,
) -> dict[str, Any]:
    """What happened to the store, against what the case expects."""
    expected = case["expected"]
    by_item: dict[str, list[dict[str, str]]] = defaultdict(list)
    for place in expected["places"]:
        by_item[place["item"]].append(place)
    place_states: dict[str, str] = {}
    for key, places in by_item.items():
        state, base = after[key], baseline[key] or ""
        spans = [p["span"] for p in places]
        gone = state.erased or state.text is None
        if any(p["action"] == "erase" for p in places):
            place_states[key] = (
                "done" if gone or not contains(state.text or "", spans) else "unchanged"
            )
        elif gone:
            place_states[key] = "item_erased"
        elif state.suppressed:
            place_states[key] = "suppressed"
        else:
            place_states[key] = redaction_state(base, state.text or "", spans)
    changed_outside = sorted(
        key
        for key, state in after.items()
        if key not in by_item and (state.erased or state.suppressed or state.text != baseline[key])
    )
    keeps, lost = 0, []
    for keep in expected["keeps"]:
        where = keep["items"] or list(after)
        if keep["items"]:
            for key in where:
                keeps += 1
                text = after[key].text
                if text is None or keep["text"] not in text:
                    lost.append(f"{key}:{keep['text']}")
        else:
            keeps += 1
            if not any(keep["text"] in (after[k].text or "") for k in where):
                lost.append(f"*:{keep['text']}")
    done = sum(1 for s in place_states.values() if s == "done")
    beyond = [k for k, s in place_states.items() if s in ("item_erased", "suppressed", "mangled")]
    wider = bool(changed_outside or beyond or lost)
    if expected["status"] == "planned":
        if error is not None:
            outcome = "error"
        elif status == "needs_clarification":
            outcome = "asked"
        elif status not in EXECUTABLE:
            outcome = "nothing"
        elif wider:
            outcome = "wider"
        elif done == len(by_item):
            outcome = "exact"
        else:
            outcome = "narrower"
    else:
        outcome = "correct" if status == expected["status"] and error is None else "wrong"
    return {
        "outcome": outcome,
        "places": len(expected["places"]),
        "place_items": len(by_item),
        "place_items_done": done,
        "place_states": dict(sorted(place_states.items())),
        "changed_outside": changed_outside,
        "keeps": keeps,
        "keeps_lost": lost,
        "damaging": expected["status"] != "planned" and wider,
    }


# -- running ---------------------------------------------------------------------------


def model_call(case: Mapping[str, Any]) -> dict[str, list[str]] | None:
    """What a model would pass to `forget_information` for this case: every written form
    of each value the case names (the staff notes' "Ms. Vell" as well as "Harriet
    Vell"), and the keep strings. None when the case names no value (a request about
    everything, or one the model would ask about or refuse: the words go to
    `plan_forget`, the fallback behind the same plans)."""
    values = list(dict.fromkeys(f for n in case["named"] for f in n["forms"]))
    if not values:
        return None
    keeps = list(dict.fromkeys(k["text"] for k in case["expected"]["keeps"]))
    return {"values": values, "keeps": [k for k in keeps if k not in values]}


def _plan(ledger: Any, case: Mapping[str, Any], history: Mapping[str, Any], protocol: str) -> Any:
    call = model_call(case) if protocol == "model" else None
    if call is None:
        return ledger.plan_forget(case["request"], timezone=history["timezone"])
    return ledger.forget_information(call["values"], keeps=call["keeps"])


def run_case(
    case: Mapping[str, Any],
    history: Mapping[str, Any],
    prepared: Prepared,
    root: Path,
    embedder: Any,
    protocol: str = "words",
) -> dict[str, Any]:
    started = time.perf_counter()
    data_dir = root / "cases" / case["id"]
    shutil.copytree(prepared.data_dir, data_dir)
    result: dict[str, Any] = {
        "id": case["id"],
        "history": case["history"],
        "language": case["language"],
        "shapes": case["shapes"],
        "expected_status": case["expected"]["status"],
        "status": None,
        "intent": None,
        "plan_targets": None,
        "executed": False,
        "outcome_status": None,
        "error": None,
        # which call planned it: the model protocol's, or the words' (a case naming no value)
        "path": "model" if protocol == "model" and model_call(case) is not None else "words",
    }
    leaks: dict[str, Any] | None = None
    try:
        with _open(data_dir, embedder, history) as service:
            ledger = service.for_principal(_principal(history))
            try:
                plan = _plan(ledger, case, history, protocol)
                result |= {
                    "status": plan.status,
                    "intent": plan.intent,
                    "plan_targets": len(plan.targets or []),
                }
                if plan.status in EXECUTABLE:
                    result["executed"] = True
                    outcome = ledger.execute_plan(plan.plan_id)
                    result["outcome_status"] = outcome.status
            except Exception as exc:  # the planner is under test: record, measure on
                result["error"] = f"{type(exc).__name__}: {exc}"[:300]
            after = read_items(ledger, prepared.ids)
            if case["expected"]["status"] == "planned":
                leaks = read_surfaces(ledger, case)
        if leaks is not None:
            leaks["files"] = file_hits(data_dir, _leak_forms(case))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    result |= score(case, prepared.baseline, after, result["status"], result["error"])
    if leaks is not None:
        leaks["any"] = bool(
            leaks["context"]
            or leaks["recall"]
            or leaks["summary"]
            or leaks["export"]
            or leaks["files"]
        )
    result["leaks"] = leaks
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def run(
    cases: Sequence[Mapping[str, Any]],
    histories: Mapping[str, Mapping[str, Any]],
    *,
    embedder_spec: str | None = None,
    keep_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    protocol: str = "words",
) -> dict[str, Any]:
    """Run `cases` (each in a fresh copy of its history's store); the results document."""
    from memory_ledger.embedders import load_embedder

    started = time.perf_counter()
    embedder = load_embedder(embedder_spec)
    root = Path(tempfile.mkdtemp(prefix="forget-in-words-", dir=keep_dir))
    prepared: dict[str, Prepared] = {}
    results = []
    prepare_seconds = 0.0
    try:
        for n, case in enumerate(cases, start=1):
            history = histories[case["history"]]
            if history["id"] not in prepared:
                prepared[history["id"]] = prepare(history, root, embedder)
                prepare_seconds += prepared[history["id"]].seconds
            results.append(
                run_case(case, history, prepared[history["id"]], root, embedder, protocol)
            )
            if progress is not None and (n % 25 == 0 or n == len(cases)):
                progress(f"{n}/{len(cases)} cases, {time.perf_counter() - started:.0f} s")
    finally:
        if keep_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    mismatched = sorted(h for h, p in prepared.items() if p.baseline != item_texts(histories[h]))
    selected = {c["history"] for c in cases}
    return {
        "format": RESULTS_FORMAT,
        "run": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - started, 1),
            "prepare_seconds": round(prepare_seconds, 1),
            "cases_run": len(results),
            "histories_prepared": len(prepared),
            "embedder": getattr(embedder, "name", str(embedder_spec)),
            "protocol": protocol,
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
        "set": composition([histories[h] for h in histories if h in selected], list(cases)),
        "baseline": {
            "histories_not_read_back_as_written": mismatched,
            "template_file_hits": {h: p.file_hits for h, p in prepared.items() if p.file_hits},
        },
        "totals": summarise(results),
        "by_language": {
            lang: summarise([r for r in results if r["language"] == lang])
            for lang in LANGUAGES
            if any(r["language"] == lang for r in results)
        },
        "by_shape": {
            shape: summarise([r for r in results if shape in r["shapes"]])
            for shape in SHAPES
            if any(shape in r["shapes"] for r in results)
        },
        "by_path": {
            path: summarise([r for r in results if r.get("path", "words") == path])
            for path in ("model", "words")
            if any(r.get("path", "words") == path for r in results)
        },
        "by_expected_status": {
            status: summarise([r for r in results if r["expected_status"] == status])
            for status in STATUSES
            if any(r["expected_status"] == status for r in results)
        },
        "cases": results,
    }


def _rate(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _leak_totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    out = {"cases_checked": len(rows)}
    for channel in CHANNELS:
        out[channel] = sum(1 for r in rows if r["leaks"][channel])
    out["any"] = sum(1 for r in rows if r["leaks"]["any"])
    out["beyond_keeps"] = sum(
        1 for r in rows if r["leaks"].get("beyond_keeps") or r["leaks"]["files"]
    )
    return out


def summarise(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    plan = [r for r in results if r["expected_status"] == "planned"]
    other = [r for r in results if r["expected_status"] != "planned"]
    counts = {o: sum(1 for r in plan if r["outcome"] == o) for o in PLAN_OUTCOMES}
    counts |= {o: sum(1 for r in other if r["outcome"] == o) for o in NONPLAN_OUTCOMES}
    checked = [r for r in plan if r["leaks"] is not None]
    executed = [r for r in checked if r["executed"]]
    items = sum(r["place_items"] for r in plan)
    items_done = sum(r["place_items_done"] for r in plan)
    return {
        "cases": len(results),
        "plan_expected": len(plan),
        **counts,
        "exact_rate": _rate(counts["exact"], len(plan)),
        "non_plan_expected": len(other),
        "non_plan_correct_rate": _rate(counts["correct"], len(other)),
        "damaging": sum(1 for r in other if r["damaging"]),
        "executed": sum(1 for r in results if r["executed"]),
        "places": sum(r["places"] for r in plan),
        "place_items": items,
        "place_items_done": items_done,
        "place_item_recall": _rate(items_done, items),
        "items_changed_outside": sum(len(r["changed_outside"]) for r in results),
        "keeps": sum(r["keeps"] for r in results),
        "keeps_lost": sum(len(r["keeps_lost"]) for r in results),
        "leaks": _leak_totals(checked),
        "leaks_after_execution": _leak_totals(executed),
    }


# -- output ----------------------------------------------------------------------------


def table(results: Mapping[str, Any]) -> str:
    head = (
        f"{'':<20}{'cases':>6}{'plan':>6}{'exact':>6}{'wider':>6}{'narr':>6}{'asked':>6}"
        f"{'none':>6}{'err':>5}{'np ok':>8}{'items':>8}{'keeps':>8}{'leak':>6}{'leak*':>7}"
    )

    def row(name: str, s: Mapping[str, Any]) -> str:
        np_ok = f"{s['correct']}/{s['non_plan_expected']}"
        items = f"{s['place_item_recall']:.0%}" if s["place_item_recall"] is not None else "-"
        keeps = f"{s['keeps_lost']}/{s['keeps']}"
        return (
            f"{name:<20}{s['cases']:>6}{s['plan_expected']:>6}{s['exact']:>6}{s['wider']:>6}"
            f"{s['narrower']:>6}{s['asked']:>6}{s['nothing']:>6}{s['error']:>5}{np_ok:>8}"
            f"{items:>8}{keeps:>8}{s['leaks']['any']:>6}{s['leaks_after_execution']['any']:>7}"
        )

    run_info = results["run"]
    lines = [
        f"forget in words: {run_info['cases_run']} cases, {run_info['histories_prepared']} "
        f"histories, protocol {run_info.get('protocol', 'words')}, {run_info['seconds']} s "
        f"(writing histories {run_info['prepare_seconds']} s), "
        f"embedder {run_info['embedder']}",
        "",
        head,
        row("all", results["totals"]),
        "",
    ]
    lines += [row(f"lang {k}", v) for k, v in results["by_language"].items()]
    lines.append("")
    lines += [row(k, v) for k, v in results["by_shape"].items()]
    lines.append("")
    lines += [row(f"expect {k}", v) for k, v in results["by_expected_status"].items()]
    if results["run"].get("protocol") == "model":
        lines.append("")
        lines += [row(f"via {k}", v) for k, v in results.get("by_path", {}).items()]
    t = results["totals"]
    leaks, after = t["leaks"], t["leaks_after_execution"]
    lines += [
        "",
        "plan: cases expecting a plan; np ok: cases expecting no plan answered with the "
        "expected status; items: share of items with expected places changed as expected; "
        "keeps: keep strings lost / checked; leak: cases (expecting a plan) where a named "
        "value is still returned or stored in clear; leak*: the same among executed plans.",
        "",
        f"leaks by channel (of {leaks['cases_checked']} cases expecting a plan; "
        f"{after['cases_checked']} executed): "
        + ", ".join(f"{c} {leaks[c]} ({after[c]})" for c in CHANNELS),
        f"cases with a named value returned or stored outside the case's keep strings: "
        f"{leaks['beyond_keeps']} ({after['beyond_keeps']} executed)",
        f"items changed that no place names: {t['items_changed_outside']}; "
        f"non-plan cases that changed the store: {t['damaging']}",
    ]
    base = results["baseline"]
    if base["histories_not_read_back_as_written"] or base["template_file_hits"]:
        lines.append(f"baseline problems: {base}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 cases over 6 histories")
    parser.add_argument("--cases", help="comma-separated case ids")
    parser.add_argument("--json", action="store_true", help="print the results JSON on stdout")
    parser.add_argument("--out", type=Path, default=RESULTS_PATH, help="where to write the JSON")
    parser.add_argument(
        "--embedder", help="MEMORY_LEDGER_EMBEDDER spec (default: the configured one)"
    )
    parser.add_argument("--keep-dir", type=Path, help="keep the stores under this directory")
    parser.add_argument(
        "--data",
        type=Path,
        help="a folder holding histories.json and cases.json (default: the project's own set); "
        "e.g. benchmarks/data/forget_outside/dev",
    )
    parser.add_argument(
        "--protocol",
        choices=("words", "model"),
        default="words",
        help="words: plan_forget(request), the offline reader; model: forget_information "
        "given the values (every form) and keeps the case states, as a model would pass "
        "them (cases naming no value fall back to the words)",
    )
    args = parser.parse_args(argv)
    histories = load_histories(args.data / "histories.json" if args.data else None)
    cases = load_cases(args.data / "cases.json" if args.data else None, histories=histories)
    if args.cases:
        wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
        known = {c["id"] for c in cases}
        unknown = [c for c in wanted if c not in known]
        if unknown:
            parser.error(f"unknown case ids: {', '.join(unknown)}")
        cases = [c for c in cases if c["id"] in set(wanted)]
    elif args.quick:
        chosen = set(quick_selection(cases, histories))
        cases = [c for c in cases if c["id"] in chosen]

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = run(
        cases,
        histories,
        embedder_spec=args.embedder,
        keep_dir=args.keep_dir,
        progress=progress,
        protocol=args.protocol,
    )
    text = json.dumps(results, ensure_ascii=False, indent=1)
    if args.json:
        print(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
        print(table(results))
        print(f"\nresults: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
