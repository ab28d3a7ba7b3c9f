"""The vector index: what it holds, what it forgets, and what it refuses to serve."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import fact, later, preference, provenance, reread, turn
from typer.testing import CliRunner

import memory_ledger.projections.vector_codes as vector_codes
import memory_ledger.projections.vector_erasure as vector_erasure
import memory_ledger.projections.vector_index as vector_index
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.cli import app
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey, new_data_key
from memory_ledger.embedders import (
    EMBEDDER_ENV,
    HashingEmbedder,
    UniversalSentenceEncoder,
)
from memory_ledger.errors import ConfigurationError, IndexMismatch
from memory_ledger.jobs.projection_catchup import _catch_up
from memory_ledger.keystore import KeyDestruction, KeyRing
from memory_ledger.principal import Principal
from memory_ledger.projections.vector_files import (
    DISCARDS,
    MANIFEST,
    Manifest,
    SegmentEntry,
    SegmentMeta,
    digest,
)
from memory_ledger.projections.vector_index import SEGMENT_ROWS, VectorIndex
from memory_ledger.projections.vector_rows import IndexState, Put, Segment
from memory_ledger.projections.vector_seal import seal_rows, text_digest
from memory_ledger.projections.vector_search import EXACT_ROWS
from memory_ledger.stores import Receipt

ALICE = Principal("acme", "alice")
BOB = Principal("acme", "bob")
ADDRESS = "18 Haisong Road"
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])
ADDRESS_SCOPE = {"kind": "predicate", "subject": "user", "predicate": "home_address"}
HASH = HashingEmbedder(256)  # the same embedder the service uses, for query vectors


class CountingEmbedder:
    """The hashing embedder, recording every call: what was embedded, and how often."""

    def __init__(
        self, dimension: int = 256, hook: Callable[[], None] | None = None, name: str = ""
    ) -> None:
        self.inner = HashingEmbedder(dimension)
        self.name = name or self.inner.name
        self.dimension = dimension
        self.calls: list[list[str]] = []
        self.hook = hook

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return self.inner.embed(texts)

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def service(settings: Settings, embedder: CountingEmbedder) -> Iterator[MemoryService]:
    with MemoryService(settings, embedder=embedder) as svc:
        yield svc


def q(text: str) -> np.ndarray:
    return HASH.embed([text])[0]


def ids(results: list[tuple[str, float]]) -> list[str]:
    return [item for item, _ in results]


def files_of(settings: Settings) -> list[Path]:
    return sorted(p for p in (settings.data_dir / "vectors").rglob("*") if p.is_file())


def holding(settings: Settings, needle: bytes) -> list[str]:
    """Files holding a vector's float32 bytes, or any 16-byte window of them (one that
    is not all zeros: those say nothing of the vector)."""
    windows = [needle[i : i + 16] for i in range(0, len(needle) - 15, 4)]
    windows = [needle, *(w for w in windows if w.strip(b"\0"))]
    found = []
    for path in files_of(settings):
        raw = path.read_bytes()
        if any(w in raw for w in windows):
            found.append(path.name)
    return found


def clear_vectors_on_disk(settings: Settings, vectors: list[np.ndarray]) -> list[str]:
    return sorted({name for v in vectors for name in holding(settings, v.tobytes())})


def segments_on_disk(directory: Path) -> dict[str, list[str]]:
    """Segment file -> the item ids its sidecar names, as the files say (not memory)."""
    manifest = json.loads((directory / MANIFEST).read_bytes())
    return {
        s["file"]: json.loads((directory / s["meta_file"]).read_bytes())["item_ids"]
        for s in manifest["segments"]
    }


def directory(settings: Settings) -> Path:
    return settings.data_dir / "vectors"


def row_of(service: MemoryService, item_id: str) -> np.ndarray:
    [row] = [r for r in service.vectors.snapshot() if r.item_id == item_id]
    return row.vector


def receipt(receipts: list[Receipt], store: str) -> Receipt:
    [found] = [r for r in receipts if r.store == store]
    return found


@pytest.fixture
def items(alice: MemoryLedger, service: MemoryService) -> dict[str, str]:
    stored = alice.remember_many(
        [
            fact("home_address", ADDRESS),
            preference("seat", "window"),
            turn("I am allergic to peanuts", turn_id="t2"),
        ]
    )
    service.vectors.catch_up()
    return dict(zip(("address", "seat", "turn"), (s.item_id for s in stored), strict=True))


def test_items_are_embedded_once_per_batch_as_predicate_and_value_or_content(
    items: dict[str, str], embedder: CountingEmbedder, service: MemoryService
) -> None:
    assert embedder.calls == [
        ["home address: 18 Haisong Road", "seat: window", "I am allergic to peanuts"]
    ]
    assert service.vectors.catch_up() == 0 and len(embedder.calls) == 1
    assert {r.kind for r in service.vectors.snapshot()} == {"fact", "preference", "turn"}


def test_search_ranks_the_right_item_first(items: dict[str, str], service: MemoryService) -> None:
    for query, expected in (
        ("what is my home address", "address"),
        ("window or aisle seat", "seat"),
        ("am I allergic to anything", "turn"),
    ):
        found = service.vectors.search(ALICE.namespace, q(query), 3)
        assert found[0][0] == items[expected], query
        scores = [score for _, score in found]
        assert len(found) == 3 and scores == sorted(scores, reverse=True)
    assert len(service.vectors.search(ALICE.namespace, q("seat"), 1)) == 1
    assert service.vectors.search(ALICE.namespace, q("seat"), 0) == []


def test_namespaces_are_isolated(
    items: dict[str, str], alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    bobs = bob.remember(fact("home_address", ADDRESS)).item_id  # the very same text
    service.vectors.catch_up()
    query = q("home address 18 Haisong Road")
    assert ids(service.vectors.search(BOB.namespace, query, 10)) == [bobs]
    assert bobs not in ids(service.vectors.search(ALICE.namespace, query, 10))
    assert service.vectors.search(ALICE.namespace, query, 10, allowed={bobs}) == []
    only_seat = service.vectors.search(ALICE.namespace, query, 10, allowed={items["seat"]})
    assert ids(only_seat) == [items["seat"]]
    assert service.vectors.search("acme/nobody", query, 10) == []


def test_an_update_is_re_embedded(
    items: dict[str, str], alice: MemoryLedger, service: MemoryService
) -> None:
    alice.update(items["address"], {"value": "7 Binjiang Avenue", "provenance": provenance()})
    service.vectors.catch_up()
    [row] = [r for r in service.vectors.snapshot() if r.item_id == items["address"]]
    assert row.version == 2
    assert np.allclose(row.vector, q("home address: 7 Binjiang Avenue"))
    assert ids(service.vectors.search(ALICE.namespace, q("Binjiang Avenue"), 1)) == [
        items["address"]
    ]


def test_suppress_removes_and_unsuppress_restores_the_current_value(
    items: dict[str, str], alice: MemoryLedger, service: MemoryService
) -> None:
    alice.suppress(items["address"])
    service.vectors.catch_up()
    assert items["address"] not in {r.item_id for r in service.vectors.snapshot()}
    assert items["address"] not in ids(service.vectors.search(ALICE.namespace, q(ADDRESS), 5))

    alice.update(items["address"], {"value": "7 Binjiang Avenue", "provenance": provenance()})
    service.vectors.catch_up()  # still suppressed: not indexed
    assert items["address"] not in {r.item_id for r in service.vectors.snapshot()}
    alice.unsuppress(items["address"])
    service.vectors.catch_up()
    [row] = [r for r in service.vectors.snapshot() if r.item_id == items["address"]]
    assert row.version == 4 and np.allclose(row.vector, q("home address: 7 Binjiang Avenue"))


def test_forget_removes_the_row_and_its_bytes_from_every_file(
    items: dict[str, str], alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    every = [r.vector for r in service.vectors.snapshot()]
    erased = row_of(service, items["address"])
    assert len(every) == 3 and not any(np.allclose(v, 0) for v in every)
    assert clear_vectors_on_disk(settings, every) == [], "sealed: no file holds a vector"
    assert items["address"] in [
        i for ids in segments_on_disk(directory(settings)).values() for i in ids
    ]

    files_before = {p.name: p.read_bytes() for p in files_of(settings)}
    report = alice.forget(items["address"])

    assert report.completed, report.to_dict()
    vector = receipt(report.receipts, "vector_index")
    assert vector.status == "ok"
    # Its key was destroyed first: listed dead, one manifest write, no segment rewritten.
    assert vector.evidence["rows_removed"] == vector.evidence["rows_listed_dead"] == 1
    assert vector.evidence["segments_rewritten"] == 0 and vector.evidence["segments_checked"] == 0
    assert vector.evidence["rows_left"] == 0 and vector.evidence["rows_sealed_under_item_keys"]
    assert vector.evidence["rows_dead_until_compaction"] == 1
    assert vector.evidence["dead_rows"] == "unservable_key_destroyed_bytes_until_compaction"
    files_after = {p.name: p.read_bytes() for p in files_of(settings)}
    assert {n for n in files_after if files_after[n] != files_before.get(n)} == {MANIFEST}
    assert clear_vectors_on_disk(settings, [*every, erased]) == []
    assert items["address"] in [  # the sidecar still names it, until compaction
        i for members in segments_on_disk(directory(settings)).values() for i in members
    ]
    assert items["address"] not in ids(service.vectors.search(ALICE.namespace, q(ADDRESS), 5))
    assert {r.item_id for r in service.vectors.snapshot()} == {items["seat"], items["turn"]}
    evidence = service.stores.get("vector_index").verify_absent([items["address"]])
    assert evidence.absent and evidence.detail["rows_dead_until_compaction"] == 1
    assert evidence.detail["rows_dead_key_alive"] == 0
    assert ADDRESS not in json.dumps(vector.to_dict())
    fresh = VectorIndex(service.log, directory(settings), HASH)  # another process
    assert items["address"] not in ids(fresh.search(ALICE.namespace, q(ADDRESS), 5))

    done = service.vectors.compact(everything=True)

    assert done.proved and done.rows_dropped == 1 and done.segments_rewritten == 1
    assert not any(
        items["address"] in ids for ids in segments_on_disk(directory(settings)).values()
    )
    evidence = service.stores.get("vector_index").verify_absent([items["address"]])
    assert evidence.absent and evidence.detail["rows_dead_until_compaction"] == 0
    assert {r.item_id for r in service.vectors.snapshot()} == {items["seat"], items["turn"]}
    assert service.vectors.compact(everything=True).rows_dropped == 0  # nothing left to do


def test_forget_does_not_wait_for_pending_embeddings(
    items: dict[str, str], alice: MemoryLedger, service: MemoryService, embedder: CountingEmbedder
) -> None:
    pending = alice.remember(fact("phone", "+86 138 0000 0000")).item_id
    calls = len(embedder.calls)
    report = alice.forget(pending)
    assert report.completed and len(embedder.calls) == calls, "forget must not embed"
    assert receipt(report.receipts, "vector_index").evidence["rows_removed"] == 0
    service.vectors.catch_up()  # the Recorded event's key is gone: never embedded
    assert not any("138 0000" in t for t in embedder.texts)
    assert pending not in {r.item_id for r in service.vectors.snapshot()}


@SQLITE_ONLY
def test_an_item_erased_while_its_batch_is_embedded_is_not_written(
    alice: MemoryLedger, service: MemoryService, embedder: CountingEmbedder
) -> None:
    phone = alice.remember(fact("phone", "+86 138 0000 0000")).item_id
    kept = alice.remember(fact("city", "Hangzhou")).item_id
    embedder.hook = lambda: alice.forget(phone)  # runs while the batch is being embedded
    service.vectors.catch_up()
    assert embedder.hook is None and "phone: +86 138 0000 0000" in embedder.texts
    assert [r.item_id for r in service.vectors.snapshot()] == [kept]


@SQLITE_ONLY
def test_a_catch_up_overtaken_by_another_writer_plans_again(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    directory = settings.data_dir / "vectors"
    other = VectorIndex(service.log, directory, CountingEmbedder())  # another process's view
    seat = alice.remember(preference("seat", "window")).item_id

    def meanwhile() -> None:
        alice.suppress(seat)
        assert other.catch_up() == 2  # commits past this batch while it is being embedded

    mine = VectorIndex(service.log, directory, CountingEmbedder(hook=meanwhile))
    mine.catch_up()
    assert mine.snapshot() == [] and mine.status()["position"] == service.log.max_position()


def test_a_restart_serves_the_same_results_without_re_embedding(settings: Settings) -> None:
    first = CountingEmbedder()
    with MemoryService(settings, embedder=first) as service:
        ledger = service.for_principal(ALICE)
        ledger.remember_many([fact("home_address", ADDRESS), preference("seat", "window")])
        service.vectors.catch_up()
        before = service.vectors.search(ALICE.namespace, q("home address"), 5)
    second = CountingEmbedder()
    with MemoryService(settings, embedder=second) as service:
        assert service.vectors.search(ALICE.namespace, q("home address"), 5) == before
        assert service.vectors.catch_up() == 0
    assert len(first.calls) == 1 and second.calls == []


def test_another_process_sees_writes_and_erasures_through_the_manifest(
    settings: Settings,
) -> None:
    with (
        MemoryService(settings, embedder=CountingEmbedder()) as writer,
        MemoryService(settings, embedder=CountingEmbedder()) as reader,
    ):
        ledger = writer.for_principal(ALICE)
        first = ledger.remember(fact("home_address", ADDRESS)).item_id
        writer.vectors.catch_up()
        assert ids(reader.vectors.search(ALICE.namespace, q(ADDRESS), 5)) == [first]
        second = ledger.remember(fact("city", "Hangzhou")).item_id
        writer.vectors.catch_up()
        assert set(ids(reader.vectors.search(ALICE.namespace, q(ADDRESS), 5))) == {first, second}
        ledger.forget(first)
        assert ids(reader.vectors.search(ALICE.namespace, q(ADDRESS), 5)) == [second]
        assert reader.vectors.catch_up() == 1  # the tombstone: already applied, a no-op
        assert ids(reader.vectors.search(ALICE.namespace, q(ADDRESS), 5)) == [second]


def _flip_segment_byte(directory: Path, name: str = "seg-0.sealed") -> None:
    segment = directory / name
    raw = bytearray(segment.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    segment.write_bytes(bytes(raw))


def _flip_sidecar_byte(directory: Path) -> None:
    [sidecar] = directory.glob("seg-*.json")
    sidecar.write_bytes(sidecar.read_bytes().replace(b'"fact"', b'"fakt"', 1))


def _delete_sidecar(directory: Path) -> None:
    [sidecar] = directory.glob("seg-*.json")
    sidecar.unlink()


def _truncate_segment(directory: Path) -> None:
    [segment] = directory.glob("seg-*.sealed")
    segment.write_bytes(segment.read_bytes()[:-4])


def _delete_segment(directory: Path) -> None:
    [segment] = directory.glob("seg-*.sealed")
    segment.unlink()


def _edit_manifest(directory: Path) -> None:
    manifest = directory / MANIFEST
    manifest.write_bytes(manifest.read_bytes().replace(b'"position":', b'"position":1', 1))


def _truncate_manifest(directory: Path) -> None:
    manifest = directory / MANIFEST
    manifest.write_bytes(manifest.read_bytes()[:-10])


@SQLITE_ONLY
@pytest.mark.parametrize(
    "damage",
    [
        _flip_segment_byte,
        _truncate_segment,
        _delete_segment,
        _flip_sidecar_byte,
        _delete_sidecar,
        _edit_manifest,
        _truncate_manifest,
    ],
)
def test_damaged_files_are_not_served_and_are_rebuilt(
    settings: Settings, damage: Callable[[Path], None], caplog: pytest.LogCaptureFixture
) -> None:
    with MemoryService(settings, embedder=CountingEmbedder()) as service:
        ledger = service.for_principal(ALICE)
        address = ledger.remember(fact("home_address", ADDRESS)).item_id
        ledger.remember(preference("seat", "window"))
        service.vectors.catch_up()
        healthy = service.vectors.snapshot()
    damage(settings.data_dir / "vectors")

    again = CountingEmbedder()
    with (
        caplog.at_level(logging.WARNING, logger="memory_ledger.vectors"),
        MemoryService(settings, embedder=again) as service,
    ):
        assert service.vectors.search(ALICE.namespace, q(ADDRESS), 5) == []  # never served
        assert "not served" in caplog.text and "Haisong" not in caplog.text
        # Discarded, and the discard noted for the next `status` (of any process).
        assert [p.name for p in files_of(settings)] == [DISCARDS, ".lock", MANIFEST]
        [reason] = service.vectors.discarded
        assert service.vectors.status()["discarded"] == [reason] and "Haisong" not in reason
        assert service.vectors.catch_up() == 2 and len(again.texts) == 2  # re-embedded
        assert ids(service.vectors.search(ALICE.namespace, q(ADDRESS), 1)) == [address]
        assert service.vectors.status()["discarded"] == [reason]  # until a full rebuild
        rebuilt = service.vectors.snapshot()
        service.rebuild()
        assert service.vectors.cleared == [reason] and service.vectors.status()["discarded"] == []
    assert [(r.item_id, r.version) for r in rebuilt] == [(r.item_id, r.version) for r in healthy]
    assert all(np.array_equal(a.vector, b.vector) for a, b in zip(rebuilt, healthy, strict=True))


@SQLITE_ONLY
def test_a_forget_reads_only_the_files_it_wrote_and_verify_reads_them_all(
    alice: MemoryLedger, service: MemoryService, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erasure reads back what it wrote; segments that never held the row are not
    its to read. An unrelated segment damaged on disk is left to `verify`, which reads
    every file, finds it does not match its checksum, and fails."""
    directory = settings.data_dir / "vectors"
    service.vectors = VectorIndex(service.log, directory, HASH, segment_rows=2)
    service.stores.get("vector_index").vectors = service.vectors  # the store is given its index
    address = alice.remember(fact("home_address", ADDRESS)).item_id
    seat = alice.remember(preference("seat", "window")).item_id
    city = alice.remember(fact("city", "Hangzhou")).item_id
    service.vectors.catch_up()
    before = segments_on_disk(directory)
    [holder] = [f for f, members in before.items() if address in members]
    [unrelated] = [f for f, members in before.items() if members == [city]]
    _flip_segment_byte(directory, unrelated)
    read: list[str] = []
    real_read = vector_erasure.read_segment

    def spy(directory: Path, entry: SegmentEntry, dimension: int) -> np.ndarray:
        read.append(entry.file)
        return real_read(directory, entry, dimension)

    monkeypatch.setattr(vector_erasure, "read_segment", spy)  # how the checks read segments

    vector = receipt(alice.forget(address).receipts, "vector_index")

    # Listed dead: nothing rewritten, so nothing read back but the manifest.
    assert segments_on_disk(directory) == before and read == [] and vector.status == "ok"
    assert vector.evidence["files_discarded"] is False
    assert vector.evidence["rows_dead_until_compaction"] == 1
    manifest = Manifest.from_bytes((directory / MANIFEST).read_bytes())
    [dead] = [e for e in manifest.segments if e.dead]
    assert dead.file == holder and [row for row, _ in dead.dead] == [before[holder].index(address)]
    evidence = service.stores.get("vector_index").verify_absent([address])
    assert not evidence.absent and evidence.detail["segments_invalid"] == 1
    assert evidence.detail["segments_checked"] == 2 and evidence.detail["rows_left"] == 0

    service.vectors.repair()  # what `rebuild` or the next process start does with it
    assert service.vectors.snapshot() == []
    assert service.stores.get("vector_index").verify_absent([address]).absent
    service.vectors.catch_up()
    assert sorted(r.item_id for r in service.vectors.snapshot()) == sorted([seat, city])


