"""The shared contract every registered store keeps, on every backend.

Like the `eventsourcing` library's recorder contract tests: one suite, run against each
store of the data map, so a new store (an index, a cache, a subscriber) is held to the
same promises the moment it is registered.
"""

from __future__ import annotations

import json
import secrets

import pytest
from factories import fact, preference, turn

from memory_ledger.api import MemoryService
from memory_ledger.principal import Principal
from memory_ledger.projections.runner import all_projections
from memory_ledger.projections.vector_index import VectorIndex
from memory_ledger.stores import Store

STORE_NAMES = [
    "event_log",
    "key_store",
    *(p.name for p in all_projections()),
    "vector_index",
    "context_cache",
    "forget_plans",
]
SECRETS = ("18 Haisong Road", "window seat", "I live at 18 Haisong Road")


@pytest.fixture
def targets(service: MemoryService) -> list[str]:
    ledger = service.for_principal(Principal("acme", "alice"))
    stored = ledger.remember_many(
        [
            fact("home_address", SECRETS[0]),
            preference("seat", SECRETS[1]),
            turn(SECRETS[2]),
        ]
    )
    ledger.remember(fact("employer", "Acme Corp"))  # a neighbour that must survive
    service.runner.catch_up()
    service.vectors.catch_up()  # the vector index embeds only when asked to catch up
    served = ledger.context("18 Haisong Road window seat I live at", limit=50)  # now cached
    assert {s.item_id for s in stored} <= {i.item_id for i in served.items}
    plan = ledger.plan_forget("forget everything about me")  # an open plan shows them
    assert {s.item_id for s in stored} <= set(plan.targets)
    note = ledger.files.create("/memories/home.md", SECRETS[0], _agent(ledger))  # a memory file
    assert note.startswith("File created")
    file_id = ledger.files.find("/memories/home.md")
    return [s.item_id for s in stored] + [file_id]


def _agent(ledger):  # type: ignore[no-untyped-def]
    return ledger.files.source("test-agent", session_id="s1", turn_id="t1")


def test_every_store_is_registered(service: MemoryService) -> None:
    assert service.stores.names()[: len(STORE_NAMES)] == STORE_NAMES
    assert all(isinstance(s, Store) and s.holds for s in service.stores)


@pytest.mark.parametrize("name", STORE_NAMES)
def test_store_contract(name: str, service: MemoryService, targets: list[str]) -> None:
    store = service.stores.get(name)
    assert not store.verify_absent(targets).absent, "the store must hold the targets first"

    service.stores.get("event_log").erase(targets)  # fan-out order: tombstones first
    receipt = store.erase(targets)
    assert (receipt.store, receipt.status, receipt.targets) == (name, "ok", len(targets))
    evidence = store.verify_absent(targets)
    assert evidence.absent and evidence.store == name

    again = store.erase(targets)  # idempotent: a retry is always safe
    assert again.status == "ok"
    store.rebuild()
    service.runner.rebuild()
    assert store.verify_absent(targets).absent, "a rebuild must not bring anything back"
    # A store whose rows mix targets with neighbours (a summary) can count no row of the
    # targets and still hold their text: its rows themselves must not hold any.
    rows = json.dumps(service.runner.snapshot().get(name, []), default=str)
    assert not any(secret in rows for secret in SECRETS)

    dumped = json.dumps([receipt.to_dict(), again.to_dict(), evidence.detail])
    assert not any(secret in dumped for secret in SECRETS)
    ledger = service.for_principal(Principal("acme", "alice"))
    assert [m.text for m in ledger.recall()] == ["Acme Corp"]


@pytest.mark.parametrize("name", STORE_NAMES)
def test_store_holds_no_plaintext(name: str, service: MemoryService) -> None:
    """Sealed everywhere: what a store keeps at rest holds no live item's content in
    clear, not even a word of it, while recall still returns that content."""
    ledger = service.for_principal(Principal("acme", "alice"))
    tokens = [f"tok{secrets.token_hex(6)}" for _ in range(3)]
    ledger.remember_many(
        [
            fact("passport", f"{tokens[0]} issued 2031"),
            preference("seat", f"aisle near {tokens[1]}"),
            turn(f"I said {tokens[2]} yesterday"),
        ]
    )
    ledger.files.create("/memories/notes.md", f"ask about {tokens[0]} again", _agent(ledger))
    service.runner.catch_up()
    service.vectors.catch_up()
    served = ledger.context(" ".join(tokens), limit=10)
    assert all(any(t in i.text for i in served.items) for t in tokens), "recall must see them"
    assert ledger.plan_forget("forget everything about me").labels  # labels of all three
    store = service.stores.get(name)
    held = b"".join(store.at_rest())
    assert tokens[0] in ledger.files.view("/memories/notes.md", _agent(ledger))
    if name in ("event_log", "key_store", "facts", "transcripts", "catalog", "forget_plans",
                "memory_files"):  # fmt: skip
        assert held, f"{name} must show what it keeps at rest"
    for token in tokens:
        assert token.encode() not in held, f"{name} holds {token} in clear"
        assert token.upper().encode() not in held and token[3:].encode() not in held


