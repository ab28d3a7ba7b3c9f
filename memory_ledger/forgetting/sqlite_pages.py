"""Which pages of a SQLite file can hold given rows: read from the file format itself.

The key proof (key_proof.py) must search the bytes where a destroyed key was, and only
those, so that its cost follows what a request destroyed and not the key store's size.
SQLite has no function that names a row's page (`sqlite_offset` is not compiled into
Python's library, and `dbstat` walks the whole table), so this module descends the
table's B-tree from its root page, as SQLite does, to each row: every page on the way
(an index B-tree keeps each entry once, in an interior or a leaf page), the overflow
pages of the cells found, and the free list (a page a row left when its page was merged
goes there). A destroyed key's row stays where it was (its wrapped bytes are set to
NULL: the cell only shrinks), so its path after the truncating checkpoint leads to the
page that held it.

What this does not see: an old copy of a cell that SQLite left in the unused gap of
another page when it rebalanced pages earlier. The scheduled verification scan reads
every page of every file for the same bytes (jobs/verification_scan.py); the proof's
receipt says which pages it read.

The file format: https://www.sqlite.org/fileformat2.html (B-tree pages, record format,
the free list). Read on the file after a truncating checkpoint: the WAL is then empty
and the file is the database.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: B-tree page types (the page header's first byte).
_INDEX_INTERIOR, _INDEX_LEAF = 0x02, 0x0A
_HEADER = 100  # the database header, before page 1's own header


class UnexpectedPage(ValueError):
    """A page is not what an index B-tree's descent expects: the caller reads more."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A SQLite varint at `at`: its value and the offset after it."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9


def _key_of(record: bytes) -> tuple[bytes, int]:
    """The first two columns of a record, (text, integer): the key store's primary key
    (item id, generation)."""
    if record[0] < 0x80 and record[1] < 0x80 and record[2] < 0x80:  # one-byte varints
        header_size, text_type, int_type = record[0], record[1], record[2]
    else:
        header_size, at = _varint(record, 0)
        text_type, at = _varint(record, at)
        int_type, _ = _varint(record, at)
    if text_type < 13 or text_type % 2 == 0:
        raise UnexpectedPage("the first column is not text")
    length = (text_type - 13) // 2
    text = record[header_size : header_size + length]
    start = header_size + length
    if int_type in (8, 9):
        return text, int_type - 8
    width = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}.get(int_type)
    if width is None:
        raise UnexpectedPage("the second column is not an integer")
    return text, int.from_bytes(record[start : start + width], "big", signed=True)


class _File:
    """Pages read once each (memory only), by number."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        header = os.pread(fd, _HEADER, 0)
        size = int.from_bytes(header[16:18], "big")
        self.page_size = 65536 if size == 1 else size
        self.usable = self.page_size - header[20]
        self.header = header
        self.pages: dict[int, bytes] = {}
        self.parsed: dict[int, _IndexPage] = {}

    def page(self, number: int) -> bytes:
        if number not in self.pages:
            self.pages[number] = os.pread(self.fd, self.page_size, (number - 1) * self.page_size)
        return self.pages[number]

    def local_size(self, payload: int) -> int:
        """How much of an index cell's payload is on its page (the rest overflows)."""
        usable = self.usable
        most = (usable - 12) * 64 // 255 - 23
        if payload <= most:
            return payload
        least = (usable - 12) * 32 // 255 - 23
        keep = least + (payload - least) % (usable - 4)
        return keep if keep <= most else least


@dataclass(frozen=True)
class _IndexPage:
    leaf: bool
    keys: list[tuple[bytes, int]]  # in order
    children: list[int]  # each cell's left child (interior pages)
    overflows: list[int]  # each cell's first overflow page, or 0
    right: int  # the right-most child (interior pages)


def _parsed(file: _File, number: int) -> _IndexPage:
    """An index page's cells, parsed once per proof (the root and the upper levels are
    on every key's path)."""
    page = file.parsed.get(number)
    if page is None:
        kind, cells, right = _cells(file, number)
        page = _IndexPage(
            kind == _INDEX_LEAF,
            [key for _, key, _ in cells],
            [child for child, _, _ in cells],
            [overflow for _, _, overflow in cells],
            right,
        )
        file.parsed[number] = page
    return page


