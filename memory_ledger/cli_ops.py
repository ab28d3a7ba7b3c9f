"""Operating a store: status, rebuild, background jobs, consolidation, the demo and the
acceptance check."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from jobs.projection_catchup import (
    MAX_CONSOLIDATE_EVERY,
    MAX_DURATION,
    MAX_INTERVAL,
    MIN_CONSOLIDATE_EVERY,
    MIN_INTERVAL,
    check_schedule,
    run_catchup_job,
)
from memory_ledger.cli_common import (
    DataDir,
    Json,
    Url,
    app,
    emit,
    fail,
    open_service,
    out,
)
from memory_ledger.errors import InvalidWrite


@app.command()
def status(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Backend, event count and how far each projection and the vector index have caught up."""
    with open_service(data_dir, url, as_json) as service:
        info = service.status()

        def human() -> None:
            out.print(
                f"backend [bold]{info['backend']}[/] at {escape(info['location'])}; "
                f"{info['events']} events"
            )
            table = Table("projection", "position", "behind")
            for p in info["projections"]:
                table.add_row(p["name"], str(p["position"]), str(p["behind"]))
            vectors = info["vector_index"]
            table.add_row(
                f"vector_index ({vectors['embedder']}, {vectors['rows']} rows)",
                str(vectors["position"]),
                str(vectors["behind"]),
            )
            out.print(table)

        emit(as_json, info, human)


@app.command()
def rebuild(
    projection: Annotated[list[str] | None, typer.Option("--projection")] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Drop projections and replay the whole log into them (without --projection, the
    vector index too, re-embedding every live item)."""
    with open_service(data_dir, url, as_json) as service:
        known = [p.name for p in service.runner.projections]
        unknown = sorted(set(projection or []) - set(known))
        if unknown:
            fail(InvalidWrite(f"unknown projection(s) {unknown}; known: {known}"), as_json)
        replayed = service.rebuild(projection)
        rebuilt = projection or [*known, "vector_index"]  # all of them: the vectors too
        emit(
            as_json,
            {"replayed": replayed, "projections": rebuilt},
            lambda: out.print(f"rebuilt {', '.join(rebuilt)} from {replayed} events"),
        )


@app.command()
def run(
    interval: Annotated[
        float,
        typer.Option(
            min=MIN_INTERVAL,
            max=MAX_INTERVAL,
            help=f"Seconds between catch-ups, {MIN_INTERVAL:.10g} to {MAX_INTERVAL:.10g}.",
        ),
    ] = 1.0,
    duration: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=MAX_DURATION,
            help=f"Stop after this many seconds (more than 0, at most {MAX_DURATION:.10g}).",
        ),
    ] = None,
    consolidate_every: Annotated[
        float | None,
        typer.Option(
            min=MIN_CONSOLIDATE_EVERY,
            max=MAX_CONSOLIDATE_EVERY,
            help="Also run consolidation every N seconds, "
            f"{MIN_CONSOLIDATE_EVERY:.10g} to {MAX_CONSOLIDATE_EVERY:.10g}.",
        ),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
) -> None:
    """Keep projections caught up (and consolidate new turns) on a schedule (APScheduler)."""
    try:  # typer checks the ranges; this also refuses NaN and a zero duration
        check_schedule(interval, duration, consolidate_every)
    except InvalidWrite as exc:
        fail(exc, False)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # not two lines per tick
    with open_service(data_dir, url, False) as service:
        run_catchup_job(
            service, interval=interval, duration=duration, consolidate_every=consolidate_every
        )


@app.command()
def consolidate(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Extract inferred facts and preferences from turns not consolidated yet, once."""
    from jobs.consolidation import Consolidator

    with open_service(data_dir, url, as_json) as service:
        written, refused = Consolidator(service).run_all()
        emit(
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
        fail(InvalidWrite(f"cannot run the acceptance cases: {exc}"), as_json)

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

    emit(as_json, results_json(results), human)
    raise typer.Exit(0 if all_passed(results) else 1)
