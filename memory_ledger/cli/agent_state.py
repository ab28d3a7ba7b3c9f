"""`memory-ledger files ...` and `memory-ledger runs ...`: an agent's memory files and
its run state (memory_ledger/agent_state), for one namespace, from the command line."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer

from memory_ledger.cli.common import (
    DataDir,
    Json,
    Namespace,
    Url,
    app,
    emit,
    fail,
    open_ledger,
    out,
    parse_json_text,
    read_json_input,
    shown,
)
from memory_ledger.errors import InvalidWrite

files_app = typer.Typer(
    help="An agent's memory files under /memories (the Claude memory tool's commands).",
    no_args_is_help=True,
)
runs_app = typer.Typer(
    help="An agent's runs: exact workflow state with compare-and-set.", no_args_is_help=True
)
app.add_typer(files_app, name="files")
app.add_typer(runs_app, name="runs")

Writer = Annotated[str, typer.Option(help="The agent making the change (an identifier).")]
Session = Annotated[str | None, typer.Option(help="Its session id.")]
Turn = Annotated[str | None, typer.Option(help="Its turn id.")]
Path_ = Annotated[str, typer.Argument(help="A path under /memories.")]
Version = Annotated[int, typer.Option("--version", help="The state version you read (CAS).")]


def _lines(text: str) -> None:
    """Multi-line text, each line made safe for the terminal on its own."""
    for line in text.split("\n"):
        out.print(shown(line.replace("\t", "    ")), highlight=False)


def _file_command(
    namespace: str,
    command: dict[str, Any],
    writer: str,
    session_id: str | None,
    turn_id: str | None,
    data_dir: Any,
    url: Any,
    as_json: bool,
) -> None:
    reads = command["command"] == "view"  # a view creates no store where there is none
    with open_ledger(namespace, data_dir, url, as_json, create=not reads) as ledger:
        files = ledger.files
        result = files.execute(command, files.source(writer, session_id=session_id,
                                                     turn_id=turn_id))  # fmt: skip
        emit(as_json, {"result": result}, lambda: _lines(result))


@files_app.command("view")
def files_view(
    path: Path_,
    namespace: Namespace,
    view_range: Annotated[
        str | None, typer.Option(help="FIRST,LAST lines (LAST -1: to the end).")
    ] = None,
    writer: Writer = "cli",
    session_id: Session = "cli",
    turn_id: Turn = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """A directory's files (two levels deep, with sizes), or a file's numbered lines."""
    command: dict[str, Any] = {"command": "view", "path": path}
    if view_range is not None:
        try:
            first, last = (int(n) for n in view_range.split(","))
        except ValueError:
            fail(InvalidWrite("--view-range is FIRST,LAST, e.g. 1,20"), as_json)
        command["view_range"] = [first, last]
    _file_command(namespace, command, writer, session_id, turn_id, data_dir, url, as_json)


@files_app.command("create")
def files_create(
    path: Path_,
    namespace: Namespace,
    content: Annotated[str, typer.Option("--content", help="The file's text.")],
    writer: Writer = "cli",
    session_id: Session = "cli",
    turn_id: Turn = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Create a file (an existing one gets a new version; its history stays)."""
    command = {"command": "create", "path": path, "file_text": content}
    _file_command(namespace, command, writer, session_id, turn_id, data_dir, url, as_json)


