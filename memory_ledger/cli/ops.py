"""Operating a store: status, rebuild, background jobs, consolidation, the demo and the
acceptance check."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from memory_ledger.bounds import (
    MAX_CONSOLIDATE_EVERY,
    MAX_DURATION,
    MAX_INTERVAL,
    MIN_CONSOLIDATE_EVERY,
    MIN_INTERVAL,
)
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
    terminal_safe,
    warn_vector_discards,
)
from memory_ledger.cli.tables import IdTable
from memory_ledger.config import Settings
from memory_ledger.errors import (
    IntegrityError,
    InvalidWrite,
    MemoryLedgerError,
    ProjectionsDamaged,
)


@app.command()
def status(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Backend, event count, how far each projection and the vector index have caught
    up, and the consistency check of the log, the key store and the ledger."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        info = ops.maintenance.status()

        def human() -> None:
            out.print(
                f"backend [bold]{info['backend']}[/] at {escape(info['location'])}; "
                f"{info['events']} events"
            )
            table = IdTable("projection", "position", "behind", ids=("projection",))
            for p in info["projections"]:
                table.add_row(p["name"], str(p["position"]), str(p["behind"]))
            vectors = info["vector_index"]
            table.add_row(
                f"vector_index ({vectors['embedder']}, {vectors['rows']} rows)",
                str(vectors["position"]),
                str(vectors["behind"]),
            )
            out.print(table)
            warn_vector_discards(ops, vectors["discarded"])
            _print_consistency(info["consistency"])

        ops.new_vector_discards()  # this process's are in the list: said once
        emit(as_json, info, human)


@app.command()
def rebuild(
    projection: Annotated[list[str] | None, typer.Option("--projection")] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Drop projections and replay the whole log into them (without --projection, the
    vector index too, re-embedding every live item). A damaged projections file is
    discarded first (overwritten and removed), and said so."""
    from memory_ledger.operations.maintenance import (
        check_projection_names,
        discard_damaged_projections,
        projection_names,
    )

    known = projection_names()
    try:
        if projection is not None:  # refused before anything is discarded or dropped
            check_projection_names(projection, known)
        discarded = discard_damaged_projections(Settings.resolve(data_dir, url))
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    with open_operations(data_dir, url, as_json, create=False) as ops:
        maintenance = ops.maintenance
        with replay_progress(as_json) as progress:
            replayed = maintenance.rebuild(projection, progress)
        restored = maintenance.restore_consolidated_turns() if discarded else 0
        rebuilt = projection or [*known, "vector_index"]  # all of them: the vectors too
        found = maintenance.check()
        data = {
            "replayed": replayed,
            "projections": rebuilt,
            "discarded": [vars(d) for d in discarded],
            "consolidated_turns_restored": restored,
            # Every discard since the previous full rebuild (this one's included), by
            # any process; after a partial rebuild, those still noted.
            "vector_index_discarded": (
                ops.cleared_vector_discards() if projection is None else ops.noted_vector_discards()
            ),
            "consistency": found.to_dict(),
        }

        def human() -> None:
            for d in discarded:
                out.print(
                    Text(
                        f"discarded the damaged projections database {d.path} ({d.reason}): "
                        f"{d.files} file(s) overwritten and removed"
                    )
                )
                if restored:
                    out.print(Text(f"restored {restored} consolidated turn id(s) from the log"))
            warn_vector_discards(ops, data["vector_index_discarded"])
            out.print(f"rebuilt {', '.join(rebuilt)} from {replayed} events")
            _print_consistency(data["consistency"], quiet_when_ok=True)

        ops.new_vector_discards()  # this process's are in the list: said once
        emit(as_json, data, human)


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
    projection: Annotated[
        list[str] | None,
        typer.Option(
            "--projection",
            help="Run only this projection (repeatable), in this process, and nothing else.",
        ),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
) -> None:
    """Keep projections caught up (and consolidate new turns) on a schedule (APScheduler),
    with the other lifecycle jobs on theirs (`jobs list`). SIGINT or SIGTERM: the running
    jobs finish, one last catch-up runs, exit 0. With --projection, this process runs
    just those projections (one process per projection is the scale-out shape)."""
    from memory_ledger.operations.maintenance import check_schedule

    try:  # typer checks the ranges; this also refuses NaN and a zero duration
        check_schedule(interval, duration, consolidate_every)
    except InvalidWrite as exc:
        fail(exc, False)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # not two lines per tick
    if projection:
        with open_operations(data_dir, url, False) as ops:
            ops.maintenance.run_projections(projection, interval, duration)
        return
    with open_operations(data_dir, url, False) as ops:
        ops.maintenance.catch_up_loop(interval, duration, consolidate_every)


