"""Commands of forgetting: forget requests, their receipts and verification, the data
map and the lifecycle ledger's audit."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from memory_ledger.cli.common import (
    DataDir,
    Json,
    Namespace,
    Url,
    app,
    emit,
    fail,
    markup_safe,
    open_ledger,
    open_service,
    out,
    shown,
)
from memory_ledger.errors import InvalidWrite

if TYPE_CHECKING:
    from memory_ledger.forgetting.planning import ForgetPlan, PlanOutcome
    from memory_ledger.forgetting.requests import RequestReport

#: The exit code of each status a forget request (or an executed plan) ends in; see the
#: "Exit codes" table of docs/user-guide.md. 1 stays for an unexpected failure, and
#: 12 and 13 are taken by Unauthenticated and Forbidden (memory_ledger/errors.py).
EXIT_FOR_STATUS = {
    "verification_failed": 7,
    "completed": 0,
    "dry_run": 0,
    "nothing_matched": 0,
    "partial": 7,
    "pending": 7,
    "needs_clarification": 8,
    "blocked": 14,  # a legal hold covers a target: nothing erased, resumed when lifted
}


@app.command()
def forget(
    namespace: Namespace,
    memory: Annotated[
        list[str] | None, typer.Option("--memory", help="Id of an item to erase (repeatable).")
    ] = None,
    subject: Annotated[str | None, typer.Option(help="With --predicate: all versions.")] = None,
    predicate: Annotated[str | None, typer.Option()] = None,
    which: Annotated[str, typer.Option(help="all | current | previous (predicate)")] = "all",
    value: Annotated[
        str | None,
        typer.Option(
            help="With --subject/--predicate: only the item with this value (case and "
            "spacing ignored; never recorded)."
        ),
    ] = None,
    turn_id: Annotated[str | None, typer.Option(help="Everything from this turn.")] = None,
    session_id: Annotated[str | None, typer.Option(help="Everything from this session.")] = None,
    tool_call_id: Annotated[str | None, typer.Option()] = None,
    category: Annotated[str | None, typer.Option()] = None,
    sensitivity: Annotated[str | None, typer.Option()] = None,
    since: Annotated[str | None, typer.Option(help="ISO time with zone (inclusive).")] = None,
    until: Annotated[str | None, typer.Option(help="ISO time with zone (exclusive).")] = None,
    everything: Annotated[
        bool, typer.Option("--everything", help="The whole namespace (the user).")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Resolve only; erase nothing.")
    ] = False,
    resume: Annotated[str | None, typer.Option(help="Retry an unfinished request.")] = None,
    request: Annotated[
        str | None,
        typer.Option(
            "--request",
            help="The user's request in words (English or Chinese): plan it, erase "
            "nothing. With --session-id: the conversation it was said in.",
        ),
    ] = None,
    plan: Annotated[
        str | None,
        typer.Option("--plan", help="Execute this confirmed plan (from --request)."),
    ] = None,
    choose: Annotated[
        list[str] | None,
        typer.Option(
            "--choose", help="With --plan: answer its clarification with these candidates."
        ),
    ] = None,
    timezone: Annotated[
        str | None, typer.Option(help="With --request: whose 'yesterday' (IANA name).")
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Erase by scope: resolve, fan out to every store, verify, record receipts. Or, in
    two steps: --request plans a request in words, --plan executes the plan."""
    if request is not None or plan is not None:
        others = (memory, subject, predicate, value, turn_id, tool_call_id, category)
        if any(others) or sensitivity or since or until or everything or dry_run or resume:
            fail(InvalidWrite("--request and --plan take no scope options"), as_json)
        _in_words(namespace, request, plan, choose, session_id, timezone, data_dir, url, as_json)
    if choose or timezone:
        fail(InvalidWrite("--choose goes with --plan, --timezone with --request"), as_json)
    given = {
        "item": bool(memory),
        "predicate": bool(subject or predicate),
        "source": bool(turn_id or session_id or tool_call_id),
        "category": bool(category),
        "sensitivity": bool(sensitivity),
        "time_range": bool(since or until),
        "namespace": everything,
    }
    kinds = [k for k, on in given.items() if on]
    if resume is not None and kinds:
        fail(InvalidWrite("--resume takes no scope: it retries the recorded one"), as_json)
    if which != "all" and kinds != ["predicate"]:
        fail(InvalidWrite("--which applies to --subject/--predicate scopes only"), as_json)
    if value is not None and kinds != ["predicate"]:
        fail(InvalidWrite("--value applies to --subject/--predicate scopes only"), as_json)
    if resume is None and len(kinds) != 1:
        fail(
            InvalidWrite(
                "name exactly one scope: --memory, --subject/--predicate, "
                "--turn-id/--session-id/--tool-call-id, --category, --sensitivity, "
                "--since/--until or --everything"
            ),
            as_json,
        )
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        if resume is not None:
            report = ledger.service.requests.resume(resume)
        else:
            scope = {
                "kind": kinds[0],
                "item_ids": memory or [],
                "subject": subject,
                "predicate": predicate,
                "turn_id": turn_id,
                "session_id": session_id,
                "tool_call_id": tool_call_id,
                "category": category,
                "sensitivity": sensitivity,
                "since": since,
                "until": until,
            }
            if kinds[0] == "predicate":
                scope["which"] = which
                scope["value"] = value
            scope = {k: v for k, v in scope.items() if v not in (None, [])}
            report = ledger.forget_scope(scope, dry_run=dry_run)
        emit(as_json, report.to_dict(), lambda: _print_request(report))
        raise typer.Exit(EXIT_FOR_STATUS.get(report.status, 1))


