"""Erasing items, and proving it: the steps behind `forget`.

1. Collect every plaintext copy we can find (readable versions in the log, and what the
   projections hold), in memory only, to know what the residue scan must not find.
2. Append tombstones and destroy every key generation, in one transaction.
3. Catch the projections up (they purge the items) and compact the files.
4. Check each store for the items, and scan the bytes of every file we control.

The report carries ids, counts and file names; the collected plaintext never leaves
this module.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memory_ledger.domain import MemoryItem
from memory_ledger.errors import CorruptKeyEntry
from memory_ledger.event_log import ERASED
from memory_ledger.keystore import KeyDestruction
from memory_ledger.residue import files_under, needles_for, scan
from memory_ledger.views import ErasedItem, ErasureReport, StoreCheck

if TYPE_CHECKING:
    from memory_ledger.api import MemoryService

log = logging.getLogger("memory_ledger.erasure")


def erase_items(
    service: MemoryService, items: list[MemoryItem], request_id: str | None
) -> ErasureReport:
    needles = needles_for(plaintext_copies(service, items))
    keys = service.log.keys_for([str(i.id) for i in items])
    erased = [
        ErasedItem(str(i.id), i.kind, i.erased, keys.live_generations(str(i.id))) for i in items
    ]
    for item in items:
        item.erase(reason="user_request", request_id=request_id)
    position = service.log.save(items, destroy=[KeyDestruction(str(i.id), None) for i in items])
    service.runner.catch_up()
    compaction = service.compact()
    residue_files: list[str] = []
    scanned = 0
    if service.settings.postgres is not None:
        scope = "not run: PostgreSQL files live on the server; VACUUM ran on the affected tables"
    elif not needles:
        scope = (
            "not run: no readable content to search for "
            "(already erased, unreadable, or under 4 bytes)"
        )
    else:
        paths = files_under(service.settings.data_dir)
        residue_files = sorted({f.path for f in scan(paths, needles)})
        scanned = len(paths)
        scope = f"bytes of every file under {service.settings.data_dir}"
    report = ErasureReport(
        items=erased,
        tombstone_position=position,
        checks=check_absent(service, [e.item_id for e in erased]),
        compaction=compaction,
        residue_checked=scanned > 0,
        residue_scan=scope,
        residue_files=residue_files,
        residue_scanned_files=scanned,
    )
    log.info("erased %d item(s); tombstones up to position %s", len(items), position)
    return report


def plaintext_copies(service: MemoryService, items: list[MemoryItem]) -> list[str]:
    """Every copy of the items' content we can find: each readable version in the log,
    plus what the projections hold (which still works when a key entry is corrupted)."""
    ids = [str(i.id) for i in items if not i.erased]
    texts: list[str] = []
    try:
        keys = service.log.keys_for(ids)
        for item in items:
            if item.erased:
                continue
            for event in service.log.events_of(item.id):
                sealed = getattr(event, "sealed", None)
                if sealed is not None:
                    opened = service.log.open_fields(
                        keys, str(item.id), event.key_generation, sealed
                    )
                    if opened is not ERASED:
                        texts.extend(opened.values())  # type: ignore[union-attr]
    except CorruptKeyEntry:
        log.warning("a key entry is corrupted; the residue scan relies on projection copies")
    with service.engine.connect() as conn:
        for projection in service.runner.projections:
            texts.extend(projection.plaintext_of(conn, ids))
    return texts


def check_absent(service: MemoryService, item_ids: list[str]) -> list[StoreCheck]:
    checks = []
    with service.engine.connect() as conn:
        for projection in service.runner.projections:
            count = projection.count_rows(conn, item_ids)
            checks.append(StoreCheck(projection.name, count == 0, f"{count} rows left"))
    keys = service.log.keys_for(item_ids)
    live = [i for i in item_ids if not keys.is_destroyed(i)]
    evidence = f"{len(item_ids) - len(live)} of {len(item_ids)} items have every key destroyed"
    checks.append(StoreCheck("key_store", not live, evidence))
    return checks
