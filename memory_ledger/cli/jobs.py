"""`memory-ledger jobs`: the named lifecycle jobs (jobs/registry.py), their schedule and
their run records.

`jobs list` reads the job tables only (no master key needed): which jobs there are,
how often they run, the next run time in the persistent job store, and each job's
last run. `jobs run` is the scheduler in the foreground; `jobs run-once NAME` is one
run through the same path (lease, start record, run, end record), as of `--now`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from memory_ledger.bounds import MAX_DURATION, RUNS_KEPT
from memory_ledger.cli.common import (
    DataDir,
    Json,
    Url,
    app,
    as_of,
    emit,
    err,
    fail,
    open_operations,
    out,
    replay_progress,
    shown,
    terminal_safe,
    whole_number,
)
from memory_ledger.cli.tables import IdTable
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite, MemoryLedgerError

if TYPE_CHECKING:  # the scheduler imports APScheduler: only the commands that need it do
    pass

jobs_app = typer.Typer(
    help="The scheduled lifecycle jobs: list them and their runs, run the scheduler, "
    "or run one job once.",
    no_args_is_help=True,
)
app.add_typer(jobs_app, name="jobs")


@jobs_app.command("list")
def list_jobs(
    runs: Annotated[
        int,
        typer.Option(
            "--runs",
            parser=whole_number(1, RUNS_KEPT),
            metavar="N",
            help=f"Show each job's last N runs (1 to {RUNS_KEPT}).",
        ),
    ] = 1,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Every job: what it does, how often, its next run time in the job store (if a
    scheduler has scheduled it), and its last run: started, ended, outcome, counts."""
    from memory_ledger.operations import job_listing

    try:
        settings = Settings.resolve(data_dir, url)
        settings.require_store()
        settings.check_reachable()
        rows = job_listing(settings, runs, datetime.now(UTC))
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    data = {"location": settings.describe(), "jobs": rows}

    def human() -> None:
        table = IdTable(
            "job",
            "every",
            "next run",
            "last run",
            "ended",
            "outcome",
            "counts",
            ids=("job",),
            whole_cells=True,
        )
        for row in rows:
            last = row["last_run"] or {}
            table.add_row(
                row["name"],
                _every_text(row["every_minutes"]),
                _time_text(row["next_run"]) if row["scheduled"] else "not scheduled",
                _time_text(last.get("started_at")),
                _time_text(last.get("ended_at")),
                _outcome_text(last),
                shown(_counts_text(last.get("counts") or {})),
            )
        out.print(table)
        for row in rows:
            out.print(Text(f"{row['name']}: {row['description']}", style="dim"))
        for row in rows:
            for run in row["runs"][1:]:
                out.print(shown(f"{row['name']}  {_run_line(run)}"))

    emit(as_json, data, human)


@jobs_app.command("run")
def run_jobs(
    duration: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=MAX_DURATION,
            help=f"Stop after this many seconds (more than 0, at most {MAX_DURATION:.10g}).",
        ),
    ] = None,
    job: Annotated[
        list[str] | None,
        typer.Option(
            "--job",
            metavar="NAME",
            help="Schedule this job (repeat for more); default: every job on by default.",
        ),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
) -> None:
    """Run the scheduler in the foreground until --duration or SIGTERM/SIGINT. On a
    signal the running jobs finish and release their leases, then it exits 0."""
    from memory_ledger.operations import job_names

    try:
        names = job_names(job, duration)
    except InvalidWrite as exc:
        fail(exc, False)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # not two lines per tick
    with open_operations(data_dir, url, False) as ops:
        logging.getLogger("memory_ledger.jobs").info(
            "scheduler of %s on %s", ", ".join(names), ops.settings.describe()
        )
        ops.jobs.run_foreground(names, duration)


@jobs_app.command("run-once")
def run_once(
    name: Annotated[str, typer.Argument(help="The job's name (see `jobs list`).")],
    now: Annotated[
        str | None,
        typer.Option(help="Run as of this ISO time with zone (a drill); default: now."),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Run one job once, now, through the scheduler's path: under its lease (if another
    run holds it, this one is skipped and says who holds it) and recorded. Exits with
    the error's code if the run failed."""
    from memory_ledger.operations import Jobs

    try:
        Jobs.check(name)
    except InvalidWrite as exc:
        fail(exc, as_json)
    at = as_of(now)

    # The result below says it once; without this, Python's last-resort handler would
    # print the failed run's log line to stderr as well.
    logging.getLogger("memory_ledger.jobs").addHandler(logging.NullHandler())
    with open_operations(data_dir, url, as_json) as ops:
        with replay_progress(as_json) as progress:
            result = ops.jobs.run_once(name, at, progress)
        data = result.to_dict()

        def human() -> None:
            if result.held_by is not None:
                held = result.held_by
                out.print(
                    shown(
                        f"{name} skipped: {held.holder} is running it "
                        f"(lease until {held.expires_at}); nothing was done"
                    )
                )
            elif result.error is not None:
                err.print(shown(f"error: {name} failed ({result.run_id}): {result.error}"))
            else:
                counts = _counts_text(result.counts) or "nothing to do"
                out.print(shown(f"{name} {result.outcome} ({result.run_id}): {counts}"))

        emit(as_json, data, human)
    raise typer.Exit(result.exit_code)


# -- how runs read ---------------------------------------------------------------------


def _every_text(minutes: float) -> str:
    seconds = minutes * 60
    if seconds < 60:
        return f"{seconds:.4g} s"
    if minutes < 60 or minutes % 60:
        return f"{minutes:.4g} min"
    return f"{minutes / 60:.4g} h"


def _time_text(value: str | None) -> str:
    return value[:19].replace("T", " ") if value else "-"


def _counts_text(counts: dict[str, int]) -> str:
    return " ".join(f"{code}={value}" for code, value in counts.items())


def _outcome_text(run: dict[str, Any]) -> Text:
    from memory_ledger.operations import RUNNING

    outcome = run.get("outcome")
    if outcome is None:
        return Text("never run", style="dim")
    style = {"ok": "green", "failed": "bold red", "interrupted": "yellow"}.get(outcome, "")
    text = Text(outcome, style=style)
    if outcome == RUNNING:
        text.append(f" on {terminal_safe(run['holder'])}")
    if run.get("error"):
        text.append(f"\n{terminal_safe(run['error'])}")
    return text


def _run_line(run: dict[str, Any]) -> str:
    from memory_ledger.operations import RunRecord

    record = RunRecord(**run)
    ended = _time_text(record.ended_at)
    return (
        f"{_time_text(record.started_at)} -> {ended}  {record.outcome}  "
        f"{_counts_text(record.counts)}"
    )
