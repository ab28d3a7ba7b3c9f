"""Dead rows of the vector index and their compaction (issue 39, item 2).

An erasure lists a shredded row dead in the manifest instead of rewriting its segment;
compaction (a job, the verification scan, `rebuild`) rewrites the segments without the
dead rows and proves their bytes gone. These tests hold the index to: a dead row is
never served (this process, a new one), every live row stays served, and after a
compaction no file of the index holds any fragment of a dead row's ciphertext.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from factories import fact
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.crypto import MasterKey, new_data_key
from memory_ledger.jobs.registry import JOBS
from memory_ledger.keystore import KeyRing
from memory_ledger.projections.vector_index import VectorIndex
from memory_ledger.projections.vector_rows import Put
from memory_ledger.projections.vector_seal import seal_rows, text_digest

DIMENSION = 16
NAMESPACES = ("t/a", "t/b")
ROWS = 24


class _Keys:
    """What the index reads of the log when it seals, opens and erases rows: the items'
    data keys, wrapped by a real master key and unwrapped by the real KeyRing. `destroy`
    is the key store's part of a forget."""

    def __init__(self, items: list[str]) -> None:
        self.master = MasterKey.generate("test")
        self.rows = {i: (i, 1, self.master.wrap(i, 1, new_data_key())) for i in items}

    def keys_for(self, item_ids: list[str]) -> KeyRing:
        return KeyRing(self.master, [self.rows[i] for i in item_ids if i in self.rows])

    def destroy(self, item_ids: list[str]) -> None:
        for item in item_ids:
            self.rows.pop(item, None)


class _NoEmbedding:
    name = "synthetic-16"
    dimension = DIMENSION

    def embed(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("not used")


def _index(directory: Path) -> tuple[VectorIndex, _Keys, list[str]]:
    """ROWS rows over two namespaces, in segments of 5 rows (several per namespace)."""
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((ROWS, DIMENSION), dtype=np.float32)
    items = [f"item-{n}" for n in range(ROWS)]
    keys = _Keys(items)
    index = VectorIndex(keys, directory, _NoEmbedding(), segment_rows=5)  # type: ignore[arg-type]
    sealed = seal_rows(keys.keys_for(items), items, [1] * ROWS, vectors, [text_digest("")] * ROWS)
    ops: dict[str, Put | None] = {
        item: Put(NAMESPACES[n % 2], "fact", "p", 1, "", 1) for n, item in enumerate(items)
    }
    with index._writing() as state:
        index._commit(state, ops, sealed, position=ROWS)
    return index, keys, items


def _served(index: VectorIndex) -> set[str]:
    query = np.ones(DIMENSION, dtype=np.float32)
    return {item for ns in NAMESPACES for item, _ in index.search(ns, query, ROWS)}


def _bytes_of(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def _rows_of(index: VectorIndex, items: set[str]) -> list[bytes]:
    """The sealed bytes of these items' rows, dead or alive, as the segments hold them."""
    state = index._current()
    return [
        seg.sealed[row].tobytes()
        for seg in state.segments
        for row, item in enumerate(seg.meta.item_ids)
        if item in items
    ]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("forget"), st.sets(st.integers(0, ROWS - 1), max_size=4)),
        st.tuples(st.just("erase_live"), st.sets(st.integers(0, ROWS - 1), max_size=2)),
        st.tuples(st.just("compact"), st.booleans()),
        st.tuples(st.just("reopen"), st.none()),
    ),
    max_size=12,
)


@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_erasures_and_compactions_in_any_order_serve_exactly_the_live_rows(
    tmp_path: Path, ops: list[tuple[str, object]]
) -> None:
    directory = tmp_path / secrets.token_hex(4) / "vectors"
    index, keys, items = _index(directory)
    live = set(items)
    erased_bytes: list[bytes] = []
    for op, arg in ops:
        if op in ("forget", "erase_live"):
            chosen = [items[n] for n in sorted(arg)]  # type: ignore[call-overload]
            erased_bytes += _rows_of(index, set(chosen) & live)
            if op == "forget":
                keys.destroy(chosen)  # the key store first, as a forget does
            assert index.erase(chosen).check.absent
            live -= set(chosen)
        elif op == "compact":
            assert index.compact(everything=bool(arg)).proved
        else:
            index = VectorIndex(keys, directory, _NoEmbedding(), segment_rows=5)  # type: ignore[arg-type]
        assert _served(index) == live
        fresh = VectorIndex(keys, directory, _NoEmbedding(), segment_rows=5)  # type: ignore[arg-type]
        assert _served(fresh) == live, "a new process serves exactly the live rows"
        assert {r.item_id for r in fresh.snapshot()} == live
        assert index.verify_absent(set(items) - live).absent
    done = index.compact(everything=True)
    assert done.proved and index.status()["dead_rows"] == 0
    assert _served(index) == live
    held = _bytes_of(directory)
    assert not any(row[:32] in held or row[-32:] in held for row in erased_bytes)


