"""The key store's proof that a request's destroyed keys are gone from its bytes.

Every store keeps personal content sealed under its item's data key (../docs/DESIGN.md,
"Sealed everywhere"), so a forget is complete once every store's receipt is in and
the destroyed keys' wrapped bytes are provably gone: the ciphertext left anywhere else
(free pages, WAL frames, old files, backups) can no longer be opened by anyone. This is
that proof, and its cost follows the key store's size, about 150 bytes per key, not the
size of the data.

On SQLite the key table lives in the event store's file. After a checkpoint that
truncates the WAL, the proof reads exactly the pages that can hold key bytes: the key
table's own pages (SQLite's `dbstat` names them), the free-list pages (a page freed
from the key table goes there) and whatever is left of the WAL, and searches them for
the destroyed keys' wrapped bytes. The wrapped bytes are read just before the keys are
destroyed and kept in memory only. On PostgreSQL the server's files are not ours to
read: the receipt says so, and that VACUUM of the key table ran.

The scheduled verification scan (jobs/verification_scan.py) later reads every file of
the data directory for the erased texts, their fragments and these same key bytes (as
keyed fingerprints), so a copy the page walk could not see is still caught, later.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memory_ledger.event_log import EventLog
from memory_ledger.keystore import KEYS_TABLE
from memory_ledger.residue import search_bytes

STORE = "key_store"
#: Distinct byte values a wrapped key must have to be searched for (a real one, 60
#: random bytes, has about 50).
MIN_DISTINCT_BYTES = 16
ACTION = "key_bytes_gone"


@dataclass(frozen=True)
class KeyBytes:
    """Wrapped bytes of the live keys of items a request is about to change: memory only,
    never stored or logged (they are what the proof searches for). Those still live after
    the request (a resumed request's rewritten mention keeps its new key) are dropped by
    `destroyed`."""

    keys: tuple[tuple[str, int, bytes], ...]

    @classmethod
    def capture(cls, log: EventLog, item_ids: Sequence[str]) -> KeyBytes:
        rows = log.keys_for(list(dict.fromkeys(item_ids))).live_rows()
        # A wrapped key is random bytes; a corrupted entry of repeated bytes (a zero
        # fill) would be "found" in every zeroed page and prove nothing either way.
        return cls(tuple(r for r in rows if len(set(r[2])) >= MIN_DISTINCT_BYTES))

    def destroyed(self, log: EventLog) -> KeyBytes:
        ring = log.keys_for(sorted({item for item, _, _ in self.keys}))
        return KeyBytes(tuple(k for k in self.keys if not ring.is_live(k[0], k[1])))

    @property
    def wrapped(self) -> tuple[bytes, ...]:
        return tuple(w for _, _, w in self.keys)


@dataclass(frozen=True)
class KeyProof:
    checked: bool
    how: str
    keys_searched: int
    found: int
    bytes_read: int
    #: The file had to be rebuilt (VACUUM) before the bytes were gone.
    rebuilt: bool = False

    @property
    def ok(self) -> bool:
        return self.found == 0

    def evidence(self) -> dict[str, int | bool | str]:
        return {  # counts and flags only: the ledger takes no free text
            "checked": self.checked,
            "keys_searched": self.keys_searched,
            "keys_found": self.found,
            "bytes_read": self.bytes_read,
            "file_rebuilt": self.rebuilt,
        }


def prove(log: EventLog, keys: KeyBytes) -> KeyProof:
    """Checkpoint the event store and search the key table's bytes for `keys`."""
    keys = keys.destroyed(log)
    done = "; ".join(log.compact())
    if log.settings.postgres is not None:
        return KeyProof(False, f"not read: the server's files; {done}", len(keys.wrapped), 0, 0)
    if not keys.wrapped:
        return KeyProof(False, f"nothing to search (no live key was destroyed); {done}", 0, 0, 0)
    path = log.settings.events_path
    data = key_pages(path)
    found = search_bytes(data, list(keys.wrapped))
    rebuilt = ""
    if found:
        # secure_delete zeroes freed cells, but a page that SQLite rebuilt when it split
        # or merged (an insert of new keys, a rotation) can keep an old copy of a cell
        # that moved away in its unused gap, and that copy outlives the key's
        # destruction. Rare; rebuilding the file (VACUUM) leaves only live rows.
        log.rewrite_file()
        data = key_pages(path)
        found = search_bytes(data, list(keys.wrapped))
        rebuilt = "; the file was rebuilt with VACUUM (a destroyed key's bytes were found)"
    how = f"key table, free-list and WAL pages of {path.name} ({len(data)} bytes); {done}{rebuilt}"
    return KeyProof(True, how, len(keys.wrapped), len(found), len(data), bool(rebuilt))


def key_pages(path: Path) -> bytes:
    """The bytes of every page that can hold a key: the key table's pages, the free-list
    trunk and leaf pages, and the WAL (empty after a truncating checkpoint)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = [
            int(p)
            for (p,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? ORDER BY pageno", (KEYS_TABLE,)
            )
        ]
    conn.close()
    parts: list[bytes] = []
    with open(path, "rb", buffering=0) as handle:
        header = os.pread(handle.fileno(), 100, 0)
        pages.extend(_free_pages(handle.fileno(), header, page_size))
        for first, count in _runs(sorted(set(pages))):  # one read per run of pages
            parts.append(os.pread(handle.fileno(), count * page_size, (first - 1) * page_size))
    wal = Path(f"{path}-wal")
    if wal.exists():
        parts.append(wal.read_bytes())
    return b"".join(parts)


def _runs(numbers: list[int]) -> list[tuple[int, int]]:
    """Sorted page numbers as (first, count) runs of consecutive pages."""
    runs: list[tuple[int, int]] = []
    for n in numbers:
        if runs and runs[-1][0] + runs[-1][1] == n:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((n, 1))
    return runs


def _free_pages(fd: int, header: bytes, page_size: int) -> list[int]:
    """Page numbers on the free list: a chain of trunk pages (next trunk, leaf count,
    leaf numbers), all big-endian 32-bit, from the header's offset 32."""
    trunk = int.from_bytes(header[32:36], "big")
    total = int.from_bytes(header[36:40], "big")
    out: list[int] = []
    while trunk and len(out) <= total:
        out.append(trunk)
        page = os.pread(fd, page_size, (trunk - 1) * page_size)
        count = int.from_bytes(page[4:8], "big")
        out.extend(int.from_bytes(page[8 + 4 * i : 12 + 4 * i], "big") for i in range(count))
        trunk = int.from_bytes(page[0:4], "big")
    return out
