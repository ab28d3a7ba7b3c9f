"""A backup is bound to the store it was taken from (issue 35, item 4).

Every store has an id, kept with its lifecycle ledger (the part a restore never
replaces); every backup names it in its authenticated manifest. A restore, and its dry
run, refuse a backup another store took (one sharing the master key) before anything is
marked, unless the operator names that store, which the ledger then records. A backup
older than store ids is this store's when its ledger anchor is an entry of this ledger;
one whose anchor binds it to nothing is accepted only by name (its backup id).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from factories import cli, cli_location, fact

from memory_ledger.api import MemoryService
from memory_ledger.audit.signed import signed
from memory_ledger.config import Settings
from memory_ledger.crypto import DEV_KEY_FILE, MasterKey
from memory_ledger.errors import ConfigurationError
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.restore.backup import MANIFEST, create, manifest_mac, verify
from memory_ledger.restore.restore import plan, restore
from memory_ledger.restoring import RestoreMarker

ALICE = Principal("acme", "alice")


def _other_store(settings: Settings, tmp_path: Path) -> Settings:
    """A second store of the same backend that shares this one's master key."""
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(settings.data_dir / DEV_KEY_FILE, other / DEV_KEY_FILE)
    if settings.postgres is None:
        return Settings.resolve(other)
    where = cli_location(settings)
    return Settings.resolve(other, where[where.index("--url") + 1] + "?schema=other_store")


def test_another_stores_backup_is_refused_before_anything_is_marked_unless_named(
    settings: Settings, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    with MemoryService(settings) as service:
        own = service.for_principal(ALICE).remember(fact("city", "Hangzhou")).item_id
        master, here = service.log.master, service.ledger.store_id
    other = _other_store(settings, tmp_path)
    with MemoryService(other) as service:
        theirs = service.for_principal(ALICE).remember(fact("city", "Ningbo")).item_id
        made = create(other, service.log.master, service.ledger, now, tmp_path / "bk")
        foreign = service.ledger.store_id
        # Once that store's ledger has entries, this one cannot vouch for its backups.
        alice = service.for_principal(ALICE)
        alice.forget(alice.remember(fact("locker", "code 4471")).item_id)
        unvouched = create(other, service.log.master, service.ledger, now, tmp_path / "bk")
    assert made.manifest.store_id == foreign != here
    with LifecycleLedger(settings) as ledger:
        refusal = f"taken by another store \\({foreign}\\).*--accept-foreign {foreign}"
        with pytest.raises(ConfigurationError, match=refusal):
            plan(verify(made.path, master), ledger)  # the dry run says so too
        with pytest.raises(ConfigurationError, match=refusal):
            restore(made.path, settings, master, ledger, now, force=True, open_store=MemoryService)
        with pytest.raises(ConfigurationError, match="another store"):  # naming this store
            restore(
                made.path,
                settings,
                master,
                ledger,
                now,
                force=True,
                accept_foreign=here,
                open_store=MemoryService,
            )
        with pytest.raises(ConfigurationError, match="does not hold its ledger anchor"):
            restore(unvouched.path, settings, master, ledger, now, force=True,
                    accept_foreign=foreign, open_store=MemoryService)  # fmt: skip
    assert RestoreMarker(settings).read() is None  # nothing marked: the store serves
    with MemoryService(settings) as service:
        assert [m.item_id for m in service.for_principal(ALICE).recall()] == [own]
    with LifecycleLedger(settings) as ledger:
        done = restore(
            made.path,
            settings,
            master,
            ledger,
            now,
            force=True,
            accept_foreign=foreign,
            open_store=MemoryService,
        )
        assert done.status == "restored" and done.foreign_accepted == foreign
        [entry] = [e for e in ledger.entries() if e.entry_type == "restore"]
        assert entry.payload["foreign_accepted"] == foreign
        assert ledger.store_id == here  # the store keeps its own id
    with MemoryService(settings) as service:
        assert [m.item_id for m in service.for_principal(ALICE).recall()] == [theirs]


def _as_format_2(path: Path, master: MasterKey) -> None:
    """Rewrite a backup's manifest as this version's predecessor wrote it: format 2, no
    store id, authenticated and signed under the same key."""
    raw = json.loads((path / MANIFEST).read_text())
    raw.pop("store_id"), raw.pop("signature"), raw.pop("mac")
    raw["format_version"] = 2
    raw["mac"] = manifest_mac(raw, master)
    (path / MANIFEST).write_text(json.dumps(signed("backup manifest", raw, master)))


def test_a_backup_older_than_store_ids_restores_where_its_ledger_anchor_binds_it(
    tmp_path: Path,
) -> None:
    settings = Settings.resolve(tmp_path / "data")
    now = datetime.now(UTC)
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        unbound = create(settings, service.log.master, service.ledger, now, tmp_path / "bk")
        alice.forget(alice.remember(fact("locker", "code 4471")).item_id)  # a ledger entry
        bound = create(settings, service.log.master, service.ledger, now, tmp_path / "bk")
        master = service.log.master
    for made in (unbound, bound):
        _as_format_2(made.path, master)
        assert verify(made.path, master).manifest.store_id is None
    with LifecycleLedger(settings) as ledger:
        assert restore(
            bound.path, settings, master, ledger, now, force=True, open_store=MemoryService
        ).verified
        # Its store's ledger was empty: nothing says whose it is; named, it restores.
        with pytest.raises(ConfigurationError, match=f"--accept-foreign {unbound.path.name}"):
            restore(
                unbound.path, settings, master, ledger, now, force=True, open_store=MemoryService
            )
        assert RestoreMarker(settings).read() is None
        named = restore(unbound.path, settings, master, ledger, now, force=True,
                        accept_foreign=unbound.path.name, open_store=MemoryService)  # fmt: skip
        assert named.foreign_accepted == unbound.path.name


def test_a_store_id_is_made_once_and_a_ledger_older_than_store_ids_gets_one(
    settings: Settings,
) -> None:
    with LifecycleLedger(settings) as ledger:
        first = ledger.store_id
    with LifecycleLedger(settings) as ledger:
        assert ledger.store_id == first and first.startswith("st-")
    if settings.postgres is None:  # a ledger written before store ids: no identity table
        with sqlite3.connect(settings.data_dir / "ledger.sqlite") as conn:
            conn.execute("DROP TABLE store_identity")
    else:
        schema = f"{settings.postgres.schema}_ledger"
        with settings._pg_connect() as conn:
            conn.execute(f'DROP TABLE "{schema}".store_identity')
    with LifecycleLedger(settings) as ledger:
        upgraded = ledger.store_id
    with LifecycleLedger(settings) as ledger:
        assert ledger.store_id == upgraded != first


def test_backup_create_records_who_took_it(tmp_path: Path) -> None:
    settings = Settings.resolve(tmp_path / "data")
    with MemoryService(settings) as service:
        service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
        here = service.ledger.store_id
    where = cli_location(settings)
    code, output = cli("backup", "create", str(tmp_path / "bk"), "--by", "ops-dana", *where,
                       "--json")  # fmt: skip
    assert code == 0, output
    made = json.loads(output)
    assert made["store_id"] == here
    with LifecycleLedger(settings) as ledger:
        [entry] = ledger.entries(made["backup_id"])
        assert entry.payload["taken_by"] == "ops-dana"
    code, output = cli("backup", "verify", made["path"], *where, "--json")
    assert code == 0 and json.loads(output)["taken_by_this_store"] is True
