"""The byte-level residue check of a forget request, now and later.

During the request the erased texts are in memory and the scan looks for them directly
(`after_erasure`). Later, `verify` has no texts and must not have any: it scans with the
request's keyed fingerprints instead (`again`), kept sealed in the erasable key store
until the verification window closes.

A text can be found because an out-of-scope item holds the very same words: another
user with the same seat preference, a current value that contains an old one. No byte
scan can tell that copy from a leftover of the erased one, so such texts are reported
as shared (a count, never the text) instead of failing the request forever, and they
are dropped from the fingerprints so that `verify` does not trip on them either.

Whether fingerprints were kept is on record: the request's `files` / `residue_scan`
receipt says `checked: true` (on SQLite the scan runs exactly when there were texts to
keep). Closing the window destroys their key and leaves the row, and the scheduled job
also records a `verification_closed` receipt. So a row that is not there at all, for a
request whose scan ran and whose closing was never recorded, was deleted: `again` says
so (`FINGERPRINTS_LOST`) instead of looking like a closed window, and the consistency
check reports it as `fingerprints_missing`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import func, or_, select

from memory_ledger.consistency import fingerprints_were_kept
from memory_ledger.forgetting.residue import (
    Fingerprints,
    ResidueFinding,
    file_paths_under,
    fingerprint,
    scan,
    scan_fingerprints,
)
from memory_ledger.keystore import KeyDestruction, NewKey
from projections.vector_files import is_segment_file

if TYPE_CHECKING:
    from memory_ledger.api import MemoryService

NOT_ON_POSTGRES = "not run: PostgreSQL files live on the server; VACUUM ran"
NOTHING_TO_SEARCH = (
    "not run: no readable content to search for (already erased, unreadable, or under 4 bytes)"
)
WINDOW_CLOSED = (
    "not run: the verification window has closed and the fingerprints' key was destroyed"
)
CLOSED_ON_RECORD = (
    "not run: the verification window was recorded as closed (its fingerprints were lost "
    "before that)"
)
NONE_KEPT = "not run: no fingerprints were kept (nothing readable was erased)"
FINGERPRINTS_LOST = (
    "not run: INTEGRITY PROBLEM: the fingerprints' key row is missing from the key store, "
    "but this request's byte scan kept fingerprints and its verification window was never "
    "recorded as closed (the row was deleted); see `memory-ledger doctor`"
)


@dataclass(frozen=True)
class ScanOutcome:
    checked: bool
    how: str
    files: list[str]
    #: Texts found only because a live, out-of-scope item holds the same words.
    shared: int = 0


class ResidueCheck:
    def __init__(self, service: MemoryService) -> None:
        self.service = service

    # -- fingerprints: a key-store row of their own, erasable like any data key ----------

    def keep(self, request_id: str, needles: Sequence[bytes]) -> None:
        if self._latest(request_id) is None:  # a resumed request keeps its first run's
            self._store(request_id, 0, fingerprint(needles))

    def fingerprints(self, request_id: str) -> Fingerprints | None:
        latest = self._latest(request_id)
        return Fingerprints.from_bytes(latest[1]) if latest is not None else None

    def _latest(self, request_id: str) -> tuple[int, bytes] | None:
        ident = _ident(request_id)
        return self.service.log.keys_for([ident]).latest(ident)

    def close(self, request_id: str) -> None:
        """Destroy the fingerprints: later verifications check the stores only."""
        self.service.log.save([], destroy=[KeyDestruction(_ident(request_id), None)])

    def _store(self, request_id: str, generation: int, prints: Fingerprints) -> None:
        """A new generation of the fingerprints; every older one is destroyed with it."""
        ident = _ident(request_id)
        sealed = self.service.log.master.wrap(ident, generation, prints.to_bytes())
        retired = [KeyDestruction(ident, tuple(range(generation)))] if generation else []
        self.service.log.save([], new_keys=[NewKey(ident, generation, sealed)], destroy=retired)

    # -- scans ---------------------------------------------------------------------------

    def after_erasure(
        self, request_id: str, needles: list[bytes], erased: Sequence[str]
    ) -> ScanOutcome:
        """Scan for the texts (or, on a retry that no longer has them, their fingerprints);
        a file that still holds one is rebuilt with VACUUM and scanned again."""
        if self.service.settings.postgres is not None:
            return ScanOutcome(False, NOT_ON_POSTGRES, [])
        prints = None if needles else self.fingerprints(request_id)
        if prints is not None:  # a retry: the content is gone, its fingerprints are not
            outcome = self._scan_rebuilding(
                "keyed fingerprints", lambda paths: scan_fingerprints(paths, prints)
            )
            return ScanOutcome(True, outcome[0], sorted({f.path for f in outcome[1]}))
        if not needles:
            return ScanOutcome(False, NOTHING_TO_SEARCH, [])
        how, findings = self._scan_rebuilding("bytes", lambda paths: scan(paths, needles))
        shared = self._held_by_live_items(needles, {f.needle_index for f in findings}, set(erased))
        if shared:
            self._drop_shared(request_id, [n for i, n in enumerate(needles) if i not in shared])
        files = sorted({f.path for f in findings if f.needle_index not in shared})
        return ScanOutcome(True, how, files, len(shared))

    def again(self, request_id: str) -> ScanOutcome:
        if self.service.settings.postgres is not None:
            return ScanOutcome(False, "not run: PostgreSQL files live on the server", [])
        ident = _ident(request_id)
        keys = self.service.log.keys_for([ident])
        latest = keys.latest(ident)
        if latest is None:
            if keys.rows_of(ident):
                return ScanOutcome(False, WINDOW_CLOSED, [])
            kept, closed = fingerprints_were_kept(self.service.ledger, request_id)
            if kept and not closed:
                return ScanOutcome(False, FINGERPRINTS_LOST, [])
            return ScanOutcome(False, CLOSED_ON_RECORD if closed else NONE_KEPT, [])
        prints = Fingerprints.from_bytes(latest[1])
        paths = file_paths_under(self.service.settings.data_dir)
        files = sorted({f.path for f in scan_fingerprints(paths, prints)})
        return ScanOutcome(True, f"keyed fingerprints over {len(paths)} files", files)

    def _scan_rebuilding(
        self, how: str, search: Callable[[list[str]], list[ResidueFinding]]
    ) -> tuple[str, list[ResidueFinding]]:
        data_dir = self.service.settings.data_dir
        paths, skipped = self.request_scan_files()
        found = search(paths)
        rebuilt = [p for p in {f.path for f in found} if self.service.rewrite_sqlite_file(Path(p))]
        if rebuilt:
            # secure_delete zeroes freed cells, but a page's unused gap can still hold
            # old bytes; rebuilding the file (VACUUM) leaves only live rows. Then look again.
            paths, skipped = self.request_scan_files()
            found = search(paths)
        note = f"; {len(rebuilt)} file(s) rebuilt with VACUUM" if rebuilt else ""
        if skipped:
            note += (
                f"; {skipped} float32 vector segment(s) left to the vector index's own "
                "check for the erased vectors' bytes"
            )
        return f"{how} of {len(paths)} files under {data_dir}{note}", found

    def request_scan_files(self) -> tuple[list[str], int]:
        """Every file under the data directory but the vector index's float32 segments.

        On the request path only. A segment is a raw float32 matrix written from numpy,
        checked against its manifest checksum when loaded and never changed after: no
        code path puts text in it, so searching it for text could only ever find a
        coincidence. It is a third of a store's bytes at 100k items, and the scan's cost
        is its bytes. The vector store's own erasure checks the segments it rewrote for
        the erased vectors' exact bytes, and `again` (the later `verify`) still reads
        every file, segments included.

        Segments are told by their names in the index's directory, not by its manifest:
        a forget request's vector erasure runs while this scan lists and reads, so the
        number left out can count a segment it is replacing."""
        index_dir = os.path.join(self.service.vectors.directory, "")
        paths = file_paths_under(self.service.settings.data_dir)
        kept = [
            p
            for p in paths
            if not (p.startswith(index_dir) and is_segment_file(p[len(index_dir) :]))
        ]
        return kept, len(paths) - len(kept)

    def _held_by_live_items(
        self, needles: list[bytes], found: set[int], erased: set[str]
    ) -> set[int]:
        """Of the texts still found, those a live row outside the request holds. Asked
        only when something was found, so a clean erasure pays nothing for it."""
        shared: set[int] = set()
        with self.service.engine.connect() as conn:
            for index in sorted(found):
                text = needles[index].decode("utf-8")
                for projection in self.service.runner.projections:
                    if not projection.plaintext_columns:
                        continue
                    table = projection.table
                    columns = [table.c[c] for c in projection.plaintext_columns]
                    query = select(func.count()).select_from(table)
                    query = query.where(or_(*(func.instr(c, text) > 0 for c in columns)))
                    if "item_id" in table.c and erased:
                        query = query.where(table.c.item_id.not_in(sorted(erased)))
                    if conn.execute(query).scalar_one():
                        shared.add(index)
                        break
        return shared

    def _drop_shared(self, request_id: str, kept: list[bytes]) -> None:
        latest = self._latest(request_id)
        generation = latest[0] + 1 if latest is not None else 0
        self._store(request_id, generation, fingerprint(kept))


def _ident(request_id: str) -> str:
    return f"residue:{request_id}"
