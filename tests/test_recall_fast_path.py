"""Recall filters hits against a namespace's state kept in memory and brought up to date
by log position (memory_ledger/retrieval/usable.py). Each test recalls first, so the
state is warm, then changes something, and checks recall sees the change at once: an
item that became unusable is never returned, one that became usable is."""

from __future__ import annotations

from datetime import timedelta

from factories import T0, fact, later, preference, provenance, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.principal import Principal
from memory_ledger.retrieval.usable import RecallStates


def _ids(ledger: MemoryLedger, query: str, **options: object) -> list[str]:
    return [i.item_id for i in ledger.context(query, limit=50, **options).items]


def _fresh_entries(service: MemoryService, namespace: str) -> dict[str, object]:
    """The namespace's state read whole, as a first recall would."""
    with service.engine.connect() as conn:
        state = RecallStates().state(
            conn, service.log, namespace, service.retention, service.log.max_position()
        )
    return dict(state.entries)


def _kept_entries(service: MemoryService, namespace: str) -> dict[str, object]:
    with service.engine.connect() as conn:
        state = service.context_cache.states.state(
            conn, service.log, namespace, service.retention, service.log.max_position()
        )
    return dict(state.entries)


def test_changes_after_a_warm_recall_are_seen_at_once(
    alice: MemoryLedger, service: MemoryService
) -> None:
    seat = alice.remember(preference("seat", "window seat on long flights")).item_id
    city = alice.remember(fact("home_city", "Hangzhou", turn="t1")).item_id
    trip = alice.remember(turn("We are flying to Kyoto on 3 March.")).item_id
    assert {seat, city, trip} <= set(_ids(alice, "window seat Hangzhou Kyoto city"))

    alice.suppress(seat)
    assert seat not in _ids(alice, "window seat on long flights")
    alice.unsuppress(seat)
    assert seat in _ids(alice, "window seat on long flights")

    alice.forget(trip)
    assert trip not in _ids(alice, "flying Kyoto March")

    moved = alice.remember(fact("home_city", "Suzhou", turn="t2", at=later(3))).item_id
    returned = _ids(alice, "home city Hangzhou Suzhou")
    assert moved in returned and city not in returned  # the older fact was superseded

    alice.update(seat, {"value": "aisle seat", "provenance": provenance(turn="t3", at=later(4))})
    [item] = [i for i in alice.context("aisle seat").items if i.item_id == seat]
    assert item.text == "aisle seat" and item.version == 4  # recorded, (un)suppressed, updated
    assert _kept_entries(service, alice.namespace) == _fresh_entries(service, alice.namespace)


def test_other_namespaces_never_enter_a_warm_state(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(fact("passport_number", "E12345678", category="identity"))
    _ids(alice, "passport")
    bobs = bob.remember(fact("passport_number", "E12345678", category="identity")).item_id
    assert bobs not in _ids(alice, "passport E12345678")
    assert bobs not in _kept_entries(service, alice.namespace)
    assert bobs in _ids(bob, "passport E12345678")


def test_expiry_and_validity_follow_the_clock_without_a_write(
    alice: MemoryLedger, service: MemoryService
) -> None:
    ends = (T0 + timedelta(days=2)).isoformat()
    hotel = alice.remember(
        fact("hotel", "Kyoto Garden Hotel", retention={"basis": "session", "expires_at": ends})
    ).item_id
    service.clock = lambda: T0 + timedelta(days=1)
    assert hotel in _ids(alice, "hotel Kyoto Garden")
    service.clock = lambda: T0 + timedelta(days=3)
    assert hotel not in _ids(alice, "hotel Kyoto Garden")


def test_a_forget_drops_the_item_from_the_state_and_says_so(
    alice: MemoryLedger, service: MemoryService
) -> None:
    seat = alice.remember(preference("seat", "window seat")).item_id
    _ids(alice, "window seat")
    assert service.context_cache.states.holding([seat]) == 1
    report = alice.forget(seat)
    [receipt] = [r for r in report.receipts if r.store == "context_cache"]
    assert receipt.status == "ok" and receipt.evidence["recall_state_entries_left"] == 0
    assert service.context_cache.states.holding([seat]) == 0


def test_another_process_changes_are_seen_by_log_position(
    alice: MemoryLedger, service: MemoryService
) -> None:
    seat = alice.remember(preference("seat", "window seat")).item_id
    tea = alice.remember(preference("drink", "green tea")).item_id
    assert {seat, tea} <= set(_ids(alice, "window seat green tea"))
    with MemoryService(service.settings, master=service.log.master) as other:
        theirs = other.for_principal(Principal.from_namespace(alice.namespace))
        theirs.forget(seat)
        theirs.suppress(tea)
        new = theirs.remember(fact("employer", "Globex Corporation")).item_id
    returned = _ids(alice, "window seat green tea Globex employer")
    assert seat not in returned and tea not in returned and new in returned
    assert _kept_entries(service, alice.namespace) == _fresh_entries(service, alice.namespace)
