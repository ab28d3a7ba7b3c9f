"""Cells taken from the events a catch-up opened (`Opened`) read as opening them would.

A catch-up opens each event once and hands the fields to the projections that read
their rows' sealed cells back. Taken from there, a cell must still be unreadable once
its key is destroyed (a forget that committed after the batch was decoded), and a cell
that is not the very blob of an opened event must be opened with its key as before.
"""

from __future__ import annotations

from factories import fact

from memory_ledger.api import MemoryService
from memory_ledger.keystore import KeyDestruction
from memory_ledger.principal import Principal
from memory_ledger.projections.cells import Cells, Opened
from memory_ledger.projections.events import decode_batch

ALICE = Principal("acme", "alice")


def _opened(service: MemoryService) -> tuple[Opened, list]:  # type: ignore[type-arg]
    events = decode_batch(service.log, service.log.notifications(0, 100))
    opened = Opened()
    opened.remember(events)
    return opened, [e for e in events if e.sealed is not None]


def test_a_cell_of_an_opened_event_is_taken_from_it_not_opened(service: MemoryService) -> None:
    ledger = service.for_principal(ALICE)
    ledger.remember(fact("home_city", "Lyon"))
    opened, events = _opened(service)
    cell = (events[0].item_id, events[0].key_generation, events[0].sealed)
    calls: list[str] = []
    real = service.log.open_fields

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[1])
        return real(*args, **kwargs)

    service.log.open_fields = counting  # type: ignore[method-assign]
    assert Cells(service.log, opened).open([cell], "value") == ["Lyon"]
    assert calls == []  # taken from the opened event
    assert Cells(service.log).open([cell], "value") == ["Lyon"]
    assert calls == [events[0].item_id]  # without it: opened with the key


def test_a_cell_whose_key_was_destroyed_after_opening_reads_as_erased(
    service: MemoryService,
) -> None:
    ledger = service.for_principal(ALICE)
    kept = ledger.remember(fact("home_city", "Lyon")).item_id
    gone = ledger.remember(fact("employer", "Northwind")).item_id
    opened, events = _opened(service)
    cells = [(e.item_id, e.key_generation, e.sealed) for e in events]
    assert len(opened) == 2
    service.log.save([], destroy=[KeyDestruction(gone, None)])  # after the batch was opened
    reader = Cells(service.log, opened)
    by_item = dict(zip([c[0] for c in cells], reader.open(cells, "value"), strict=True))
    assert by_item == {kept: "Lyon", gone: None}
    ring = reader.ring([gone])
    assert reader.open_one(ring, next(c for c in cells if c[0] == gone), "value") is None


def test_opened_holds_at_most_its_limit_and_drops_the_oldest(service: MemoryService) -> None:
    ledger = service.for_principal(ALICE)
    for i in range(3):
        ledger.remember(fact(f"note_{i}", f"value {i}"))
    events = [
        e
        for e in decode_batch(service.log, service.log.notifications(0, 100))
        if e.sealed is not None
    ]
    opened = Opened(limit=2)
    opened.remember(events)
    first, *rest = events
    assert len(opened) == 2
    assert opened.get(first.item_id, first.key_generation or 0, first.sealed or "") is None
    assert all(
        opened.get(e.item_id, e.key_generation or 0, e.sealed or "") == e.fields for e in rest
    )
