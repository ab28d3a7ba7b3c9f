"""A full rebuild replays the vector index in a second process: the same index as one
process builds, and a child that cannot do it leaves the work to the parent."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
from factories import fact, reread, turn

from memory_ledger.api import MemoryService
from memory_ledger.config import SIDE_BY_SIDE_ENV, Settings
from memory_ledger.embedders import HashingEmbedder
from memory_ledger.principal import Principal
from memory_ledger.projections.vector_index import VECTORS_DIR

ALICE = Principal("acme", "alice")


def _fill(service: MemoryService) -> list[str]:
    alice = service.for_principal(ALICE)
    writes = [fact(f"note_{i}", f"tea garden {i} by the lake") for i in range(40)]
    ids = [r.item_id for r in alice.remember_many([*writes, turn("I walked by the lake")])]
    alice.forget(ids[3])
    service.runner.catch_up()
    service.vectors.catch_up()
    return ids


def _index(service: MemoryService) -> tuple[dict, list[str]]:
    status = {k: v for k, v in service.vectors.status().items() if k != "namespaces_open"}
    found = service.for_principal(ALICE).context("tea garden by the lake", rank="vector")
    return status, sorted(m.item_id for m in found.items)


@pytest.mark.parametrize("side_by_side", ["1", "0"])
def test_a_rebuild_gives_the_index_one_process_builds(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    side_by_side: str,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the second process, on any machine
    monkeypatch.setenv(SIDE_BY_SIDE_ENV, side_by_side)  # read with the settings
    with MemoryService(reread(settings)) as service:
        ids = _fill(service)
        before = _index(service)
        shutil.rmtree(settings.data_dir / VECTORS_DIR)
        with caplog.at_level(logging.WARNING, logger="memory_ledger"):
            service.rebuild()
        after = _index(service)
    assert "instead" not in caplog.text  # the child did it (or, with "0", this process)
    assert after == before and before[0]["rows"] >= len(ids) - 2  # a turn may be unindexed
    assert ids[3] not in after[1]


def test_a_child_with_another_embedder_leaves_the_rebuild_to_the_parent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SIDE_BY_SIDE_ENV, "1")  # read with the settings
    settings = Settings.resolve(tmp_path / "data")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    # The environment names `hashing` (256): the store's embedder differs, so the
    # child must not build an index of the wrong kind.
    with MemoryService(settings, embedder=HashingEmbedder(64)) as service:
        _fill(service)
        rows = service.vectors.status()["rows"]
        shutil.rmtree(settings.data_dir / VECTORS_DIR)
        with caplog.at_level(logging.WARNING, logger="memory_ledger"):
            service.rebuild()
        status = service.vectors.status()
    assert "rebuilt in this process instead (skipped" in caplog.text
    assert status["dimension"] == 64 and status["rows"] == rows > 0
