"""Nothing is signed over a ledger that does not hold (issue 35, items 6 and 7).

- `audit pack` (and every head) refuses a ledger whose hash chain `audit verify` calls
  broken, rather than sign a head and a statement over it.
- The `audit-head` job checks each new head against the last one it kept: after a
  rollback of the ledger (a copy of it restored: sizes 3, then 1 again) or a fork (the
  restored copy grown past the kept size with other entries), the run fails (exit 10)
  and appends nothing; `doctor` reports `audit_head_not_extended`, and the compliance
  console's ledger verdict carries it for the page's banner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from factories import fact
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryService
from memory_ledger.audit import verifier
from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.pack import build_pack
from memory_ledger.cli import app
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.errors import IntegrityError
from memory_ledger.http.app import create_app
from memory_ledger.jobs.audit_head import HEADS_FILE
from memory_ledger.ledger import LEDGER_FILE, LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.times import now


def _copy_db(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite file (its WAL included), as a backup restores it."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def test_no_pack_or_head_is_signed_over_a_chain_audit_verify_calls_broken(
    tmp_path: Path,
) -> None:
    """An entry's fields changed and its own hash recomputed: each entry still hashes to
    its stored hash (what the pack checked), but the next entry's link breaks."""
    settings = Settings.resolve(tmp_path)
    master = MasterKey.generate()
    with LifecycleLedger(settings) as ledger:
        auditor = Auditor(ledger, master)
        auditor.record_key()
        Auditor(ledger, MasterKey.generate()).record_key()
        auditor.record_key()  # audit-key-1, -2, -3: a chain of three entries
    conn = sqlite3.connect(settings.data_dir / LEDGER_FILE, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER ledger_entries_no_update")
        seq, rid, kind, at, payload, prev = conn.execute(
            "SELECT seq, request_id, entry_type, recorded_at, payload, prev_hash "
            "FROM ledger_entries WHERE seq = 2"
        ).fetchone()
        payload = payload.replace("master_key", "hardware_token")
        rehashed = verifier.chain_hash(prev, seq, rid, kind, at, payload)
        conn.execute(
            "UPDATE ledger_entries SET payload = ?, entry_hash = ? WHERE seq = 2",
            (payload, rehashed),
        )
    finally:
        conn.close()
    with LifecycleLedger(settings) as ledger:
        assert not ledger.verify().ok  # what `audit verify` says
        auditor = Auditor(ledger, master)
        with pytest.raises(IntegrityError, match=r"hash chain does not verify.*audit verify"):
            build_pack(auditor, "audit-key-1")
        with pytest.raises(IntegrityError, match="nothing was signed"):
            auditor.head()


def test_a_rollback_or_fork_fails_the_audit_head_job_and_doctor_and_the_console_say_so(
    tmp_path: Path,
) -> None:
    settings = Settings.resolve(tmp_path / "data")
    heads = settings.data_dir / HEADS_FILE
    ledger_file = settings.data_dir / LEDGER_FILE
    runner = CliRunner()
    where = ["--data-dir", str(settings.data_dir)]
    with MemoryService(settings) as service:
        service.for_principal(Principal("acme", "alice")).remember(fact("city", "Lyon"))
    assert runner.invoke(app, ["jobs", "run-once", "audit-head", *where]).exit_code == 0
    _copy_db(ledger_file, tmp_path / "older.sqlite")  # the ledger as one head was kept
    with MemoryService(settings) as service:  # the ledger grows: another key recorded
        Auditor(service.ledger, MasterKey.generate()).record_key()
    assert runner.invoke(app, ["jobs", "run-once", "audit-head", *where]).exit_code == 0
    sizes = [json.loads(line)["size"] for line in heads.read_text().splitlines()]
    assert sizes[1] > sizes[0]

    _copy_db(tmp_path / "older.sqlite", ledger_file)  # rolled back to the older copy
    kept_before = heads.read_bytes()
    done = runner.invoke(app, ["jobs", "run-once", "audit-head", *where])
    assert done.exit_code == IntegrityError.exit_code, done.output
    assert isinstance(done.exception, SystemExit)
    assert heads.read_bytes() == kept_before  # no smaller head after the larger one

    doctor = runner.invoke(app, ["doctor", "--json", *where])
    assert doctor.exit_code == IntegrityError.exit_code, doctor.output
    codes = [f["code"] for f in json.loads(doctor.output)["findings"]]
    assert codes == ["audit_head_not_extended"], doctor.output

    with MemoryService(settings) as service:  # a fork: past the kept size, other entries
        for _ in range(sizes[1]):
            Auditor(service.ledger, MasterKey.generate()).record_key()
        assert service.ledger.verify().ok and service.ledger.verify().entries_checked > sizes[1]
        store = TokenStore(settings, now)
        token = store.create("acme", "compliance")[1]
        with TestClient(create_app(service, store)) as client:
            verdict = client.get(
                "/compliance/api/ledger", headers={"Authorization": f"Bearer {token}"}
            ).json()
        store.close()
    assert verdict["ok"] and not verdict["kept_head"]["ok"]
    assert f"size {sizes[1]}" in verdict["kept_head"]["explanation"]
    assert "not a prefix" in verdict["kept_head"]["explanation"]
    done = runner.invoke(app, ["jobs", "run-once", "audit-head", *where])
    assert done.exit_code == IntegrityError.exit_code and heads.read_bytes() == kept_before

    heads.rename(tmp_path / "audit-heads-before-the-restore.jsonl")  # the documented repair
    assert runner.invoke(app, ["jobs", "run-once", "audit-head", *where]).exit_code == 0
    assert len(heads.read_text().splitlines()) == 1  # a new history, one head long
