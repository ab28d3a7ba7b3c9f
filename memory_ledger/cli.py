"""The `memory-ledger` command line. It acts as a local operator: `--namespace` names
whose memory a command touches (the Python API and HTTP service take it from the
principal instead). Human tables by default, `--json` for machines."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import DATA_DIR_ENV, URL_ENV
from memory_ledger.crypto import DEV_KEY_FILE, MASTER_KEY_ENV
from memory_ledger.errors import InvalidWrite, MemoryLedgerError
from memory_ledger.forget_requests import RequestReport
from memory_ledger.principal import Principal
from memory_ledger.views import Memory

app = typer.Typer(
    help="Event-sourced memory for AI agents, with provable forgetting.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", envvar=DATA_DIR_ENV, help="SQLite data directory.", show_default=False
    ),
]
Url = Annotated[
    str | None,
    typer.Option("--url", envvar=URL_ENV, help="Database URL, e.g. postgresql://user@host/db."),
]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
Namespace = Annotated[
    str,
    typer.Option(
        "--namespace",
        "-n",
        envvar="MEMORY_LEDGER_NAMESPACE",
        help="tenant/user or tenant/user/project",
    ),
]


def _fail(exc: MemoryLedgerError, as_json: bool) -> None:
    if as_json:
        problems = getattr(exc, "problems", [])
        print(json.dumps({"error": str(exc), "type": type(exc).__name__, "problems": problems}))
    else:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
    raise typer.Exit(exc.exit_code)


@contextmanager
def _service(data_dir: Path | None, url: str | None, as_json: bool) -> Iterator[MemoryService]:
    try:
        service = MemoryService.open(data_dir, url)
    except MemoryLedgerError as exc:
        _fail(exc, as_json)
    if service.dev_key_created:
        err.print(
            f"[yellow]warning:[/] no {MASTER_KEY_ENV} set; generated a development master key "
            f"at {escape(str(service.settings.data_dir / DEV_KEY_FILE))}. A key stored beside "
            "the data does not protect it at rest: set the variable in production.",
            highlight=False,
        )
    try:
        yield service
    except MemoryLedgerError as exc:
        _fail(exc, as_json)
    finally:
        service.close()


@contextmanager
def _ledger(
    namespace: str, data_dir: Path | None, url: str | None, as_json: bool
) -> Iterator[MemoryLedger]:
    try:
        principal = Principal.from_namespace(namespace)
    except MemoryLedgerError as exc:
        _fail(exc, as_json)
    with _service(data_dir, url, as_json) as service:
        yield service.for_principal(principal)


def _emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        print(json.dumps(data, indent=2, default=str, ensure_ascii=False))
    else:
        human()


def _memories_table(memories: list[Memory], title: str) -> Table:
    table = Table(title=escape(title), show_lines=False)
    for column in ("id", "kind", "subject", "predicate", "text", "origin", "status", "valid from"):
        table.add_column(column, overflow="fold")
    for m in memories:
        text = Text(m.text) if m.text is not None else Text("ERASED", style="dim")
        table.add_row(
            m.item_id[:8],
            m.kind,
            Text(m.subject),
            Text(m.predicate),
            text,
            m.origin,
            m.status,
            (m.valid_from or "")[:19],
        )
    return table


@app.command()
def remember(
    namespace: Namespace,
    kind: Annotated[str | None, typer.Option(help="fact | preference | turn")] = None,
    subject: Annotated[str | None, typer.Option()] = None,
    predicate: Annotated[str | None, typer.Option()] = None,
    value: Annotated[str | None, typer.Option(help="Value of a fact or preference.")] = None,
    content: Annotated[str | None, typer.Option(help="Text of a transcript turn.")] = None,
    category: Annotated[str, typer.Option()] = "general",
    origin: Annotated[str, typer.Option(help="explicit | observed | inferred")] = "explicit",
    sensitivity: Annotated[
        str, typer.Option(help="public|internal|personal|restricted")
    ] = "personal",
    scope: Annotated[str, typer.Option(help="Preference scope.")] = "global",
    writer: Annotated[str, typer.Option(help="Identity of the writing agent.")] = "cli",
    turn_id: Annotated[str | None, typer.Option()] = None,
    session_id: Annotated[str | None, typer.Option()] = None,
    tool_call_id: Annotated[str | None, typer.Option()] = None,
    consent_ref: Annotated[str | None, typer.Option()] = None,
    expires_at: Annotated[str | None, typer.Option(help="ISO-8601 time with zone.")] = None,
    basis: Annotated[str, typer.Option(help="session|consent|contract|indefinite")] = "indefinite",
    from_json: Annotated[
        str | None, typer.Option("--from-json", help="A JSON write (or a list), '-' for stdin.")
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Store a memory. Validated before anything is written; refused writes change nothing."""
    if from_json is not None:
        try:
            raw = sys.stdin.read() if from_json == "-" else Path(from_json).read_text()
            payload = json.loads(raw)
        except (OSError, ValueError) as exc:
            _fail(InvalidWrite(f"cannot read the JSON write: {exc}; nothing was stored"), as_json)
        writes = payload if isinstance(payload, list) else [payload]
    else:
        write: dict[str, Any] = {
            "kind": kind,
            "subject": subject,
            "predicate": predicate,
            "value": value,
            "content": content,
            "category": category,
            "origin": origin,
            "sensitivity": sensitivity,
            "scope": scope,
            "provenance": {
                "writer": writer,
                "written_at": datetime.now(UTC).isoformat(),
                "turn_id": turn_id,
                "session_id": session_id,
                "tool_call_id": tool_call_id,
                "consent_ref": consent_ref,
            },
            "retention": {"basis": basis, "expires_at": expires_at},
        }
        writes = [{k: v for k, v in write.items() if v is not None}]
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        stored = ledger.remember_many(writes)
        _emit(
            as_json,
            [vars(s) for s in stored],
            lambda: [out.print(f"remembered {s.kind} [bold]{s.item_id}[/]") for s in stored],
        )


