"""A store left restoring always has a way forward (issue 35, item 4): `resume`
finishes the restore from the step it reached, `abort` puts back the store it replaced.

The restore is stopped right after each of its steps: in-process, by the same fault
injection the kill tests use, with the kill turned into an exception (nothing after it
runs); and once by a real kill -9 of the CLI. After either way forward the store serves,
holds what it should, and nothing erased is back (read, or in the store's bytes).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from factories import cli, cli_location, fact, reread, store_bytes_contain

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.restore import restore as restoring
from memory_ledger.restore.backup import create
from memory_ledger.restore.restore import KILL_AFTER_ENV, PREVIOUS_DIR, STEPS
from memory_ledger.restoring import RestoreMarker

ALICE = Principal("acme", "alice")
BEFORE_OPEN = STEPS[:-1]  # after "opened" the store serves: there is nothing left to do


class Killed(BaseException):
    """The process died here (BaseException: no `except Exception` absorbs it)."""


def _store_with_a_backup(settings: Settings, tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """A backup, then an erasure and a new memory after it."""
    token = f"zq{secrets.token_hex(8)}"
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        ids = {"gone": alice.remember(fact("locker", f"code {token}")).item_id}
        ids["kept"] = alice.remember(fact("city", "Hangzhou")).item_id
        path = create(
            settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path / "bk"
        ).path
        assert alice.forget(ids["gone"]).completed
        ids["later"] = alice.remember(fact("gym", "Tuesdays")).item_id  # not in the backup
    return path, token, ids


def _killed_restore(
    settings: Settings, path: Path, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def kill(pid: int, sig: int) -> None:
        raise Killed(step)

    with MemoryService(settings) as probe:
        master = probe.log.master
    with monkeypatch.context() as m:
        m.setenv(KILL_AFTER_ENV, step)
        m.setattr(os, "kill", kill)
        killing = reread(settings)  # the variable is read when settings are made
        with LifecycleLedger(killing) as ledger, pytest.raises(Killed):
            restoring.restore(
                path,
                killing,
                master,
                ledger,
                datetime.now(UTC),
                force=True,
                open_store=MemoryService,
            )
    with pytest.raises(ConfigurationError, match=r"--resume.*--abort"):
        MemoryService(settings)  # nothing serves a half-restored store, and it says why


def _serves(settings: Settings, token: str, ids: dict[str, str], recalled: set[str]) -> None:
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        assert {m.item_id for m in alice.recall()} == recalled
        assert alice.get(ids["gone"]).erased
    assert store_bytes_contain(settings, token) == []
    assert RestoreMarker(settings).read() is None
    assert not (settings.data_dir / PREVIOUS_DIR).exists()  # no second copy left behind


@pytest.mark.parametrize(
    ("backend", "step"),
    [*(("sqlite", s) for s in BEFORE_OPEN)]
    + [pytest.param("postgresql", s, marks=pytest.mark.postgres) for s in ("replayed",)],
    indirect=["backend"],
)
def test_a_restore_stopped_after_any_step_is_aborted_or_resumed_to_a_serving_store(
    settings: Settings, tmp_path: Path, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, token, ids = _store_with_a_backup(settings, tmp_path)
    with MemoryService(settings) as probe:
        master = probe.log.master

    _killed_restore(settings, path, step, monkeypatch)
    with LifecycleLedger(settings) as ledger:
        aborted = restoring.abort(
            settings, master, ledger, aborted_by="ops-dana", open_store=MemoryService
        )
        assert aborted["put_back"] is (step != "checked")
        [entry] = [e for e in ledger.entries() if e.entry_type == "restore_aborted"]
        assert entry.payload["aborted_by"] == "ops-dana"
    _serves(settings, token, ids, {ids["kept"], ids["later"]})  # as it was before

    _killed_restore(settings, path, step, monkeypatch)
    with LifecycleLedger(settings) as ledger:
        done = restoring.resume(
            settings, master, ledger, datetime.now(UTC), open_store=MemoryService
        )
        assert done.status == "restored" and done.verified
        assert len([e for e in ledger.entries() if e.entry_type == "restore"]) == 1
        with pytest.raises(ConfigurationError, match="not being restored"):
            restoring.abort(settings, master, ledger, open_store=MemoryService)
    _serves(settings, token, ids, {ids["kept"]})  # as the backup was, replayed


@pytest.mark.slow
def test_a_restore_killed_by_kill_9_is_aborted_by_the_command(tmp_path: Path) -> None:
    settings = Settings.resolve(tmp_path / "data")
    path, token, ids = _store_with_a_backup(settings, tmp_path)
    where = cli_location(settings)
    command = [sys.executable, "-m", "memory_ledger.cli", "restore", str(path), "--force", *where]
    killed = subprocess.run(
        command, env={**os.environ, KILL_AFTER_ENV: "replayed"}, capture_output=True, text=True
    )
    assert killed.returncode == -9, killed.stderr
    code, output = cli("recall", "-n", "acme/alice", *where)
    assert code == 3 and "restore --resume" in output and "Traceback" not in output
    code, output = cli("restore", str(path), "--abort", *where)
    assert code == 2 and "--abort alone" in output  # abort names no backup
    code, output = cli("restore", "--abort", "--by", "ops-dana", *where)
    assert code == 0 and "the store it replaced is back" in output, output
    _serves(settings, token, ids, {ids["kept"], ids["later"]})
    code, output = cli("restore", "--resume", *where)
    assert code == 3 and "not being restored" in output and "Traceback" not in output


def test_a_restore_an_earlier_version_left_is_resumed_not_aborted(tmp_path: Path) -> None:
    """It kept nothing aside: an abort would have nothing to put back, and says so."""
    settings = Settings.resolve(tmp_path / "data")
    with MemoryService(settings) as service:
        master = service.log.master
    RestoreMarker(settings).write({"backup_id": "bk-0123456789abcdef",
                                   "restore_id": "restore-0123456789abcdef",
                                   "done": ["checked", "loaded"]})  # fmt: skip
    with LifecycleLedger(settings) as ledger, pytest.raises(ConfigurationError, match="--resume"):
        restoring.abort(settings, master, ledger, open_store=MemoryService)
    assert RestoreMarker(settings).read() is not None  # nothing changed
    assert (settings.data_dir / "events.sqlite").exists()
