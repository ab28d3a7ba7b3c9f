"""Fingerprints of erased texts live only as long as the verification window."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from factories import fact, jobs_reread

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError
from memory_ledger.jobs.catchup_loop import start_catchup_scheduler
from memory_ledger.jobs.verification_window import CLOSED, close_elapsed_windows, window_setting


def _closing_receipts(service: MemoryService, request_id: str) -> list[dict]:
    return [
        e.payload
        for e in service.ledger.entries(request_id)
        if e.entry_type == "receipt" and e.payload["action"] == CLOSED
    ]


@pytest.mark.parametrize("backend", ["sqlite"])  # fingerprints exist where files are scanned
def test_a_window_closes_only_after_it_has_elapsed(
    alice: MemoryLedger, service: MemoryService
) -> None:
    report = alice.forget(alice.remember(fact("home_address", "18 Haisong Road")).item_id)
    window = timedelta(days=30)
    now = datetime.now(UTC)

    assert close_elapsed_windows(service.job_context, window, now + timedelta(days=29)) == []
    assert service.requests.residue.fingerprints(report.request_id) is not None

    assert close_elapsed_windows(service.job_context, window, now + timedelta(days=31)) == [
        report.request_id
    ]
    assert service.requests.residue.fingerprints(report.request_id) is None
    assert _closing_receipts(service, report.request_id) == [
        {
            "store": "files",
            "action": CLOSED,
            "targets": 0,
            "status": "ok",
            "evidence": {"fingerprints_destroyed": True},
            "attempt": 1,
        }
    ]
    assert "window has closed" in service.requests.verify(report.request_id).residue_scan
    # Closed once: a later run neither repeats it nor touches requests still open.
    assert close_elapsed_windows(service.job_context, window, now + timedelta(days=90)) == []
    assert service.ledger.verify().ok


def test_unfinished_requests_keep_their_window(alice: MemoryLedger, service: MemoryService) -> None:
    stored = alice.remember(fact("home_address", "18 Haisong Road"))
    dry = alice.forget_scope({"kind": "item", "item_ids": [stored.item_id]}, dry_run=True)
    assert (
        close_elapsed_windows(service.job_context, timedelta(0), datetime.now(UTC) + timedelta(1))
        == []
    )
    assert _closing_receipts(service, dry.request_id) == []


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_scheduler_closes_elapsed_windows(
    alice: MemoryLedger, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = alice.forget(alice.remember(fact("home_address", "18 Haisong Road")).item_id)
    monkeypatch.setenv("MEMORY_LEDGER_VERIFICATION_DAYS", "0")
    scheduler = start_catchup_scheduler(jobs_reread(service), interval=60)
    try:
        closed = threading.Event()
        for _ in range(100):
            if _closing_receipts(service, report.request_id):
                closed.set()
                break
            closed.wait(0.05)
        assert closed.is_set(), "the scheduled job never closed the elapsed window"
    finally:
        scheduler.shutdown(wait=True)
    assert service.requests.residue.fingerprints(report.request_id) is None


@pytest.mark.parametrize("raw", ["-1", "ten", "99999"])
def test_a_bad_window_setting_is_refused(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_VERIFICATION_DAYS", raw)
    with pytest.raises(ConfigurationError, match="MEMORY_LEDGER_VERIFICATION_DAYS"):
        window_setting(Settings.from_env())


def test_the_default_window_is_thirty_days() -> None:
    assert window_setting(Settings.from_env()) == timedelta(days=30)
