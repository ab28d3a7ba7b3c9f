"""Restore drills: prove, on a scratch copy, that a restore brings nothing erased back.

A drill restores a backup into a scratch directory (on PostgreSQL, a scratch schema of
the same database), with a copy of the ledger as it is now (so the live ledger only
gains the drill's own entry), through the same steps as a
real restore (check, load, replay, rebuild, verify), and then checks the result
independently of the restore's own verification:

- every item the ledger says was erased, or rewritten after the backup, is absent from
  every store of the scratch copy, and has no live key;
- the scratch files' bytes (on PostgreSQL, the scratch schema's rows too) hold none of
  the keyed fingerprints the live store kept for
  the requests recorded after the backup (their texts, fragments and destroyed keys'
  bytes: the same scan as `verify`);
- a sample of items of every state (current, superseded, suppressed, archived, expired,
  erased) is served as its state promises (restore/serving.py: a superseded fact is
  readable but not recalled, an erased one is neither), and is in the same state as in
  the live store unless something deciding it was written after the restore point.

The report (JSON, a human table, and a short markdown file to attach to a ticket) lists
what was replayed and every finding; the drill and its outcome are recorded in the
ledger (`drill-...`); any finding fails it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memory_ledger.agent_state import AGENT_KINDS
from memory_ledger.audit.signed import signed, signed_markdown
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError, NotFound
from memory_ledger.forgetting.residue_check import database_rows
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.ledger.storage import SCHEMA_SUFFIX as LEDGER_SCHEMA_SUFFIX
from memory_ledger.policy import POLICY_FILE
from memory_ledger.residue import (
    file_paths_under,
    scan_fingerprint_bytes,
    scan_fingerprints,
)
from memory_ledger.restore.backup import Backup, verify
from memory_ledger.restore.restore import RestorePlan, requests_in, restore
from memory_ledger.restore.serving import changed_after, serving
from memory_ledger.restore.store import registered
from memory_ledger.times import canonical_time

if TYPE_CHECKING:
    from memory_ledger.restore.live import LiveStore, StoreOpener

DRILLS_DIR = "drills"
SAMPLE = 20


@dataclass
class DrillReport:
    drill_id: str
    backup_id: str
    restore_position: int
    replayed: list[str] = field(default_factory=list)
    erasures_checked: int = 0
    files_scanned: int = 0
    requests_scanned: int = 0
    retained_sampled: int = 0
    #: Items sampled per state (restore/serving.py), each held to what it promises.
    states: dict[str, int] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)  # codes and ids, never content
    outcome: str = "failed"
    report_files: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def markdown(self) -> str:
        lines = [
            f"# Restore drill {self.drill_id}: {self.outcome.upper()}",
            "",
            f"- backup: `{self.backup_id}` (restore point {self.restore_position})",
            f"- erasures replayed and checked: {self.erasures_checked}",
            f"- files scanned for residue: {self.files_scanned} "
            f"(fingerprints of {self.requests_scanned} request(s))",
            f"- kept items sampled: {self.retained_sampled}, by state: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.states.items())) or "none"),
            f"- findings: {len(self.findings)}",
        ]
        lines += [f"  - {finding}" for finding in self.findings]
        return "\n".join(lines) + "\n"


def scratch_settings(settings: Settings, scratch: Path) -> Settings:
    """Where a drill restores to: a scratch directory, and on PostgreSQL a scratch schema
    of the same database (its ledger copy in the schema beside it), dropped afterwards."""
    data_dir = scratch / "data"
    if settings.postgres is None:
        return Settings.resolve(data_dir)
    schema = f"ml_drill_{uuid.uuid4().hex[:12]}"
    return Settings(data_dir.resolve(), replace(settings.postgres, schema=schema))


def restore_into_scratch(
    service: LiveStore, backup: Backup, target: Settings, now: datetime, open_store: StoreOpener
) -> RestorePlan:
    """The restore half of a drill: the backup restored into `target` with a copy of
    the live ledger (which the drill must not write the restore into)."""
    target.data_dir.mkdir(parents=True, exist_ok=True)
    policy = service.settings.data_dir / POLICY_FILE  # reads apply the live policy
    if policy.exists():
        shutil.copyfile(policy, target.data_dir / POLICY_FILE)
    with LifecycleLedger(target) as ledger:
        ledger.copy_from(service.ledger)
        return restore(
            backup.path, target, service.log.master, ledger, now,
            open_store=open_store, restored_by="drill",
        )  # fmt: skip


def drop_scratch(target: Settings) -> None:
    """Remove a drill's scratch copy: its directory, and its schemas on PostgreSQL."""
    shutil.rmtree(target.data_dir.parent, ignore_errors=True)
    if target.postgres is not None:
        schema = target.postgres.schema
        with target._pg_connect() as conn:
            for name in (schema, schema + LEDGER_SCHEMA_SUFFIX):
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def check_scratch(
    service: LiveStore,
    target: Settings,
    result: RestorePlan,
    report: DrillReport,
    open_store: StoreOpener,
) -> None:
    """The checking half: erasures absent everywhere, no residue, kept items readable."""

    report.replayed = list(result.erase_again)
    taken = result.restore_time
    with open_store(target, service.log.master) as scratch:
        for store in scratch.stores:
            evidence = store.verify_absent(result.erase_again)
            if not evidence.absent:
                report.findings.append(f"{store.name}: erased items present ({evidence.detail})")
        report.erasures_checked = len(result.erase_again)
        paths = file_paths_under(target.data_dir)
        tables = database_rows(target)
        report.files_scanned = len(paths) + len(tables)
        for request_id in _requests_after(service.ledger, taken):
            prints = service.requests.residue.fingerprints(request_id)
            if prints is None:
                continue
            report.requests_scanned += 1
            found = [Path(f.path).name for f in scan_fingerprints(paths, prints)]
            found += [name for name, data in tables.items() if scan_fingerprint_bytes(data, prints)]
            report.findings += [f"residue of {request_id} in {name}" for name in sorted(set(found))]
        report.retained_sampled = _check_states(service, scratch, result, report)