@app.command()
def recall(
    namespace: Namespace,
    subject: Annotated[str | None, typer.Option()] = None,
    predicate: Annotated[str | None, typer.Option()] = None,
    kind: Annotated[str | None, typer.Option()] = None,
    category: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option()] = 100,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """List live memories: not suppressed, erased or expired."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        found = ledger.recall(
            subject=subject, predicate=predicate, kind=kind, category=category, limit=limit
        )
        _emit(
            as_json,
            [m.to_dict() for m in found],
            lambda: out.print(_memories_table(found, f"memories of {ledger.namespace}")),
        )


@app.command()
def context(
    namespace: Namespace,
    query: Annotated[str, typer.Argument(help="What the turn is about.")],
    budget: Annotated[int, typer.Option(help="Token budget for the returned context.")] = 800,
    kind: Annotated[list[str] | None, typer.Option(help="fact, preference, turn.")] = None,
    category: Annotated[str | None, typer.Option()] = None,
    workspace: Annotated[str | None, typer.Option(help="Preference scope in effect.")] = None,
    task: Annotated[str | None, typer.Option(help="Preference scope in effect.")] = None,
    session: Annotated[str | None, typer.Option(help="Preference scope in effect.")] = None,
    limit: Annotated[int, typer.Option()] = 20,
    rank: Annotated[str, typer.Option(help="hybrid, vector or keyword.")] = "hybrid",
    for_turn: Annotated[
        str | None, typer.Option(help="Record what was served on this turn (ids + MAC).")
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """The context for one turn: relevant live memories, ranked, labelled, within budget."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        built = ledger.context(
            query,
            for_turn=for_turn,
            token_budget=budget,
            kinds=tuple(kind or ()),
            category=category,
            workspace=workspace,
            task=task,
            session=session,
            limit=limit,
            rank=rank,
        )

        def human() -> None:
            out.print(Text(built.render() or "(nothing relevant)"))
            out.print(
                f"[dim]{len(built.items)} item(s), {built.tokens}/{built.token_budget} tokens, "
                f"{built.omitted} over budget; ranked {built.rank}, embedder {built.embedder}[/]"
            )

        _emit(as_json, built.to_dict(), human)


