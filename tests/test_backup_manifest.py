"""A backup's manifest is authenticated, a backup is named by its id or its path, and a
dry run counts only what a restore would erase again.

The manifest says what a restore trusts about the copy (its restore point and time, its
expiry, its id, its files' checksums, the wrapped file key): it carries an HMAC under a
key derived from the master key, and a manifest changed by hand is refused by `backup
verify`, `restore` (with `--dry-run` too) and `drill` alike, before anything is loaded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from factories import cli, cli_location, fact

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.errors import ConfigurationError, NotFound
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.restore.backup import (
    MANIFEST,
    SEALED_EVENTS,
    create,
    list_backups,
    open_verified,
    verify,
)
from memory_ledger.restore.restore import plan
from memory_ledger.restore.store import registered
from memory_ledger.restoring import RestoreMarker

ALICE = Principal("acme", "alice")
Change = Callable[[dict[str, Any]], None]


def _earlier(text: str) -> str:
    return (datetime.fromisoformat(text) - timedelta(days=1)).isoformat()


def _position(m: dict[str, Any]) -> None:
    m["restore_point"]["position"] -= 1


def _time(m: dict[str, Any]) -> None:
    m["restore_point"]["at"] = _earlier(m["restore_point"]["at"])


def _expiry(m: dict[str, Any]) -> None:
    m["expires_at"] = (datetime.fromisoformat(m["expires_at"]) + timedelta(days=3000)).isoformat()


def _backup_id(m: dict[str, Any]) -> None:
    m["backup_id"] = "bk-" + "0" * 16


def _checksum(m: dict[str, Any]) -> None:
    m["files"][0]["sha256"] = "0" * 64


CHANGES: dict[str, Change] = {
    "restore point position": _position,
    "restore point time": _time,
    "expires_at": _expiry,
    "backup_id": _backup_id,
    "file checksum": _checksum,
}


@pytest.fixture
def store(tmp_path: Path) -> Settings:
    return Settings.resolve(tmp_path / "data")


def _copy_with(path: Path, dest: Path, change: Change) -> Path:
    shutil.copytree(path, dest)
    manifest = json.loads((dest / MANIFEST).read_text())
    change(manifest)
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return dest


def _said(output: str) -> str:
    """The CLI's output as one line (a terminal wraps long messages)."""
    return " ".join(output.split())


def _commands(path: Path, where: list[str]) -> dict[str, tuple[str, ...]]:
    return {
        "backup verify": ("backup", "verify", str(path), *where),
        "restore --dry-run": ("restore", str(path), "--dry-run", *where),
        "restore": ("restore", str(path), "--force", *where),
        "drill": ("drill", "--backup", str(path), *where),
    }


@pytest.mark.parametrize("changed", list(CHANGES))
def test_a_changed_manifest_is_refused_by_verify_restore_and_drill(
    store: Settings, tmp_path: Path, changed: str
) -> None:
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", "code 4471")).item_id
        made = create(store, service.log.master, service.ledger, datetime.now(UTC), tmp_path / "bk")
        alice.forget(gone)
        late = alice.remember(fact("city", "Hangzhou")).item_id  # a restore would lose it
    where = cli_location(store)
    damaged = tmp_path / "damaged"
    shutil.copytree(made.path, damaged)
    (damaged / SEALED_EVENTS).write_bytes((damaged / SEALED_EVENTS).read_bytes()[:-10])
    damaged_codes = {name: cli(*args)[0] for name, args in _commands(damaged, where).items()}
    assert set(damaged_codes.values()) == {ConfigurationError.exit_code}, damaged_codes

    tampered = _copy_with(made.path, tmp_path / "tampered", CHANGES[changed])
    for name, args in _commands(tampered, where).items():
        code, output = cli(*args)
        assert code == damaged_codes[name], (name, output)
        said = _said(output)
        assert "does not authenticate under this master key: it was changed" in said, said
        assert "Traceback" not in output, (name, output)
    with MemoryService(store) as service:
        with pytest.raises(ConfigurationError, match="does not authenticate"):
            verify(tampered, service.log.master)
        alice = service.for_principal(ALICE)
        assert alice.get(late).text == "Hangzhou" and alice.get(gone).erased  # not restored
        kinds = [e.entry_type for e in service.ledger.entries()]
        assert "restore" not in kinds and "drill" not in kinds
    assert RestoreMarker(store).read() is None


