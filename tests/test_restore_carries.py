"""A restore keeps every verification that was true before it (restore/carried.py):
after each restore here, `verify` of every request and `doctor` are clean, and a scan
that could not check says so."""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path

from factories import cli, cli_location, fact, later, turn

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.jobs.registry import JOBS
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.restore.backup import create
from memory_ledger.restore.restore import restore

ALICE = Principal("acme", "alice")


def _backup(service: MemoryService, tmp_path: Path) -> Path:
    now = datetime.now(UTC)
    return create(service.settings, service.log.master, service.ledger, now, tmp_path / "bk").path


def _restore(settings: Settings, path: Path, *, lose_store: bool) -> object:
    with MemoryService(settings) as probe:
        master = probe.log.master
    if lose_store:  # the disaster case: the event store is gone, the ledger is not
        for name in ("events.sqlite", "events.sqlite-wal", "events.sqlite-shm"):
            (settings.data_dir / name).unlink(missing_ok=True)
    with LifecycleLedger(settings) as ledger:
        return restore(
            path, settings, master, ledger, datetime.now(UTC), force=True, open_store=MemoryService
        )


def _every_verification_clean(settings: Settings, request_ids: list[str]) -> list[dict]:
    where = cli_location(settings)
    outcomes = []
    for request_id in request_ids:
        code, output = cli("verify", request_id, *where, "--json")
        assert code == 0, output
        outcomes.append(json.loads(output))
    code, output = cli("doctor", *where, "--json")
    assert code == 0, output
    code, output = cli("status", *where, "--json")
    assert code == 0 and not json.loads(output).get("warnings"), output
    return outcomes


def _scan_receipt(outcome: dict) -> dict:
    [scan] = [
        r for r in outcome["receipts"] if r["store"] == "files" and r["action"] == "residue_scan"
    ]
    return scan


def test_a_forget_after_the_backup_verifies_after_restoring_over_the_store(
    settings: Settings, tmp_path: Path
) -> None:
    """`restore --force` over the store: the request's fingerprints postdate the backup
    and are carried over, so its byte scan still checks."""
    token = f"zq{secrets.token_hex(8)}"
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        secret = alice.remember(fact("locker", f"code {token}")).item_id
        alice.remember(fact("city", "Hangzhou"))
        path = _backup(service, tmp_path)
        report = alice.forget(secret)
        assert report.completed
    result = _restore(settings, path, lose_store=False)
    assert result.fingerprints_lost == []
    with MemoryService(settings) as service:  # the scheduled scan checks it for real
        counts = JOBS["verification-scan"].run(service, datetime.now(UTC), None)
    assert _scan_counts(counts) == {"requests": 1, "ok": 1, "residue": 0, "not_checked": 0}
    [outcome] = _every_verification_clean(settings, [report.request_id])
    assert outcome["status"] == "completed"
    assert _scan_receipt(outcome)["status"] == "ok"


def test_a_scheduled_scan_that_cannot_check_says_so(settings: Settings) -> None:
    """Fingerprints deleted by hand (no restore, no closing on record): the scan job
    counts the request as not checked instead of calling the run ok."""
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        report = alice.forget(alice.remember(fact("locker", "code 7731-0042")).item_id)
        table = service.log.key_sql.keys_table
        with service.log.recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE item_id = {service.log.key_sql.param}",
                (f"residue:{report.request_id}",),
            )
        counts = JOBS["verification-scan"].run(service, datetime.now(UTC), None)
    assert _scan_counts(counts) == {"requests": 1, "ok": 0, "residue": 0, "not_checked": 1}


def test_a_store_lost_with_its_fingerprints_says_so_and_verifies_clean(
    settings: Settings, tmp_path: Path
) -> None:
    """The event store itself is lost: the fingerprints of a request recorded after the
    backup are gone with it. The restore records that (the window closed, by it), so
    verify says why no scan ran, and doctor finds nothing to call damage."""
    if settings.postgres is not None:
        return  # losing the files is the SQLite case; PostgreSQL is covered above
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        secret = alice.remember(fact("locker", "code 5518-2290")).item_id
        path = _backup(service, tmp_path)
        report = alice.forget(secret)
    result = _restore(settings, path, lose_store=True)
    assert result.fingerprints_lost == [report.request_id]
    [outcome] = _every_verification_clean(settings, [report.request_id])
    assert not outcome["residue_checked"]
    assert "lost with the store that " + result.restore_id in outcome["residue_scan"]
    with LifecycleLedger(settings) as ledger:
        [closed] = [
            e.payload for e in ledger.entries(report.request_id)
            if e.entry_type == "receipt" and e.payload["action"] == "verification_closed"
        ]  # fmt: skip
    assert closed["evidence"] == {
        "fingerprints_destroyed": False,
        "lost_with_replaced_store": True,
        "restore": result.restore_id,
    }
    with MemoryService(settings) as service:
        counts = JOBS["verification-scan"].run(service, datetime.now(UTC), None)
    assert counts["requests"] == 0  # nothing due: the window is closed, on record


def test_the_ledger_explains_every_tombstone_a_restore_writes(
    settings: Settings, tmp_path: Path
) -> None:
    """A forget after the backup redacts its value from a turn that repeats it; the
    restore erases that turn (its copy holds the old words), and the ledger records the
    tombstone, so doctor finds none unexplained."""
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        address = "18 Haisong Road, Xihu District, Hangzhou"
        alice.remember(fact("home_address", address, category="contact"))
        taxi = alice.remember(
            turn("Send the taxi to 18 Haisong Road at 7am.", turn_id="t9", at=later(3))
        )
        path = _backup(service, tmp_path)
        scope = {"kind": "predicate", "subject": "user", "predicate": "home_address"}
        report = alice.forget_scope(scope)
        assert report.completed
        assert taxi.item_id in report.mentions
    result = _restore(settings, path, lose_store=False)
    assert taxi.item_id in result.rewritten_after_backup
    _every_verification_clean(settings, [report.request_id])
    with LifecycleLedger(settings) as ledger:
        assert ledger.entries(result.restore_id)[0].entry_type == "restore"
        tombstoned = {
            e.payload["item_id"] for e in ledger.entries(result.restore_id)
            if e.entry_type == "tombstone"
        }  # fmt: skip
    assert taxi.item_id in {str(i) for i in tombstoned}


def _scan_counts(counts: dict[str, int]) -> dict[str, int]:
    """The scan's own counts; the vector index's compaction, run first, must have left
    no dead row's bytes in any file."""
    assert counts.get("vector_files_holding_dead_rows", 0) == 0
    return {k: counts[k] for k in ("requests", "ok", "residue", "not_checked")}