def _cells(file: _File, number: int) -> tuple[int, list[tuple[int, tuple[bytes, int], int]], int]:
    """An index page's type, its cells as (left child or 0, key, first overflow page or
    0) in order, and its right-most child (0 on a leaf)."""
    data = file.page(number)
    base = _HEADER if number == 1 else 0
    kind = data[base]
    if kind not in (_INDEX_INTERIOR, _INDEX_LEAF):
        raise UnexpectedPage(f"page {number} is not an index B-tree page")
    count = int.from_bytes(data[base + 3 : base + 5], "big")
    interior = kind == _INDEX_INTERIOR
    right = int.from_bytes(data[base + 8 : base + 12], "big") if interior else 0
    pointers = base + (12 if interior else 8)
    cells = []
    for i in range(count):
        at = int.from_bytes(data[pointers + 2 * i : pointers + 2 * i + 2], "big")
        child = 0
        if interior:
            child = int.from_bytes(data[at : at + 4], "big")
            at += 4
        payload, at = _varint(data, at)
        local = file.local_size(payload)
        record, overflow = data[at : at + local], 0
        if local < payload:  # the rest of the record is on a chain of overflow pages
            overflow = int.from_bytes(data[at + local : at + local + 4], "big")
            for page in _overflow_chain(file, overflow):
                record += file.page(page)[4 : file.usable]
        cells.append((child, _key_of(record[:payload]), overflow))
    return kind, cells, right


def _overflow_chain(file: _File, first: int) -> list[int]:
    chain: list[int] = []
    while first and first not in chain:
        chain.append(first)
        first = int.from_bytes(file.page(first)[0:4], "big")
    return chain


def _path_to(file: _File, root: int, key: tuple[bytes, int]) -> list[int]:
    """The pages from the root to the entry of `key` (or to the leaf where it would be),
    and the overflow pages of the entry if it has some."""
    path: list[int] = []
    number = root
    while number and len(path) < 64:  # a B-tree of 64 levels would not fit in any file
        path.append(number)
        page = _parsed(file, number)
        at = bisect.bisect_left(page.keys, key)  # the first cell not below the key
        if at < len(page.keys) and page.keys[at] == key:
            return path + _overflow_chain(file, page.overflows[at])
        if page.leaf:
            return path
        number = page.children[at] if at < len(page.keys) else page.right
    raise UnexpectedPage("the descent did not reach a leaf")


def free_pages(file_header: bytes, fd: int, page_size: int) -> list[int]:
    """Page numbers on the free list: a chain of trunk pages (next trunk, leaf count,
    leaf numbers), all big-endian 32-bit, from the header's offset 32."""
    trunk = int.from_bytes(file_header[32:36], "big")
    total = int.from_bytes(file_header[36:40], "big")
    out: list[int] = []
    while trunk and len(out) <= total:
        out.append(trunk)
        page = os.pread(fd, page_size, (trunk - 1) * page_size)
        count = int.from_bytes(page[4:8], "big")
        out.extend(int.from_bytes(page[8 + 4 * i : 12 + 4 * i], "big") for i in range(count))
        trunk = int.from_bytes(page[0:4], "big")
    return out


def pages_of_rows(fd: int, root: int, keys: Iterable[tuple[str, int]]) -> tuple[int, list[int]]:
    """The page size, and the sorted numbers of the pages that hold (or would hold) the
    rows of a WITHOUT ROWID table with primary key (text, integer), rooted at `root`, with
    their overflow pages and the free list. Raises UnexpectedPage if the file is not
    shaped as expected (the caller then reads the whole table)."""
    file = _File(fd)
    found: set[int] = set()
    for item_id, generation in keys:
        found.update(_path_to(file, root, (item_id.encode("utf-8"), generation)))
    found.update(free_pages(file.header, fd, file.page_size))
    return file.page_size, sorted(found)


def read_pages(fd: int, page_size: int, numbers: Sequence[int]) -> bytes:
    """The pages' bytes, one read per run of consecutive pages."""
    parts: list[bytes] = []
    runs: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if runs and runs[-1][0] + runs[-1][1] == n:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((n, 1))
    for first, count in runs:
        parts.append(os.pread(fd, count * page_size, (first - 1) * page_size))
    return b"".join(parts)
