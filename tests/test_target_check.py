"""A damaged or tampered projection row cannot steer a forget into another user's data:
targets are confirmed against the event log before any key is destroyed."""

from __future__ import annotations

import json

import pytest
from factories import cli, fact, turn
from sqlalchemy import update

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.errors import ProjectionMismatch
from memory_ledger.projections.catalog import catalog


def _tamper(service: MemoryService, item_id: str, **values: str) -> None:
    service.runner.catch_up()  # the row exists before it is changed
    with service.engine.begin() as conn:
        conn.execute(update(catalog).where(catalog.c.item_id == item_id).values(**values))


def _refusals(service: MemoryService) -> list[dict]:
    statuses = service.ledger.latest_statuses()
    refused = [r for r, status in statuses.items() if status == "refused"]
    return [
        e.payload for r in refused for e in service.ledger.entries(r) if e.entry_type == "refusal"
    ]


def test_a_catalog_row_moved_to_another_namespace_is_not_erased(
    service: MemoryService, alice: MemoryLedger, bob: MemoryLedger
) -> None:
    victim = alice.remember(fact("home_address", "18 Haisong Road")).item_id
    bob.remember(fact("seat", "aisle"))
    _tamper(service, victim, namespace=bob.namespace)

    with pytest.raises(ProjectionMismatch) as refused:
        bob.forget_scope({"kind": "namespace"})
    assert "nothing was erased" in str(refused.value)
    assert "18 Haisong" not in str(refused.value)

    state = alice.get(victim)
    assert state.text == "18 Haisong Road" and not state.erased
    assert [bob.recall()[0].text] == ["aisle"]  # bob's own item was not erased either
    assert [p["reason"] for p in _refusals(service)] == ["projection_mismatch"]
    assert _refusals(service)[0]["items"] == [victim]
    assert service.ledger.verify().ok


@pytest.mark.parametrize(
    ("scope", "column", "value"),
    [
        ({"kind": "predicate", "subject": "user", "predicate": "seat"}, "predicate", "seat"),
        ({"kind": "category", "category": "travel"}, "category", "travel"),
        ({"kind": "sensitivity", "sensitivity": "public"}, "sensitivity", "public"),
        ({"kind": "source", "session_id": "s9"}, "session_id", "s9"),
    ],
)
def test_a_target_must_have_the_attributes_that_selected_it(
    service: MemoryService, alice: MemoryLedger, scope: dict, column: str, value: str
) -> None:
    kept = alice.remember(fact("home_address", "18 Haisong Road")).item_id
    _tamper(service, kept, **{column: value})
    if column == "session_id":  # source scopes match versions: tamper the version list too
        with service.engine.begin() as conn:
            raw = (
                conn.execute(catalog.select().where(catalog.c.item_id == kept))
                .mappings()
                .one()["versions"]
            )
        _tamper(service, kept, versions=raw.replace('"s1"', '"s9"'))

    with pytest.raises(ProjectionMismatch):
        alice.forget_scope(scope)
    assert alice.get(kept).text == "18 Haisong Road"


def test_a_cascade_the_log_does_not_show_is_refused(
    service: MemoryService, alice: MemoryLedger
) -> None:
    target = alice.remember(fact("seat", "aisle", turn="t1")).item_id
    other = alice.remember(turn("I will fly on Friday", turn_id="t7")).item_id
    _tamper(service, other, turn_id="t1")  # now looks like the turn the seat came from

    with pytest.raises(ProjectionMismatch):
        alice.forget(target)
    assert alice.get(other).text == "I will fly on Friday"
    assert alice.get(target).text == "aisle"


def test_an_untampered_forget_still_completes(service: MemoryService, alice: MemoryLedger) -> None:
    target = alice.remember(fact("seat", "aisle", turn="t1")).item_id
    carrier = alice.remember(turn("aisle seat please", turn_id="t1")).item_id
    report = alice.forget_scope({"kind": "predicate", "subject": "user", "predicate": "seat"})
    assert report.status == "completed"
    assert report.cascaded == [carrier] and report.targets == [target]


def test_a_value_inside_an_identifier_is_named_in_the_receipt(alice: MemoryLedger) -> None:
    """Identifiers stay in clear after erasure; a client that built one from content is
    told so, never silently."""
    leaky = fact("meeting_point", "Harbor steps line", turn="t_deleted_harbor_steps_line")
    target = alice.remember(leaky).item_id
    clean = alice.remember(fact("seat", "aisle", turn="t2")).item_id
    report = alice.forget(target)
    assert report.status == "completed"
    [proof] = [r for r in report.receipts if r.action == "key_bytes_gone"]
    assert proof.evidence["target_values_in_identifiers"] == 1
    assert "inside an identifier" in report.message
    assert "Harbor" not in report.message
    other = alice.forget(clean)
    assert "inside an identifier" not in other.message


def test_doctor_reads_the_catalog_against_the_log(
    service: MemoryService, alice: MemoryLedger, where: list[str]
) -> None:
    moved = alice.remember(fact("home_address", "18 Haisong Road")).item_id
    dropped = alice.remember(fact("seat", "aisle", turn="t2")).item_id
    alice.forget(alice.remember(fact("city", "Hangzhou", turn="t3")).item_id)  # erased: fine
    _tamper(service, moved, namespace="acme/bob")
    with service.engine.begin() as conn:
        conn.execute(catalog.delete().where(catalog.c.item_id == dropped))

    code, output = cli("doctor", *where, "--json")
    found = {f["code"]: f["item_ids"] for f in json.loads(output)["findings"]}
    assert code == 10
    assert found == {"catalog_disagrees_with_log": [moved], "catalog_missing_items": [dropped]}

    service.rebuild(["catalog"])
    code, output = cli("doctor", *where, "--json")
    assert code == 0, output
