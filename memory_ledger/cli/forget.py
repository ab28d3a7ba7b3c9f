"""Commands of forgetting: forget requests, their receipts and verification, the data
map and the lifecycle ledger's audit."""

from __future__ import annotations

import copy
import re
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memory_ledger.cli.common import (
    DataDir,
    Json,
    Namespace,
    Url,
    app,
    emit,
    err,
    fail,
    markup_safe,
    open_ledger,
    open_operations,
    out,
    shown,
    terminal_safe,
)
from memory_ledger.cli.tables import IdTable, hint
from memory_ledger.config import DATA_DIR_ENV, URL_ENV
from memory_ledger.errors import InvalidTransition, InvalidWrite

if TYPE_CHECKING:
    from memory_ledger.operations import ForgetPlan, PlanOutcome, RequestReport


def say(command: str, lead: str = "next") -> None:
    """Print a hint (a command that works as printed) on one line: with the store
    options this command line named, so the hint opens the same store."""
    out.print(hint(command + _same_store(), lead), soft_wrap=True)


def _same_store() -> str:
    """` --data-dir DIR` / ` --url URL` as given on this command line (from the
    environment, the next command gets them the same way). A URL holding a password is
    left out: a hint never prints a credential (set MEMORY_LEDGER_URL instead)."""
    import shlex
    from urllib.parse import urlsplit

    try:  # typer from 0.29 runs on its own copy of click, not the click package
        from typer._click.core import ParameterSource  # type: ignore[import-not-found]
        from typer._click.globals import get_current_context  # type: ignore[import-not-found]
    except ImportError:
        from click import get_current_context
        from click.core import ParameterSource

    context = get_current_context(silent=True)
    if context is None:
        return ""
    given = []
    for name, flag in (("data_dir", "--data-dir"), ("url", "--url")):
        value = context.params.get(name)
        if value is None or context.get_parameter_source(name) != ParameterSource.COMMANDLINE:
            continue
        if name == "url" and urlsplit(str(value)).password:
            continue
        given.append(f" {flag} {shlex.quote(str(value))}")
    return "".join(given)


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


forget_app = typer.Typer(
    help="Forget: plan a request in words, choose, execute; or erase a scope at once.",
    invoke_without_command=True,
    no_args_is_help=True,
)
app.add_typer(forget_app, name="forget")

