"""Master keys, key entries and storage locations: each failure is clear and harmless."""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

import pytest
from factories import fact, preference, reread

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.crypto import MASTER_KEY_ENV, new_data_key, seal, unseal
from memory_ledger.errors import (
    BackendUnavailable,
    ConfigurationError,
    CorruptKeyEntry,
    WrongMasterKey,
)
from memory_ledger.principal import Principal

ALICE = Principal("acme", "alice")


def _digest(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file()
    }


def test_seal_binds_content_to_its_item_and_generation() -> None:
    key = new_data_key()
    sealed = seal(key, "item-a", 1, b"18 Haisong Road")
    assert unseal(key, "item-a", 1, sealed) == b"18 Haisong Road"
    with pytest.raises(CorruptKeyEntry):
        unseal(key, "item-b", 1, sealed)
    with pytest.raises(CorruptKeyEntry):
        unseal(key, "item-a", 2, sealed)


def test_master_key_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    material = secrets.token_bytes(32)
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(material).decode())
    with MemoryService(Settings.resolve(tmp_path)) as service:
        assert not service.dev_key_created
        service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
    assert not (tmp_path / "dev-master.key").exists()


@pytest.mark.parametrize("bad", ["not base64!", base64.b64encode(b"short").decode()])
def test_malformed_master_key_is_a_clear_error(
    bad: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MASTER_KEY_ENV, bad)
    with pytest.raises(ConfigurationError, match=MASTER_KEY_ENV):
        MemoryService(Settings.resolve(tmp_path))


def test_wrong_master_key_is_refused_and_changes_nothing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryService(settings) as service:
        service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
        events = service.log.max_position()
    before = _digest(settings.data_dir) if settings.postgres is None else None
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(secrets.token_bytes(32)).decode())
    with pytest.raises(WrongMasterKey, match="does not match"):
        MemoryService(reread(settings))
    monkeypatch.delenv(MASTER_KEY_ENV)
    if before is not None:
        assert _digest(settings.data_dir) == before
    with MemoryService(settings) as service:
        assert service.log.max_position() == events
        assert [m.text for m in service.for_principal(ALICE).recall()] == ["Hangzhou"]


def _corrupt_key(service: MemoryService, item_id: str) -> None:
    table, p = service.log.key_sql.keys_table, service.log.key_sql.param
    with service.log.recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute(
            f"UPDATE {table} SET wrapped = {p} WHERE item_id = {p}",
            (secrets.token_bytes(60), item_id),
        )


def test_corrupted_key_entry_is_reported_and_erasure_still_works(service: MemoryService) -> None:
    ledger = service.for_principal(ALICE)
    kept = ledger.remember(preference("seat", "window"))
    ledger.recall()
    broken = ledger.remember(fact("city", "Hangzhou"))
    _corrupt_key(service, broken.item_id)
    events = service.log.max_position()

    with pytest.raises(CorruptKeyEntry, match=broken.item_id):
        ledger.get(broken.item_id)
    with pytest.raises(CorruptKeyEntry, match=broken.item_id):
        ledger.recall()  # catch-up refuses to guess; the batch is not applied
    assert service.log.max_position() == events
    assert all(s.behind == 1 for s in service.runner.status())

    report = ledger.forget(broken.item_id)  # destroying a corrupted key is always allowed
    assert report.completed
    assert [m.item_id for m in ledger.recall()] == [kept.item_id]


def test_unsupported_url_scheme() -> None:
    with pytest.raises(ConfigurationError, match="unsupported database URL"):
        Settings.resolve(url="mysql://root@localhost/test")


def test_postgres_url_without_database() -> None:
    with pytest.raises(ConfigurationError, match="must name a database"):
        Settings.resolve(url="postgresql://postgres@127.0.0.1:5432")


def test_unreachable_database_is_a_clear_error_with_the_password_masked(tmp_path: Path) -> None:
    settings = Settings.resolve(tmp_path, "postgresql://alice:s3cret@127.0.0.1:1/nowhere")
    with pytest.raises(BackendUnavailable) as refused:
        MemoryService(settings)
    message = str(refused.value)
    assert "127.0.0.1:1/nowhere" in message and "nothing was changed" in message
    assert "s3cret" not in message
    assert not (tmp_path / "dev-master.key").exists()


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("not a directory")
    with pytest.raises(BackendUnavailable, match="not a directory"):
        MemoryService(Settings.resolve(target))


def test_a_foreign_file_in_place_of_the_event_store(tmp_path: Path) -> None:
    (tmp_path / "events.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(BackendUnavailable, match="not a readable SQLite database"):
        MemoryService(Settings.resolve(tmp_path))
    assert (tmp_path / "events.sqlite").read_bytes() == b"this is not a database" * 100


def test_settings_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_DATA_DIR", str(tmp_path / "d"))
    assert Settings.resolve().data_dir == (tmp_path / "d").resolve()
    monkeypatch.setenv("MEMORY_LEDGER_URL", "postgresql://u:p@db.example:6543/mem?schema=ml")
    settings = Settings.resolve()
    assert settings.backend == "postgresql"
    assert settings.postgres is not None
    assert (settings.postgres.port, settings.postgres.schema) == (6543, "ml")
    assert settings.describe() == "postgresql://u:***@db.example:6543/mem"


def test_no_new_dev_key_for_an_existing_store(tmp_path: Path) -> None:
    with MemoryService(Settings.resolve(tmp_path)) as service:
        service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
    (tmp_path / "dev-master.key").unlink()
    with pytest.raises(ConfigurationError, match="created with one"):
        MemoryService(Settings.resolve(tmp_path))
    assert not (tmp_path / "dev-master.key").exists()


def test_a_failed_open_leaves_no_dev_key(tmp_path: Path) -> None:
    key_dir = tmp_path / "keys"
    settings = Settings.resolve(key_dir, "postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(BackendUnavailable):
        MemoryService(settings)
    assert not (key_dir / "dev-master.key").exists()


def test_postgres_schema_holds_every_table(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    with MemoryService(Settings.resolve(tmp_path / "a", pg_url)) as public:
        public.for_principal(ALICE).remember(fact("city", "Hangzhou"))
    with MemoryService(Settings.resolve(tmp_path / "b", pg_url + "?schema=tenant_two")) as other:
        carol = other.for_principal(Principal("acme", "carol"))
        carol.remember(fact("city", "Ningbo"))
        assert [m.text for m in carol.recall()] == ["Ningbo"]
    with MemoryService(Settings.resolve(tmp_path / "a", pg_url)) as public:
        assert [m.text for m in public.for_principal(ALICE).recall()] == ["Hangzhou"]
        assert public.for_principal(Principal("acme", "carol")).recall() == []
    with psycopg.connect(pg_url) as conn:
        tables = {
            r[0]
            for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'tenant_two'")
        }
    expected = {
        "facts",
        "transcripts",
        "preferences",
        "projection_tracking",
        "memory_keys",
        "memory_ledger_meta",
        "memory_ledger_events",
        "memory_ledger_snapshots",
    }
    assert expected <= tables, tables
