"""`memory-ledger demo`: the product's promise, end to end, on the embedded default.

A travel assistant remembers a home address, a seat preference and a trip, and finds the
address when asked in Chinese. The user asks to delete the address. We show what was
deleted and what was kept, recall (lists and the context builder's vector and keyword
search) from a fresh process, rebuild every projection from the log, and scan every
file's bytes, the vector index's files included.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from memory_ledger.api import MemoryService
from memory_ledger.principal import Principal
from memory_ledger.residue import files_under, needles_for, scan

console = Console()
ADDRESS = "18 Haisong Road, Xihu District, Hangzhou"
SECRET_WORDS = [ADDRESS, "Haisong Road"]
NAMESPACE = "demo-travel/li-wei"


def _turn(session: str, turn: str, at: datetime, text: str) -> dict[str, Any]:
    return {
        "kind": "turn",
        "subject": "user",
        "content": text,
        "origin": "explicit",
        "sensitivity": "personal",
        "category": "conversation",
        "provenance": {
            "writer": "travel-assistant",
            "written_at": at.isoformat(),
            "session_id": session,
            "turn_id": turn,
        },
    }


def _memory(
    kind: str,
    predicate: str,
    value: str,
    category: str,
    turn: str,
    at: datetime,
    sensitivity: str = "personal",
) -> dict[str, Any]:
    return {
        "kind": kind,
        "subject": "user",
        "predicate": predicate,
        "value": value,
        "category": category,
        "origin": "explicit",
        "sensitivity": sensitivity,
        "provenance": {
            "writer": "travel-assistant",
            "written_at": at.isoformat(),
            "session_id": "s-0412",
            "turn_id": turn,
            "consent_ref": "consent-2026-04",
        },
    }


def _cli_in_new_process(data_dir: Path, *args: str) -> Any:
    command = [sys.executable, "-m", "memory_ledger.cli", *args]
    command += ["--namespace", NAMESPACE, "--data-dir", str(data_dir), "--json"]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def _show(title: str, memories: list[dict[str, Any]]) -> None:
    table = Table(title=title)
    for column in ("kind", "predicate", "remembered", "origin"):
        table.add_column(column)
    for m in memories:
        table.add_row(m["kind"], m["predicate"], m["text"], m["origin"])
    console.print(table)


def run_demo(data_dir: Path | None = None) -> int:
    directory = Path(data_dir or tempfile.mkdtemp(prefix="memory-ledger-demo-")).resolve()
    console.print(
        Panel.fit(
            "[bold]memory-ledger demo[/]: a travel assistant remembers, the user asks it "
            "to forget,\n"
            f"and we prove it forgot. Data directory: {directory}",
            border_style="cyan",
        )
    )
    checks: list[tuple[str, bool]] = []
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(days=30)

    with MemoryService.open(directory) as service:
        if service.dev_key_created:
            console.print(
                "[yellow]note:[/] generated a development master key in the data "
                "directory; production sets MEMORY_LEDGER_MASTER_KEY instead."
            )
        mem = service.for_principal(Principal.from_namespace(NAMESPACE))
        said = [
            ("t1", "My home address is " + ADDRESS + "."),
            ("t2", "Please always book me a window seat."),
            ("t3", "I'm flying to Kyoto on 12 December for four days."),
        ]
        turns = mem.remember_many(
            [
                _turn("s-0412", t, start + timedelta(minutes=i), text)
                for i, (t, text) in enumerate(said)
            ]
        )
        address, seat, trip = mem.remember_many(
            [
                _memory("fact", "home_address", ADDRESS, "contact", "t1", start),
                _memory("preference", "seat", "window", "travel", "t2", start, "internal"),
                _memory("fact", "upcoming_trip", "Kyoto, 12-16 December", "travel", "t3", start),
            ]
        )
        console.rule("1. The assistant remembers")
        _show("recall, before", [m.to_dict() for m in mem.recall()])
        asked = mem.context("她住在哪里？")  # "where does she live?", asked in Chinese
        console.print("context for the turn [italic]她住在哪里？[/] (where does she live?):")
        console.print(asked.render())
        checks.append(
            ("a Chinese question recalls the English address", "Haisong" in asked.render())
        )

        console.rule('2. "Please delete my old address."')
        console.print(
            "The request names a scope (subject user, predicate home_address). It resolves "
            "to the address fact, plus the transcript turn it was taken from (turn t1), "
            "which carries the same words. Seat preference and trip are out of scope."
        )
        report = mem.forget_scope(
            {"kind": "predicate", "subject": "user", "predicate": "home_address"}
        )
        table = Table(title=f"what was deleted (request {report.request_id})")
        table.add_column("item")
        table.add_column("why")
        for item in report.targets:
            table.add_row(item, "in scope: home_address")
        for item in report.cascaded:
            table.add_row(item, "transcript turn carrying it")
        console.print(table)
        table = Table(title="receipts, one per store")
        for column in ("store", "action", "status", "evidence"):
            table.add_column(column)
        for r in report.receipts:
            evidence = ", ".join(f"{k}={v}" for k, v in r.evidence.items())
            table.add_row(r.store, r.action, r.status, evidence)
        console.print(table)
        console.print(f"The assistant may answer: [italic]{report.message}[/]")
        checks.append(("request completed, with a receipt from every store", report.completed))
        checks.append(
            ("the confirmation does not repeat the address", "Haisong" not in report.message)
        )
        checks.append(
            (
                "the address's transcript turn was found and erased",
                turns[0].item_id in report.cascaded,
            )
        )
        state = mem.get(address.item_id)
        console.print(
            f"Reading the erased item from the log now gives: [bold]{state.text or 'ERASED'}[/] "
            f"(erased={state.erased}); its events remain, its key does not."
        )
        checks.append(
            ("erased item reads as ERASED from the log", state.erased and state.text is None)
        )
        kept_ids = {seat.item_id, trip.item_id}

    console.rule("3. Recall from a fresh process")
    fresh = _cli_in_new_process(directory, "recall")
    _show("recall, after (new process)", fresh)
    texts = json.dumps(fresh)
    checks.append(("address absent from recall in a new process", "Haisong" not in texts))
    checks.append(("seat preference and trip kept", kept_ids <= {m["item_id"] for m in fresh}))
    where = _cli_in_new_process(directory, "context", "where does she live? 她住在哪里？")
    seat_now = _cli_in_new_process(directory, "context", "which seat should I book?")
    console.print("context for [italic]where does she live?[/] now:")
    console.print(where["rendered"] or "(nothing relevant)")
    checks.append(
        (
            "the vector and keyword indexes no longer find the address",
            "Haisong" not in json.dumps(where, ensure_ascii=False),
        )
    )
    served = {i["item_id"] for i in seat_now["items"]}
    checks.append(("the seat preference is still found", seat.item_id in served))

    console.rule("4. Rebuild every projection from the log")
    with MemoryService.open(directory) as service:
        replayed = service.rebuild()
        console.print(f"replayed {replayed} events into every projection")
        rebuilt = [
            m.to_dict() for m in service.for_principal(Principal.from_namespace(NAMESPACE)).recall()
        ]
        audit = service.ledger.verify()
        console.print(
            f"lifecycle ledger ({service.ledger.location}): {audit.entries_checked} entries, "
            f"hash chain {'verified' if audit.ok else 'BROKEN'}; it holds ids and codes only"
        )
        checks.append(("the lifecycle ledger's hash chain verifies", audit.ok))
    _show("recall, after rebuild", rebuilt)
    checks.append(("address absent after rebuild", "Haisong" not in json.dumps(rebuilt)))
    checks.append(
        ("kept items still there after rebuild", kept_ids <= {m["item_id"] for m in rebuilt})
    )

    console.rule("5. Scan every file's bytes")
    paths = files_under(directory)
    findings = scan(paths, needles_for(SECRET_WORDS))
    table = Table(title=f"byte scan of {directory}")
    table.add_column("file")
    table.add_column("bytes")
    table.add_column("address found")
    hits = {f.path for f in findings}
    for path in paths:
        table.add_row(
            str(path.relative_to(directory)),
            str(path.stat().st_size),
            "[red]YES[/]" if str(path) in hits else "no",
        )
    console.print(table)
    checks.append(("address bytes absent from every file in the data dir", not findings))
    console.rule("Result")
    for name, ok in checks:
        console.print(("[green]PASS[/] " if ok else "[red]FAIL[/] ") + name, highlight=False)
    failed = [name for name, ok in checks if not ok]
    console.print(
        "[bold green]All checks passed.[/]"
        if not failed
        else f"[bold red]{len(failed)} check(s) failed.[/]"
    )
    return 1 if failed else 0