def drill(
    service: LiveStore,
    now: datetime,
    backup_path: Path | None = None,
    run_by: str = "operator",
    keep_scratch: bool = False,
    *,
    open_store: StoreOpener,
) -> DrillReport:
    """Run a drill on a backup (default: the newest registered one); `open_store` opens
    the scratch store it is restored into."""
    if backup_path is None:
        found = registered(service.settings.data_dir)
        if not found:
            raise NotFound("no registered backup to drill on: take one with `backup create`")
        backup_path = found[-1].path
    backup = verify(backup_path, service.log.master)
    report = DrillReport(
        f"drill-{uuid.uuid4().hex[:16]}",
        backup.manifest.backup_id,
        backup.manifest.restore_point.position,
    )
    target = scratch_settings(service.settings, Path(tempfile.mkdtemp(prefix="ml-drill-")))
    try:
        result = restore_into_scratch(service, backup, target, now, open_store)
        check_scratch(service, target, result, report, open_store)
    except ConfigurationError as exc:
        report.findings.append(f"restore refused: {type(exc).__name__}")
    finally:
        if not keep_scratch:
            drop_scratch(target)
    return finish(service, report, run_by, now)


def finish(service: LiveStore, report: DrillReport, run_by: str, now: datetime) -> DrillReport:
    """Settle the outcome, write the report files, record the drill in the ledger."""
    report.outcome = "failed" if report.findings else "passed"
    folder = service.settings.data_dir / DRILLS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    stamp = canonical_time(now).replace(":", "").replace(".", "")
    json_file, md_file = (folder / f"{stamp}-{report.drill_id}{ext}" for ext in (".json", ".md"))
    report.report_files = [str(json_file), str(md_file)]
    # Both signed with the ledger's key: the report is evidence an auditor checks
    # offline (`python verifier.py --document FILE`), as a compliance pack is, and the
    # markdown is what gets attached to a ticket.
    master = service.log.master
    json_file.write_text(json.dumps(signed("drill report", report.to_dict(), master), indent=2))
    md_file.write_text(signed_markdown("drill report markdown", report.markdown(), master))
    service.ledger.append(
        report.drill_id,
        EntryType.DRILL,
        {
            "backup_id": report.backup_id,
            "restore_position": report.restore_position,
            "items_erased_again": len(report.replayed),
            "erasures_checked": report.erasures_checked,
            "files_scanned": report.files_scanned,
            "requests_scanned": report.requests_scanned,
            "retained_sampled": report.retained_sampled,
            "states": report.states,
            "findings": len(report.findings),
            "outcome": report.outcome,
            "run_by": run_by,
        },
    )
    return report