@files_app.command("str-replace")
def files_str_replace(
    path: Path_,
    old: Annotated[str, typer.Argument(help="Text that appears exactly once.")],
    new: Annotated[str, typer.Argument(help="Its replacement.")],
    namespace: Namespace,
    writer: Writer = "cli",
    session_id: Session = "cli",
    turn_id: Turn = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Replace text that appears exactly once in the file."""
    command = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
    _file_command(namespace, command, writer, session_id, turn_id, data_dir, url, as_json)


@files_app.command("insert")
def files_insert(
    path: Path_,
    line: Annotated[int, typer.Argument(help="Insert after this line (0: at the top).")],
    text: Annotated[str, typer.Argument(help="The text to insert.")],
    namespace: Namespace,
    writer: Writer = "cli",
    session_id: Session = "cli",
    turn_id: Turn = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Insert text after a line."""
    command = {"command": "insert", "path": path, "insert_line": line, "insert_text": text}
    _file_command(namespace, command, writer, session_id, turn_id, data_dir, url, as_json)


@files_app.command("delete")
def files_delete(
    path: Path_,
    namespace: Namespace,
    writer: Writer = "cli",
    session_id: Session = "cli",
    turn_id: Turn = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Take a file (or a directory's files) out of the directory; history keeps it until
    `files forget` or its expiry."""
    command = {"command": "delete", "path": path}
    _file_command(namespace, command, writer, session_id, turn_id, data_dir, url, as_json)


@files_app.command("rename")
def files_rename(
    path: Path_,
    new_path: Annotated[str, typer.Argument(help="The new path under /memories.")],
    namespace: Namespace,
    writer: Writer = "cli",
    session_id: Session = "cli",
    turn_id: Turn = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Rename (or move) a file."""
    command = {"command": "rename", "old_path": path, "new_path": new_path}
    _file_command(namespace, command, writer, session_id, turn_id, data_dir, url, as_json)


@files_app.command("changes")
def files_changes(
    namespace: Namespace,
    turn_id: Turn = None,
    session_id: Session = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """What a turn (or a session) changed in the memory files, as diffs, for the user."""
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        found = ledger.files.changes(turn_id=turn_id, session_id=session_id)

        def human() -> None:
            if not found:
                out.print("no memory file changed")
            for c in found:
                flag = "  [reads like an instruction]" if c.flagged else ""
                out.print(shown(f"{c.change} {c.path} (v{c.version}, by {c.writer}){flag}"))
                _lines(c.diff)

        emit(as_json, {"changes": [c.to_dict() for c in found]}, human)


@files_app.command("history")
def files_history(
    path: Path_, namespace: Namespace, data_dir: DataDir = None, url: Url = None,
    as_json: Json = False,
) -> None:  # fmt: skip
    """Every version of a file, oldest first."""
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        versions = ledger.files.history(path)

        def human() -> None:
            for v in versions:
                made = v["provenance"]
                mark = " (deleted)" if v["deleted"] else ""
                line = f"v{v['version']} {v['path']}{mark} by {made.get('writer')}"
                out.print(shown(f"{line} turn {made.get('turn_id')} at {made.get('written_at')}"))

        emit(as_json, {"versions": versions}, human)


@files_app.command("forget")
def files_forget(
    path: Path_, namespace: Namespace, data_dir: DataDir = None, url: Url = None,
    as_json: Json = False,
) -> None:  # fmt: skip
    """Erase a file (or a directory's files), every version, with receipts."""
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        report = ledger.files.forget(path)
        emit(as_json, report.to_dict(),
             lambda: out.print(f"{report.request_id}: {report.status}"))  # fmt: skip


# -- runs ------------------------------------------------------------------------------


def _run_line(view: Any) -> None:
    steps = ", ".join(f"{name}={step['status']}" for name, step in view.steps.items())
    out.print(
        shown(
            f"{view.run_id} v{view.version} {view.status}; steps {steps or 'none'}; "
            f"{len(view.pending)} pending, {len(view.operations)} operation(s)"
        )
    )


def _json_object(text: str | None, what: str, as_json: bool) -> dict[str, Any] | None:
    if text is None:
        return None
    try:  # inline JSON, or a file, or '-' for stdin
        value = parse_json_text(text) if text.lstrip().startswith("{") else read_json_input(text)
    except InvalidWrite as exc:
        fail(exc, as_json)
    if not isinstance(value, dict):
        fail(InvalidWrite(f"{what} is a JSON object"), as_json)
    return value


@runs_app.command("start")
def runs_start(
    task: Annotated[str, typer.Argument(help="What the run is for.")],
    namespace: Namespace,
    state: Annotated[
        str | None, typer.Option(help="Initial state: a JSON object, a file, or '-' for stdin.")
    ] = None,
    deadline: Annotated[str | None, typer.Option(help="ISO time with zone.")] = None,
    writer: Writer = "cli",
    session_id: Session = "cli",
    turn_id: Turn = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Start a run; prints its id and state version."""
    body = _json_object(state, "--state", as_json)
    when: datetime | None = None
    if deadline is not None:
        from memory_ledger.times import to_utc

        try:
            when = to_utc(deadline)
        except ValueError:
            fail(InvalidWrite("--deadline is an ISO time with a zone"), as_json)
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        runs = ledger.runs
        view = runs.start(task, runs.source(writer, session_id=session_id, turn_id=turn_id),
                          state=body, deadline=when)  # fmt: skip
        emit(as_json, view.to_dict(), lambda: _run_line(view))


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument()], namespace: Namespace, data_dir: DataDir = None,
    url: Url = None, as_json: Json = False,
) -> None:  # fmt: skip
    """A run's current state, read from the log (what resume reads)."""
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        view = ledger.runs.get(run_id)
        emit(as_json, view.to_dict(), lambda: _run_line(view))


@runs_app.command("list")
def runs_list(
    namespace: Namespace,
    status: Annotated[str | None, typer.Option(help="Only runs in this status.")] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """The namespace's runs, newest first."""
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        found = ledger.runs.list(status)

        def human() -> None:
            if not found:
                out.print("no runs")
            for r in found:
                out.print(f"{r['run_id']}  {r['status']}  started {r['started_at']}")

        emit(as_json, {"runs": found}, human)


@runs_app.command("step")
def runs_step(
    run_id: Annotated[str, typer.Argument()],
    step_id: Annotated[str, typer.Argument()],
    action: Annotated[str, typer.Argument(help="begin | succeeded | failed")],
    namespace: Namespace,
    version: Version,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Begin a step (or a new attempt), or end it, at the state version you read."""
    if action not in ("begin", "succeeded", "failed"):
        fail(InvalidWrite("the action is begin, succeeded or failed"), as_json)
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        runs = ledger.runs
        if action == "begin":
            view = runs.begin_step(run_id, version, step_id)
        else:
            view = runs.end_step(run_id, version, step_id, action)
        emit(as_json, view.to_dict(), lambda: _run_line(view))


@runs_app.command("state")
def runs_state(
    run_id: Annotated[str, typer.Argument()],
    state: Annotated[str, typer.Argument(help="The new state: JSON, '-' for stdin.")],
    namespace: Namespace,
    version: Version,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Replace the run's workflow state, if it is still at --version."""
    body = _json_object(state, "the state", as_json) or {}
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        view = ledger.runs.set_state(run_id, version, body)
        emit(as_json, view.to_dict(), lambda: _run_line(view))


@runs_app.command("finish")
def runs_finish(
    run_id: Annotated[str, typer.Argument()],
    outcome: Annotated[str, typer.Argument(help="succeeded | failed | cancelled")],
    namespace: Namespace,
    version: Version,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Finish a run: its scratch and checkpoints are erased, its record archived."""
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        view = ledger.runs.finish(run_id, version, outcome)
        emit(as_json, view.to_dict(), lambda: _run_line(view))


@runs_app.command("promote")
def runs_promote(
    run_id: Annotated[str, typer.Argument()],
    step_id: Annotated[str, typer.Argument()],
    write: Annotated[str, typer.Argument(help="A fact as JSON (no provenance), '-' for stdin.")],
    namespace: Namespace,
    confirmed_by: Annotated[str, typer.Option(help="user | rule:NAME | tool:NAME")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Make a succeeded step's result a long-term fact, through the promotion gate."""
    body = _json_object(write, "the write", as_json) or {}
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        stored = ledger.runs.promote(run_id, step_id, body, confirmed_by)
        emit(as_json, {"item_id": stored.item_id, "version": stored.version},
             lambda: out.print(f"promoted as {stored.item_id}"))  # fmt: skip


@runs_app.command("forget")
def runs_forget(
    run_id: Annotated[str, typer.Argument()], namespace: Namespace, data_dir: DataDir = None,
    url: Url = None, as_json: Json = False,
) -> None:  # fmt: skip
    """Erase a run with its scratch, checkpoints and promotions, with receipts."""
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        report = ledger.runs.forget(run_id)
        emit(as_json, report.to_dict(),
             lambda: out.print(f"{report.request_id}: {report.status}"))  # fmt: skip