def test_the_untouched_backup_verifies_and_a_re_serialised_manifest_too(
    store: Settings, tmp_path: Path
) -> None:
    """The MAC is of the manifest's content, not its bytes: indentation or key order
    changed by a tool that rewrites the JSON faithfully is not a change."""
    with MemoryService(store) as service:
        made = create(store, service.log.master, service.ledger, datetime.now(UTC))
        assert len(made.manifest.mac or "") == 64
        again = tmp_path / "again"
        shutil.copytree(made.path, again)
        raw = json.loads((again / MANIFEST).read_text())
        (again / MANIFEST).write_text(json.dumps(dict(reversed(list(raw.items())))))
        assert verify(again, service.log.master).manifest == made.manifest
        assert verify(made.path, service.log.master).manifest.backup_id == made.manifest.backup_id
        with pytest.raises(ConfigurationError, match="another master key"):
            verify(made.path, MasterKey.generate())


def test_a_backup_of_the_old_unauthenticated_format_is_refused_but_still_listed(
    store: Settings, tmp_path: Path
) -> None:
    """Format 1 had no MAC: nothing says its restore point or times are the ones it was
    taken with, so it is refused for verify and restore (with why), but it stays listed
    and registered, so receipts still name it and retention still destroys it."""
    with MemoryService(store) as service:
        made = create(store, service.log.master, service.ledger, datetime.now(UTC))

        def old(m: dict[str, Any]) -> None:
            m["format_version"] = 1
            m.pop("mac", None)

        raw = json.loads((made.path / MANIFEST).read_text())
        old(raw)
        (made.path / MANIFEST).write_text(json.dumps(raw, indent=2))
        with pytest.raises(ConfigurationError, match=r"format 1.*not authenticated"):
            verify(made.path, service.log.master)
        assert [b.manifest.backup_id for b in registered(store.data_dir)] == [
            made.manifest.backup_id
        ]
    code, output = cli("restore", made.manifest.backup_id, "--dry-run", *cli_location(store))
    assert code == ConfigurationError.exit_code, output
    assert "take a new backup" in _said(output).lower(), output
    code, output = cli("backup", "list", *cli_location(store), "--json")
    assert [b["backup_id"] for b in json.loads(output)["backups"]] == [made.manifest.backup_id]


def test_the_manifest_key_is_derived_for_its_purpose_alone() -> None:
    from memory_ledger.crypto import BACKUP_MANIFEST_LABEL

    key = MasterKey.generate()
    derived = key.subkey(BACKUP_MANIFEST_LABEL)
    assert derived == key.subkey(BACKUP_MANIFEST_LABEL) and len(derived) == 32
    assert derived != key.material and derived != key.subkey(b"memory-ledger/other/v1")
    assert derived != MasterKey.generate().subkey(BACKUP_MANIFEST_LABEL)


