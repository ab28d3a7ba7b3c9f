"""Commands on one namespace's memories: write, read, recall a context, change."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memory_ledger.bounds import (
    MAX_CONTEXT_LIMIT,
    MAX_RECALL_LIMIT,
    MAX_TOKEN_BUDGET,
    MIN_TOKEN_BUDGET,
)
from memory_ledger.cli.common import (
    DataDir,
    Json,
    Namespace,
    Url,
    app,
    dump_json,
    emit,
    fail,
    markup_safe,
    memories_table,
    open_ledger,
    out,
    read_json_input,
    shown,
    whole_number,
)
from memory_ledger.cli.tables import IdTable
from memory_ledger.errors import InvalidWrite

if TYPE_CHECKING:
    from memory_ledger.views import Remembered


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
    mode: Annotated[
        str | None,
        typer.Option(help="Facts: add | replace (default: by the predicate's cardinality)."),
    ] = None,
    replaces: Annotated[
        list[str] | None,
        typer.Option("--replaces", help="Facts: id of a set member to replace (repeatable)."),
    ] = None,
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
            payload = read_json_input(from_json)
        except InvalidWrite as exc:
            fail(exc, as_json)
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
            "mode": mode,
            "replaces": replaces or None,
        }
        writes = [{k: v for k, v in write.items() if v is not None}]
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        stored = ledger.remember_many(writes)
        emit(
            as_json,
            [vars(s) for s in stored],
            lambda: [out.print(_remembered_line(s)) for s in stored],
        )


def _remembered_line(stored: Remembered) -> str:
    line = f"remembered {markup_safe(stored.kind)} [bold]{markup_safe(stored.item_id)}[/]"
    if stored.cardinality == "many":
        replaced = len(stored.replaces)
        line += f" (many-valued: replaced {replaced} member(s))" if replaced else " (added to set)"
    return line


@app.command()
def recall(
    namespace: Namespace,
    subject: Annotated[str | None, typer.Option()] = None,
    predicate: Annotated[str | None, typer.Option()] = None,
    kind: Annotated[str | None, typer.Option()] = None,
    category: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[
        int,
        typer.Option(
            parser=whole_number(1, MAX_RECALL_LIMIT),
            metavar="N",
            help=f"At most this many memories, 1 to {MAX_RECALL_LIMIT}.",
        ),
    ] = 100,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """List live memories: not suppressed, erased or expired."""
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        found = ledger.recall(
            subject=subject, predicate=predicate, kind=kind, category=category, limit=limit
        )
        emit(
            as_json,
            [m.to_dict() for m in found],
            lambda: out.print(memories_table(found, f"memories of {ledger.namespace}")),
        )


@app.command()
def context(
    namespace: Namespace,
    query: Annotated[str, typer.Argument(help="What the turn is about.")],
    budget: Annotated[
        int,
        typer.Option(
            "--token-budget",
            "--budget",
            parser=whole_number(MIN_TOKEN_BUDGET, MAX_TOKEN_BUDGET),
            metavar="TOKENS",
            help=f"Token budget, {MIN_TOKEN_BUDGET} to {MAX_TOKEN_BUDGET}.",
        ),
    ] = 800,
    kind: Annotated[list[str] | None, typer.Option(help="fact, preference, turn.")] = None,
    category: Annotated[str | None, typer.Option()] = None,
    workspace: Annotated[str | None, typer.Option(help="Preference scope in effect.")] = None,
    task: Annotated[str | None, typer.Option(help="Preference scope in effect.")] = None,
    session: Annotated[str | None, typer.Option(help="Preference scope in effect.")] = None,
    limit: Annotated[
        int,
        typer.Option(
            parser=whole_number(1, MAX_CONTEXT_LIMIT),
            metavar="N",
            help=f"At most this many items, 1 to {MAX_CONTEXT_LIMIT}.",
        ),
    ] = 20,
    rank: Annotated[str, typer.Option(help="hybrid, vector or keyword.")] = "hybrid",
    for_turn: Annotated[
        str | None, typer.Option(help="Record what was served on this turn (ids + MAC).")
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """The context for one turn: relevant live memories, ranked, labelled, within budget."""
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
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
            # One line per item, each sanitised: a newline inside a memory is shown as
            # \n, so no memory can fake another item's label.
            for item in built.items:
                out.print(shown(item.render()))
            if not built.items:
                out.print("(nothing relevant)")
            out.print(
                f"[dim]{len(built.items)} item(s), {built.tokens}/{built.token_budget} tokens, "
                f"{built.omitted} over budget; ranked {markup_safe(built.rank)}, "
                f"embedder {markup_safe(built.embedder)}[/]"
            )

        emit(as_json, built.to_dict(), human)


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
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        versions = ledger.history(item_id, subject=subject, predicate=predicate)
        emit(
            as_json,
            [m.to_dict() for m in versions],
            lambda: out.print(memories_table(versions, "history")),
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
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        state = ledger.get(item_id)
        emit(as_json, state.to_dict(), lambda: out.print(_fields_table(state.to_dict())))


def _fields_table(fields: dict[str, Any]) -> IdTable:
    """One item, field by field; nested values as compact JSON. Every cell sanitised."""
    table = IdTable("field", "value", show_header=False)
    for name, value in fields.items():
        if value is None and name == "text":
            withheld = "EXPIRED (withheld until the retention sweep erases it)"
            cell = shown(withheld if fields.get("expired") else "ERASED", style="dim")
        elif isinstance(value, dict | list):
            cell = shown(dump_json(value))
        else:
            cell = shown(value)
            if name.endswith("_id") and isinstance(value, str):
                table.keep_whole(cell.plain)  # an id: whole on one line, at any width
        table.add_row(shown(name), cell)
    return table


@app.command()
def summary(
    namespace: Namespace, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """The profile summary of live facts and preferences, with the inputs it was built from."""
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        found = ledger.summary()

        def human() -> None:
            if found is None:
                out.print(
                    f"no summary for {markup_safe(ledger.namespace)}: nothing live to summarise"
                )
                return
            for line in found.text.split("\n"):
                out.print(shown(line))
            out.print(
                f"[dim]{len(found.inputs)} input(s); summarizer {markup_safe(found.summarizer)}[/]"
            )

        emit(as_json, None if found is None else found.to_dict(), human)


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
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        version = ledger.update(item_id, {"value": value, "provenance": provenance})
        emit(
            as_json,
            {"item_id": item_id, "version": version},
            lambda: out.print(shown(f"updated {item_id} to version {version}")),
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
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        version = ledger.suppress(item_id, reason)
        emit(
            as_json,
            {"item_id": item_id, "version": version, "suppressed": True},
            lambda: out.print(shown(f"suppressed {item_id} (data kept; use forget to delete)")),
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
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        version = ledger.unsuppress(item_id)
        emit(
            as_json,
            {"item_id": item_id, "version": version, "suppressed": False},
            lambda: out.print(shown(f"unsuppressed {item_id}")),
        )


@app.command()
def export(
    namespace: Namespace,
    output: Annotated[
        Path | None, typer.Option("--out", help="Write the JSON here instead of stdout.")
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
) -> None:
    """Everything held about a person (data subject access), as versioned JSON: facts
    with versions, preferences, transcripts, the summary, erased items by id."""
    with open_ledger(namespace, data_dir, url, True, create=False) as ledger:
        text = dump_json(ledger.export(), indent=2)
        if output is None:
            print(text)
        else:
            from memory_ledger.operations.exports import write_export

            write_export(output, text)
            out.print(f"exported {namespace} to {markup_safe(output)}", highlight=False)
