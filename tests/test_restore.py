"""Backups and restore with tombstone replay, on SQLite and PostgreSQL: nothing erased
after a backup comes back when the backup is restored, and a restore that cannot be
sure refuses.

Each test takes a backup, changes the store (erasures, expiries, redactions), loses the
event store, restores, and then reads from a new process and scans the store's bytes
(the files; on PostgreSQL a data-only pg_dump of the store's schema too).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from factories import cli_location, fact, store_bytes_contain, turn

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError
from memory_ledger.jobs.retention import expire_due
from memory_ledger.jobs.runs import RunStore
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.restore.backup import MANIFEST, SEALED_EVENTS, create, list_backups, verify
from memory_ledger.restore.restore import KILL_AFTER_ENV, STEPS, plan, restore
from memory_ledger.restoring import RestoreMarker

ALICE = Principal("acme", "alice")


@pytest.fixture
def store(settings: Settings) -> Settings:
    return settings


def _backup(service: MemoryService, tmp_path: Path) -> Path:
    made = create(
        service.settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path / "bk"
    )
    return made.path


def _lose_the_event_store(settings: Settings) -> None:
    """The store's data is lost (the lifecycle ledger, apart from it, is not)."""
    if settings.postgres is None:
        for name in ("events.sqlite", "events.sqlite-wal", "events.sqlite-shm"):
            (settings.data_dir / name).unlink(missing_ok=True)
        return
    schema = settings.postgres.schema
    with psycopg.connect(_url(settings), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    shutil.rmtree(settings.data_dir / "vectors", ignore_errors=True)


def _url(settings: Settings) -> str:
    where = cli_location(settings)
    return where[where.index("--url") + 1]


def _settings_code(settings: Settings) -> str:
    """Python that opens the same store in a new process."""
    url = _url(settings) if settings.postgres else None
    return f"Settings.resolve({str(settings.data_dir)!r}, {url!r})"


def _ledger_copy(service: MemoryService, directory: Path) -> Path:
    """The ledger as it is now, copied into a directory of its own."""
    with LifecycleLedger(service.settings, ledger_url=str(directory)) as copy:
        copy.copy_from(service.ledger)
    return directory


def _restore(settings: Settings, path: Path, **options: object) -> object:
    with MemoryService(settings) as probe:  # the master key, as the CLI loads it
        master = probe.log.master
    _lose_the_event_store(settings)
    with LifecycleLedger(settings) as ledger:
        return restore(
            path, settings, master, ledger, datetime.now(UTC), **options, open_store=MemoryService
        )


def _read_in_a_new_process(settings: Settings, item_id: str) -> dict:
    script = textwrap.dedent(f"""
        import json
        from memory_ledger.api import MemoryService
        from memory_ledger.config import Settings
        from memory_ledger.principal import Principal
        with MemoryService({_settings_code(settings)}) as service:
            alice = service.for_principal(Principal("acme", "alice"))
            state = alice.get({item_id!r})
            print(json.dumps({{"erased": state.erased, "text": state.text,
                              "recalled": [m.item_id for m in alice.recall()]}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_an_item_erased_after_the_backup_stays_erased_after_a_restore(
    store: Settings, tmp_path: Path
) -> None:
    token = f"zq{secrets.token_hex(8)}"
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        secret = alice.remember(fact("locker", f"code {token}")).item_id
        kept = alice.remember(fact("city", "Hangzhou")).item_id
        path = _backup(service, tmp_path)
        assert alice.forget(secret).completed
    result = _restore(store, path)
    assert result.status == "restored" and result.verified and result.erased_again == 1
    seen = _read_in_a_new_process(store, secret)
    assert seen["erased"] and seen["text"] is None and seen["recalled"] == [kept]
    assert store_bytes_contain(store, token) == []
    with LifecycleLedger(store) as ledger:
        [entry] = [e for e in ledger.entries() if e.entry_type == "restore"]
        assert entry.payload["items_erased_again"] == 1 and entry.payload["verified"] is True
        assert ledger.verify().ok


def test_an_expiry_and_a_redaction_after_the_backup_are_replayed(
    store: Settings, tmp_path: Path
) -> None:
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        guess = alice.remember(fact("employer", "Acme Robotics", origin="inferred")).item_id
        note = alice.remember(fact("note", "call Dr. Wang at 555-0199")).item_id
        kept = alice.remember(fact("city", "Hangzhou")).item_id
        path = _backup(service, tmp_path)
        [expired] = expire_due(service.job_context, datetime.now(UTC) + timedelta(days=91))
        assert expired.completed
        assert alice.redact(note, spans=["555-0199"]).completed
    result = _restore(store, path)
    # The redaction cannot be replayed (its spans are never recorded): the item, whose
    # backed-up words still hold the span, is erased rather than served as it was.
    assert set(result.erase_again) >= {guess, note}
    assert result.rewritten_after_backup == [note]
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        assert alice.get(guess).erased and alice.get(note).erased
        assert [m.item_id for m in alice.recall()] == [kept]
    assert store_bytes_contain(store, "555-0199") == []


def test_an_item_written_and_erased_after_the_backup_does_not_stop_the_restore(
    store: Settings, tmp_path: Path
) -> None:
    """The copy never held it: the replay has nothing to tombstone, and its verification
    finds it absent (it once failed on it, leaving the store restoring for good)."""
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        kept = alice.remember(fact("city", "Hangzhou")).item_id
        path = _backup(service, tmp_path)
        later = alice.remember(fact("locker", "code 4471")).item_id
        assert alice.forget(later).completed
    result = _restore(store, path)
    assert result.verified and later in result.erase_again and result.erased_again == 0
    with MemoryService(store) as service:
        assert [m.item_id for m in service.for_principal(ALICE).recall()] == [kept]


def test_a_restore_run_twice_gives_the_same_state(store: Settings, tmp_path: Path) -> None:
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", "code 4471")).item_id
        kept = alice.remember(fact("city", "Hangzhou")).item_id
        path = _backup(service, tmp_path)
        alice.forget(gone)
    _restore(store, path)
    again = _restore(store, path)
    assert again.status == "restored"
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        assert [m.item_id for m in alice.recall()] == [kept] and alice.get(gone).erased


def test_the_plan_says_what_will_be_replayed_and_changes_nothing(
    store: Settings, tmp_path: Path
) -> None:
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", "code 4471")).item_id
        path = _backup(service, tmp_path)
        alice.forget(gone)
        backup = verify(path, service.log.master)
        shown = plan(backup, service.ledger)
        assert shown.erase_again == [gone] and shown.tombstones_after_restore_point == 1
        assert alice.get(gone).erased  # the store is as it was
    assert [b.manifest.backup_id for b in list_backups(tmp_path / "bk")] == [shown.backup_id]


def test_a_store_being_restored_refuses_to_open(store: Settings, tmp_path: Path) -> None:
    with MemoryService(store):
        pass
    RestoreMarker(store).write({"backup_id": "bk-0"})
    with pytest.raises(ConfigurationError, match="being restored"):
        MemoryService(store)
    RestoreMarker(store).clear()
    MemoryService(store).close()


def test_damaged_newer_or_foreign_backups_are_refused(store: Settings, tmp_path: Path) -> None:
    with MemoryService(store) as service:
        service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
        path = _backup(service, tmp_path)
        master = service.log.master
    damaged = tmp_path / "damaged"
    shutil.copytree(path, damaged)
    sealed = damaged / SEALED_EVENTS
    sealed.write_bytes(sealed.read_bytes()[:-10])
    with pytest.raises(ConfigurationError, match="damaged"):
        verify(damaged, master)
    newer = tmp_path / "newer"
    shutil.copytree(path, newer)
    manifest = json.loads((newer / MANIFEST).read_text())
    (newer / MANIFEST).write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(ConfigurationError, match="format 99"):
        verify(newer, master)
    from memory_ledger.crypto import MasterKey

    with pytest.raises(ConfigurationError, match="another master key"):
        verify(path, MasterKey.generate())


def test_a_ledger_behind_the_backup_makes_the_restore_refuse(
    store: Settings, tmp_path: Path
) -> None:
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        alice.forget(alice.remember(fact("city", "Hangzhou")).item_id)  # the ledger has one
        older = _ledger_copy(service, tmp_path / "ledger-before")  # before the next forget
        alice.forget(alice.remember(fact("locker", "code 4471")).item_id)
        path = _backup(service, tmp_path)  # the backup holds the tombstone
        master = service.log.master
    _lose_the_event_store(store)
    ledger = LifecycleLedger(store, ledger_url=str(older))
    with ledger, pytest.raises(ConfigurationError, match="behind"):
        restore(path, store, master, ledger, datetime.now(UTC), open_store=MemoryService)
    assert RestoreMarker(store).read() is None  # refused before loading


def test_a_target_that_holds_a_store_is_refused_unless_forced(
    store: Settings, tmp_path: Path
) -> None:
    with MemoryService(store) as service:
        path = _backup(service, tmp_path)
        master = service.log.master
    with LifecycleLedger(store) as ledger, pytest.raises(ConfigurationError, match="--force"):
        restore(path, store, master, ledger, datetime.now(UTC), open_store=MemoryService)
    with LifecycleLedger(store) as ledger:
        assert restore(
            path, store, master, ledger, datetime.now(UTC), force=True, open_store=MemoryService
        ).verified


@pytest.mark.slow
@pytest.mark.parametrize("step", STEPS[:-1])
def test_a_restore_killed_after_any_step_is_finished_by_running_it_again(
    store: Settings, tmp_path: Path, step: str
) -> None:
    token = f"zq{secrets.token_hex(8)}"
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", f"code {token}")).item_id
        path = _backup(service, tmp_path)
        alice.forget(gone)
    _lose_the_event_store(store)
    script = textwrap.dedent(f"""
        from datetime import UTC, datetime
        from memory_ledger.config import Settings
        from memory_ledger.crypto import load_master_key
        from memory_ledger.ledger import LifecycleLedger
        from memory_ledger.api import MemoryService
        from memory_ledger.restore.restore import restore
        settings = {_settings_code(store)}
        master, _ = load_master_key(settings, allow_dev_key=False)
        with LifecycleLedger(settings) as ledger:
            restore(__import__("pathlib").Path({str(path)!r}), settings, master, ledger,
                    datetime.now(UTC), open_store=MemoryService)
    """)
    env = {**__import__("os").environ, KILL_AFTER_ENV: step}
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True)
    assert killed.returncode == -9, killed.stderr.decode()
    with pytest.raises(ConfigurationError, match="being restored"):
        MemoryService(store)  # nothing serves a half-restored store
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert finished.returncode == 0, finished.stderr.decode()
    seen = _read_in_a_new_process(store, gone)
    assert seen["erased"] and seen["recalled"] == []
    assert store_bytes_contain(store, token) == []
    with LifecycleLedger(store) as ledger:
        assert len([e for e in ledger.entries() if e.entry_type == "restore"]) == 1


def test_the_backup_and_restore_commands(store: Settings, tmp_path: Path) -> None:
    from factories import cli

    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", "code 4471")).item_id
    where = cli_location(store)
    code, output = cli("backup", "create", str(tmp_path / "bk"), *where, "--json")
    assert code == 0, output
    made = json.loads(output)
    assert made["restore_point"]["position"] >= 1 and "master" not in json.dumps(made["files"])
    code, output = cli("backup", "list", str(tmp_path / "bk"), *where, "--json")
    assert [b["backup_id"] for b in json.loads(output)["backups"]] == [made["backup_id"]]
    code, output = cli("backup", "verify", made["path"], *where, "--json")
    assert code == 0 and json.loads(output)["verified"] is True
    code, output = cli("forget", "-n", "acme/alice", "--memory", gone, *where, "--json")
    assert code == 0
    code, output = cli("restore", made["path"], "--dry-run", *where, "--json")
    assert code == 0 and json.loads(output)["erase_again"] == [gone]
    code, output = cli("restore", made["path"], *where)
    assert code != 0 and "--force" in output and "Traceback" not in output
    code, output = cli("restore", made["path"], "--force", *where, "--json")
    assert code == 0 and json.loads(output)["status"] == "restored"
    code, output = cli("backup", "verify", str(tmp_path / "nowhere"), *where)
    assert code != 0 and "not a readable backup" in output


def test_an_erasure_while_the_backup_is_taken_is_gone_after_the_restore(
    store: Settings, tmp_path: Path
) -> None:
    import threading

    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        ids = [
            alice.remember_many([fact(f"note_{n}_{i}", f"value {n} {i}") for i in range(50)])
            for n in range(20)
        ]
        doomed = [r.item_id for batch in ids[:5] for r in batch]
        errors: list[BaseException] = []

        def forget() -> None:
            try:
                for start in range(0, len(doomed), 10):
                    assert alice.forget(*doomed[start : start + 10]).completed
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=forget)
        worker.start()
        path = _backup(service, tmp_path)  # while the forgets run
        worker.join(60)
        assert errors == []
    _restore(store, path)
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        assert all(alice.get(i).erased for i in doomed)
        assert len(alice.recall(limit=10_000)) == 1000 - len(doomed)


def test_a_forgets_receipt_names_the_backups_that_still_hold_sealed_copies(
    store: Settings, tmp_path: Path
) -> None:
    from memory_ledger.jobs.backup_retention import destroy_expired

    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        before = alice.remember(fact("locker", "code 4471")).item_id
        first = _backup(service, tmp_path)
        second = _backup(service, tmp_path)
        after = alice.remember(fact("gym", "code 1180")).item_id
        report = alice.forget(before)
        [receipt] = [r for r in report.receipts if r.store == "backups"]
        assert receipt.status == "ok" and receipt.action == "restore_replays"
        assert receipt.evidence["backups_holding_sealed_copies"] == 2
        assert receipt.evidence["restore_replays_erasure"] is True
        ids = {first.name, second.name}
        assert {receipt.evidence["first_backup"], receipt.evidence["last_backup"]} == ids
        last = receipt.evidence["last_copy_destroyed_by"]
        assert isinstance(last, str) and last > datetime.now(UTC).isoformat()[:10]
        [later] = [r for r in alice.forget(after).receipts if r.store == "backups"]
        assert later.evidence["backups_holding_sealed_copies"] == 0  # written after both
        # Backup retention destroys them at their expiry, and the ledger records it.
        assert destroy_expired(service.job_context, datetime.now(UTC))["destroyed"] == 0
        gone = destroy_expired(service.job_context, datetime.now(UTC) + timedelta(days=31))
        assert gone["destroyed"] == 2 and not first.exists() and not second.exists()
        kinds = [e.entry_type for e in service.ledger.entries(first.name)]
        assert kinds == ["backup", "backup_destroyed"]
        [receipt] = [
            r for r in alice.forget(alice.remember(fact("x", "y")).item_id).receipts
            if r.store == "backups"
        ]  # fmt: skip
        assert receipt.evidence["backups_holding_sealed_copies"] == 0


def test_a_drill_passes_on_a_good_backup_and_records_its_report(
    store: Settings, tmp_path: Path
) -> None:
    from memory_ledger.restore.drill import drill

    token = f"zq{secrets.token_hex(8)}"
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", f"code {token}")).item_id
        alice.remember(fact("city", "Hangzhou"))
        _backup(service, tmp_path)
        alice.forget(gone)
        report = drill(service, datetime.now(UTC), open_store=MemoryService)
        assert report.passed, report.findings
        assert report.replayed == [gone] and report.requests_scanned == 1
        assert report.retained_sampled == 1 and report.files_scanned > 0
        [entry] = [e for e in service.ledger.entries() if e.entry_type == "drill"]
        assert entry.payload["outcome"] == "passed" and entry.payload["findings"] == 0
        markdown = Path(report.report_files[-1]).read_text()
        assert "PASSED" in markdown and token not in markdown
        assert alice.get(gone).erased  # the live store is untouched by the drill


def test_a_drill_after_every_kind_of_rewrite_passes_and_the_restore_erases_them(
    store: Settings, tmp_path: Path
) -> None:
    """Issue 35 (5): a turn whose mention of a forgotten phone was redacted, one whose
    content field was redacted and one with a span redacted, all after the backup: the
    drill expects each erased by the restore (it cannot replay a rewrite), passes, and
    the real restore that follows erases them and keeps the rest."""
    from memory_ledger.restore.drill import drill

    number = f"555 {secrets.randbelow(9000) + 1000}"
    code = f"zq{secrets.token_hex(8)}"  # long enough that no timestamp digits match it
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        phone = alice.remember(fact("phone", f"+1 {number}")).item_id
        mentioned = alice.remember(turn(f"call me at +1 {number} tomorrow", turn_id="t2")).item_id
        fielded = alice.remember(turn(f"my badge is {code}", turn_id="t3")).item_id
        spanned = alice.remember(turn(f"the gate code is {code}, thanks", turn_id="t4")).item_id
        kept = alice.remember(fact("city", "Hangzhou")).item_id
        path = _backup(service, tmp_path)
        forgot = {"kind": "predicate", "subject": "user", "predicate": "phone", "which": "all"}
        assert alice.forget_scope(forgot).completed
        assert alice.get(mentioned).text is not None  # rewritten, not erased
        assert alice.redact(fielded, ["content"]).completed
        assert alice.redact(spanned, spans=[code]).completed
        report = drill(service, datetime.now(UTC), path, open_store=MemoryService)
        assert report.passed, report.findings
        assert set(report.replayed) == {phone, mentioned, fielded, spanned}
    result = _restore(store, path)
    assert sorted(result.rewritten_after_backup) == sorted([mentioned, fielded, spanned])
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        assert all(alice.get(i).erased for i in (phone, mentioned, fielded, spanned))
        assert [m.item_id for m in alice.recall()] == [kept]


def test_a_drill_catches_an_erased_key_written_back_into_the_restored_store(
    store: Settings, tmp_path: Path
) -> None:
    import sqlite3

    from memory_ledger.restore.drill import (
        DrillReport,
        check_scratch,
        drop_scratch,
        finish,
        restore_into_scratch,
        scratch_settings,
    )

    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", "code 4471")).item_id
        path = _backup(service, tmp_path)
        wrapped = _wrapped_key_in(path, service, gone)
        alice.forget(gone)
        backup = verify(path, service.log.master)
        target = scratch_settings(store, tmp_path / "scratch")
        result = restore_into_scratch(service, backup, target, datetime.now(UTC), MemoryService)
        # A faulty restore: the erased item's key comes back.
        back = "UPDATE {} SET wrapped = {}, destroyed_at = NULL WHERE item_id = {}"
        if target.postgres is None:
            with sqlite3.connect(target.events_path) as conn:
                conn.execute(back.format("memory_keys", "?", "?"), (wrapped, gone))
        else:
            with psycopg.connect(_url(store), autocommit=True) as conn:
                table = f'"{target.postgres.schema}".memory_keys'
                conn.execute(back.format(table, "%s", "%s"), (wrapped, gone))
        report = DrillReport("drill-test", backup.manifest.backup_id, 0)
        try:
            check_scratch(service, target, result, report, MemoryService)
        finally:
            drop_scratch(target)
        report = finish(service, report, "test", datetime.now(UTC))
        assert not report.passed
        assert any(f.startswith("key_store") for f in report.findings), report.findings
        [entry] = [e for e in service.ledger.entries() if e.entry_type == "drill"]
        assert entry.payload["outcome"] == "failed"


def _wrapped_key_in(path: Path, service: MemoryService, item_id: str) -> bytes:
    import sqlite3

    from memory_ledger.restore.backup import open_events, read_manifest

    copy = path.parent / "peek.sqlite"
    copy.write_bytes(open_events(path, read_manifest(path), service.log.master))
    conn = sqlite3.connect(copy)
    [(wrapped,)] = conn.execute("SELECT wrapped FROM memory_keys WHERE item_id = ?", (item_id,))
    conn.close()
    copy.unlink()
    return bytes(wrapped)


def test_the_drill_command(store: Settings, tmp_path: Path) -> None:
    from factories import cli

    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", "code 4471")).item_id
        _backup(service, tmp_path)
        alice.forget(gone)
    where = cli_location(store)
    code, output = cli("drill", *where, "--json")
    assert code == 0, output
    assert json.loads(output)["outcome"] == "passed"
    # Issue 35 (18): a drill by hand is the drill job's last run, not `never run`.
    code, output = cli("jobs", "list", *where, "--json")
    [row] = [j for j in json.loads(output)["jobs"] if j["name"] == "drill"]
    assert row["last_run"]["outcome"] == "ok", row
    assert row["last_run"]["counts"] == {
        "drills": 1,
        "passed": 1,
        "findings": 0,
        "erasures_checked": 1,
    }
    with RunStore(store) as runs:  # a drill job running: one by hand does nothing
        run_id = runs.begin("drill")
        code, output = cli("drill", *where)
        assert code == 6 and "drill job is running" in output, output
        runs.finish("drill", str(run_id), "ok", {})
    code, output = cli("jobs", "run-once", "drill", *where, "--json")
    assert code == 0, output
    assert json.loads(output)["counts"] == {
        "drills": 1,
        "passed": 1,
        "findings": 0,
        "erasures_checked": 1,
    }
    code, output = cli("stores", *where, "--json")
    assert code == 0 and "backups" in output
    empty = Settings.resolve(tmp_path / "empty")
    with MemoryService(empty):
        pass
    code, output = cli("drill", "--data-dir", str(empty.data_dir))
    assert code == 5 and "no registered backup" in output


def test_a_missing_or_tampered_ledger_makes_the_restore_refuse(
    store: Settings, tmp_path: Path
) -> None:
    import sqlite3

    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        alice.forget(alice.remember(fact("city", "Hangzhou")).item_id)
        path = _backup(service, tmp_path)
        master = service.log.master
        copy = _ledger_copy(service, tmp_path / "ledger-now")
    _lose_the_event_store(store)
    # The ledger is lost: a new, empty one is where it was.
    empty = LifecycleLedger(store, ledger_url=str(tmp_path / "empty-ledger"))
    with empty, pytest.raises(ConfigurationError, match="behind"):
        restore(path, store, master, empty, datetime.now(UTC), open_store=MemoryService)
    conn = sqlite3.connect(copy / "ledger.sqlite")  # tampered by hand
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute("UPDATE ledger_entries SET payload = replace(payload, 'user_request', 'x')")
    conn.commit()
    conn.close()
    tampered = LifecycleLedger(store, ledger_url=str(copy))
    with tampered, pytest.raises(ConfigurationError, match="damaged"):
        restore(path, store, master, tampered, datetime.now(UTC), open_store=MemoryService)
    assert RestoreMarker(store).read() is None


def test_the_backups_store_holds_no_plaintext(store: Settings, tmp_path: Path) -> None:
    """The store contract's sealed-everywhere check, for backups: what a backup
    keeps at rest is ciphertext, not a word of the content."""
    with MemoryService(store) as service:
        tokens = [f"tok{secrets.token_hex(6)}" for _ in range(2)]
        alice = service.for_principal(ALICE)
        alice.remember_many([fact("passport", f"{tokens[0]} issued"), fact("pin", tokens[1])])
        _backup(service, tmp_path)
        held = b"".join(service.stores.get("backups").at_rest())
        assert len(held) > 4096
        for token in tokens:
            assert token.encode() not in held and token[3:].encode() not in held
        manifest = (next((tmp_path / "bk").glob("bk-*")) / MANIFEST).read_bytes()
        assert all(t.encode() not in manifest for t in tokens)


def test_key_destructions_after_the_backup_are_replayed_too(
    store: Settings, tmp_path: Path
) -> None:
    """Derived keys destroyed after the backup (a closed verification window's
    fingerprints, a whole-user forget's keyword-index key) are live again in the copy:
    the restore destroys them again, and indexes under new keyword-index keys."""
    from memory_ledger.jobs.verification_window import close_elapsed_windows

    bob = Principal("acme", "bob")
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        first = alice.forget(alice.remember(fact("locker", "code 4471")).item_id)
        assert first.completed and service.requests.residue.fingerprints(first.request_id)
        service.for_principal(bob).remember(fact("city", "Ningbo"))
        kept = alice.remember(fact("city", "Hangzhou")).item_id
        service.runner.catch_up()
        path = _backup(service, tmp_path)
        assert close_elapsed_windows(service.job_context, timedelta(0)) == [first.request_id]
        gone = service.for_principal(bob).forget_scope({"kind": "namespace"})
        assert gone.completed
    _restore(store, path)
    with MemoryService(store) as service:
        states = service.log.key_states()
        assert states[f"residue:{first.request_id}"][0] == 0  # no live generation
        assert states.get("index:acme/bob", (0, 0))[0] == 0
        alice = service.for_principal(ALICE)
        found = alice.context("Hangzhou", rank="keyword")
        assert [m.item_id for m in found.items] == [kept]  # indexed under a new key
        assert service.requests.residue.fingerprints(first.request_id) is None
    with LifecycleLedger(store) as ledger:
        [entry] = [e for e in ledger.entries() if e.entry_type == "restore"]
        assert entry.payload["derived_keys_destroyed"] >= 2


def test_a_drill_restores_an_agents_files_and_runs_without_what_was_forgotten(
    store: Settings, tmp_path: Path
) -> None:
    """Memory files and runs are items of the same log: a restore replays their erasure,
    and the kept ones read back."""
    from memory_ledger.restore.drill import drill

    token = f"zq{secrets.token_hex(8)}"
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        files = alice.files
        source = files.source("claude", session_id="s1", turn_id="t1")
        files.create("/memories/gone.md", f"note {token}", source)
        files.create("/memories/kept.md", "kept note", source)
        run = alice.runs.start("a task", source, state={"secret": token})
        _backup(service, tmp_path)
        files.forget("/memories/gone.md")
        alice.runs.forget(run.run_id)
        report = drill(service, datetime.now(UTC), open_store=MemoryService)
        assert report.passed, report.findings
        assert len(report.replayed) == 2 and report.retained_sampled == 1
        assert "kept note" in files.view("/memories/kept.md", source)