def _requests_after(ledger: LifecycleLedger, taken: str) -> list[str]:
    """Requests with an entry at or after the backup was taken: their erasures are the
    ones the backup cannot have."""
    return [rid for rid, entries in requests_in(ledger).items() if entries[-1].recorded_at >= taken]


def _check_states(
    service: LiveStore,
    scratch: LiveStore,
    result: RestorePlan,
    report: DrillReport,
) -> int:
    """Items of every state, sampled from the restored copy (and the erased ones), each
    held to what its state promises (restore/serving.py) and compared with the live
    store: an item erased there must be erased here, and so must one the restore
    erases on purpose (an item rewritten after the backup is erased, whatever the live
    store holds of it now); one kept there must not be lost here; and while nothing
    deciding its state changed after the restore point, it must be in the same state
    in both. Returns how many kept items were sampled."""
    erased = set(result.erase_again)
    kept = 0
    for item_id in _sample(scratch, result.erase_again):
        restored = serving(scratch, item_id)
        live = serving(service, item_id)
        if restored.state == "absent":  # written after the backup (then erased)
            continue
        report.states[restored.state] = report.states.get(restored.state, 0) + 1
        ident = UUID(item_id)
        broken = restored.broken_promise()
        if broken is not None:
            report.findings.append(
                f"{restored.state} item {ident} is {broken.replace('_', ' ')} after the restore"
            )
        if live.state == "erased" and restored.state != "erased":
            report.findings.append(f"item {ident}, erased in the live store, is back")
        elif item_id in erased:  # erased on purpose (rewritten after the backup, or gone)
            if restored.state != "erased":
                report.findings.append(f"item {ident}, which the restore erases, is back")
        elif restored.state == "erased" and live.state != "erased":
            report.findings.append(f"item {ident}, {live.state} in the live store, was lost")
        elif restored.state != live.state and not changed_after(
            service, item_id, result.restore_position
        ):
            report.findings.append(
                f"item {ident} is {restored.state} after the restore but {live.state} in "
                "the live store, and nothing deciding it changed after the restore point"
            )
        kept += restored.state != "erased"
    return kept


def _sample(scratch: LiveStore, erased: list[str]) -> list[str]:
    """Up to SAMPLE item ids of each state the restored copy can hold, and of the
    erased ones: a drill that only looks at current items misses half the promises."""
    from sqlalchemy import select

    from memory_ledger.projections.catalog import catalog
    from memory_ledger.projections.facts import facts

    c = catalog.c
    lapsed = scratch.retention.expired_clause(c)
    plain = c.suppressed.is_(False) & (c.tier == "active") & ~lapsed
    picks: dict[str, None] = dict.fromkeys(erased[:SAMPLE])
    scratch.runner.catch_up()
    with scratch.engine.connect() as conn:
        times = scratch.retention.cutoffs(scratch.clock())
        for where in (
            plain,
            c.suppressed.is_(True),
            c.tier == "archived",
            lapsed,
            c.kind.in_(AGENT_KINDS),
        ):
            query = select(c.item_id).where(where).order_by(c.position).limit(SAMPLE)
            picks.update(dict.fromkeys(r[0] for r in conn.execute(query, times)))
        superseded = (
            select(facts.c.item_id).where(facts.c.status == "superseded").distinct().limit(SAMPLE)
        )
        picks.update(dict.fromkeys(r[0] for r in conn.execute(superseded)))
    return list(picks)
