"""The key proof: a destroyed key's bytes left in a page's unused gap (SQLite can leave
an old copy of a cell there when it rebuilds a page on a split or merge, which
secure_delete does not zero) are found, the file is rebuilt, and only then is the proof
given; a forget is never `completed` on bytes that are still there."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence

import pytest
from factories import fact

from memory_ledger.api import MemoryService
from memory_ledger.forgetting.key_proof import KeyBytes, key_pages, prove, touched_pages
from memory_ledger.forgetting.sqlite_pages import pages_of_rows
from memory_ledger.principal import Principal

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # the files are SQLite's


def _plant(
    path: os.PathLike[str], needle: bytes, where: Callable[[int], bool] = lambda page: True
) -> int:
    """Write `needle` into a run of zeros inside a page of the key table (one `where`
    accepts), as a stale copy of a moved cell would sit there; returns the page."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        table = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'memory_keys'")]
    conn.close()
    pages = [p for p in table if where(p)]
    with open(path, "r+b") as handle:
        for page in pages:
            data = os.pread(handle.fileno(), page_size, (page - 1) * page_size)
            gap = data.find(b"\x00" * (len(needle) + 16), 100)
            if gap > 0:
                os.pwrite(handle.fileno(), needle, (page - 1) * page_size + gap + 8)
                return int(page)
    raise AssertionError("no gap in the key table's pages")


def _held(path: os.PathLike[str], keys: Sequence[tuple[str, int]]) -> list[int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        [(root,)] = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'memory_keys'")
    conn.close()
    with open(path, "rb") as handle:
        return pages_of_rows(handle.fileno(), int(root), keys)[1]


def test_a_stale_copy_of_a_destroyed_key_is_found_and_rebuilt_away(
    service: MemoryService,
) -> None:
    alice = service.for_principal(Principal("acme", "alice"))
    ids = [alice.remember(fact(f"p{n}", f"value {n}")).item_id for n in range(40)]
    captured = KeyBytes.capture(service.log, ids[:1])
    service.log.tombstone(ids[:1], "test")
    service.log.compact()
    path = service.settings.events_path
    [wrapped] = captured.destroyed(service.log).wrapped
    _plant(path, wrapped, set(_held(path, [(ids[0], 1)])).__contains__)  # in the page that held it
    assert wrapped in key_pages(path)  # the proof reads what is really there

    proof = prove(service.log, captured)

    assert proof.checked and proof.found == 0 and proof.rebuilt and proof.whole_table
    assert wrapped not in key_pages(path) and wrapped not in path.read_bytes()
    assert [alice.get(i).text for i in ids[1:3]] == ["value 1", "value 2"]  # nothing else lost


def test_a_clean_file_is_not_rebuilt(service: MemoryService) -> None:
    alice = service.for_principal(Principal("acme", "alice"))
    item = alice.remember(fact("locker", "code 5120")).item_id
    captured = KeyBytes.capture(service.log, [item])
    service.log.tombstone([item], "test")
    proof = prove(service.log, captured)
    assert proof.checked and proof.found == 0 and not proof.rebuilt


def test_the_proof_reads_the_pages_that_held_the_keys_not_the_whole_table(
    service: MemoryService,
) -> None:
    """At a few thousand keys the key table is a B-tree of several levels: the descent
    from the file finds every key's row (its wrapped bytes are in the pages it names),
    and reads a small part of the table."""
    alice = service.for_principal(Principal("acme", "alice"))
    ids = [r.item_id for r in alice.remember_many([fact(f"p{n}", f"v {n}") for n in range(3000)])]
    service.log.compact()
    path = service.settings.events_path
    whole = key_pages(path)
    for item_id, generation, wrapped in KeyBytes.capture(service.log, ids[::97]).keys:
        data, whole_table = touched_pages(path, [(item_id, generation)])
        assert wrapped in data, item_id
        assert not whole_table and len(data) * 20 < len(whole)


def test_a_copy_outside_the_touched_pages_is_left_to_the_scheduled_scan(
    service: MemoryService,
) -> None:
    """The proof's limit, as the receipt says: an old copy in another page's gap is not
    read by it (the scheduled verification scan reads every page)."""
    alice = service.for_principal(Principal("acme", "alice"))
    ids = [r.item_id for r in alice.remember_many([fact(f"p{n}", f"v {n}") for n in range(3000)])]
    captured = KeyBytes.capture(service.log, ids[:1])
    service.log.tombstone(ids[:1], "test")
    service.log.compact()
    path = service.settings.events_path
    [wrapped] = captured.destroyed(service.log).wrapped
    held = _held(path, [(ids[0], 1)])
    planted = _plant(path, wrapped, lambda page: page not in held)
    assert planted not in held
    proof = prove(service.log, captured)
    assert proof.checked and proof.found == 0 and not proof.rebuilt and not proof.whole_table
    assert wrapped in path.read_bytes()  # what the scheduled scan is for