#: The scope options of `forget scope` (and of the flat `forget` form of earlier
#: versions, which still works: its options are hidden from `forget --help`).
ScopeMemory = Annotated[
    list[str] | None,
    typer.Option("--memory", help="Id of an item to erase (repeatable; or give ids as arguments)."),
]
Subject = Annotated[str | None, typer.Option(help="With --predicate: all versions.")]
Predicate = Annotated[str | None, typer.Option()]
Which = Annotated[str, typer.Option(help="all | current | previous (predicate)")]
Value = Annotated[
    str | None,
    typer.Option(
        help="With --subject/--predicate: only the item with this value (case and "
        "spacing ignored; never recorded)."
    ),
]
TurnId = Annotated[str | None, typer.Option(help="Everything from this turn.")]
SessionId = Annotated[str | None, typer.Option(help="Everything from this session.")]
ToolCallId = Annotated[str | None, typer.Option()]
Category = Annotated[str | None, typer.Option()]
Sensitivity = Annotated[str | None, typer.Option()]
Since = Annotated[str | None, typer.Option(help="ISO time with zone (inclusive).")]
Until = Annotated[str | None, typer.Option(help="ISO time with zone (exclusive).")]
Everything = Annotated[bool, typer.Option("--everything", help="The whole namespace (the user).")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Resolve only; erase nothing.")]
Timezone = Annotated[str | None, typer.Option(help="Whose 'yesterday' (IANA name).")]
PlanId = Annotated[str, typer.Argument(help="The plan's id (plan-...), from `forget plan`.")]
RequestId = Annotated[str, typer.Argument(help="The request's id (req-...).")]


def _hidden(option: Any) -> Any:
    """The same option, hidden from `forget --help` (the flat form of earlier versions)."""
    kind, info = option.__origin__, copy.copy(option.__metadata__[0])
    info.hidden = True
    return Annotated[kind, info]


@forget_app.callback()
def forget(
    ctx: typer.Context,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            envvar="MEMORY_LEDGER_NAMESPACE",
            hidden=True,
            help="tenant/user or tenant/user/project",
        ),
    ] = None,
    memory: _hidden(ScopeMemory) = None,  # type: ignore[valid-type]
    subject: _hidden(Subject) = None,  # type: ignore[valid-type]
    predicate: _hidden(Predicate) = None,  # type: ignore[valid-type]
    which: _hidden(Which) = "all",  # type: ignore[valid-type]
    value: _hidden(Value) = None,  # type: ignore[valid-type]
    turn_id: _hidden(TurnId) = None,  # type: ignore[valid-type]
    session_id: _hidden(SessionId) = None,  # type: ignore[valid-type]
    tool_call_id: _hidden(ToolCallId) = None,  # type: ignore[valid-type]
    category: _hidden(Category) = None,  # type: ignore[valid-type]
    sensitivity: _hidden(Sensitivity) = None,  # type: ignore[valid-type]
    since: _hidden(Since) = None,  # type: ignore[valid-type]
    until: _hidden(Until) = None,  # type: ignore[valid-type]
    everything: _hidden(Everything) = False,  # type: ignore[valid-type]
    dry_run: _hidden(DryRun) = False,  # type: ignore[valid-type]
    resume: Annotated[str | None, typer.Option(hidden=True)] = None,
    request: Annotated[str | None, typer.Option("--request", hidden=True)] = None,
    plan: Annotated[str | None, typer.Option("--plan", hidden=True)] = None,
    choose: Annotated[list[str] | None, typer.Option("--choose", hidden=True)] = None,
    timezone: _hidden(Timezone) = None,  # type: ignore[valid-type]
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", envvar=DATA_DIR_ENV, hidden=True)
    ] = None,
    url: Annotated[str | None, typer.Option("--url", envvar=URL_ENV, hidden=True)] = None,
    as_json: Annotated[bool, typer.Option("--json", hidden=True)] = False,
) -> None:
    """Forget, in the steps a person takes:

    `forget plan -n NS "WORDS"` plans a request in words and erases nothing;
    `forget choose -n NS PLAN_ID ITEM_ID...` answers a plan's question with a narrower
    plan; `forget execute -n NS PLAN_ID` carries a plan out; `forget scope -n NS ITEM_ID...`
    (or --subject/--predicate, --session-id, --category, ... --everything) erases a scope
    at once; `forget status REQUEST_ID` and `forget resume REQUEST_ID` follow a request.

    The flat form of earlier versions (`forget -n NS --memory ID`, `--request`, `--plan`,
    `--choose`, `--resume`) still works."""
    if ctx.invoked_subcommand is not None:
        given = [k for k, v in ctx.params.items() if v and v != "all"]
        given = [k for k in given if k not in ("namespace", "data_dir", "url")]
        if given:
            fail(
                InvalidWrite(
                    f"options go after the subcommand: forget {ctx.invoked_subcommand} ..."
                ),
                as_json,
            )
        return
    if namespace is None:
        fail(InvalidWrite("name the namespace: -n tenant/user"), as_json)
    if request is not None or plan is not None:
        others = (memory, subject, predicate, value, turn_id, tool_call_id, category)
        if any(others) or sensitivity or since or until or everything or dry_run or resume:
            fail(InvalidWrite("--request and --plan take no scope options"), as_json)
        _in_words(namespace, request, plan, choose, session_id, timezone, data_dir, url, as_json)
    if choose or timezone:
        fail(InvalidWrite("--choose goes with --plan, --timezone with --request"), as_json)
    if resume is not None:
        kinds = _scope_kinds(
            memory, subject, predicate, turn_id, session_id, tool_call_id, category,
            sensitivity, since, until, everything,
        )  # fmt: skip
        if kinds:
            fail(InvalidWrite("--resume takes no scope: it retries the recorded one"), as_json)
        _resume(resume, data_dir, url, as_json)
    _erase_scope(
        namespace, memory or [], subject, predicate, which, value, turn_id, session_id,
        tool_call_id, category, sensitivity, since, until, everything, dry_run, data_dir,
        url, as_json,
    )  # fmt: skip


