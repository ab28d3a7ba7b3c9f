"""What every `memory-ledger` command shares: the app, its options, opening a store
and printing results. The commands live in cli_memories, cli_forget and cli_ops."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
from memory_ledger.errors import MemoryLedgerError
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


def fail(exc: MemoryLedgerError, as_json: bool) -> None:
    if as_json:
        problems = getattr(exc, "problems", [])
        print(json.dumps({"error": str(exc), "type": type(exc).__name__, "problems": problems}))
    else:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
    raise typer.Exit(exc.exit_code)


@contextmanager
def open_service(data_dir: Path | None, url: str | None, as_json: bool) -> Iterator[MemoryService]:
    try:
        service = MemoryService.open(data_dir, url)
    except MemoryLedgerError as exc:
        fail(exc, as_json)
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
        fail(exc, as_json)
    finally:
        service.close()


@contextmanager
def open_ledger(
    namespace: str, data_dir: Path | None, url: str | None, as_json: bool
) -> Iterator[MemoryLedger]:
    try:
        principal = Principal.from_namespace(namespace)
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    with open_service(data_dir, url, as_json) as service:
        yield service.for_principal(principal)


def emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        print(json.dumps(data, indent=2, default=str, ensure_ascii=False))
    else:
        human()


def memories_table(memories: list[Memory], title: str) -> Table:
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