def test_restore_drill_and_verify_take_a_backup_by_its_id(store: Settings, tmp_path: Path) -> None:
    with MemoryService(store) as service:
        alice = service.for_principal(ALICE)
        gone = alice.remember(fact("locker", "code 4471")).item_id
    where = cli_location(store)
    code, output = cli("backup", "create", *where, "--json")
    assert code == 0, output
    backup_id = json.loads(output)["backup_id"]
    code, output = cli("backup", "create", str(tmp_path / "elsewhere"), *where, "--json")
    assert code == 0, output
    elsewhere = json.loads(output)["backup_id"]  # registered, outside DATA_DIR/backups
    code, output = cli("forget", "-n", "acme/alice", "--memory", gone, *where, "--json")
    assert code == 0, output
    for name in (backup_id, elsewhere):
        code, output = cli("backup", "verify", name, *where, "--json")
        assert code == 0 and json.loads(output)["backup_id"] == name, output
        code, output = cli("restore", name, "--dry-run", *where, "--json")
        assert code == 0 and json.loads(output)["erase_again"] == [gone], output
        code, output = cli("drill", "--backup", name, *where, "--json")
        assert code == 0 and json.loads(output)["backup_id"] == name, output
    code, output = cli("restore", backup_id, "--force", *where, "--json")
    assert code == 0 and json.loads(output)["status"] == "restored", output

    empty_dir = tmp_path / "not-a-backup"
    empty_dir.mkdir()
    for name in ("bk-0123456789abcdef", str(tmp_path / "nowhere"), str(empty_dir)):
        for args in (
            ("backup", "verify", name),
            ("restore", name, "--dry-run"),
            ("restore", name, "--force"),
            ("drill", "--backup", name),
        ):
            code, output = cli(*args, *where)
            assert code == NotFound.exit_code, (args, output)
            assert "not a readable backup" in _said(output), (args, output)
            assert "Errno" not in output and "Traceback" not in output, (args, output)


def test_the_resolver_takes_an_id_or_a_path(store: Settings, tmp_path: Path) -> None:
    from memory_ledger.restore.store import resolve

    with MemoryService(store) as service:
        made = create(store, service.log.master, service.ledger, datetime.now(UTC))
    backup_id = made.manifest.backup_id
    assert resolve(store.data_dir, backup_id) == made.path
    assert resolve(store.data_dir, str(made.path)) == made.path
    assert resolve(store.data_dir, made.path) == made.path
    with pytest.raises(NotFound, match="no backup bk-0123456789abcdef"):
        resolve(store.data_dir, "bk-0123456789abcdef")
    with pytest.raises(NotFound):  # an id only, when paths are not accepted (HTTP)
        resolve(store.data_dir, str(made.path), paths=False)
    assert resolve(store.data_dir, backup_id, paths=False) == made.path


def test_a_dry_run_counts_only_the_erasures_the_backup_does_not_hold(
    settings: Settings, tmp_path: Path
) -> None:
    """A and B remembered, A forgotten, a backup, B forgotten: the backup already holds
    A's tombstone, so a restore erases one item again, not two."""
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        first = alice.remember(fact("locker", "code 4471")).item_id
        second = alice.remember(fact("city", "Hangzhou")).item_id
        assert alice.forget(first).completed
        made = create(
            settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path / "bk"
        )
        assert alice.forget(second).completed
    where = cli_location(settings)
    code, output = cli("restore", str(made.path), "--dry-run", *where, "--json")
    assert code == 0, output
    planned = json.loads(output)
    assert planned["to_erase_again"] == 1 and planned["already_erased_in_backup"] == 1
    assert set(planned["erase_again"]) == {first, second}  # what the replay tombstones
    code, output = cli("restore", str(made.path), "--dry-run", *where)
    assert code == 0 and "1 item(s) to erase again" in _said(output), output
    assert "1 already erased in the backup" in _said(output), output
    with MemoryService(settings) as service:
        backup, data = open_verified(made.path, service.log.master)
        shown = plan(backup, service.ledger, data)
        assert shown.to_erase_again == 1 and shown.already_erased_in_backup == 1
        assert plan(backup, service.ledger).to_erase_again is None  # not counted without it