def test_a_dead_row_is_masked_in_an_opened_namespace_without_opening_it_again(
    tmp_path: Path,
) -> None:
    index, keys, items = _index(tmp_path / "vectors")
    assert _served(index) == set(items)  # both namespaces opened
    opened: list[list[str]] = []
    real = index._open

    def spy(item_ids: list[str], generations: list[int], sealed: np.ndarray) -> object:
        opened.append(list(item_ids))
        return real(item_ids, generations, sealed)

    index._open = spy  # type: ignore[method-assign]
    view = index._current().opened()["t/a"]
    row = view.position["item-0"]
    keys.destroy(["item-0"])
    erased = index.erase(["item-0"])
    assert erased.rows_dead == 1 and erased.segments_rewritten == 0
    assert not view.matrix[row].any(), "the erased vector is zeroed in memory at once"
    assert _served(index) == set(items) - {"item-0"} and opened == []


def _old(service: MemoryService, days: int) -> datetime:
    return datetime.now(UTC) + timedelta(days=days)


def test_the_compaction_job_takes_dead_rows_past_the_window_or_past_the_share(
    service: MemoryService, alice: MemoryLedger
) -> None:
    stored = alice.remember_many([fact(f"p{n}", f"value {n}") for n in range(30)])
    service.vectors.catch_up()
    assert alice.forget(stored[0].item_id).completed
    job = JOBS["vector-compaction"]
    counts = job.run(service.job_context, datetime.now(UTC), None)
    assert counts["vector_dead_rows_dropped"] == 0, "1 of 30: under the share, and recent"
    assert service.vectors.status()["dead_rows"] == 1
    counts = job.run(service.job_context, _old(service, 31), None)  # past the 30-day window
    assert counts["vector_dead_rows_dropped"] == 1
    assert counts["vector_files_holding_dead_rows"] == 0 and counts["vector_files_scanned"] > 0
    assert service.vectors.status()["dead_rows"] == 0

    for item in stored[1:10]:  # 9 of the 29 left: past the share of 0.2
        assert alice.forget(item.item_id).completed
    counts = job.run(service.job_context, datetime.now(UTC), None)
    assert counts["vector_dead_rows_dropped"] == 9 and service.vectors.status()["dead_rows"] == 0


def test_the_verification_scan_compacts_every_dead_row_before_it_reads_the_files(
    service: MemoryService, alice: MemoryLedger
) -> None:
    stored = alice.remember_many([fact(f"p{n}", f"value {n}") for n in range(30)])
    service.vectors.catch_up()
    erased = stored[3].item_id
    dead = _rows_of(service.vectors, {erased})
    assert alice.forget(erased).completed
    assert service.vectors.status()["dead_rows"] == 1
    held = _bytes_of(service.settings.data_dir / "vectors")
    assert all(row in held for row in dead), "listed dead: the bytes stay until compaction"

    counts = JOBS["verification-scan"].run(service.job_context, datetime.now(UTC), None)

    assert counts["requests"] == 1 and counts["ok"] == 1
    assert counts["vector_dead_rows_dropped"] == 1
    assert counts["vector_files_holding_dead_rows"] == 0
    assert service.vectors.status()["dead_rows"] == 0
    held = _bytes_of(service.settings.data_dir / "vectors")
    assert not any(row[:32] in held or row[-32:] in held for row in dead)
    fresh = MemoryService(service.settings)
    try:
        found = fresh.vectors.search(alice.namespace, fresh.vectors.embed_query("value 3"), 40)
        assert erased not in {item for item, _ in found} and len(found) == 29
    finally:
        fresh.close()
