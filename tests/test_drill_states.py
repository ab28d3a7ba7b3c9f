"""Drills on stores that hold every state an item can be in: a healthy store passes (a
false alarm is as serious a defect as a missed one), and a restored copy that serves an
item against its state, or in another state than the live store, fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from factories import T0, cli_location, fact, preference, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.jobs.decay import decay_pass
from memory_ledger.policy import POLICY_FILE
from memory_ledger.principal import Principal
from memory_ledger.restore.backup import create, verify
from memory_ledger.restore.drill import (
    DrillReport,
    check_scratch,
    drill,
    drop_scratch,
    finish,
    restore_into_scratch,
    scratch_settings,
)
from memory_ledger.restore.serving import STATES

ALICE = Principal("acme", "alice")
DECAY = """[retention]
version = 2
[decay]
period = "1d"
archive_below = 0.2
reinforce_step = 0.1
[[decay.class]]
name = "seats"
kind = "preference"
half_life = "10d"
"""


def _every_state(service: MemoryService, alice: MemoryLedger) -> dict[str, str]:
    """One item in each state; returns state -> item id (erased: forgotten after the
    backup, which the caller takes)."""
    old = alice.remember(fact("home_address", "12 Haisong Road")).item_id
    alice.remember(fact("home_address", "8 Binjiang Avenue", at=T0 + timedelta(days=2)))
    hidden = alice.remember(fact("employer", "Northwind")).item_id
    alice.suppress(hidden)
    seat = alice.remember(preference("seat", "aisle", origin="observed")).item_id
    _, start = service.retention.period_start(datetime.now(UTC) + timedelta(days=7))
    assert decay_pass(service.job_context, start + timedelta(hours=1))["archived"] == 1
    lapsed = fact("parking_spot", "B2-17")
    lapsed["retention"] = {"basis": "session", "expires_at": (T0 + timedelta(hours=1)).isoformat()}
    expired = alice.remember(lapsed).item_id
    current = alice.remember(turn("please book the 9am train")).item_id
    doomed = alice.remember(fact("locker", "code 4471")).item_id
    return {
        "current": current,
        "superseded": old,
        "suppressed": hidden,
        "archived": seat,
        "expired": expired,
        "erased": doomed,
    }


def _store(settings: Settings) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / POLICY_FILE).write_text(DECAY)


def test_a_drill_on_a_store_holding_every_state_passes(settings: Settings, tmp_path: Path) -> None:
    _store(settings)
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        items = _every_state(service, alice)
        create(settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path / "bk")
        assert alice.forget(items["erased"]).completed
        report = drill(service, datetime.now(UTC), open_store=MemoryService)
        assert report.passed, report.findings
        assert set(report.states) == set(STATES), report.states
        assert report.retained_sampled == len(STATES) - 1
        [entry] = [e for e in service.ledger.entries() if e.entry_type == "drill"]
        assert entry.payload["states"] == report.states


def test_a_drill_after_a_superseded_address_passes_through_the_cli(
    settings: Settings, tmp_path: Path
) -> None:
    """The case an operator hit: an address, a new address, a backup, a drill."""
    where = cli_location(settings)
    env = {**os.environ, "COLUMNS": "200"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "memory_ledger.cli", *args, *where]
        return subprocess.run(command, capture_output=True, text=True, env=env)

    for value in ("12 Haisong Road", "8 Binjiang Avenue"):
        done = cli(
            "remember", "-n", "acme/alice", "--kind", "fact", "--subject", "user",
            "--predicate", "home_address", "--value", value, "--turn-id", "t1",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert cli("backup", "create").returncode == 0
    done = cli("drill", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["outcome"] == "passed" and report["states"] == {"current": 1, "superseded": 1}


def test_a_restored_copy_serving_an_item_in_another_state_fails_the_drill(
    settings: Settings, tmp_path: Path
) -> None:
    """No false negatives either: a suppression lost in the copy, and a superseded fact
    served as current, are each a finding."""
    _store(settings)
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        items = _every_state(service, alice)
        backup_path = create(
            settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path / "bk"
        ).path
        backup = verify(backup_path, service.log.master)
        target = scratch_settings(settings, tmp_path / "scratch")
        (target.data_dir).mkdir(parents=True, exist_ok=True)
        (target.data_dir / POLICY_FILE).write_text(DECAY)
        result = restore_into_scratch(service, backup, target, datetime.now(UTC), MemoryService)
        with MemoryService(target, service.log.master) as copy:  # a faulty copy
            copy.for_principal(ALICE).unsuppress(items["suppressed"])
        report = DrillReport("drill-test", backup.manifest.backup_id, result.restore_position)
        try:
            check_scratch(service, target, result, report, MemoryService)
        finally:
            drop_scratch(target)
        report = finish(service, report, "test", datetime.now(UTC))
        assert not report.passed
        suppressed = items["suppressed"]
        assert any(suppressed in f and "suppressed in the live" in f for f in report.findings), (
            report.findings
        )


def test_changes_in_place_after_the_backup_are_no_finding_but_a_lost_suppression_is(
    settings: Settings, tmp_path: Path
) -> None:
    """Issue 35 (5): a suppression and an unsuppression after the backup change items in
    place (the catalog's position stays where they were recorded): the drill passes.
    A copy that lost a suppression made before the backup still fails it, and only on
    that item."""
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        kept_hidden = alice.remember(fact("employer", "Northwind")).item_id
        alice.suppress(kept_hidden)
        shown_later = alice.remember(fact("team", "Platform")).item_id
        alice.suppress(shown_later)
        hidden_later = alice.remember(turn("please book the 9am train")).item_id
        made = create(settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path)
        alice.unsuppress(shown_later)
        alice.suppress(hidden_later)
        report = drill(service, datetime.now(UTC), made.path, open_store=MemoryService)
        assert report.passed, report.findings
        assert report.states == {"suppressed": 2, "current": 1}

        backup = verify(made.path, service.log.master)
        target = scratch_settings(settings, tmp_path / "scratch")
        result = restore_into_scratch(service, backup, target, datetime.now(UTC), MemoryService)
        with MemoryService(target, service.log.master) as copy:  # a faulty copy
            copy.for_principal(ALICE).unsuppress(kept_hidden)
        faulty = DrillReport("drill-test", backup.manifest.backup_id, result.restore_position)
        try:
            check_scratch(service, target, result, faulty, MemoryService)
        finally:
            drop_scratch(target)
        assert faulty.findings == [
            f"item {kept_hidden} is current after the restore but suppressed in the live "
            "store, and nothing deciding it changed after the restore point"
        ]
