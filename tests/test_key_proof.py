"""The key proof: a destroyed key's bytes left in a page's unused gap (SQLite can leave
an old copy of a cell there when it rebuilds a page on a split or merge, which
secure_delete does not zero) are found, the file is rebuilt, and only then is the proof
given; a forget is never `completed` on bytes that are still there."""

from __future__ import annotations

import os
import sqlite3

import pytest
from factories import fact

from memory_ledger.api import MemoryService
from memory_ledger.forgetting.key_proof import KeyBytes, key_pages, prove
from memory_ledger.principal import Principal

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # the files are SQLite's


def _plant(path: os.PathLike[str], needle: bytes) -> None:
    """Write `needle` into a run of zeros inside a page of the key table, as a stale
    copy of a moved cell would sit there."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'memory_keys'")]
    conn.close()
    with open(path, "r+b") as handle:
        for page in pages:
            data = os.pread(handle.fileno(), page_size, (page - 1) * page_size)
            gap = data.find(b"\x00" * (len(needle) + 16), 100)
            if gap > 0:
                os.pwrite(handle.fileno(), needle, (page - 1) * page_size + gap + 8)
                return
    raise AssertionError("no gap in the key table's pages")


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
    _plant(path, wrapped)
    assert wrapped in key_pages(path)  # the proof reads what is really there

    proof = prove(service.log, captured)

    assert proof.checked and proof.found == 0 and proof.rebuilt
    assert wrapped not in key_pages(path) and wrapped not in path.read_bytes()
    assert [alice.get(i).text for i in ids[1:3]] == ["value 1", "value 2"]  # nothing else lost


def test_a_clean_file_is_not_rebuilt(service: MemoryService) -> None:
    alice = service.for_principal(Principal("acme", "alice"))
    item = alice.remember(fact("locker", "code 5120")).item_id
    captured = KeyBytes.capture(service.log, [item])
    service.log.tombstone([item], "test")
    proof = prove(service.log, captured)
    assert proof.checked and proof.found == 0 and not proof.rebuilt