@pytest.mark.slow
def test_the_ops_routes_take_ids_refuse_a_changed_manifest_and_plan_honestly(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from http_server import server_on_scratch_store

    from memory_ledger.access import TokenStore
    from memory_ledger.times import now

    with server_on_scratch_store(tmp_path_factory, "http-manifest") as (base, settings):
        tokens = TokenStore(settings, now)
        ops = {"Authorization": f"Bearer {tokens.create('acme', 'ops')[1]}"}
        agent = {"Authorization": f"Bearer {tokens.create('acme/dana', 'agent', ['forget'])[1]}"}
        tokens.close()
        items = []
        for value in ("first", "second"):
            body = {"kind": "fact", "subject": "user", "predicate": f"p_{value}", "value": value,
                    "origin": "explicit", "sensitivity": "personal",
                    "provenance": {"writer": "t", "written_at": datetime.now(UTC).isoformat(),
                                   "session_id": "s1"}}  # fmt: skip
            made = httpx.post(f"{base}/v1/memories", json=body, headers=agent)
            assert made.status_code == 201, made.text
            items.append(made.json()["memories"][0]["item_id"])

        def forget(item: str) -> None:
            scope = {"scope": {"kind": "item", "item_ids": [item]}}
            filed = httpx.post(f"{base}/v1/forget-requests", json=scope, headers=agent)
            assert filed.json()["status"] == "completed", filed.text

        forget(items[0])
        backup_id = httpx.post(f"{base}/v1/ops/backups", json={}, headers=ops).json()["backup_id"]
        with LifecycleLedger(settings) as ledger:  # who took it: the ops token, as for restores
            [taken] = ledger.entries(backup_id)
            assert taken.payload["taken_by"].startswith("token:")
        checked = httpx.post(f"{base}/v1/ops/backups/{backup_id}/verify", headers=ops).json()
        assert checked["taken_by_this_store"] is True
        forget(items[1])
        planned = httpx.post(f"{base}/v1/ops/restores", headers=ops,
                             json={"backup_id": backup_id, "dry_run": True})  # fmt: skip
        assert planned.status_code == 200, planned.text
        assert planned.json()["to_erase_again"] == 1
        missing = httpx.post(f"{base}/v1/ops/backups/bk-0123456789abcdef/verify", headers=ops)
        assert missing.status_code == 404 and "no backup bk-0123456789abcdef" in missing.text
        assert str(settings.data_dir) not in missing.text  # no host path over HTTP
        manifest = settings.data_dir / "backups" / backup_id / MANIFEST
        raw = json.loads(manifest.read_text())
        _position(raw)
        manifest.write_text(json.dumps(raw))
        for method, url, body in (
            ("POST", f"/v1/ops/backups/{backup_id}/verify", None),
            ("POST", "/v1/ops/restores", {"backup_id": backup_id, "dry_run": True}),
            ("POST", "/v1/ops/restores", {"backup_id": backup_id}),
            ("POST", "/v1/ops/drills", {"backup_id": backup_id}),
        ):
            refused = httpx.request(method, f"{base}{url}", json=body, headers=ops, timeout=120)
            assert refused.status_code == 503, (url, refused.text)
            assert "does not authenticate" in refused.json()["detail"], (url, refused.text)
        assert httpx.get(f"{base}/v1/ready").json() == {"status": "ready"}
        assert [b.manifest.backup_id for b in list_backups(settings.data_dir / "backups")] == [
            backup_id
        ]
        with LifecycleLedger(settings) as ledger:
            assert "restore" not in [e.entry_type for e in ledger.entries()]


def test_an_expiry_edited_later_neither_keeps_the_backup_nor_the_receipts_promise(
    store: Settings, tmp_path: Path
) -> None:
    """Listing does not check a manifest's MAC, so retention and the forget receipts take
    the expiry the ledger recorded when the backup was taken, when it is earlier."""
    from memory_ledger.jobs.backup_retention import destroy_expired

    with MemoryService(store) as service:
        alice = service.for_principal(Principal("acme", "alice"))
        item = alice.remember(fact("locker", "code 9931")).item_id
        now = datetime.now(UTC)
        backup = create(store, service.log.master, service.ledger, now, keep_days=1)
        manifest = json.loads((backup.path / MANIFEST).read_text())
        _expiry(manifest)  # three thousand days later
        (backup.path / MANIFEST).write_text(json.dumps(manifest, indent=2))
        report = alice.forget(item)
        [receipt] = [r for r in report.receipts if r.store == "backups"]
        promised = datetime.fromisoformat(str(receipt.evidence["last_copy_destroyed_by"]))
        assert promised <= now + timedelta(days=1)
        assert destroy_expired(service.job_context, now + timedelta(days=2)) == {"destroyed": 1}
        assert not backup.path.exists() and registered(store.data_dir) == []
