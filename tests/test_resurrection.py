"""Nothing deleted comes back through background consolidation."""

from __future__ import annotations

import pytest
from factories import fact, file_bytes_contain, sqlite_files, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import StaleDerivation
from memory_ledger.jobs.consolidation import Consolidator

SAID = "Hi! My address is 18 Haisong Road, Hangzhou. Please book me a window seat."


def test_consolidation_extracts_inferences_pinned_to_their_turn(
    alice: MemoryLedger, service: MemoryService
) -> None:
    said = alice.remember(turn(SAID, turn_id="t1"))
    written, refused = Consolidator(service.job_context).run_once(alice)
    assert (written, refused) == (1, 0), "the seat preference waits for a second turn"
    alice.remember(turn("Again, give me a window seat.", turn_id="t2"))
    assert Consolidator(service.job_context).run_once(alice) == (1, 0)
    by_predicate = {
        m.predicate: m for m in alice.recall(kind="fact") + alice.recall(kind="preference")
    }
    assert by_predicate["home_address"].text == "18 Haisong Road, Hangzhou"
    assert by_predicate["home_address"].origin == "inferred"
    assert by_predicate["seat"].origin == "observed"
    assert Consolidator(service.job_context).run_once(alice) == (0, 0), "each turn is read once"
    assert said.item_id


def test_race_consolidation_reads_then_deletion_lands_then_commit_is_refused(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    said = alice.remember(turn(SAID, turn_id="t1"))
    kept = alice.remember(fact("employer", "Acme Corp"))
    consolidator = Consolidator(service.job_context)
    proposals = consolidator.read(alice)  # 1. the job reads the turn (version 1)
    assert any(p.write for p in proposals)
    report = alice.forget(said.item_id)  # 2. the deletion lands
    assert report.completed
    written, refused = consolidator.commit(alice, proposals)  # 3. the job commits
    assert (written, refused) == (0, 1)  # the address (the seat waits for more evidence)
    assert [m.item_id for m in alice.recall()] == [kept.item_id]
    assert Consolidator(service.job_context).run_once(alice) == (0, 0)
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "Haisong") == []


def test_the_check_is_atomic_with_the_append(
    alice: MemoryLedger, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deletion lands after the API's own pre-check and before the append: the
    version check inside the append's transaction must still refuse the write."""
    said = alice.remember(turn(SAID, turn_id="t1"))
    [proposal, *_] = [p for p in Consolidator(service.job_context).read(alice) if p.write]
    original = MemoryLedger._check_inputs

    def check_then_delete(self: MemoryLedger, write):  # type: ignore[no-untyped-def]
        original(self, write)
        monkeypatch.setattr(MemoryLedger, "_check_inputs", original)
        self.forget(said.item_id)  # lands in the window between check and commit

    monkeypatch.setattr(MemoryLedger, "_check_inputs", check_then_delete)
    events = service.log.max_position()
    with pytest.raises(StaleDerivation, match="at commit"):
        alice.remember(proposal.write)
    assert service.log.max_position() == events + 1  # only the tombstone
    assert alice.recall() == []


def test_a_suppressed_conclusion_is_not_derived_again(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(turn("I work at Globex Corporation", turn_id="t4"))
    Consolidator(service.job_context).run_once(alice)
    [conclusion] = alice.recall(predicate="employer")
    alice.forget_conclusion(conclusion.item_id)
    assert Consolidator(service.job_context).run_once(alice) == (0, 0)
    assert alice.recall(predicate="employer") == []
    assert [m.text for m in alice.recall(kind="turn")] == ["I work at Globex Corporation"]


def test_an_erased_conclusion_is_not_derived_again(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(turn("I am allergic to peanuts", turn_id="t5"))
    Consolidator(service.job_context).run_once(alice)
    [conclusion] = alice.recall(predicate="allergy")
    assert alice.forget(conclusion.item_id).completed
    assert Consolidator(service.job_context).run_once(alice) == (0, 0)
    assert alice.recall(predicate="allergy") == []


def test_forget_conclusion_applies_to_inferences_only(alice: MemoryLedger) -> None:
    from memory_ledger.errors import InvalidTransition

    stated = alice.remember(fact("employer", "Acme Corp"))
    with pytest.raises(InvalidTransition, match="not an inference"):
        alice.forget_conclusion(stated.item_id)
    assert [m.text for m in alice.recall()] == ["Acme Corp"]
