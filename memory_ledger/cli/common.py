"""What every `memory-ledger` command shares: the app, its options, opening a store,
reading JSON input and printing results. The commands live in memories, forget
and ops.

Two rules hold for everything here. Input is bounded before it is parsed: JSON by size
and nesting depth, numbers by range and type (a clear exit 2, never a traceback). And
what is printed for a person never reaches the terminal raw: memory content may hold
control characters, escape sequences or bidi overrides, and `terminal_safe` shows them
as visible escapes in every human table and line (`--json` output stays exact).

And one rule of start-up: this module, and every command module, imports only typer,
rich and light modules at the top. The service stack (SQLAlchemy, numpy, eventsourcing,
the embedder, planning, FastAPI) is imported inside the commands that use it, so
`--help`, `--version` and a usage error answer at once (tests/test_cli_start.py).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memory_ledger.cli.usage import Commands
from memory_ledger.config import DATA_DIR_ENV, URL_ENV
from memory_ledger.errors import InvalidWrite, MemoryLedgerError, StoreNotFound
from memory_ledger.views import verifier

if TYPE_CHECKING:  # the service stack is imported when a command opens a store
    from memory_ledger.api import MemoryLedger, MemoryService
    from memory_ledger.operations import Operations, Progress
    from memory_ledger.views import Memory

app = typer.Typer(
    cls=Commands,
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
Actor = Annotated[str, typer.Option("--by", help="Who does this (an identifier), for the ledger.")]
Namespace = Annotated[
    str,
    typer.Option(
        "--namespace",
        "-n",
        envvar="MEMORY_LEDGER_NAMESPACE",
        help="tenant/user or tenant/user/project",
    ),
]


# -- what reaches a terminal ---------------------------------------------------------


def terminal_safe(value: object) -> str:
    """The text of `value` with every character that could drive or deceive a terminal
    shown as a visible escape (ESC as `\\x1b`, U+202E as `\\u202e`, a newline as
    `\\n`). The one sanitiser of human output: every table cell and printed line that
    can carry stored or user-given text goes through it. It is the standalone verifier's
    (which must run without this package), so there is one list of unsafe characters."""
    return verifier.printable(value)


def shown(value: object, style: str = "") -> Text:
    """A table cell or line of text: sanitised, and never read as rich markup."""
    return Text(terminal_safe(value), style=style)


def markup_safe(value: object) -> str:
    """A value to interpolate into a rich markup string: sanitised and escaped."""
    return escape(terminal_safe(value))


# What json.dumps(ensure_ascii=False) leaves raw of the above: it escapes C0 controls
# itself (and the newlines and spaces it adds between tokens must stay as they are).
_UNSAFE_IN_JSON = re.compile(
    r"[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dump_json(data: Any, indent: int | None = None) -> str:
    """JSON for `--json`: exact data, and still safe on a terminal. The DEL, C1 and bidi
    controls and lone surrogates that json.dumps leaves raw (they only occur inside
    strings) are written as \\u escapes, which decode to the same string."""
    text = json.dumps(data, indent=indent, default=str, ensure_ascii=False)
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


#: Said after a read-only command's "no store at PATH (nothing was created)".
NO_STORE_HINT = (
    "create one with `memory-ledger remember ...`, or name the store with --data-dir or "
    "--url (or MEMORY_LEDGER_DATA_DIR / MEMORY_LEDGER_URL)"
)


def fail(exc: MemoryLedgerError, as_json: bool) -> NoReturn:
    if isinstance(exc, StoreNotFound) and NO_STORE_HINT not in str(exc):
        exc = StoreNotFound(f"{exc}: {NO_STORE_HINT}")
    if as_json:
        problems = getattr(exc, "problems", [])
        print(dump_json({"error": str(exc), "type": type(exc).__name__, "problems": problems}))
    else:
        # One line: the terminal wraps it, so a path or a command in it stays whole.
        err.print(f"[bold red]error:[/] {markup_safe(exc)}", highlight=False, soft_wrap=True)
    raise typer.Exit(exc.exit_code)


# -- what comes in --------------------------------------------------------------------

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_JSON_DEPTH = 32  # a write is 4 deep (a list, a write, derived_from, a reference)
MAX_INT_DIGITS = 30  # any count or version fits; int() of a huge literal is slow
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")


def read_json_input(source: str) -> Any:
    """Read JSON from a file, or stdin for `-`: at most MAX_JSON_BYTES, UTF-8, nested at
    most MAX_JSON_DEPTH deep, strict JSON (no NaN or Infinity, no repeated key in an
    object). Anything else is an InvalidWrite that says why; nothing was stored."""
    try:
        if source == "-":
            raw = sys.stdin.buffer.read(MAX_JSON_BYTES + 1)
        else:
            with Path(source).open("rb") as handle:
                raw = handle.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise _unreadable(f"{source}: {exc.strerror or exc}") from None
    if len(raw) > MAX_JSON_BYTES:
        raise _unreadable(f"it is larger than {MAX_JSON_BYTES} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = f"byte {raw[exc.start]:#04x} at offset {exc.start}"
        raise _unreadable(f"it is not UTF-8 ({where})") from None
    return parse_json_text(text)


def parse_json_text(text: str) -> Any:
    """JSON given inline, under the same rules as `read_json_input`."""
    if len(text.encode("utf-8")) > MAX_JSON_BYTES:
        raise _unreadable(f"it is larger than {MAX_JSON_BYTES} bytes")
    _check_depth(text)
    try:
        return json.loads(
            text,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_short_int,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:  # unreachable after _check_depth; kept as a last line
        raise _unreadable(f"it is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # JSONDecodeError and the hooks below
        raise _unreadable(str(exc)) from None


def _unreadable(why: str) -> InvalidWrite:
    return InvalidWrite(f"cannot read the JSON write: {why}; nothing was stored")


def _check_depth(text: str) -> None:
    """Refuse deep nesting before the parser recurses into it. Brackets inside strings
    do not count; the scan stops at the first level too many."""
    depth = 0
    for bracket in _NOT_BRACKETS.sub("", _JSON_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise _unreadable(f"it is nested deeper than {MAX_JSON_DEPTH} levels")
        else:
            depth -= 1


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _short_int(literal: str) -> int:
    if len(literal.removeprefix("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer has more than {MAX_INT_DIGITS} digits")
    return int(literal)


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"number {literal[:20]} is out of range")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:  # which value would count is a guess: refuse instead
            raise ValueError(f"key {json.dumps(key)[:80]} appears twice in one object")
        found[key] = value
    return found


def whole_number(low: int, high: int) -> Callable[[str | int], int]:
    """The parser of every integer option (`typer.Option(parser=whole_number(1, 1000))`):
    ASCII digits only (no 1.0, 1e3, 1_000 or fullwidth digits), from `low` to `high`.
    Anything else is a usage error (exit 2), before any store is opened."""

    def parse(value: str | int) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value  # the option's default
        else:
            text = str(value).strip()
            digits = text.removeprefix("-")
            if not (digits.isascii() and digits.isdigit()) or len(digits) > 30:
                raise typer.BadParameter(f"expected a whole number from {low} to {high}")
            number = int(text)
        if not low <= number <= high:
            raise typer.BadParameter(f"{number} is not in the range {low} to {high}")
        return number

    return parse


@contextmanager
def open_service(
    data_dir: Path | None, url: str | None, as_json: bool, *, create: bool = True
) -> Iterator[MemoryService]:
    """The store, opened for one command. A command that only reads passes
    `create=False`: where there is no store it fails (exit 3) and creates nothing."""
    from memory_ledger.api import MemoryService
    from memory_ledger.operations.keys import DEV_KEY_FILE, MASTER_KEY_ENV

    try:
        service = MemoryService.open(data_dir, url, create=create)
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    if service.dev_key_created:
        key_file = service.operations.settings.data_dir / DEV_KEY_FILE
        err.print(
            f"[yellow]warning:[/] no {MASTER_KEY_ENV} set; generated a development master key "
            f"at {markup_safe(key_file)}. A key stored beside "
            "the data does not protect it at rest: set the variable in production.",
            highlight=False,
        )
    try:
        yield service
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    finally:
        # Vector files found damaged by whatever the command did (a `context`, a
        # `recall`): discarded and rebuilt from the log, and said here, not only logged.
        operations = service.operations
        warn_vector_discards(operations, operations.new_vector_discards())
        service.close()


@contextmanager
def open_operations(
    data_dir: Path | None, url: str | None, as_json: bool, *, create: bool = True
) -> Iterator[Operations]:
    """The store-wide operations of the store, opened for one command (`open_service`:
    the same refusals, warnings and closing)."""
    with open_service(data_dir, url, as_json, create=create) as service:
        yield service.operations


def warn_vector_discards(operations: Operations, reasons: list[str]) -> None:
    """A warning on stderr per discard of the vector index's files (names and checks,
    e.g. `segment seg-0.sealed checksum mismatch`, never content)."""
    for reason in reasons:
        err.print(
            shown(
                f"warning: the vector index's files were discarded ({reason}; in "
                f"{operations.vector_directory}); it is rebuilt from the log",
                style="yellow",
            )
        )


@contextmanager
def open_ledger(
    namespace: str, data_dir: Path | None, url: str | None, as_json: bool, *, create: bool = True
) -> Iterator[MemoryLedger]:
    from memory_ledger.principal import Principal

    try:
        principal = Principal.from_namespace(namespace)
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    with open_service(data_dir, url, as_json, create=create) as service:
        yield service.for_principal(principal)


Now = Annotated[
    str | None, typer.Option(help="As of this ISO time with zone (a drill); default: now.")
]


def as_of(now: str | None) -> datetime:
    """The time a `--now` option names (default: the current time), or a usage error."""
    from memory_ledger.times import to_utc

    try:
        return to_utc(now) if now is not None else datetime.now(UTC)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--now") from None


def emit(as_json: bool, data: Any, human: Callable[[], None]) -> None:
    if as_json:
        print(dump_json(data, indent=2))
    else:
        human()


def memories_table(memories: list[Memory], title: str) -> Table:
    """Memories, one a row, each with its whole id (the next command takes it)."""
    from memory_ledger.cli.tables import IdTable

    columns = ("id", "kind", "subject", "predicate", "text", "origin", "status", "valid from")
    table = IdTable(*columns, ids=("id",), title=shown(title), show_lines=False)
    for m in memories:
        text = shown(m.text) if m.text is not None else shown("ERASED", style="dim")
        table.add_row(
            shown(m.item_id),
            shown(m.kind),
            shown(m.subject),
            shown(m.predicate),
            text,
            shown(m.origin),
            shown(m.status),
            shown((m.valid_from or "")[:19]),
        )
    return table


REPLAY_STAGES = {
    "projections": "replaying the log",
    "vector_index": "vector index: reading the log",
    "vector_embedding": "vector index: embedding",
    "verification_scan": "verification scan",
    "retention": "erasing expired items",
}


@contextmanager
def replay_progress(as_json: bool) -> Iterator[Progress | None]:
    """A progress bar on stderr while a replay (rebuild) or a long job run (`jobs
    run-once`) goes: only in a terminal, and never with --json, so scripts and logs see
    only the result."""
    if as_json or not err.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        SpinnerColumn,
        Task,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress

    class Rate(ProgressColumn):
        """Items per second of a phase, once it has a rate."""

        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            if speed is None and task.elapsed and task.completed:  # too few updates for rich
                speed = task.completed / task.elapsed
            return Text("" if speed is None else f"{speed:,.0f}/s")

    columns = (
        SpinnerColumn(),  # moves from the first moment, before any phase reports
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeRemainingColumn(),
    )
    with RichProgress(*columns, console=err, transient=True) as bar:
        tasks: dict[str, Any] = {"": bar.add_task("starting", total=None)}

        def report(stage: str, position: int, head: int) -> None:
            if "" in tasks:  # the first phase has reported: the placeholder goes
                bar.remove_task(tasks.pop(""))
            if stage not in tasks:
                tasks[stage] = bar.add_task(REPLAY_STAGES.get(stage, stage), total=head)
            bar.update(tasks[stage], completed=position, total=head)

        yield report
