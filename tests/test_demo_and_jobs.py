"""The README's first command, the background catch-up job, and snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from uuid import UUID

from factories import fact, file_bytes_contain, sqlite_files

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.jobs.catchup_loop import start_catchup_scheduler


def test_demo_runs_end_to_end_and_proves_the_erasure(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    # The demo is the product as a user gets it: the default embedder, not the tests' one.
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_LEDGER_EMBEDDER"}
    result = subprocess.run(
        [sys.executable, "-m", "memory_ledger.cli", "demo", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All checks passed." in result.stdout
    assert "FAIL" not in result.stdout
    files = sorted(p for p in data_dir.rglob("*") if p.is_file())  # vectors/ too
    assert file_bytes_contain(files, "Haisong") == []
    # Kept items are sealed like every other: in no file in clear (the demo recalls them).
    assert file_bytes_contain(files, "Kyoto") == []


def test_scheduler_keeps_projections_caught_up(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember_many([fact("city", "Hangzhou"), fact("team", "Rockets")])
    assert all(s.behind == 2 for s in service.runner.status())
    scheduler = start_catchup_scheduler(service.job_context, interval=0.05)
    try:
        caught_up = threading.Event()
        for _ in range(200):
            if all(s.behind == 0 for s in service.runner.status()):
                caught_up.set()
                break
            caught_up.wait(0.05)
        assert caught_up.is_set(), "the scheduled job never caught the projections up"
    finally:
        scheduler.shutdown(wait=True)


def test_snapshots_hold_no_plaintext(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    stored = alice.remember(fact("home_address", "18 Haisong Road"))
    app = service.log.app
    app.take_snapshot(UUID(stored.item_id))
    assert app.snapshots is not None
    [snapshot] = app.snapshots.recorder.select_events(UUID(stored.item_id))
    assert b"Haisong" not in snapshot.state
    restored = service.log.get(UUID(stored.item_id))
    assert service.log.read(restored) == {"value": "18 Haisong Road"}
    alice.forget(stored.item_id)
    assert alice.get(stored.item_id).text is None
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "Haisong") == []