BULK = 520  # more than one chunk of 500 ids, so every chunked statement meets its seam


def test_every_store_erases_a_set_in_bulk(service: MemoryService) -> None:
    """The bulk path: each store is handed one set of hundreds of items at once, in the
    fan-out order, and must erase every one of them (across the chunk seams of its id
    lists), report the whole count, keep the neighbour, and stay clean after a rebuild."""
    ledger = service.for_principal(Principal("acme", "alice"))
    values = [f"bulk value {n} {secrets.token_hex(4)}" for n in range(BULK)]
    writes = [
        fact(f"p{n}", v) if n % 3 else turn(f"I said {v}", turn_id=f"t{n}")
        for n, v in enumerate(values)
    ]
    targets = [s.item_id for s in ledger.remember_many(writes)]
    ledger.remember(fact("employer", "Acme Corp"))  # a neighbour that must survive
    service.runner.catch_up()
    service.vectors.catch_up()
    for name in STORE_NAMES:
        store = service.stores.get(name)
        receipt = store.erase(targets)
        assert (receipt.status, receipt.targets) == ("ok", BULK), name
        evidence = store.verify_absent(targets)
        assert evidence.absent, (name, evidence.detail)
    service.runner.rebuild()
    service.vectors.rebuild()
    for name in STORE_NAMES:
        assert service.stores.get(name).verify_absent(targets).absent, name
    rows = json.dumps(service.runner.snapshot(), default=str)
    assert not any(v in rows for v in values[:: BULK // 20])
    assert [m.text for m in ledger.recall()] == ["Acme Corp"]


def test_the_vector_index_lists_a_bulk_erasure_dead_then_compacts_it_away(
    service: MemoryService,
) -> None:
    """The vector index's bulk path: hundreds of shredded rows listed dead in one
    manifest write, none served (here, and in a new process), and one compaction that
    leaves no byte of their ciphertext in any file of the index."""
    ledger = service.for_principal(Principal("acme", "alice"))
    stored = ledger.remember_many(
        [fact(f"p{n}", f"bulk {n} {secrets.token_hex(4)}") for n in range(BULK)]
    )
    targets = [s.item_id for s in stored]
    keep = ledger.remember(fact("employer", "Acme Corp")).item_id
    service.vectors.catch_up()
    state = service.vectors._current()
    wanted = set(targets)
    rows = [
        seg.sealed[r].tobytes()
        for seg in state.segments
        for r, item in enumerate(seg.meta.item_ids)
        if item in wanted
    ]
    assert len(rows) == BULK
    service.stores.get("event_log").erase(targets)  # fan-out order: keys destroyed first
    receipt = service.stores.get("vector_index").erase(targets)
    assert receipt.status == "ok" and receipt.evidence["rows_listed_dead"] == BULK
    assert receipt.evidence["segments_rewritten"] == 0
    query = service.vectors.embed_query("bulk")
    assert [i for i, _ in service.vectors.search(ledger.namespace, query, 10)] == [keep]
    vectors = service.vectors
    fresh = VectorIndex(vectors.log, vectors.directory, vectors.embedder)  # another process
    assert [i for i, _ in fresh.search(ledger.namespace, query, 10)] == [keep]
    # A segment left with no live row was unlinked by the erasure; the rest are listed.
    dead = service.vectors.status()["dead_rows"]
    assert 0 < dead < BULK and receipt.evidence["segments_removed"] >= 1
    done = service.vectors.compact(everything=True)
    assert done.proved and done.rows_dropped == dead
    assert service.vectors.status()["dead_rows"] == 0
    assert service.stores.get("vector_index").verify_absent(targets).absent
    files = sorted(p for p in (service.settings.data_dir / "vectors").rglob("*") if p.is_file())
    held = b"".join(p.read_bytes() for p in files)
    assert not any(row[:32] in held or row[-32:] in held for row in rows)
    assert [i for i, _ in service.vectors.search(ledger.namespace, query, 10)] == [keep]
