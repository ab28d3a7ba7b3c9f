"""Recovery commands recover: `rebuild` discards a damaged projections file and says so,
a discarded vector index is named on the CLI, and `verify` after an interrupted rebuild
catches up instead of reporting a false failure (or says "behind" when it cannot)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ALICE
from damage import cli, sql
from factories import fact, turn

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ProjectionsDamaged
from memory_ledger.projections.facts import facts

NS = ["--namespace", "acme/alice"]


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    return Settings.resolve(tmp_path / "data")


def fill(settings: Settings) -> tuple[str, str]:
    """A live fact, a consolidated turn whose conclusion was then suppressed (it must not
    be derived again after a discard), and a rebuilt vector index."""
    from memory_ledger.jobs.consolidation import Consolidator

    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        live = alice.remember(fact("city", "Hangzhou")).item_id
        alice.remember(turn("I work at Globex Corporation"))
        assert Consolidator(service.job_context).run_all() == (1, 0)
        (employer,) = alice.recall(predicate="employer")
        alice.forget_conclusion(employer.item_id)
        service.rebuild()
        return live, employer.item_id


def garble(path: Path, offset: int) -> None:
    with path.open("r+b") as handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(offset)
        handle.write((b"garbage!" * ((size - offset) // 8 + 1))[: size - offset])


@pytest.mark.parametrize("offset", [0, 4096], ids=["header", "pages"])
def test_rebuild_discards_a_damaged_projections_file(
    sqlite_settings: Settings, offset: int
) -> None:
    settings = sqlite_settings
    fill(settings)
    garble(settings.projections_path, offset)

    status = cli(settings, "status", fresh=True)
    assert status.code == 3 and "is damaged" in status.stderr
    assert "memory-ledger rebuild" in " ".join(status.stderr.split())
    if offset == 0:
        with pytest.raises(ProjectionsDamaged):
            MemoryService(settings)

    rebuilt = cli(settings, "rebuild", fresh=True)
    assert rebuilt.code == 0, rebuilt.stderr
    said = " ".join(rebuilt.stdout.split())
    assert f"discarded the damaged projections database {settings.projections_path}" in said
    assert "restored 1 consolidated turn id(s)" in said

    recalled = cli(settings, "recall", *NS, "--kind", "fact", "--json")
    assert recalled.code == 0 and [m["text"] for m in recalled.json] == ["Hangzhou"]
    # The suppressed conclusion is not derived again from its turn.
    assert cli(settings, "consolidate", "--json").json == {"written": 0, "refused": 0}
    again = cli(settings, "rebuild", "--json")  # nothing damaged now: nothing discarded
    assert again.code == 0 and again.json["discarded"] == []


def test_a_partial_rebuild_also_discards_a_damaged_file(sqlite_settings: Settings) -> None:
    settings = sqlite_settings
    fill(settings)
    garble(settings.projections_path, 0)
    rebuilt = cli(settings, "rebuild", "--projection", "facts", "--json")
    assert rebuilt.code == 0 and rebuilt.json["discarded"][0]["path"] == str(
        settings.projections_path
    )
    # The other projections replay from the empty file at their next catch-up.
    recalled = cli(settings, "recall", *NS, "--kind", "fact", "--json")
    assert [m["text"] for m in recalled.json] == ["Hangzhou"]


def _damage_a_segment(settings: Settings) -> None:
    segment = sorted((settings.data_dir / "vectors").glob("seg-*.sealed"))[0]
    garble(segment, 0)


def test_a_discarded_vector_index_is_said_on_the_cli(sqlite_settings: Settings) -> None:
    settings = sqlite_settings
    fill(settings)
    _damage_a_segment(settings)
    status = cli(settings, "status", "--json")
    assert status.code == 0
    assert status.json["vector_index"]["discarded"] == ["segment seg-0.sealed checksum mismatch"]
    cli(settings, "rebuild")
    _damage_a_segment(settings)
    human = cli(settings, "status", fresh=True)
    assert human.code == 0 and "vector index's files were discarded" in human.stderr
    cli(settings, "rebuild")
    _damage_a_segment(settings)
    rebuilt = cli(settings, "rebuild", "--json")
    assert rebuilt.code == 0
    assert rebuilt.json["vector_index_discarded"] == ["segment seg-0.sealed checksum mismatch"]
    assert cli(settings, "status", "--json").json["vector_index"]["rows"] == 2


def test_a_segment_discarded_by_another_command_is_said_then_and_in_status(
    sqlite_settings: Settings,
) -> None:
    """The command that finds a damaged segment is whichever reads the index first (here
    `context`, in a process of its own): it says so on stderr, and the discard is noted
    on disk, so a later `status` lists it too, until a full rebuild clears the note."""
    settings = sqlite_settings
    fill(settings)
    [segment] = sorted((settings.data_dir / "vectors").glob("seg-*.sealed"))
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one flipped bit: the size is right, the checksum is not
    segment.write_bytes(bytes(raw))
    reason = f"segment {segment.name} checksum mismatch"

    served = cli(settings, "context", *NS, "where does the user live", fresh=True)
    assert served.code == 0 and "Hangzhou" in served.stdout  # rebuilt from the log
    assert f"{reason}; in {segment.parent}" in served.stderr.replace("\n", " ")
    assert "rebuilt from the log" in " ".join(served.stderr.split())  # wrapped at any width
    status = cli(settings, "status", "--json", fresh=True)
    assert status.code == 0 and status.json["vector_index"]["discarded"] == [reason]
    assert status.json["vector_index"]["rows"] == 2  # what the log holds: served again
    human = cli(settings, "status", fresh=True)
    assert human.stderr.count("vector index's files were discarded") == 1
    assert segment.name in human.stderr
    rebuilt = cli(settings, "rebuild", "--json", fresh=True)
    assert rebuilt.code == 0 and rebuilt.json["vector_index_discarded"] == [reason]
    after = cli(settings, "status", "--json", fresh=True)
    assert after.json["vector_index"]["discarded"] == [] and after.stderr == ""


def _interrupted_rebuild(service: MemoryService, stop_at: int) -> None:
    """A rebuild killed after applying the log up to `stop_at`: its batches up to there
    are committed, the rest never ran (what a kill between batches leaves)."""
    head, batch = service.log.max_position, service.runner.batch_size
    service.log.max_position = lambda: stop_at  # type: ignore[method-assign]
    service.runner.batch_size = 1
    try:
        service.runner.rebuild()
    finally:
        service.log.max_position = head  # type: ignore[method-assign]
        service.runner.batch_size = batch


def test_verify_after_an_interrupted_rebuild_catches_up(settings: Settings) -> None:
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        erased = alice.remember(fact("home_address", "18 Haisong Road")).item_id
        alice.remember(fact("city", "Hangzhou"))
        request = alice.forget(erased).request_id
        _interrupted_rebuild(service, stop_at=1)  # before the tombstone
        with service.engine.connect() as conn:  # the erased item's row, unreadable
            rows = conn.execute(facts.select().where(facts.c.item_id == erased)).all()
        assert len(rows) == 1 and rows[0].sealed is None
    run = cli(settings, "verify", request, "--json", fresh=True)
    assert run.code == 0, run.stdout
    assert run.json["status"] == "completed" and run.json["failed_stores"] == []


def test_verify_says_behind_when_it_cannot_catch_up(settings: Settings) -> None:
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        erased = alice.remember(fact("home_address", "18 Haisong Road")).item_id
        live = alice.remember(fact("city", "Hangzhou")).item_id
        request = alice.forget(erased).request_id
        _interrupted_rebuild(service, stop_at=1)
    # A corrupted key entry of a live item blocks the catch-up past it.
    sql(settings, "UPDATE memory_keys SET wrapped = ? WHERE item_id = ?", (b"x" * 60, live))
    run = cli(settings, "verify", request, "--json", fresh=True)
    assert run.code == 7
    assert run.json["status"] == "projection_behind", run.json
    lagging = {r["store"] for r in run.json["receipts"] if r["status"] == "behind"}
    assert "facts" in lagging
    assert not [r for r in run.json["receipts"] if r["status"] == "failed"]
    assert "not caught up with the log" in run.json["message"]