@SQLITE_ONLY
def test_a_segment_that_does_not_read_back_as_written_is_discarded_by_the_erasure(
    alice: MemoryLedger, service: MemoryService, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = settings.data_dir / "vectors"
    address = alice.remember(fact("home_address", ADDRESS)).item_id
    seat = alice.remember(preference("seat", "window")).item_id
    service.vectors.catch_up()
    write_segment = vector_index.write_segment

    def bad_write(*args: Any, **kwargs: Any) -> Any:
        entry = write_segment(*args, **kwargs)
        _flip_segment_byte(directory, entry.file)  # e.g. a failing disk
        return entry

    report = alice.forget(address)  # listed dead: no segment written
    assert receipt(report.receipts, "vector_index").evidence["files_discarded"] is False
    monkeypatch.setattr(vector_index, "write_segment", bad_write)

    done = service.vectors.compact(everything=True)  # writes the segment without it

    assert done.segments_invalid == 1 and not done.proved
    assert service.vectors.snapshot() == [], "a segment that does not read back is discarded"
    monkeypatch.undo()
    service.vectors.catch_up()
    assert [r.item_id for r in service.vectors.snapshot()] == [seat]


@SQLITE_ONLY
def test_a_segment_of_the_wrong_size_is_not_served_even_with_a_consistent_manifest(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with MemoryService(settings, embedder=CountingEmbedder()) as service:
        ledger = service.for_principal(ALICE)
        ledger.remember_many([fact("home_address", ADDRESS), preference("seat", "window")])
        service.vectors.catch_up()
    directory = settings.data_dir / "vectors"
    manifest = Manifest.from_bytes((directory / MANIFEST).read_bytes())
    [meta] = manifest.segments
    short = (directory / meta.file).read_bytes()[:1024]  # one row's worth, not two
    (directory / meta.file).write_bytes(short)
    forged = replace(meta, sha256=digest(short))  # checksums agree; only the size does not
    (directory / MANIFEST).write_bytes(replace(manifest, segments=(forged,)).to_bytes())
    with (
        caplog.at_level(logging.WARNING, logger="memory_ledger.vectors"),
        MemoryService(settings, embedder=CountingEmbedder()) as service,
    ):
        assert service.vectors.search(ALICE.namespace, q(ADDRESS), 5) == []
        assert "wrong size" in caplog.text
        assert service.vectors.catch_up() == 2 and len(service.vectors.snapshot()) == 2


def test_an_index_ahead_of_its_log_is_rebuilt_from_the_log(tmp_path: Path) -> None:
    """A vectors/ directory from another (or a newer) log must never be served."""
    first, second = Settings.resolve(tmp_path / "a"), Settings.resolve(tmp_path / "b")
    with MemoryService(first, embedder=CountingEmbedder()) as service:
        ledger = service.for_principal(ALICE)
        ledger.remember_many([fact("home_address", ADDRESS), preference("seat", "window")])
        service.vectors.catch_up()
    with MemoryService(second, embedder=CountingEmbedder()) as service:
        kept = service.for_principal(ALICE).remember(fact("city", "Hangzhou")).item_id
        shutil.copytree(first.data_dir / "vectors", second.data_dir / "vectors")
        assert service.vectors.catch_up() == 1
        assert [r.item_id for r in service.vectors.snapshot()] == [kept]


def test_a_query_from_another_embedder_is_refused(
    items: dict[str, str], service: MemoryService
) -> None:
    assert issubclass(IndexMismatch, ConfigurationError)
    with pytest.raises(IndexMismatch, match="256-dimensional"):
        service.vectors.search(ALICE.namespace, HashingEmbedder(128).embed(["x"])[0], 3)
    with pytest.raises(IndexMismatch, match="use-multilingual-v3"):
        service.vectors.search(
            ALICE.namespace, q("home"), 3, embedder_name=UniversalSentenceEncoder.name
        )
    assert service.vectors.search(ALICE.namespace, q("home"), 3, embedder_name=HASH.name)


@SQLITE_ONLY
def test_a_manifest_of_another_dimension_is_rebuilt_for_the_configured_embedder(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(EMBEDDER_ENV, "hashing:128")
    with MemoryService(reread(settings)) as service:
        assert service.vectors.dimension == 128
        address = service.for_principal(ALICE).remember(fact("home_address", ADDRESS)).item_id
        service.vectors.catch_up()
    monkeypatch.setenv(EMBEDDER_ENV, "hashing")
    with (
        caplog.at_level(logging.WARNING, logger="memory_ledger.vectors"),
        MemoryService(reread(settings)) as service,
    ):
        assert service.vectors.search(ALICE.namespace, q(ADDRESS), 5) == []
        assert "hashing-128" in caplog.text and "hashing-256" in caplog.text
        service.vectors.catch_up()
        assert ids(service.vectors.search(ALICE.namespace, q(ADDRESS), 5)) == [address]
    manifest = json.loads((settings.data_dir / "vectors" / MANIFEST).read_bytes())
    assert manifest["embedder"] == {"name": "hashing-256", "dimension": 256}


def _history(alice: MemoryLedger, bob: MemoryLedger, service: MemoryService) -> None:
    """Every event kind, with catch-ups in between (and not) so batches split differently."""
    home = alice.remember(fact("home_address", ADDRESS)).item_id
    seat = alice.remember(preference("seat", "window")).item_id
    card = alice.remember(turn("my card is 4111 1111 1111 1111", turn_id="t2")).item_id
    bob.remember(fact("home_address", ADDRESS))
    service.vectors.catch_up()
    alice.update(home, {"value": "7 Binjiang Avenue", "provenance": provenance(at=later(2))})
    alice.suppress(seat)
    alice.redact(card, ["content"])  # before its vector's catch-up, and after
    service.vectors.catch_up()
    early = alice.remember(turn("ship it to 9 Lake Road", turn_id="t3")).item_id
    alice.redact(early, ["content"])  # never embedded before the redaction
    alice.unsuppress(seat)
    gone = alice.remember(fact("phone", "+86 138 0000 0000")).item_id
    service.vectors.catch_up()
    alice.forget(gone)
    hidden = alice.remember(fact("city", "Hangzhou")).item_id
    alice.suppress(hidden)
    alice.update(hidden, {"value": "Ningbo", "provenance": provenance(at=later(3))})
    service.vectors.catch_up()


def test_rebuild_equals_incremental(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    _history(alice, bob, service)
    incremental = service.vectors.snapshot()
    assert len(incremental) == 5
    assert service.vectors.rebuild() > 0
    rebuilt = service.vectors.snapshot()
    assert [(r.item_id, r.namespace, r.kind, r.version) for r in rebuilt] == [
        (r.item_id, r.namespace, r.kind, r.version) for r in incremental
    ]
    assert all(np.allclose(a.vector, b.vector) for a, b in zip(rebuilt, incremental, strict=True))
    redacted = [r for r in rebuilt if np.allclose(r.vector, q("[redacted]"))]
    assert len(redacted) == 2


@SQLITE_ONLY
def test_segments_roll_over_and_only_the_touched_ones_are_rewritten(
    alice: MemoryLedger, service: MemoryService, tmp_path: Path
) -> None:
    embedder = CountingEmbedder(64)
    index = VectorIndex(service.log, tmp_path / "v", embedder, batch_size=4, segment_rows=3)
    stored = [alice.remember(fact(f"p{i}", f"value {i}")).item_id for i in range(7)]
    assert index.catch_up() == 7 and [len(c) for c in embedder.calls] == [4, 3]

    def segments() -> dict[str, list[str]]:
        return segments_on_disk(tmp_path / "v")

    layout = segments()
    assert sorted(len(v) for v in layout.values()) == [1, 3, 3]
    first = next(f for f, members in layout.items() if stored[0] in members)
    untouched = {f: (tmp_path / "v" / f).stat().st_ino for f in layout if f != first}

    done = index.erase([stored[0]])
    assert (done.rows_removed, done.segments_rewritten, done.segments_removed) == (1, 1, 0)
    after = segments()
    assert first not in after and {f: (tmp_path / "v" / f).stat().st_ino for f in untouched} == (
        untouched
    )
    last = next(f for f, members in after.items() if members == [stored[6]])
    done = index.erase([stored[6]])
    assert (done.rows_removed, done.segments_rewritten, done.segments_removed) == (1, 0, 1)
    assert last not in segments() and not (tmp_path / "v" / last).exists()
    names = {p.name for p in (tmp_path / "v").iterdir()}
    sidecars = {f.replace(".sealed", ".json") for f in segments()}
    assert names == {".lock", MANIFEST, *segments(), *sidecars}


@SQLITE_ONLY
def test_a_commit_writes_only_what_changed(
    alice: MemoryLedger, service: MemoryService, tmp_path: Path
) -> None:
    directory = tmp_path / "v"
    index = VectorIndex(service.log, directory, CountingEmbedder(64), segment_rows=3)
    stored = [alice.remember(fact(f"p{i}", f"value {i}")).item_id for i in range(5)]
    index.catch_up()
    raw = (directory / MANIFEST).read_bytes()
    assert not any(item.encode() in raw for item in stored), "no per-row data in the manifest"
    before = {p.name: p.stat().st_ino for p in directory.iterdir()}
    [full] = [f for f, members in segments_on_disk(directory).items() if len(members) == 3]

    alice.remember(fact("p5", "value 5"))
    index.catch_up()

    after = {p.name: p.stat().st_ino for p in directory.iterdir()}
    new = {name for name, inode in after.items() if before.get(name) != inode}
    kept = {full, full.replace(".sealed", ".json"), ".lock"}
    assert {name for name in after if before.get(name) == after[name]} == kept
    [last] = set(segments_on_disk(directory)) - {full}  # the 2-row segment, appended to
    assert len(segments_on_disk(directory)[last]) == 3
    assert new == {MANIFEST, last, last.replace(".sealed", ".json")}


def test_searches_see_every_commit_of_their_namespace(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    """A search caches where a namespace's rows are; a commit must drop what it changed."""
    first = alice.remember(fact("home_address", ADDRESS)).item_id
    bobs = bob.remember(fact("home_address", ADDRESS)).item_id
    service.vectors.catch_up()
    query = q(ADDRESS)
    assert ids(service.vectors.search(ALICE.namespace, query, 5)) == [first]
    assert ids(service.vectors.search(BOB.namespace, query, 5)) == [bobs]
    second = alice.remember(fact("city", "Hangzhou")).item_id
    service.vectors.catch_up()
    assert set(ids(service.vectors.search(ALICE.namespace, query, 5))) == {first, second}
    alice.forget(first)
    assert ids(service.vectors.search(ALICE.namespace, query, 5)) == [second]
    assert ids(service.vectors.search(BOB.namespace, query, 5)) == [bobs]


def test_segments_are_written_by_namespace_and_read_in_any_order(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    """Rows are written grouped by namespace, so a search takes one slice per segment;
    a segment whose rows are not grouped is still searched right (through row indexes)."""
    stored = [alice.remember(fact("city", "Hangzhou")), bob.remember(fact("city", "Ningbo"))]
    stored.append(alice.remember(preference("seat", "window")))
    service.vectors.catch_up()
    directory = settings.data_dir / "vectors"
    [sidecar] = directory.glob("seg-*.json")
    namespaces = json.loads(sidecar.read_bytes())["namespaces"]
    assert namespaces == sorted(namespaces) and len(set(namespaces)) == 2

    entry = SegmentEntry("seg-0.sealed", 3, "", "seg-0.json", "")
    meta = SegmentMeta(
        ("x", "y", "z"), ("a", "b", "a"), ("fact",) * 3, ("p",) * 3, (1, 1, 1), (0, 0, 0)
    )
    rows = np.arange(3 * 8, dtype=np.uint8).reshape(3, 8)  # stands for sealed rows
    manifest = Manifest("e", 4, "epoch", 1, 0, 1, (entry,))
    state = IndexState.of(manifest, [Segment.of(entry, meta, rows)], None)
    ids, generations, blocks = state.sealed_rows("a")
    assert ids == ["x", "z"] and generations == [0, 0]
    assert np.array_equal(np.concatenate(blocks), rows[[0, 2]])
    assert state.sealed_rows("c") == ([], [], [])


@SQLITE_ONLY
def test_redaction_drops_the_old_vector_at_once(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    card = alice.remember(turn("my card is 4111 1111 1111 1111")).item_id
    service.vectors.catch_up()
    old = row_of(service, card).tobytes()
    alice.redact(card, ["content"])
    assert holding(settings, old) == [] and service.vectors.snapshot() == []
    service.vectors.catch_up()
    assert np.allclose(row_of(service, card), q("[redacted]"))


def test_a_forget_drops_the_vectors_of_items_that_repeated_the_value(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    alice.remember(fact("home_address", ADDRESS))
    taxi = alice.remember(
        turn(f"Send the taxi to {ADDRESS} at 7am.", turn_id="t9", at=later(3))
    ).item_id
    service.vectors.catch_up()
    old = row_of(service, taxi).tobytes()

    report = alice.forget_scope(ADDRESS_SCOPE)

    assert report.completed and report.mentions == [taxi]
    [redacted] = [r for r in report.receipts if r.action == "mentions_redacted"]
    assert redacted.evidence["vector_rows_dropped"] == 1
    if settings.postgres is None:
        assert holding(settings, old) == []
    assert taxi not in {r.item_id for r in service.vectors.snapshot()}
    service.vectors.catch_up()  # embedded again, from the redacted wording
    assert np.allclose(row_of(service, taxi), q(alice.get(taxi).text or ""))
    assert not np.allclose(row_of(service, taxi), np.frombuffer(old, dtype=np.float32))


@SQLITE_ONLY
def test_a_crashed_writers_leftover_is_counted_then_shredded(
    items: dict[str, str], alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    erased = row_of(service, items["address"]).tobytes()
    (settings.data_dir / "vectors" / ".tmp-leftover").write_bytes(erased * 2)
    store = service.stores.get("vector_index")
    assert store.verify_absent([items["seat"]]).detail["stray_files"] == 1
    report = alice.forget(items["address"])
    assert receipt(report.receipts, "vector_index").status == "ok"
    assert holding(settings, erased) == []
    assert not (settings.data_dir / "vectors" / ".tmp-leftover").exists()


def test_the_same_text_in_another_users_item_survives_a_forget(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    """Same text, same vector, but two rows sealed under two keys: nothing is shared."""
    mine = alice.remember(preference("seat", "window")).item_id
    theirs = bob.remember(preference("seat", "window")).item_id
    service.vectors.catch_up()
    vector = receipt(alice.forget(mine).receipts, "vector_index")
    assert vector.status == "ok" and vector.evidence["rows_removed"] == 1
    assert ids(service.vectors.search(BOB.namespace, q("window seat"), 5)) == [theirs]


def test_the_scheduler_and_a_full_rebuild_include_the_vector_index(
    alice: MemoryLedger, service: MemoryService, embedder: CountingEmbedder
) -> None:
    alice.remember(fact("city", "Hangzhou"))
    _catch_up(service.job_context)
    assert service.vectors.status()["position"] == service.log.max_position()
    assert len(embedder.calls) == 1
    service.rebuild(["facts"])
    assert len(embedder.calls) == 1, "rebuilding one table leaves the vectors alone"
    service.rebuild()
    assert len(embedder.calls) == 1, "the stored vector is taken back, not embedded again"
    assert service.vectors.status()["rows"] == 1


@SQLITE_ONLY
def test_the_rebuild_command_rebuilds_the_vector_index(settings: Settings) -> None:
    with MemoryService(settings) as service:
        service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
    result = CliRunner().invoke(app, ["rebuild", "--data-dir", str(settings.data_dir), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["projections"][-1] == "vector_index"
    manifest = json.loads((settings.data_dir / "vectors" / MANIFEST).read_bytes())
    assert [s["rows"] for s in manifest["segments"]] == [1]


@SQLITE_ONLY
def test_the_default_embedder_finds_a_chinese_memory_for_an_english_query(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EMBEDDER_ENV, "use")
    with MemoryService(reread(settings)) as service:
        assert isinstance(service.vectors.embedder, UniversalSentenceEncoder)
        ledger = service.for_principal(ALICE)
        stored = ledger.remember_many(
            [
                turn("我对花生过敏"),
                turn("我住在杭州"),
                turn("我喜欢靠窗的座位"),
                fact("employer", "Acme Corp"),
            ]
        )
        service.vectors.catch_up()
        for query, expected in (
            ("Do I have any food allergies?", stored[0].item_id),
            ("Where do I like to sit on a plane?", stored[2].item_id),
        ):
            vector = service.vectors.embed_query(query)
            assert vector.shape == (512,)
            assert ids(service.vectors.search(ALICE.namespace, vector, 4))[0] == expected


class _NoEmbedding:
    name = "synthetic-512"
    dimension = 512

    def embed(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("not used")


class _KeysOnly:
    """What the index reads of the log when it only seals and opens rows: the items'
    data keys, wrapped by a real master key and unwrapped by the real KeyRing."""

    def __init__(self, items: list[str]) -> None:
        self.master = MasterKey.generate("test")
        self.rows = {i: (i, 1, self.master.wrap(i, 1, new_data_key())) for i in items}

    def keys_for(self, item_ids: list[str]) -> KeyRing:
        return KeyRing(self.master, [self.rows[i] for i in item_ids if i in self.rows])


def test_search_over_many_rows_from_sealed_files_finds_each_namespaces_own_rows(
    tmp_path: Path,
) -> None:
    """At scale, from the files as a fresh process reads them: many small namespaces
    (scored exactly) and one large one (codes pick candidates, scored exactly). How fast
    is measured in benchmarks/, not asserted here: machines are noisy."""
    rng = np.random.default_rng(7)
    rows, namespaces, heavy = 30_000, 500, 3 * EXACT_ROWS
    vectors = rng.standard_normal((rows, 512), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owner = [f"t/u{n}" for n in rng.integers(namespaces, size=rows - heavy)]
    owner += ["t/heavy"] * heavy
    items = [f"item-{i}" for i in range(rows)]
    keys = _KeysOnly(items)
    index = VectorIndex(keys, tmp_path / "v", _NoEmbedding())  # type: ignore[arg-type]
    ops: dict[str, Put | None] = {
        i: Put(owner[n], "fact", "p", 1, "", 1) for n, i in enumerate(items)
    }
    ring = keys.keys_for(items)
    sealed = seal_rows(ring, items, [1] * rows, vectors, [text_digest("")] * rows)
    with index._writing() as state:
        index._commit(state, ops, sealed, position=rows)
    index.close()  # searched from the files, as a fresh process would
    assert index.status()["rows"] == rows
    assert index.status()["segments"] == -(-rows // SEGMENT_ROWS)
    assert holding_any(tmp_path / "v", vectors[::997]) == []
    heavy_rows = np.flatnonzero(np.asarray(owner) == "t/heavy")
    for n in [*range(0, rows - heavy, 97), *range(rows - heavy, rows, 41)]:
        probe = vectors[n] + 0.02 * rng.standard_normal(512, dtype=np.float32)
        found = index.search(owner[n], probe, 10)
        assert found[0][0] == f"item-{n}" and found[0][1] > 0.9
        assert all(owner[int(item_id.removeprefix("item-"))] == owner[n] for item_id, _ in found)
        if owner[n] == "t/heavy":  # exact scores, and the best row of the namespace first
            exact = vectors[heavy_rows] @ probe
            assert found[0][1] == pytest.approx(float(exact.max()), abs=1e-5)
            for item_id, score in found:
                row = int(item_id.removeprefix("item-"))
                assert score == pytest.approx(float(vectors[row] @ probe), abs=1e-5)


def holding_any(directory: Path, vectors: np.ndarray) -> list[str]:
    out = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        if any(v.tobytes()[i : i + 16] in raw for v in vectors for i in range(0, 2048, 256)):
            out.append(path.name)
    return out


def test_rebuild_takes_the_stored_vectors_back_instead_of_embedding_again(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService, embedder: CountingEmbedder
) -> None:
    _history(alice, bob, service)
    incremental = service.vectors.snapshot()
    calls = len(embedder.calls)
    assert service.vectors.rebuild() > 0
    assert len(embedder.calls) == calls, "no item's text changed: nothing is embedded"
    assert service.vectors.last_rebuild == {
        "rows": 5,
        "reused": 5,
        "embedded": 0,
        # the history's forget listed one row dead: gone with the old segments, proved
        "dead_rows_dropped": 1,
        "dead_rows_files_holding": 0,
    }
    assert service.vectors.status()["dead_rows"] == 0
    rebuilt = service.vectors.snapshot()
    assert [(r.item_id, r.version) for r in rebuilt] == [
        (r.item_id, r.version) for r in incremental
    ]
    assert all(
        np.array_equal(a.vector, b.vector) for a, b in zip(rebuilt, incremental, strict=True)
    )

    home = next(
        r.item_id for r in rebuilt if np.allclose(r.vector, q("home address: 7 Binjiang Avenue"))
    )
    alice.update(home, {"value": "3 West Lake Road", "provenance": provenance(at=later(5))})
    service.vectors.rebuild()  # the text changed: only that item is embedded
    assert embedder.calls[calls:] == [["home address: 3 West Lake Road"]]
    assert np.allclose(row_of(service, home), q("home address: 3 West Lake Road"))


def test_another_embedder_embeds_everything_again(settings: Settings) -> None:
    with MemoryService(settings, embedder=CountingEmbedder()) as service:
        ledger = service.for_principal(ALICE)
        ledger.remember_many([fact("home_address", ADDRESS), preference("seat", "window")])
        service.vectors.catch_up()
    other = CountingEmbedder(name="hashing-256-retrained")  # same dimension, another model
    with MemoryService(settings, embedder=other) as service:
        assert service.vectors.search(ALICE.namespace, q(ADDRESS), 5) == []  # not served
        assert service.vectors.catch_up() == 2 and len(other.texts) == 2
        service.vectors.rebuild()  # and now its own vectors are the stored ones
        assert len(other.texts) == 2 and service.vectors.status()["rows"] == 2


def test_an_opened_namespace_is_updated_by_commits_not_opened_again(
    items: dict[str, str],
    alice: MemoryLedger,
    service: MemoryService,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert service.vectors.search(ALICE.namespace, q(ADDRESS), 1)  # opens its 3 rows
    opened: list[list[str]] = []
    real = service.vectors._open

    def spy(item_ids: list[str], generations: list[int], sealed: np.ndarray) -> Any:
        opened.append(list(item_ids))
        return real(item_ids, generations, sealed)

    monkeypatch.setattr(service.vectors, "_open", spy)
    city = alice.remember(fact("city", "Hangzhou")).item_id
    service.vectors.catch_up()
    assert opened == [[city]], "only the new row is opened"
    view = service.vectors._current().namespace(ALICE.namespace, spy)
    assert view is not None and len(view) == 4
    row = view.position[items["address"]]
    alice.forget(items["address"])
    assert not view.matrix[row].any(), "the erased vector is zeroed in memory at once"
    found = ids(service.vectors.search(ALICE.namespace, q("Hangzhou"), 5))
    assert found[0] == city and items["address"] not in found and len(found) == 3
    assert opened == [[city]]


def test_a_destroyed_key_makes_its_row_unservable_while_its_file_rows_remain(
    items: dict[str, str], service: MemoryService, settings: Settings
) -> None:
    address = items["address"]
    assert ids(service.vectors.search(ALICE.namespace, q(ADDRESS), 1)) == [address]  # opened
    service.log.save([], destroy=[KeyDestruction(address, None)])  # the key store alone
    on_disk = [i for members in segments_on_disk(directory(settings)).values() for i in members]
    assert address in on_disk, "the row is still in the files"
    assert address not in ids(service.vectors.search(ALICE.namespace, q(ADDRESS), 5))
    assert len(service.vectors.search(ALICE.namespace, q(ADDRESS), 5)) == 2
    fresh = VectorIndex(service.log, directory(settings), HASH)  # another process
    assert address not in ids(fresh.search(ALICE.namespace, q(ADDRESS), 5))
    assert address not in {r.item_id for r in fresh.snapshot()}


def _killed(settings: Settings, point: str, work: str) -> None:
    """Run `work` (with `service` open) in a child process that kills itself with
    SIGKILL at `point` of a vector index commit: as the manifest is about to be written,
    or once it is written, before the replaced files are unlinked."""
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}" if pg else ""
    script = textwrap.dedent(f"""
        import os, signal
        import memory_ledger.projections.vector_index as vi
        from memory_ledger.api import MemoryService
        from memory_ledger.keystore import KeyDestruction

        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)

        real_write = vi.write_atomic
        def write_atomic(directory, name, data):
            if {point!r} == "before_manifest" and name == "manifest.json":
                die()
            return real_write(directory, name, data)
        vi.write_atomic = write_atomic
        if {point!r} == "before_sweep":
            vi.VectorIndex._sweep = die
        with MemoryService.open({str(settings.data_dir)!r}, {url!r} or None) as service:
    """) + textwrap.indent(textwrap.dedent(work), "    ")
    worker = subprocess.run(
        [sys.executable, "-c", script], env=dict(os.environ), capture_output=True
    )
    assert worker.returncode == -9, worker.stderr.decode()


def _named_files(settings: Settings) -> set[str]:
    return {
        n for f in segments_on_disk(directory(settings)) for n in (f, f.replace(".sealed", ".json"))
    }


def test_a_writer_killed_during_an_erasure_leaves_nothing_erased_servable(
    items: dict[str, str], service: MemoryService, settings: Settings
) -> None:
    address = items["address"]
    every = [r.vector for r in service.vectors.snapshot()]
    _killed(
        settings,
        "before_manifest",
        f"""
        service.log.save([], destroy=[KeyDestruction({address!r}, None)])
        service.vectors.erase([{address!r}])
        """,
    )
    assert clear_vectors_on_disk(settings, every) == []
    with MemoryService(settings, embedder=CountingEmbedder()) as again:
        found = ids(again.vectors.search(ALICE.namespace, q(ADDRESS), 5))
        assert address not in found and set(found) == {items["seat"], items["turn"]}
        assert again.stores.get("vector_index").erase([address]).status == "ok"
        assert again.stores.get("vector_index").verify_absent([address]).absent
        assert again.vectors.status()["dead_rows"] == 1


@pytest.mark.parametrize("point", ["before_manifest", "before_sweep"])
def test_a_compaction_killed_midway_loses_nothing_and_the_next_one_proves_the_bytes_gone(
    alice: MemoryLedger, service: MemoryService, settings: Settings, point: str
) -> None:
    """kill -9 of a compaction in a child process: after the restart no search returns
    an erased row, every live row is still there, and the next compaction proves the
    erased rows' bytes gone from every file."""
    service.vectors = VectorIndex(service.log, directory(settings), HASH, segment_rows=4)
    service.stores.get("vector_index").vectors = service.vectors
    stored = alice.remember_many([fact(f"p{n}", f"value number {n}") for n in range(10)])
    service.vectors.catch_up()
    erased = [stored[n].item_id for n in (1, 2, 5, 9)]
    live = {s.item_id for s in stored} - set(erased)
    for item in erased:
        assert alice.forget(item).completed
    sealed = {p.name: p.read_bytes() for p in files_of(settings)}
    state = service.vectors._current()
    dead_rows = [seg.sealed[r].tobytes() for seg in state.segments for r in sorted(seg.dead)]
    assert len(dead_rows) == len(erased)
    assert any(row in raw for row in dead_rows for raw in sealed.values())

    _killed(settings, point, "service.vectors.compact(everything=True)")

    strays = {p.name for p in files_of(settings)} - {".lock", MANIFEST} - _named_files(settings)
    assert strays, "the killed compaction left its files behind"
    with MemoryService(settings, embedder=CountingEmbedder()) as again:
        found = set(ids(again.vectors.search(ALICE.namespace, q("value number"), 20)))
        assert found == live, "no erased row served, every live row still there"
        assert {r.item_id for r in again.vectors.snapshot()} == live
        done = again.vectors.compact(everything=True)
        if point == "before_manifest":
            assert done.rows_dropped == len(erased)
        assert done.proved and again.vectors.status()["dead_rows"] == 0
        assert again.stores.get("vector_index").verify_absent(erased).absent
        assert {p.name for p in files_of(settings)} - {".lock", MANIFEST} == _named_files(settings)
        found = set(ids(again.vectors.search(ALICE.namespace, q("value number"), 20)))
        assert found == live
    held = b"".join(p.read_bytes() for p in files_of(settings))
    assert not any(row[:32] in held or row[-32:] in held for row in dead_rows)


def _heavy_index(tmp_path: Path, rows: int) -> tuple[VectorIndex, _KeysOnly, np.ndarray, list[str]]:
    """One namespace of `rows` random unit vectors, committed to files, nothing opened."""
    rng = np.random.default_rng(37)
    vectors = rng.standard_normal((rows, 512), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    items = [f"item-{i}" for i in range(rows)]
    keys = _KeysOnly(items)
    index = VectorIndex(keys, tmp_path / "v", _NoEmbedding())  # type: ignore[arg-type]
    ring = keys.keys_for(items)
    sealed = seal_rows(ring, items, [1] * rows, vectors, [text_digest("")] * rows)
    ops: dict[str, Put | None] = {i: Put("t/heavy", "fact", "p", 1, "", 1) for i in items}
    with index._writing() as state:
        index._commit(state, ops, sealed, position=rows)
    index.close()
    return index, keys, vectors, items


def test_a_fresh_process_opens_only_the_rows_a_search_scores(tmp_path: Path) -> None:
    """Issue 37: a large namespace's codes are kept sealed (projections/vector_codes.py),
    so another process builds its view from them and opens only the candidates it
    scores; what it returns is what a view opened whole returns, exact scores."""
    rows = 2 * EXACT_ROWS + 700
    first, keys, vectors, _ = _heavy_index(tmp_path, rows)
    rng = np.random.default_rng(5)
    probes = [vectors[n] + 0.05 * rng.standard_normal(512, dtype=np.float32) for n in (3, 4000)]
    whole = [first.search("t/heavy", p, 10) for p in probes]  # opened whole: codes stored
    assert len(first.codes.files()) == 1
    raw = first.codes.files()[0].read_bytes()
    assert b"item-3" not in raw and b"t/heavy" not in raw  # sealed, named by a keyed hash

    fresh = VectorIndex(keys, tmp_path / "v", _NoEmbedding())  # type: ignore[arg-type]
    lazily = [fresh.search("t/heavy", p, 10) for p in probes]
    assert [ids(r) for r in lazily] == [ids(r) for r in whole]
    for got, want in zip(lazily, whole, strict=True):
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
    view = fresh._current().namespace("t/heavy", fresh._open)
    assert view is not None and view.lazy is not None
    assert 0 < view.lazy.used < rows // 2, "only the candidates were opened"


def test_a_lazily_opened_namespace_never_serves_a_destroyed_key_and_codes_new_rows(
    tmp_path: Path,
) -> None:
    rows = EXACT_ROWS + 500
    first, keys, vectors, items = _heavy_index(tmp_path, rows)
    target = 42
    assert ids(first.search("t/heavy", vectors[target], 1)) == [items[target]]  # codes stored
    del keys.rows[items[target]]  # its key destroyed, its row (and code) still on disk
    fresh = VectorIndex(keys, tmp_path / "v", _NoEmbedding())  # type: ignore[arg-type]
    found = fresh.search("t/heavy", vectors[target], 5)
    assert items[target] not in ids(found) and len(found) == 5

    # Rows written after the codes were stored: opened and coded when the view is built.
    extra = np.random.default_rng(9).standard_normal((3, 512), dtype=np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    new = [f"new-{i}" for i in range(3)]
    keys.rows.update({i: (i, 1, keys.master.wrap(i, 1, new_data_key())) for i in new})
    sealed = seal_rows(keys.keys_for(new), new, [1] * 3, extra, [text_digest("")] * 3)
    with fresh._writing() as state:
        fresh._commit(state, {i: Put("t/heavy", "fact", "p", 1, "", 1) for i in new}, sealed,
                      position=rows + 3)  # fmt: skip
    another = VectorIndex(keys, tmp_path / "v", _NoEmbedding())  # type: ignore[arg-type]
    for n, item in enumerate(new):
        assert ids(another.search("t/heavy", extra[n], 1)) == [item]
    view = another._current().namespace("t/heavy", another._open)
    assert view is not None and view.lazy is not None


def test_an_erasure_removes_every_codes_file(
    items: dict[str, str], alice: MemoryLedger, service: MemoryService
) -> None:
    codes = service.vectors.codes
    stored = vector_codes.NamespaceCodes([("x", 1, 1)], np.zeros((1, 64), np.uint8))
    before = codes.epoch  # what a search that began before the erasure read
    codes.save("t/other", stored, before)
    assert codes.files()
    alice.forget(items["address"])
    assert codes.files() == []
    # that search's file, built from rows read before the erasure, is not written after it
    codes.save("t/other", stored, before)
    assert codes.files() == []