def _scope_kinds(
    memory: list[str] | None,
    subject: str | None,
    predicate: str | None,
    turn_id: str | None,
    session_id: str | None,
    tool_call_id: str | None,
    category: str | None,
    sensitivity: str | None,
    since: str | None,
    until: str | None,
    everything: bool,
) -> list[str]:
    given = {
        "item": bool(memory),
        "predicate": bool(subject or predicate),
        "source": bool(turn_id or session_id or tool_call_id),
        "category": bool(category),
        "sensitivity": bool(sensitivity),
        "time_range": bool(since or until),
        "namespace": everything,
    }
    return [k for k, on in given.items() if on]


def _erase_scope(
    namespace: str,
    memory: list[str],
    subject: str | None,
    predicate: str | None,
    which: str,
    value: str | None,
    turn_id: str | None,
    session_id: str | None,
    tool_call_id: str | None,
    category: str | None,
    sensitivity: str | None,
    since: str | None,
    until: str | None,
    everything: bool,
    dry_run: bool,
    data_dir: Path | None,
    url: str | None,
    as_json: bool,
) -> None:
    kinds = _scope_kinds(
        memory, subject, predicate, turn_id, session_id, tool_call_id, category,
        sensitivity, since, until, everything,
    )  # fmt: skip
    if which != "all" and kinds != ["predicate"]:
        fail(InvalidWrite("--which applies to --subject/--predicate scopes only"), as_json)
    if value is not None and kinds != ["predicate"]:
        fail(InvalidWrite("--value applies to --subject/--predicate scopes only"), as_json)
    if len(kinds) != 1:
        fail(
            InvalidWrite(
                "name exactly one scope: item ids (or --memory), --subject/--predicate, "
                "--turn-id/--session-id/--tool-call-id, --category, --sensitivity, "
                "--since/--until or --everything"
            ),
            as_json,
        )
    scope = {
        "kind": kinds[0],
        "item_ids": memory,
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
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        report = ledger.forget_scope(scope, dry_run=dry_run)
        emit(as_json, report.to_dict(), lambda: _print_request(report))
        raise typer.Exit(EXIT_FOR_STATUS.get(report.status, 1))


def _resume(request_id: str, data_dir: Path | None, url: str | None, as_json: bool) -> None:
    with open_operations(data_dir, url, as_json) as ops:
        report = ops.requests.resume(request_id)
        emit(as_json, report.to_dict(), lambda: _print_request(report))
        raise typer.Exit(EXIT_FOR_STATUS.get(report.status, 1))


@forget_app.command("scope")
def forget_scope(
    namespace: Namespace,
    item_ids: Annotated[
        list[str] | None, typer.Argument(help="Ids of the items to erase.", show_default=False)
    ] = None,
    memory: ScopeMemory = None,
    subject: Subject = None,
    predicate: Predicate = None,
    which: Which = "all",
    value: Value = None,
    turn_id: TurnId = None,
    session_id: SessionId = None,
    tool_call_id: ToolCallId = None,
    category: Category = None,
    sensitivity: Sensitivity = None,
    since: Since = None,
    until: Until = None,
    everything: Everything = False,
    dry_run: DryRun = False,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Erase a scope at once: items by id, all versions of a subject/predicate, a
    turn/session/tool call, a category, a sensitivity, a time range or --everything.
    Resolve, fan out to every store, verify, record receipts."""
    _erase_scope(
        namespace, [*(item_ids or []), *(memory or [])], subject, predicate, which, value,
        turn_id, session_id, tool_call_id, category, sensitivity, since, until, everything,
        dry_run, data_dir, url, as_json,
    )  # fmt: skip


@forget_app.command("plan")
def forget_plan(
    namespace: Namespace,
    words: Annotated[str, typer.Argument(help="The user's request, in English or Chinese.")],
    session_id: Annotated[
        str | None, typer.Option(help="The conversation the request was said in.")
    ] = None,
    timezone: Timezone = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Plan a request in words: what would be erased, what stays, or a question. Erases
    nothing; `forget execute` carries the plan out, `forget choose` answers its question."""
    _in_words(namespace, words, None, None, session_id, timezone, data_dir, url, as_json)


@forget_app.command("choose")
def forget_choose(
    namespace: Namespace,
    plan_id: PlanId,
    item_ids: Annotated[list[str], typer.Argument(help="The candidate(s) meant.")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Answer a plan's question with the candidates meant: a new, narrower plan (the
    question's plan is withdrawn). Erases nothing."""
    _in_words(namespace, None, plan_id, item_ids, None, None, data_dir, url, as_json)


@forget_app.command("execute")
def forget_execute(
    namespace: Namespace,
    plan_id: PlanId,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Carry out a confirmed plan: file its forget request(s) and verify them."""
    _in_words(namespace, None, plan_id, None, None, None, data_dir, url, as_json)


@forget_app.command("status")
def forget_status(
    request_id: Annotated[
        str, typer.Argument(help="A request's id (req-...), or a plan's (plan-..., with -n).")
    ],
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            envvar="MEMORY_LEDGER_NAMESPACE",
            help="With a plan id: the plan's namespace.",
        ),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Where a request stands (its receipts, store by store), or a plan (its state)."""
    if request_id.startswith("plan-"):
        if namespace is None:
            fail(InvalidWrite("a plan's status needs its namespace: -n tenant/user"), as_json)
        with open_ledger(namespace, data_dir, url, as_json) as ledger:
            made = ledger.forget_plan(request_id)
            emit(as_json, made.to_dict(), lambda: _print_plan(made, ledger.namespace))
        return
    with open_operations(data_dir, url, as_json) as ops:
        report = ops.requests.report(request_id)
        emit(as_json, report.to_dict(), lambda: _print_request(report))


@forget_app.command("resume")
def forget_resume(
    request_id: RequestId, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """Retry an unfinished request (pending or partial) with the scope it recorded."""
    _resume(request_id, data_dir, url, as_json)


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
            emit(as_json, made.to_dict(), lambda: _print_plan(made, ledger.namespace))
            raise typer.Exit(PLAN_EXIT.get(made.status, 1))
        try:
            outcome = ledger.execute_plan(plan_id)  # type: ignore[arg-type]
        except InvalidTransition as exc:
            _closed_plan(ledger, plan_id, exc, as_json)  # type: ignore[arg-type]
        emit(as_json, outcome.to_dict(), lambda: _print_outcome(outcome))
        raise typer.Exit(EXIT_FOR_STATUS.get(outcome.status, 1))


def _closed_plan(ledger: Any, plan_id: str, exc: InvalidTransition, as_json: bool) -> None:
    """A plan that cannot run: the error, and the command that goes on from here."""
    made = ledger.forget_plan(plan_id)
    if not as_json:
        err.print(f"[bold red]error:[/] {markup_safe(exc)}", highlight=False)
        ns = terminal_safe(ledger.namespace)
        if made.replaced_by is not None:
            replacement = ledger.forget_plan(made.replaced_by)
            verb = "execute" if replacement.state == "open" else "status"
            command = f"memory-ledger forget {verb} -n {ns} {made.replaced_by}"
        elif made.request_id is not None:
            command = f"memory-ledger forget status {made.request_id}"
        elif made.status == "needs_clarification" and made.state == "open" and made.candidates:
            first = made.candidates[0]["item_id"]
            command = f"memory-ledger forget choose -n {ns} {plan_id} {first}"
        else:
            command = ""
        if command:
            err.print(hint(command), soft_wrap=True)
        raise typer.Exit(exc.exit_code)
    fail(exc, as_json)


def _print_plan(plan: ForgetPlan, namespace: str) -> None:
    state = "" if plan.state == "open" else f", {markup_safe(plan.state)}"
    out.print(
        f"plan [bold]{markup_safe(plan.plan_id)}[/]: {markup_safe(plan.status)}"
        + (f" ({markup_safe(plan.intent)})" if plan.intent else "")
        + state
    )
    rows = [(i, "target") for i in plan.targets] + [(i, "erased with it") for i in plan.cascaded]
    rows += [
        (i, "span(s) redacted, rest stays") for i in plan.spans_by_item if i not in plan.targets
    ]
    rows += [
        (i, "stays") for i in plan.keeps if i not in plan.targets and i not in plan.spans_by_item
    ]
    if rows:
        table = IdTable("item", "what happens", "label", ids=("item",))
        for item, what in rows:
            table.add_row(shown(item), what, shown(plan.labels.get(item, "")))
        out.print(table)
    if plan.candidates:
        table = IdTable("candidate item", "label", ids=("candidate item",))
        for c in plan.candidates:
            table.add_row(shown(c["item_id"]), shown(c.get("label", "")))
        out.print(table)
    if plan.pieces:  # a request that names information: each piece and its places
        table = IdTable("piece of information", "kind", "status", "erased", "redacted", "spans")
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
        table = IdTable("kept, as asked", "kind", "said in")
        for kept in plan.kept:
            table.add_row(
                shown(kept.get("said", "")), shown(kept["kind"]), shown(len(kept["item_ids"]))
            )
        out.print(table)
    if plan.parts and not plan.pieces:  # a request of several parts: what became of each
        table = IdTable("part of the request", "status", "items", "why not")
        for part in plan.parts:
            table.add_row(
                shown(part.get("said", "")),
                shown(part["status"]),
                shown(len(part["item_ids"])),
                shown(part.get("reason", "")),
            )
        out.print(table)
    if plan.blast:  # the size before the yes: places, items, share of the namespace
        blast = plan.blast
        scope = f", scope {blast['scope']}" if blast.get("scope") else ""
        out.print(
            f"blast radius: {blast['places']} place(s), {blast['items']} item(s) of "
            f"{blast['namespace_items']} ({100 * blast['share']:.1f}%){markup_safe(scope)}"
        )
    if plan.question or plan.message:
        out.print(shown(plan.question or plan.message))
    ns = terminal_safe(namespace)
    if plan.replaced_by is not None:
        say(f"memory-ledger forget status -n {ns} {plan.replaced_by}", "answered by")
    elif plan.state != "open":
        if plan.request_id is not None:
            say(f"memory-ledger forget status {plan.request_id}")
    elif plan.status in ("planned", "partial_match"):
        say(f"memory-ledger forget execute -n {ns} {plan.plan_id}", "to go ahead")
    elif plan.status == "needs_clarification" and plan.candidates:
        first = plan.candidates[0]["item_id"]
        say(
            f"memory-ledger forget choose -n {ns} {plan.plan_id} {first}",
            "to answer, name the candidate(s) meant (one or more of the above), e.g.",
        )


def _print_outcome(outcome: PlanOutcome) -> None:
    requests = outcome.request_ids or ([outcome.request_id] if outcome.request_id else [])
    out.print(
        f"plan {markup_safe(outcome.plan_id)}: {markup_safe(outcome.status)}"
        + (f", request(s) {markup_safe(', '.join(requests))}" if requests else "")
    )
    if outcome.remaining:
        out.print(shown("still to confirm: " + ", ".join(outcome.remaining)))
    out.print(shown(outcome.message))
    for request_id in requests:
        say(f"memory-ledger forget status {request_id}", "receipts")
        if outcome.status in ("partial", "pending"):
            say(f"memory-ledger forget resume {request_id}", "to retry")


def _print_request(report: RequestReport) -> None:
    out.print(f"request [bold]{markup_safe(report.request_id)}[/]: {markup_safe(report.status)}")
    if report.resolved_position is not None:
        out.print(
            shown(
                f"resolved at {report.resolved_at}, log position {report.resolved_position}: "
                "what was written later is not in this request"
            )
        )
    if report.targets or report.cascaded or report.mentions:
        table = IdTable("item", "why", ids=("item",))
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
        table = IdTable("candidate item", "valid from", "valid to", ids=("candidate item",))
        for c in report.candidates:
            table.add_row(shown(c.item_id), shown(c.valid_from), shown(c.valid_to or ""))
        out.print(table)
    if report.receipts:
        table = IdTable("store", "action", "status", "evidence", ids=("store",))
        for r in report.receipts:
            status = shown(r.status, style="" if r.status == "ok" else "red")
            evidence = ", ".join(f"{k}={v}" for k, v in r.evidence.items())
            table.add_row(shown(r.store), shown(r.action), status, shown(evidence))
        out.print(table)
    if report.residue_scan:
        out.print(shown(f"byte scan: {report.residue_scan}"))
    out.print(shown(report.message))
    if report.status in ("partial", "pending", "verification_failed"):
        say(f"memory-ledger forget resume {report.request_id}", "to retry")


@app.command()
def requests(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Every forget request in the lifecycle ledger, with its latest status."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        data = [row.to_dict() for row in ops.requests.page().rows]

        def human() -> None:
            # "waiting for" only when a request waits: an empty column costs 14 of 80.
            waiting = any(d["waiting_for"] for d in data)
            headers = ["request", "namespace", "scope", "targets", "status"]
            table = IdTable(
                *headers, *(["waiting for"] if waiting else []), ids=("request",), whole_cells=True
            )
            for d in data:
                waits = [
                    f"{w['subscriber']}{' (OVERDUE)' if w['overdue'] else ''}"
                    for w in d["waiting_for"]
                ]
                table.add_row(
                    shown(d["request_id"]),
                    shown(d["namespace"]),
                    shown(d["scope"].get("kind", "")),
                    shown(d["items"]),
                    shown(d["status"]),
                    *([shown(", ".join(waits))] if waiting else []),
                )
            out.print(table)

        emit(as_json, data, human)


@app.command()
def receipts(
    request_id: str, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """The recorded receipts of one request, store by store."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        report = ops.requests.report(request_id)
        emit(as_json, report.to_dict(), lambda: _print_request(report))


@app.command()
def verify(
    request_id: str, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """Ask every store again for evidence that a request's targets are gone."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        report = ops.requests.verify(request_id)
        emit(as_json, report.to_dict(), lambda: _print_request(report))
        if report.failed_stores:
            raise typer.Exit(7)


@app.command()
def stores(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """The data map: every registered store and what it holds."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        data = ops.data_map()

        def human() -> None:
            table = IdTable("store", "holds", ids=("store",))
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
    with open_operations(data_dir, url, as_json, create=False) as ops:
        result = ops.verify_ledger(pinned)

        def human() -> None:
            verdict = "[green]intact[/]" if result.ok else "[red]BROKEN[/]"
            out.print(f"lifecycle ledger {verdict}: {markup_safe(result.explanation)}")
            out.print(shown(f"anchor for the next audit: {result.head_seq}:{result.head_hash}"))

        emit(as_json, asdict(result), human)
        if not result.ok:
            raise typer.Exit(9)
