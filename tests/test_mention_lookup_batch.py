"""The batched mention lookup (`where_mentioned` over many values, `candidates_each`)
answers exactly what each value looked up alone answers: the same items, in the same
order, with the same spans. The reference below is the lookup as it was before it was
batched: `find_mentions` per value, then each found item's texts read alone."""

from __future__ import annotations

import json
from pathlib import Path

from factories import fact, turn

from memory_ledger.api import MemoryService
from memory_ledger.forgetting.mentions import find_mentions, mention_pattern, where_mentioned
from memory_ledger.principal import Principal
from memory_ledger.projections.cells import Cells
from memory_ledger.projections.mention_index import candidates, candidates_each

ALICE = Principal("acme", "alice")
DATA = json.loads((Path(__file__).parent / "data" / "mention_lookup_batch.json").read_text())


def _one_by_one(conn, cells, projections, namespace, value) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    pattern = mention_pattern([value])
    found: dict[str, list[str]] = {}
    if pattern is None:
        return found
    items = find_mentions(conn, cells, projections, namespace, pattern, ())
    for projection in projections:
        for item_id in items:
            for text in projection.texts_of(conn, cells, [item_id]):
                spans = [text[a:b] for a, b in pattern.spans(text)]
                if spans:
                    known = found.setdefault(item_id, [])
                    known.extend(s for s in spans if s not in known)
    return found


def _store(service: MemoryService) -> str:
    """Alice's texts; the id of a turn of Bob's that says her phone number."""
    alice = service.for_principal(ALICE)
    alice.remember_many(
        [turn(text, turn_id=f"t{n}", session=f"s{n % 3}") for n, text in enumerate(DATA["turns"])]
    )
    ids = {
        predicate: alice.remember(fact(predicate, value, turn=f"f{n}")).item_id
        for n, (predicate, value) in enumerate(DATA["facts"])
    }
    for predicate, value in DATA["changed"]:  # the old value lives on in a superseded version
        alice.update(ids[predicate], {"value": value, "provenance": fact("x", "x")["provenance"]})
    bob = service.for_principal(Principal("acme", "bob")).remember(turn(DATA["turns"][0]))
    service.runner.catch_up()
    return str(bob.item_id)


def test_batched_lookup_equals_each_value_alone(service: MemoryService) -> None:
    bobs = _store(service)
    projections = service.runner.projections
    cells = Cells(service.log)
    with service.engine.connect() as conn:
        batched = where_mentioned(conn, cells, projections, ALICE.namespace, DATA["values"])
        alone = {
            v: _one_by_one(conn, cells, projections, ALICE.namespace, v) for v in DATA["values"]
        }
    assert list(batched) == list(dict.fromkeys(DATA["values"]))
    for value in DATA["values"]:
        assert list(batched[value].items()) == list(alone[value].items()), value
    # The lookup finds something (the comparison is not between two empty answers),
    # never in another namespace, and never a value inside a larger one.
    assert len(batched["relay-17"]) >= 3 and batched["copper finch"] == {}
    assert all(len(batched[v]) >= 2 for v in ("206-555-0148", "150 EUR", "海松路18号"))
    assert bobs not in batched["206-555-0148"]
    assert all("3,150" not in s for spans in batched["150 EUR"].values() for s in spans)


def test_candidates_each_equals_candidates_per_group(service: MemoryService) -> None:
    _store(service)
    groups = [[v] for v in DATA["values"]] + [DATA["values"][:3], [], ["b c d e f", "blue heron"]]
    with service.engine.connect() as conn:
        each = candidates_each(conn, service.log, ALICE.namespace, groups)
        alone = [candidates(conn, service.log, ALICE.namespace, g) for g in groups]
        unknown = candidates_each(conn, service.log, "acme/nobody", groups)
    assert each == alone
    assert any(found for found in each) and None in each  # both kinds of answer are compared
    assert all(found in (None, set()) for found in unknown)