@app.command()
def redact(
    namespace: Namespace,
    item_ids: Annotated[list[str], typer.Argument(help="The item(s) to remove text from.")],
    span: Annotated[
        list[str] | None,
        typer.Option("--span", help="Text to remove (repeatable); the rest of the item stays."),
    ] = None,
    field: Annotated[
        list[str] | None, typer.Option("--field", help="Remove a whole field (value, content).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Resolve; change nothing.")] = False,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Remove spans (or whole fields) from items, as a forget request: receipts per
    store, ledger entries, verification; the old wording's keys are destroyed."""
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        report = ledger.redact(item_ids, field or (), spans=span or (), dry_run=dry_run)
        emit(as_json, report.to_dict(), lambda: _print_request(report))
        raise typer.Exit(EXIT_FOR_STATUS.get(report.status, 1))


#: A plan of some parts of a request only (`partial_match`) exits as a question does: the
#: user sees which part matched nothing before anything runs.
PLAN_EXIT = {
    "planned": 0,
    "not_a_request": 0,
    "nothing_matched": 0,
    "needs_clarification": 8,
    "partial_match": 8,
}


def _in_words(
    namespace: str,
    request: str | None,
    plan_id: str | None,
    choose: list[str] | None,
    session_id: str | None,
    timezone: str | None,
    data_dir: Path | None,
    url: str | None,
    as_json: bool,
) -> None:
    """`--request` plans (and destroys nothing); `--plan` executes, or with `--choose`
    answers the plan's question with a narrower plan."""
    if (request is None) == (plan_id is None):
        fail(InvalidWrite("give --request or --plan, not both"), as_json)
    if choose and plan_id is None:
        fail(InvalidWrite("--choose goes with --plan"), as_json)
    if plan_id is not None and (session_id or timezone):
        fail(InvalidWrite("--session-id and --timezone go with --request"), as_json)
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        if request is not None or choose:
            if request is not None:
                made = ledger.plan_forget(request, session_id=session_id, timezone=timezone)
            else:
                made = ledger.choose_candidates(plan_id, choose or [])  # type: ignore[arg-type]
            emit(as_json, made.to_dict(), lambda: _print_plan(made))
            raise typer.Exit(PLAN_EXIT.get(made.status, 1))
        outcome = ledger.execute_plan(plan_id)  # type: ignore[arg-type]
        emit(as_json, outcome.to_dict(), lambda: _print_outcome(outcome))
        raise typer.Exit(EXIT_FOR_STATUS.get(outcome.status, 1))


def _print_plan(plan: ForgetPlan) -> None:
    out.print(
        f"plan [bold]{markup_safe(plan.plan_id)}[/]: {markup_safe(plan.status)}"
        + (f" ({markup_safe(plan.intent)})" if plan.intent else "")
    )
    rows = [(i, "target") for i in plan.targets] + [(i, "erased with it") for i in plan.cascaded]
    rows += [
        (i, "span(s) redacted, rest stays") for i in plan.spans_by_item if i not in plan.targets
    ]
    rows += [
        (i, "stays") for i in plan.keeps if i not in plan.targets and i not in plan.spans_by_item
    ]
    if rows:
        table = Table("item", "what happens", "label")
        for item, what in rows:
            table.add_row(shown(item), what, shown(plan.labels.get(item, "")))
        out.print(table)
    if plan.candidates:
        table = Table("candidate item", "label")
        for c in plan.candidates:
            table.add_row(shown(c["item_id"]), shown(c.get("label", "")))
        out.print(table)
    if plan.pieces:  # a request that names information: each piece and its places
        table = Table("piece of information", "kind", "status", "erased", "redacted", "spans")
        for piece in plan.pieces:
            places = piece["places"]
            table.add_row(
                shown(piece.get("said", "")),
                shown(piece["kind"]),
                shown(piece["status"] + (f" ({piece['reason']})" if piece.get("reason") else "")),
                shown(sum(1 for p in places if p["action"] == "erase")),
                shown(sum(1 for p in places if p["action"] == "redact")),
                shown(sum(p["spans"] for p in places)),
            )
        out.print(table)
    if plan.kept:  # what the request said stays
        table = Table("kept, as asked", "kind", "said in")
        for kept in plan.kept:
            table.add_row(
                shown(kept.get("said", "")), shown(kept["kind"]), shown(len(kept["item_ids"]))
            )
        out.print(table)
    if plan.parts and not plan.pieces:  # a request of several parts: what became of each
        table = Table("part of the request", "status", "items", "why not")
        for part in plan.parts:
            table.add_row(
                shown(part.get("said", "")),
                shown(part["status"]),
                shown(len(part["item_ids"])),
                shown(part.get("reason", "")),
            )
        out.print(table)
    out.print(shown(plan.question or plan.message))
    if plan.status in ("planned", "partial_match"):
        out.print(shown(f"to go ahead: memory-ledger forget NAMESPACE --plan {plan.plan_id}"))


def _print_outcome(outcome: PlanOutcome) -> None:
    requests = outcome.request_ids or ([outcome.request_id] if outcome.request_id else [])
    out.print(
        f"plan {markup_safe(outcome.plan_id)}: {markup_safe(outcome.status)}"
        + (f", request(s) {markup_safe(', '.join(requests))}" if requests else "")
    )
    if outcome.remaining:
        out.print(shown("still to confirm: " + ", ".join(outcome.remaining)))
    out.print(shown(outcome.message))


def _print_request(report: RequestReport) -> None:
    out.print(f"request [bold]{markup_safe(report.request_id)}[/]: {markup_safe(report.status)}")
    if report.targets or report.cascaded or report.mentions:
        table = Table("item", "why")
        redaction = report.scope.get("kind") == "redaction"
        named = "named: spans removed, rest kept" if redaction else "in scope"
        for item in report.targets:
            table.add_row(shown(item), named)
        for item in report.cascaded:
            why = "derived from or carrying a target"
            table.add_row(shown(item), why + (": spans removed, rest kept" if redaction else ""))
        for item in report.mentions:
            table.add_row(shown(item), "repeats a target's value: redacted, kept")
        out.print(table)
    if report.candidates:
        table = Table("candidate item", "valid from", "valid to")
        for c in report.candidates:
            table.add_row(shown(c.item_id), shown(c.valid_from), shown(c.valid_to or ""))
        out.print(table)
    if report.receipts:
        table = Table("store", "action", "status", "evidence")
        for r in report.receipts:
            status = shown(r.status, style="" if r.status == "ok" else "red")
            evidence = ", ".join(f"{k}={v}" for k, v in r.evidence.items())
            table.add_row(shown(r.store), shown(r.action), status, shown(evidence))
        out.print(table)
    if report.residue_scan:
        out.print(shown(f"byte scan: {report.residue_scan}"))
    out.print(shown(report.message))


@app.command()
def requests(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Every forget request in the lifecycle ledger, with its latest status."""
    with open_service(data_dir, url, as_json, create=False) as service:
        rows = [service.requests.report(r) for r in service.ledger.request_ids()]
        active = service.subscribers.active()  # once, for every row
        data = [
            {
                "request_id": r.request_id,
                "namespace": r.namespace,
                "status": r.status,
                "scope": r.scope,
                "targets": len(r.targets) + len(r.cascaded),
                "waiting_for": service.subscribers.waiting(r, active=active),
            }
            for r in rows
        ]

        def human() -> None:
            table = Table("request", "namespace", "scope", "targets", "status", "waiting for")
            for d in data:
                waits = [
                    f"{w['subscriber']}{' (OVERDUE)' if w['overdue'] else ''}"
                    for w in d["waiting_for"]
                ]
                table.add_row(
                    shown(d["request_id"]),
                    shown(d["namespace"]),
                    shown(d["scope"].get("kind", "")),
                    shown(d["targets"]),
                    shown(d["status"]),
                    shown(", ".join(waits)),
                )
            out.print(table)

        emit(as_json, data, human)


@app.command()
def receipts(
    request_id: str, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """The recorded receipts of one request, store by store."""
    with open_service(data_dir, url, as_json, create=False) as service:
        report = service.requests.report(request_id)
        emit(as_json, report.to_dict(), lambda: _print_request(report))


@app.command()
def verify(
    request_id: str, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """Ask every store again for evidence that a request's targets are gone."""
    with open_service(data_dir, url, as_json, create=False) as service:
        report = service.requests.verify(request_id)
        emit(as_json, report.to_dict(), lambda: _print_request(report))
        if report.failed_stores:
            raise typer.Exit(7)


@app.command()
def stores(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """The data map: every registered store and what it holds."""
    with open_service(data_dir, url, as_json, create=False) as service:
        data = [{"store": s.name, "holds": s.holds} for s in service.stores]

        def human() -> None:
            table = Table("store", "holds")
            for d in data:
                table.add_row(shown(d["store"]), shown(d["holds"]))
            out.print(table)

        emit(as_json, data, human)


audit = typer.Typer(help="Check the lifecycle ledger.", no_args_is_help=True)
app.add_typer(audit, name="audit")


@audit.command("verify")
def audit_verify(
    anchor: Annotated[
        str | None,
        typer.Option(help="SEQ:HASH from an earlier run, to detect removed newest entries."),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Recompute the ledger's hash chain; any tampering makes this fail."""
    pinned = None
    if anchor is not None:
        # ASCII digits only ("²".isdigit() is true, and int() refuses it), and no more
        # of them than a sequence number can have.
        found = re.fullmatch(r"([0-9]{1,18}):([0-9a-fA-F]{64})", anchor.strip())
        if found is None:
            fail(InvalidWrite("--anchor must be SEQ:HASH as printed by an earlier run"), as_json)
        pinned = (int(found[1]), found[2].lower())
    with open_service(data_dir, url, as_json, create=False) as service:
        result = service.ledger.verify(pinned)

        def human() -> None:
            verdict = "[green]intact[/]" if result.ok else "[red]BROKEN[/]"
            out.print(f"lifecycle ledger {verdict}: {markup_safe(result.explanation)}")
            out.print(shown(f"anchor for the next audit: {result.head_seq}:{result.head_hash}"))

        emit(as_json, asdict(result), human)
        if not result.ok:
            raise typer.Exit(9)
