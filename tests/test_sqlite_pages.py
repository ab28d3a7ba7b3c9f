"""The descent of a SQLite B-tree read from the file (sqlite_pages.py), against SQLite
itself: for any set of rows of a table shaped like the key store's (WITHOUT ROWID,
primary key text and integer), the pages it names for a row hold that row's bytes, also
when the row overflows its page and when the tree has several levels."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.forgetting.sqlite_pages import pages_of_rows, read_pages

ids = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40)


def _table(path: Path, rows: list[tuple[str, int, bytes]]) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE keys (item_id TEXT NOT NULL, generation INTEGER NOT NULL, "
            "wrapped BLOB, PRIMARY KEY (item_id, generation)) WITHOUT ROWID"
        )
        conn.executemany("INSERT INTO keys VALUES (?, ?, ?)", rows)
        [(root,)] = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'keys'")
    conn.close()
    return int(root)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    keys=st.sets(st.tuples(ids, st.integers(-(2**40), 2**40)), min_size=1, max_size=400),
    padding=st.integers(0, 3000),
)
def test_the_named_pages_hold_each_row(
    tmp_path: Path, keys: set[tuple[str, int]], padding: int
) -> None:
    path = tmp_path / f"{secrets.token_hex(4)}.sqlite"
    # A long id overflows its page; many rows make interior levels.
    rows = [
        (i + "x" * (padding if n % 7 == 0 else 0), g, secrets.token_bytes(60))
        for n, (i, g) in enumerate(sorted(keys))
    ]
    root = _table(path, rows)
    with open(path, "rb") as handle:
        for item_id, generation, wrapped in rows[:: max(1, len(rows) // 20)]:
            page_size, pages = pages_of_rows(handle.fileno(), root, [(item_id, generation)])
            data = read_pages(handle.fileno(), page_size, pages)
            if len(item_id.encode()) < 400:  # the row fits its page
                assert wrapped in data
            else:  # it may span two overflow pages: one half is whole in one of them
                assert wrapped[:30] in data or wrapped[30:] in data


def test_a_missing_row_leads_to_the_leaf_where_it_would_be(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    root = _table(path, [(f"item-{n:05d}", 1, secrets.token_bytes(60)) for n in range(5000)])
    with open(path, "rb") as handle:
        _, pages = pages_of_rows(handle.fileno(), root, [("item-02500x", 1)])
    assert 2 <= len(pages) <= 4  # the root, maybe a level, one leaf: not the table
