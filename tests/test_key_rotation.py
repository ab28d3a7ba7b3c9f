"""Master-key rotation (`memory-ledger keys rotate`): every live data key, and every
backup, rewrapped under a new master key; erased items stay erased; the old key's
material destroyed; a rotation killed midway finished by running it again."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from factories import cli, cli_location, fact, reread

from memory_ledger.api import MemoryService
from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.verifier import check_head
from memory_ledger.config import Settings
from memory_ledger.crypto import DEV_KEY_FILE, MASTER_KEY_ENV, MasterKey, load_master_key
from memory_ledger.errors import (
    ConfigurationError,
    KeyRotated,
    KeyRotationInProgress,
    WrongMasterKey,
)
from memory_ledger.key_rotation import (
    NEW_MASTER_KEY_ENV,
    NEXT_DEV_KEY_FILE,
    rotate,
    rotation_lock,
)
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.restore.backup import create, verify
from memory_ledger.restore.restore import restore

ALICE = Principal("acme", "alice")


def _seed(service: MemoryService, tmp_path: Path) -> tuple[dict[str, str], str, Path]:
    """Three kept facts, one forgotten after a backup that holds it: (kept id -> value,
    the erased id, the backup's path)."""
    alice = service.for_principal(ALICE)
    kept = {alice.remember(fact(f"p{i}", f"value {i}")).item_id: f"value {i}" for i in range(3)}
    gone = alice.remember(fact("locker", "code 4471")).item_id
    made = create(
        service.settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path / "bk"
    )
    alice.forget(gone)
    return kept, gone, made.path


def _wrapped_of(service: MemoryService, item_id: str) -> list[bytes | None]:
    ring = service.log.keys_for([item_id])
    return [ring._wrapped[(item_id, g)] for g in ring.generations(item_id)]


def test_rotation_rewraps_every_live_key_and_every_backup_and_destroys_the_old_key(
    settings: Settings, tmp_path: Path
) -> None:
    with MemoryService(settings) as service:
        kept, gone, backup = _seed(service, tmp_path)
        old = service.log.master
        live, destroyed = service.log.key_counts()
        old_auditor = Auditor(service.ledger, old)
        kept_head = {**old_auditor.head().to_dict(), "public_key": old_auditor.key.public_key}
        assert _wrapped_of(service, gone) == [None]

    done = rotate(settings, "ops-alice", chunk_size=2)

    assert (done.keys_rewrapped, done.keys_verified, done.destroyed_keys_left) == (
        live,
        live,
        destroyed,
    )
    assert (done.backups_rewrapped, done.backups_not_rewrapped) == (1, 0)
    assert done.old_key_material == "destroyed" and done.old_key_bytes_found == 0
    new, _ = load_master_key(settings, allow_dev_key=False)
    assert new.material != old.material
    assert not (settings.data_dir / NEXT_DEV_KEY_FILE).exists()
    with pytest.raises(WrongMasterKey):
        MemoryService(settings, master=old)
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        assert {i: alice.get(i).text for i in kept} == kept  # readable before, and after
        assert alice.get(gone).erased and _wrapped_of(service, gone) == [None]  # not resurrected
        assert service.ledger.verify().ok
        rotation = service.ledger.entries_of_type(EntryType.KEY_ROTATION)[-1]
        assert rotation.payload == {
            "old_key_id": done.old_key_id,
            "new_key_id": done.new_key_id,
            "keys_rewrapped": live,
            "keys_verified": live,
            "destroyed_keys_left": destroyed,
            "backups_rewrapped": 1,
            "backups_not_rewrapped": 0,
            "old_key_material": "destroyed",
            "old_key_files_found": 0,
            "rotated_by": "ops-alice",
        }
        ledger_text = " ".join(e.payload_json for e in service.ledger.entries())
        for secret in (old, new):
            assert base64.b64encode(secret.material).decode() not in ledger_text
            assert secret.check_value() not in ledger_text
        audit_key = service.ledger.entries_of_type(EntryType.AUDIT_KEY)[-1].payload
        assert audit_key["replaces"] == old_auditor.key.key_id == kept_head["key_id"]
        assert audit_key["key_id"] == done.audit_key_id
    # A head signed before the rotation still verifies, with the public key it carries.
    assert check_head(kept_head, base64.b64decode(kept_head["public_key"])) == []
    # The backup taken before the rotation opens under the new key, and not the old one.
    verify(backup, new)
    with pytest.raises(ConfigurationError, match="another master key"):
        verify(backup, old)
    if settings.postgres is None:  # and is restored, its erasure replayed (both backends
        with LifecycleLedger(settings) as ledger:  # share restore: SQLite is enough here)
            assert restore(
                backup,
                settings,
                new,
                ledger,
                datetime.now(UTC),
                force=True,
                open_store=MemoryService,
            ).verified
        with MemoryService(settings) as service:
            alice = service.for_principal(ALICE)
            assert {i: alice.get(i).text for i in kept} == kept
            assert alice.get(gone).erased


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_process_opened_before_the_rotation_cannot_wrap_new_keys_under_the_old_key(
    settings: Settings,
) -> None:
    with MemoryService(settings) as stale:
        alice = stale.for_principal(ALICE)
        alice.remember(fact("city", "Hangzhou"))
        events = stale.log.max_position()
        rotate(settings, "ops-alice")
        with pytest.raises(KeyRotated, match="rotated"):
            alice.remember(fact("team", "blue"))
        assert stale.log.max_position() == events  # nothing stored
    with MemoryService(settings) as service:
        assert [m.text for m in service.for_principal(ALICE).recall()] == ["Hangzhou"]
    with rotation_lock(settings), pytest.raises(ConfigurationError, match="another"):
        rotate(settings, "ops-bob")  # one rotation at a time; this one changed nothing
    with MemoryService(settings) as service:
        assert len(service.ledger.entries_of_type(EntryType.KEY_ROTATION)) == 1


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_rotation_killed_between_chunks_is_finished_by_running_it_again(
    settings: Settings,
) -> None:
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        kept = {alice.remember(fact(f"p{i}", f"value {i}")).item_id: f"value {i}" for i in range(5)}
        live, _ = service.log.key_counts()
    script = textwrap.dedent(f"""
        import os, signal
        from memory_ledger.config import Settings
        from memory_ledger.key_rotation import rotate

        def after_chunk(rewrapped):
            if rewrapped >= 2:
                os.kill(os.getpid(), signal.SIGKILL)

        rotate(Settings.resolve({str(settings.data_dir)!r}), "ops-alice", chunk_size=1,
               after_chunk=after_chunk)
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    assert (settings.data_dir / NEXT_DEV_KEY_FILE).exists()  # the new key, durable
    with pytest.raises(KeyRotationInProgress, match="keys rotate"):
        MemoryService(settings)  # half rewrapped: nothing serves it
    code, output = cli("recall", "-n", "acme/alice", *cli_location(settings), "--json")
    assert code == KeyRotationInProgress.exit_code and "Traceback" not in output
    assert "keys rotate" in json.loads(output)["error"]

    code, output = cli("keys", "rotate", "--by", "ops-bob", *cli_location(settings), "--json")
    assert code == 0, output
    done = json.loads(output)
    assert done["resumed"] and done["keys_verified"] == live
    assert done["keys_rewrapped"] == live  # the 2 before the kill, and the rest
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        assert {i: alice.get(i).text for i in kept} == kept
        rotations = service.ledger.entries_of_type(EntryType.KEY_ROTATION)
        assert [e.payload["rotated_by"] for e in rotations] == ["ops-bob"]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_key_from_the_environment_needs_the_new_one_given_and_stays_the_operators(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(old.material).decode())
    with MemoryService(reread(settings)) as service:
        item = service.for_principal(ALICE).remember(fact("city", "Hangzhou")).item_id
    where = cli_location(settings)

    code, output = cli("keys", "rotate", *where, "--json")
    assert code == 3 and NEW_MASTER_KEY_ENV in json.loads(output)["error"]
    monkeypatch.setenv(NEW_MASTER_KEY_ENV, base64.b64encode(old.material).decode())
    code, output = cli("keys", "rotate", *where, "--json")
    assert code == 3 and "is the key in use" in json.loads(output)["error"]
    monkeypatch.setenv(NEW_MASTER_KEY_ENV, base64.b64encode(new.material).decode())
    code, output = cli("keys", "rotate", "--by", "not an actor!", *where, "--json")
    assert code == 2 and "--by" in json.loads(output)["error"]
    with MemoryService(reread(settings)) as service:  # every refusal above changed nothing
        assert service.for_principal(ALICE).get(item).text == "Hangzhou"

    # A development key file left beside the data with the same key is overwritten too.
    (settings.data_dir / DEV_KEY_FILE).write_text(os.environ[MASTER_KEY_ENV] + "\n")
    code, output = cli("keys", "rotate", *where, "--json")
    assert code == 0, output
    done = json.loads(output)
    assert done["old_key_material"] == "held_by_operator" and done["old_key_bytes_found"] == 0
    dev_key = (settings.data_dir / DEV_KEY_FILE).read_text().strip()
    assert base64.b64decode(dev_key) == new.material
    with pytest.raises(WrongMasterKey):
        MemoryService(reread(settings))  # the variable still names the old key
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(new.material).decode())
    monkeypatch.delenv(NEW_MASTER_KEY_ENV)
    with MemoryService(reread(settings)) as service:
        assert service.for_principal(ALICE).get(item).text == "Hangzhou"
        entry = service.ledger.entries_of_type(EntryType.KEY_ROTATION)[-1].payload
        assert entry["old_key_material"] == "held_by_operator"
        assert entry["rotated_by"] == "operator"
    assert os.environ[MASTER_KEY_ENV] != base64.b64encode(old.material).decode()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_rotation_stopped_while_rewriting_a_backup_finishes_it_when_run_again(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after a backup's new sealed file and manifest were written beside the
    old ones, before they replaced them: the next run puts them in place, and the
    backup opens under the new key."""
    import memory_ledger.restore.backup as backups

    with MemoryService(settings) as service:
        kept, gone, backup = _seed(service, tmp_path)
    real = backups.finish_rekey
    calls: list[Path] = []

    def stop_before_the_second(path: Path) -> None:
        calls.append(path)
        if len(calls) == 2:  # rekey's own, after writing the new files
            raise KeyboardInterrupt
        real(path)

    monkeypatch.setattr(backups, "finish_rekey", stop_before_the_second)
    with pytest.raises(KeyboardInterrupt):
        rotate(settings, "ops-alice")
    monkeypatch.setattr(backups, "finish_rekey", real)
    assert (backup / (backups.MANIFEST + backups.REKEY_SUFFIX)).exists()
    with pytest.raises(KeyRotationInProgress):
        MemoryService(settings)

    done = rotate(settings, "ops-alice")
    assert done.resumed and (done.backups_rewrapped, done.backups_not_rewrapped) == (1, 0)
    assert {p.name for p in backup.iterdir()} == {backups.MANIFEST, backups.SEALED_EVENTS}
    new, _ = load_master_key(settings, allow_dev_key=False)
    verify(backup, new)
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        assert {i: alice.get(i).text for i in kept} == kept and alice.get(gone).erased
