"""The near-duplicate merge (issue 12, item 3): one derived item per memory told several
times, with its inputs recorded, the inputs suppressed, and the resurrection guard."""

from __future__ import annotations

from uuid import UUID

from factories import fact, later, preference

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.jobs.dedupe import Deduper, merge_duplicates
from memory_ledger.policy.retention import attributes_of, inherited_retention


def allergy(value: str, turn: str, **extra: object) -> dict:
    return fact("allergy", value, turn=turn, category="health", **extra)


def live(ledger: MemoryLedger) -> dict[str, str]:
    return {
        m.item_id: m.text for m in ledger.recall(kind="fact") + ledger.recall(kind="preference")
    }


def test_duplicates_merge_into_one_derived_item(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    a = alice.remember(allergy("Peanuts", "t1", origin="inferred", confidence=0.6))
    b = alice.remember(allergy("peanuts.", "t2"))
    c = alice.remember(
        allergy(
            "PEANUTS", "t3", sensitivity="restricted",
            retention={"basis": "consent", "expires_at": later(3650).isoformat()},
        )
    )  # fmt: skip
    other = alice.remember(allergy("peanut oil", "t4"))
    theirs = bob.remember(allergy("peanuts", "t1"))

    counts = merge_duplicates(service.job_context)
    assert counts["merged"] == 1 and counts["inputs"] == 3 and counts["refused"] == 0
    mine = live(alice)
    [merged_id] = set(mine) - {other.item_id}
    assert mine[merged_id] == "PEANUTS", "the newest wording"
    merged = service.log.get(UUID(merged_id))
    assert [(r["item_id"], r["version"]) for r in merged.derived_from] == [
        (a.item_id, 1),
        (b.item_id, 1),
        (c.item_id, 1),
    ]  # the evidence count: 3
    assert (merged.origin, merged.confidence, merged.sensitivity) == ("explicit", 1.0, "restricted")
    # It ends no later than its first member would, protect list aside: here the
    # inferred member's class (90 days), before the third's own expiry (ten years).
    members = [attributes_of(service.log.get(UUID(i.item_id))) for i in (a, b, c)]
    assert merged.retention == inherited_retention(service.retention, members)
    assert merged.retention["expires_at"] < later(3650).isoformat()
    assert merged.provenance["writer"] == "dedupe" and merged.provenance["turn_id"] == "t3"
    for item_id in (a.item_id, b.item_id, c.item_id):
        state = alice.get(item_id)
        assert state.suppressed and not state.erased
        assert service.log.events_of(UUID(item_id))[-1].reason == "merged"
    assert list(live(bob)) == [theirs.item_id], "namespaces are never merged together"


def test_merge_run_twice_writes_nothing_new(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember(allergy("Peanuts", "t1"))
    alice.remember(allergy("peanuts", "t2"))
    alice.remember(preference("seat", "Window"))
    alice.remember(preference("seat", "window", scope="session:s9"))  # another scope
    assert merge_duplicates(service.job_context)["merged"] == 1
    events = service.log.max_position()
    assert merge_duplicates(service.job_context) == {
        "groups": 0, "merged": 0, "inputs": 0, "refused": 0, "invalid": 0, "kept_changed": 0,
    }  # fmt: skip
    assert service.log.max_position() == events
    assert len(live(alice)) == 3


def test_preferences_merge_with_their_strength(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember(preference("seat", "Window", origin="observed", strength=0.4))
    alice.remember(preference("seat", "window ", origin="observed", strength=0.7))
    merge_duplicates(service.job_context)
    [seat] = alice.recall(kind="preference")
    assert (seat.text, seat.origin, seat.strength) == ("window ", "observed", 0.7)


def test_an_input_erased_mid_merge_refuses_the_merge(
    alice: MemoryLedger, service: MemoryService
) -> None:
    a = alice.remember(allergy("Peanuts", "t1"))
    b = alice.remember(allergy("peanuts", "t2"))
    job = Deduper(service.job_context)
    groups = job.read(alice)  # 1. the job reads both
    assert len(groups) == 1 and "Peanuts" not in repr(groups)
    assert alice.forget(a.item_id).completed  # 2. one is erased
    events = service.log.max_position()
    counts = job.commit(alice, groups)  # 3. the merge is refused
    assert (counts["merged"], counts["refused"]) == (0, 1)
    assert service.log.max_position() == events, "nothing was written or suppressed"
    assert list(live(alice)) == [b.item_id]


def test_an_input_changed_mid_merge_refuses_it_at_commit(
    alice: MemoryLedger, service: MemoryService
) -> None:
    a = alice.remember(allergy("Peanuts", "t1"))
    alice.remember(allergy("peanuts", "t2"))
    job = Deduper(service.job_context)
    groups = job.read(alice)
    alice.update(a.item_id, {"value": "Tree nuts", "provenance": fact("x", "y")["provenance"]})
    assert job.commit(alice, groups)["refused"] == 1
    assert sorted(live(alice).values()) == ["Tree nuts", "peanuts"]


def test_forgetting_an_input_erases_the_merged_item(
    alice: MemoryLedger, service: MemoryService
) -> None:
    a = alice.remember(allergy("Peanuts", "t1"))
    alice.remember(allergy("peanuts", "t2"))
    alice.remember(allergy("shellfish", "t3"))
    merge_duplicates(service.job_context)
    [merged_id] = [i for i, text in live(alice).items() if text != "shellfish"]
    report = alice.forget(a.item_id)
    assert report.completed and merged_id in report.cascaded
    assert alice.get(merged_id).erased
    assert list(live(alice).values()) == ["shellfish"]


def test_a_merged_item_merges_again_with_a_later_duplicate(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(allergy("Peanuts", "t1"))
    alice.remember(allergy("peanuts", "t2"))
    merge_duplicates(service.job_context)
    [first] = live(alice)
    alice.remember(allergy("peanuts!", "t3"))
    assert merge_duplicates(service.job_context)["merged"] == 1
    [second] = live(alice)
    cited = [r["item_id"] for r in service.log.get(UUID(second)).derived_from]
    assert first in cited and len(cited) == 2