@app.command()
def history(
    namespace: Namespace,
    item_id: Annotated[str | None, typer.Argument(help="A fact's id.")] = None,
    subject: Annotated[str | None, typer.Option()] = None,
    predicate: Annotated[str | None, typer.Option()] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Every version of a fact, with validity intervals."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        versions = ledger.history(item_id, subject=subject, predicate=predicate)
        _emit(
            as_json,
            [m.to_dict() for m in versions],
            lambda: out.print(_memories_table(versions, "history")),
        )


@app.command()
def show(
    namespace: Namespace,
    item_id: str,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Read one item straight from the log (ERASED once its key is destroyed)."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        state = ledger.get(item_id)
        _emit(as_json, state.to_dict(), lambda: out.print(state))


@app.command()
def summary(
    namespace: Namespace, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """The profile summary of live facts and preferences, with the inputs it was built from."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        found = ledger.summary()

        def human() -> None:
            if found is None:
                out.print(f"no summary for {escape(ledger.namespace)}: nothing live to summarise")
                return
            out.print(Text(found.text))
            out.print(
                f"[dim]{len(found.inputs)} input(s); summarizer {escape(found.summarizer)}[/]"
            )

        _emit(as_json, None if found is None else found.to_dict(), human)


@app.command()
def update(
    namespace: Namespace,
    item_id: str,
    value: Annotated[str, typer.Option()],
    writer: Annotated[str, typer.Option()] = "cli",
    turn_id: Annotated[str | None, typer.Option()] = None,
    session_id: Annotated[str | None, typer.Option()] = None,
    tool_call_id: Annotated[str | None, typer.Option()] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Record a new version of a fact or preference; the old one stays as history."""
    provenance = {
        k: v
        for k, v in {
            "writer": writer,
            "written_at": datetime.now(UTC).isoformat(),
            "turn_id": turn_id,
            "session_id": session_id,
            "tool_call_id": tool_call_id,
        }.items()
        if v is not None
    }
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        version = ledger.update(item_id, {"value": value, "provenance": provenance})
        _emit(
            as_json,
            {"item_id": item_id, "version": version},
            lambda: out.print(f"updated {escape(item_id)} to version {version}"),
        )


@app.command()
def suppress(
    namespace: Namespace,
    item_id: str,
    reason: Annotated[str, typer.Option()] = "user_request",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Stop using an item: hidden from recall, but not deleted."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        version = ledger.suppress(item_id, reason)
        _emit(
            as_json,
            {"item_id": item_id, "version": version, "suppressed": True},
            lambda: out.print(f"suppressed {escape(item_id)} (data kept; use forget to delete)"),
        )


@app.command()
def unsuppress(
    namespace: Namespace,
    item_id: str,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Use a suppressed item again."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        version = ledger.unsuppress(item_id)
        _emit(
            as_json,
            {"item_id": item_id, "version": version, "suppressed": False},
            lambda: out.print(f"unsuppressed {escape(item_id)}"),
        )


@app.command()
def redact(
    namespace: Namespace,
    item_id: str,
    field: Annotated[list[str], typer.Option("--field", help="Field to redact (value, content).")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Rewrite named fields; the old content is shredded (its key generation destroyed)."""
    with _ledger(namespace, data_dir, url, as_json) as ledger:
        version = ledger.redact(item_id, field)
        _emit(
            as_json,
            {"item_id": item_id, "version": version, "fields": field},
            lambda: out.print(escape(f"redacted {', '.join(field)} of {item_id}")),
        )


EXIT_FOR_STATUS = {
    "verification_failed": 7,
    "completed": 0,
    "dry_run": 0,
    "nothing_matched": 0,
    "partial": 7,
    "pending": 7,
    "needs_clarification": 8,
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
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Erase by scope: resolve, fan out to every store, verify, record receipts."""
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
        _fail(InvalidWrite("--resume takes no scope: it retries the recorded one"), as_json)
    if which != "all" and kinds != ["predicate"]:
        _fail(InvalidWrite("--which applies to --subject/--predicate scopes only"), as_json)
    if resume is None and len(kinds) != 1:
        _fail(
            InvalidWrite(
                "name exactly one scope: --memory, --subject/--predicate, "
                "--turn-id/--session-id/--tool-call-id, --category, --sensitivity, "
                "--since/--until or --everything"
            ),
            as_json,
        )
    with _ledger(namespace, data_dir, url, as_json) as ledger:
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
            scope = {k: v for k, v in scope.items() if v not in (None, [])}
            report = ledger.forget_scope(scope, dry_run=dry_run)
        _emit(as_json, report.to_dict(), lambda: _print_request(report))
        raise typer.Exit(EXIT_FOR_STATUS.get(report.status, 1))


def _print_request(report: RequestReport) -> None:
    out.print(f"request [bold]{report.request_id}[/]: {escape(report.status)}")
    if report.targets or report.cascaded or report.mentions:
        table = Table("item", "why")
        for item in report.targets:
            table.add_row(item, "in scope")
        for item in report.cascaded:
            table.add_row(item, "derived from or carrying a target")
        for item in report.mentions:
            table.add_row(item, "repeats a target's value: redacted, kept")
        out.print(table)
    if report.candidates:
        table = Table("candidate item", "valid from", "valid to")
        for c in report.candidates:
            table.add_row(c.item_id, c.valid_from, c.valid_to or "")
        out.print(table)
    if report.receipts:
        table = Table("store", "action", "status", "evidence")
        for r in report.receipts:
            status = "ok" if r.status == "ok" else f"[red]{escape(r.status)}[/]"
            evidence = ", ".join(f"{k}={v}" for k, v in r.evidence.items())
            table.add_row(r.store, r.action, status, Text(evidence))
        out.print(table)
    if report.residue_scan:
        out.print(Text(f"byte scan: {report.residue_scan}"))
    out.print(Text(report.message))


@app.command()
def requests(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Every forget request in the lifecycle ledger, with its latest status."""
    with _service(data_dir, url, as_json) as service:
        rows = [service.requests.report(r) for r in service.ledger.request_ids()]
        data = [
            {
                "request_id": r.request_id,
                "namespace": r.namespace,
                "status": r.status,
                "scope": r.scope,
                "targets": len(r.targets) + len(r.cascaded),
            }
            for r in rows
        ]

        def human() -> None:
            table = Table("request", "namespace", "scope", "targets", "status")
            for d in data:
                table.add_row(
                    d["request_id"],
                    d["namespace"],
                    d["scope"].get("kind", ""),
                    str(d["targets"]),
                    d["status"],
                )
            out.print(table)

        _emit(as_json, data, human)


@app.command()
def receipts(
    request_id: str, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """The recorded receipts of one request, store by store."""
    with _service(data_dir, url, as_json) as service:
        report = service.requests.report(request_id)
        _emit(as_json, report.to_dict(), lambda: _print_request(report))


@app.command()
def verify(
    request_id: str, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """Ask every store again for evidence that a request's targets are gone."""
    with _service(data_dir, url, as_json) as service:
        report = service.requests.verify(request_id)
        _emit(as_json, report.to_dict(), lambda: _print_request(report))
        if report.failed_stores:
            raise typer.Exit(7)


@app.command()
def stores(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """The data map: every registered store and what it holds."""
    with _service(data_dir, url, as_json) as service:
        data = [{"store": s.name, "holds": s.holds} for s in service.stores]

        def human() -> None:
            table = Table("store", "holds")
            for d in data:
                table.add_row(d["store"], Text(d["holds"]))
            out.print(table)

        _emit(as_json, data, human)


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
        seq, _, digest = anchor.partition(":")
        if not seq.isdigit() or len(digest) != 64:
            _fail(InvalidWrite("--anchor must be SEQ:HASH as printed by an earlier run"), as_json)
        pinned = (int(seq), digest)
    with _service(data_dir, url, as_json) as service:
        result = service.ledger.verify(pinned)

        def human() -> None:
            verdict = "[green]intact[/]" if result.ok else "[red]BROKEN[/]"
            out.print(f"lifecycle ledger {verdict}: {escape(result.explanation)}")
            out.print(Text(f"anchor for the next audit: {result.head_seq}:{result.head_hash}"))

        _emit(as_json, asdict(result), human)
        if not result.ok:
            raise typer.Exit(9)


@app.command()
def status(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Backend, event count and how far each projection has caught up."""
    with _service(data_dir, url, as_json) as service:
        info = service.status()

        def human() -> None:
            out.print(
                f"backend [bold]{info['backend']}[/] at {escape(info['location'])}; "
                f"{info['events']} events"
            )
            table = Table("projection", "position", "behind")
            for p in info["projections"]:
                table.add_row(p["name"], str(p["position"]), str(p["behind"]))
            out.print(table)

        _emit(as_json, info, human)


@app.command()
def rebuild(
    projection: Annotated[list[str] | None, typer.Option("--projection")] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Drop projections and replay the whole log into them (without --projection, the
    vector index too, re-embedding every live item)."""
    with _service(data_dir, url, as_json) as service:
        known = [p.name for p in service.runner.projections]
        unknown = sorted(set(projection or []) - set(known))
        if unknown:
            _fail(InvalidWrite(f"unknown projection(s) {unknown}; known: {known}"), as_json)
        replayed = service.rebuild(projection)
        rebuilt = projection or [*known, "vector_index"]  # all of them: the vectors too
        _emit(
            as_json,
            {"replayed": replayed, "projections": rebuilt},
            lambda: out.print(f"rebuilt {', '.join(rebuilt)} from {replayed} events"),
        )


@app.command()
def run(
    interval: Annotated[float, typer.Option(help="Seconds between catch-ups.")] = 1.0,
    duration: Annotated[float | None, typer.Option(help="Stop after this many seconds.")] = None,
    consolidate_every: Annotated[
        float | None, typer.Option(help="Also run consolidation every N seconds.")
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
) -> None:
    """Keep projections caught up (and consolidate new turns) on a schedule (APScheduler)."""
    from jobs.projection_catchup import run_catchup_job

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # not two lines per tick
    with _service(data_dir, url, False) as service:
        run_catchup_job(
            service, interval=interval, duration=duration, consolidate_every=consolidate_every
        )


@app.command()
def consolidate(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Extract inferred facts and preferences from turns not consolidated yet, once."""
    from jobs.consolidation import Consolidator

    with _service(data_dir, url, as_json) as service:
        written, refused = Consolidator(service).run_all()
        _emit(
            as_json,
            {"written": written, "refused": refused},
            lambda: out.print(f"consolidation wrote {written}, refused {refused} (stale)"),
        )


@app.command()
def demo(
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Where to put the demo's data (default: a new temp dir)."),
    ] = None,
) -> None:
    """A travel assistant remembers, a user asks to forget, and we prove it."""
    from memory_ledger.demo import run_demo

    raise typer.Exit(run_demo(data_dir))


@app.command()
def check(
    as_json: Json = False,
    keep: Annotated[
        Path | None,
        typer.Option(
            "--keep", help="Build the stores in this (empty) directory and keep them as evidence."
        ),
    ] = None,
) -> None:
    """Deletion acceptance: every case on SQLite, a control store A beside a store B where
    the forget request is applied; four separate results per case, never one score.
    Exits 0 only if every result of every case passes."""
    import tempfile

    from memory_ledger.acceptance import all_passed, render_table, results_json, run_all

    try:
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            results = run_all(keep)
        else:
            with tempfile.TemporaryDirectory(prefix="memory-ledger-check-") as workdir:
                results = run_all(workdir)
    except (OSError, ValueError) as exc:
        _fail(InvalidWrite(f"cannot run the acceptance cases: {exc}"), as_json)

    def human() -> None:
        out.print(render_table(results))
        failing = [r.case for r in results if not r.passed]
        out.print(
            Text(
                f"{len(results)} case(s); {len(results) - len(failing)} with all four results "
                "passing" + (f"; failing: {', '.join(failing)}" if failing else "")
            )
        )
        if keep is not None:
            out.print(Text(f"stores kept under {keep}"))

    _emit(as_json, results_json(results), human)
    raise typer.Exit(0 if all_passed(results) else 1)


if __name__ == "__main__":
    app()