@app.command()
def consolidate(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Extract inferred facts and preferences from turns not consolidated yet, once."""
    with open_operations(data_dir, url, as_json) as ops:
        written, refused = ops.maintenance.consolidate()
        emit(
            as_json,
            {"written": written, "refused": refused},
            lambda: out.print(f"consolidation wrote {written}, refused {refused} (stale)"),
        )


@app.command()
def expire(
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
    now: Annotated[
        str | None,
        typer.Option(help="Sweep as of this ISO time with zone (a drill); default: now."),
    ] = None,
) -> None:
    """Erase every item whose retention has run out, once (the `run` schedule does it
    hourly): one forget request per namespace, basis `retention_expiry`. Exit 7 if a
    request is not `completed` (it is retried like any other)."""
    at = as_of(now)
    with open_operations(data_dir, url, as_json) as ops:
        reports = ops.maintenance.expire(at)
        rows = [
            {
                "request_id": r.request_id,
                "namespace": r.namespace,
                "erased": len(r.all_targets),
                "status": r.status,
            }
            for r in reports
        ]

        def human() -> None:
            if not rows:
                out.print("nothing is due")
            for row in rows:
                out.print(
                    f"{row['request_id']}  {terminal_safe(row['namespace'])}  "
                    f"{row['erased']} item(s)  {row['status']}"
                )

        emit(as_json, {"requests": rows}, human)
        if any(r.status != "completed" for r in reports):
            raise typer.Exit(7)


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
    Exits 0 only if every result of every case passes; 1 if one fails; 15 if none
    fails but a probe gave no answer (could not check: run it again)."""
    import tempfile

    from memory_ledger.acceptance import (
        EXIT_CODES,
        FAILED,
        PASSED,
        overall,
        render_table,
        results_json,
        run_all,
    )

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
        failing = [r.case for r in results if r.outcome == FAILED]
        unchecked = [r.case for r in results if r.outcome not in (FAILED, PASSED)]
        passing = len(results) - len(failing) - len(unchecked)
        out.print(
            Text(
                f"{len(results)} case(s); {passing} with all four results passing"
                + (f"; failing: {', '.join(failing)}" if failing else "")
                + (f"; could not check (run again): {', '.join(unchecked)}" if unchecked else "")
            )
        )
        if keep is not None:
            out.print(Text(f"stores kept under {keep}"))

    emit(as_json, results_json(results), human)
    raise typer.Exit(EXIT_CODES[overall(results)])


@app.command()
def doctor(
    repair_key_check: Annotated[
        bool,
        typer.Option(
            "--repair-key-check",
            help="Write the master-key check again, after proving the key opens stored keys.",
        ),
    ] = False,
    acknowledge_ledger_loss: Annotated[
        bool,
        typer.Option(
            "--acknowledge-ledger-loss",
            help="Record in the ledger that its entries for unexplained tombstones are lost.",
        ),
    ] = False,
    close_verification: Annotated[
        list[str] | None,
        typer.Option(
            "--close-verification",
            help="Record a request's verification window as closed (its fingerprints are lost).",
        ),
    ] = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help="Who acknowledges a loss (recorded); default: the OS user."),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Check the event log, the key store and the lifecycle ledger against each other,
    explain every problem and how to repair it. Exits 10 when a problem is found, 0 when
    none. The repair options change the store; without them nothing is changed."""
    from memory_ledger.api import MemoryService
    from memory_ledger.operations.maintenance import (
        acknowledge_ledger_loss as acknowledge_loss,
    )
    from memory_ledger.operations.maintenance import (
        open_finding,
        projections_damage,
    )
    from memory_ledger.operations.maintenance import (
        repair_key_check as repair_check,
    )

    settings = Settings.resolve(data_dir, url)
    repaired: list[str] = []
    findings: list[dict[str, Any]] = []
    notes: list[str] = []
    checked: dict[str, Any] = {}
    try:
        settings.require_store()  # a doctor of nothing creates nothing
        if repair_key_check:
            repaired.append(repair_check(settings))
        if acknowledge_ledger_loss:
            repaired.append(acknowledge_loss(settings, by))
        damage = projections_damage(settings)
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    if damage is not None:
        findings.append(open_finding("projections_damaged", damage, "memory-ledger rebuild"))
    service = None
    try:
        service = MemoryService(settings)
    except ProjectionsDamaged:
        pass  # reported above, from the same check
    except IntegrityError as exc:
        findings.append(open_finding(exc.code, str(exc), exc.repair))
        notes.append("the store refuses to open until this is repaired; run doctor again after")
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    if service is not None:
        ops = service.operations
        maintenance = ops.maintenance
        try:
            for request_id in close_verification or []:
                repaired.append(maintenance.close_lost_window(request_id))
            report = maintenance.check(chain=True)
            findings.extend(f.to_dict() for f in report.findings)
            findings.extend(f.to_dict() for f in maintenance.projection_findings())
            findings.extend(f.to_dict() for f in maintenance.kept_head_findings())
            checked = report.to_dict()["checked"]
            for reason in ops.vector_status()["discarded"]:
                notes.append(
                    f"the vector index's files were discarded ({reason}); it is rebuilt from "
                    "the log at the next catch-up (or `memory-ledger rebuild`)"
                )
        except MemoryLedgerError as exc:
            fail(exc, as_json)
        finally:
            service.close()
    data = {
        "ok": not findings,
        "location": settings.describe(),
        "problems": sum(f["count"] for f in findings),
        "findings": findings,
        "repaired": repaired,
        "notes": notes,
        "checked": checked,
    }

    def human() -> None:
        out.print(Text(f"memory-ledger doctor: {settings.describe()}"))
        for line in repaired:
            out.print(Text(f"repaired: {line}"))
        for f in findings:
            out.print(Text(f"PROBLEM {f['code']} ({f['count']})", style="bold red"))
            out.print(Text(f"  what: {f['explanation']}"))
            ids = f["item_ids"] or f["request_ids"]
            if ids:
                more = f" … and {f['count'] - len(ids)} more" if f["count"] > len(ids) else ""
                label = "items" if f["item_ids"] else "requests"
                out.print(Text(f"  {label}: {', '.join(ids)}{more}"))
            if f["repair"]:
                out.print(Text(f"  repair: {f['repair']}"))
        for note in notes:
            out.print(Text(f"note: {note}"))
        if findings:
            out.print(Text(f"{data['problems']} problem(s) found", style="bold red"))
        else:
            out.print(Text(f"no problems found: {_checked_summary(checked)}, ledger chain intact"))

    emit(as_json, data, human)
    raise typer.Exit(IntegrityError.exit_code if findings else 0)


# -- shared by status, rebuild and doctor --------------------------------------------------


def _checked_summary(checked: dict[str, Any]) -> str:
    return (
        f"{checked.get('items', 0)} items ({checked.get('erased', 0)} erased), "
        f"{checked.get('key_rows', 0)} key rows, {checked.get('ledger_entries', 0)} ledger entries"
    )


def _print_consistency(info: dict[str, Any], *, quiet_when_ok: bool = False) -> None:
    if info["ok"]:
        if not quiet_when_ok:
            out.print(Text(f"consistency: ok ({_checked_summary(info['checked'])})"))
        return
    found = ", ".join(f"{f['code']} ({f['count']})" for f in info["findings"])
    err.print(
        Text(
            f"warning: the consistency check found {info['problems']} problem(s): {found}; "
            "run `memory-ledger doctor` for what they mean and how to repair them"
        ),
        style="yellow",
    )
