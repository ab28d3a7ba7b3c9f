"""The scheduled VACUUM gives free pages back, so later forgets scan fewer bytes."""

from __future__ import annotations

import sqlite3

import pytest
from factories import turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError
from memory_ledger.jobs.file_vacuum import file_space, ratio_setting, vacuum_fragmented


def _churned(alice: MemoryLedger, service: MemoryService) -> None:
    """A store whose projections file is mostly free pages, as a dropped table leaves
    them (a rebuild drops tables, a forget deletes rows)."""
    alice.remember_many([turn(f"turn {i} in Hangzhou", turn_id=f"t{i}") for i in range(50)])
    alice.recall()
    raw = sqlite3.connect(service.settings.projections_path)
    raw.execute("CREATE TABLE scratch (blob BLOB)")
    raw.executemany("INSERT INTO scratch VALUES (?)", [(bytes(4000),)] * 500)
    raw.commit()
    raw.execute("DROP TABLE scratch")
    raw.commit()
    raw.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_fragmented_file_is_rebuilt_and_keeps_its_rows(
    alice: MemoryLedger, service: MemoryService
) -> None:
    _churned(alice, service)
    path = service.settings.projections_path
    before = file_space(path)
    assert before is not None and before.free_ratio > 0.5, before
    size_before = path.stat().st_size
    recalled = sorted(m.item_id for m in alice.recall())

    rebuilt = vacuum_fragmented(service.job_context, ratio=0.3, min_free_bytes=0)

    assert [s.path for s in rebuilt] == [path]
    after = file_space(path)
    assert after is not None and after.free_pages == 0 and path.stat().st_size < size_before
    assert sorted(m.item_id for m in alice.recall()) == recalled
    assert (
        vacuum_fragmented(service.job_context, ratio=0.3, min_free_bytes=0) == []
    )  # nothing left to give


@pytest.mark.parametrize("backend", ["sqlite"])
def test_files_below_the_thresholds_are_left_alone(
    alice: MemoryLedger, service: MemoryService
) -> None:
    _churned(alice, service)
    path = service.settings.projections_path
    space = file_space(path)
    assert space is not None and space.free_pages > 0
    assert vacuum_fragmented(service.job_context, ratio=1.0, min_free_bytes=0) == []
    assert (
        vacuum_fragmented(service.job_context, ratio=0.01, min_free_bytes=space.free_bytes + 1)
        == []
    )
    assert file_space(path) == space


@pytest.mark.parametrize("backend", ["postgresql"])
def test_postgresql_is_left_to_its_autovacuum(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember(turn("hello"))
    assert vacuum_fragmented(service.job_context, ratio=0.0001, min_free_bytes=0) == []


@pytest.mark.parametrize("raw", ["0", "-0.1", "1.5", "half"])
def test_a_bad_ratio_setting_is_refused(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_VACUUM_FREE_RATIO", raw)
    with pytest.raises(ConfigurationError, match="MEMORY_LEDGER_VACUUM_FREE_RATIO"):
        ratio_setting(Settings.from_env())


def test_the_ratio_defaults_and_can_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORY_LEDGER_VACUUM_FREE_RATIO", raising=False)
    assert ratio_setting(Settings.from_env()) == 0.2
    monkeypatch.setenv("MEMORY_LEDGER_VACUUM_FREE_RATIO", "0.5")
    assert ratio_setting(Settings.from_env()) == 0.5
