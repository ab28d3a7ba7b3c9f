"""The rows a plan keeps between plans (PoolRows) equal a full read of the catalog
after whatever happened in between: writes, a new version that supersedes another, a
suppression, a forget, a redaction, a rebuild of the projections. Each step checks
that the kept rows were brought forward (not read whole again), then compares them
with a pool read from scratch."""

from __future__ import annotations

from factories import fact, later, turn

from memory_ledger.api import MemoryService
from memory_ledger.forgetting.planning.pool import Pool, PoolRows, projected_position
from memory_ledger.principal import Principal

ALICE = Principal("acme", "alice")
BOB = Principal("acme", "bob")


def _same_as_full_read(service: MemoryService, kept: PoolRows, forward: bool) -> list[str]:
    service.runner.catch_up()
    with service.engine.connect() as conn:
        position = projected_position(conn)
        assert (kept.behind(ALICE.namespace, position) is not None) == forward
        cached = Pool(conn, service.log, ALICE.namespace, kept=kept)
        full = Pool(conn, service.log, ALICE.namespace)
        assert cached.rows == full.rows and cached.by_id == full.by_id
        assert kept.get(ALICE.namespace, position) is cached.rows
        return [r.item_id for r in full.rows]


def test_kept_rows_equal_a_full_read_after_every_change(service: MemoryService) -> None:
    alice, bob = service.for_principal(ALICE), service.for_principal(BOB)
    alice.remember_many([turn(f"note {n} about the fence", turn_id=f"n{n}") for n in range(30)])
    home = alice.remember(fact("home_address", "12 Elm Street", turn="t1")).item_id
    phone = alice.remember(fact("phone", "07700 900123", turn="t2")).item_id
    kept = PoolRows()
    ids = _same_as_full_read(service, kept, forward=False)  # cold: read whole
    assert home in ids and phone in ids
    said = alice.remember(turn("my number is 07700 900123", turn_id="t3")).item_id
    bob.remember(turn("another namespace's turn", turn_id="b1"))
    assert said in _same_as_full_read(service, kept, forward=True)
    moved = alice.remember(fact("home_address", "4 Harbour Lane", turn="t4", at=later(3))).item_id
    ids = _same_as_full_read(service, kept, forward=True)
    with service.engine.connect() as conn:  # the old address's standing changed too
        rows = Pool(conn, service.log, ALICE.namespace).by_id
    assert moved in ids and rows[home].status == "superseded"
    alice.suppress(phone)
    _same_as_full_read(service, kept, forward=True)
    alice.redact(said, spans=["07700 900123"])
    _same_as_full_read(service, kept, forward=True)
    alice.forget(moved)
    ids = _same_as_full_read(service, kept, forward=True)
    assert moved not in ids
    service.runner.rebuild()
    _same_as_full_read(service, kept, forward=False)  # same position: kept as they are
    _same_as_full_read(service, kept, forward=False)


def test_a_position_far_ahead_is_read_whole(service: MemoryService) -> None:
    alice = service.for_principal(ALICE)
    alice.remember(turn("first", turn_id="t1"))
    kept = PoolRows()
    kept.MAX_STEP = 3
    _same_as_full_read(service, kept, forward=False)
    alice.remember_many([turn(f"more {n}", turn_id=f"m{n}") for n in range(5)])
    _same_as_full_read(service, kept, forward=False)
