"""Sealed cells: how a projection keeps personal content without holding it in clear.

A row that shows an item's content stores the ciphertext of the event that carried it
(the event's own `sealed` blob, under the item's data key) and the key generation it was
sealed under, never the text (../docs/DESIGN.md, "Sealed everywhere"). So destroying
the item's key erases the row's copy too, wherever its bytes still lie (a free page, a
WAL frame, a backup), and a forget needs no byte scan of the projections to be complete.

Readers open cells here, for a batch of rows at once: one key-store query per batch,
each key unwrapped once. A cell whose key is gone opens as None, like an erased value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory_ledger.event_log import ERASED, EventLog
from memory_ledger.keystore import KeyRing

#: (item id, key generation, sealed blob) as a projection row stores them.
Cell = tuple[str, int | None, str | None]


class Cells:
    """Opens sealed cells with the key store's keys. Given the log, nothing else."""

    def __init__(self, log: EventLog) -> None:
        self.log = log

    def open(self, cells: Sequence[Cell], field: str) -> list[str | None]:
        """The named field of each cell, in order; None where the key was destroyed or
        the cell holds nothing."""
        wanted = sorted(
            {item for item, gen, sealed in cells if sealed is not None and gen is not None}
        )
        keys = self.log.keys_for(wanted)
        out: list[str | None] = []
        for item_id, generation, sealed in cells:
            if sealed is None or generation is None:
                out.append(None)
                continue
            fields = self.log.open_fields(keys, item_id, generation, sealed)
            out.append(None if fields is ERASED else fields.get(field))  # type: ignore[union-attr]
        return out

    def ring(self, item_ids: Sequence[str]) -> KeyRing:
        """The keys of these items, fetched in one query and unwrapped only when used:
        for a reader that opens some of a batch's cells, one at a time (`open_one`)."""
        return self.log.keys_for(sorted(set(item_ids)))

    def open_one(self, ring: KeyRing, cell: Cell, field: str) -> str | None:
        item_id, generation, sealed = cell
        if sealed is None or generation is None:
            return None
        fields = self.log.open_fields(ring, item_id, generation, sealed)
        return None if fields is ERASED else fields.get(field)  # type: ignore[union-attr]

    def fill(self, rows: Sequence[dict[str, Any]], field: str, into: str) -> None:
        """Open each row's `sealed` / `key_generation` cell, in place: the field's text
        goes to `into` (None if unreadable), and the sealed columns are dropped, so what
        leaves a reader is what callers always saw."""
        texts = self.open(
            [(str(r["item_id"]), r.get("key_generation"), r.get("sealed")) for r in rows], field
        )
        for row, text in zip(rows, texts, strict=True):
            row.pop("sealed", None)
            row.pop("key_generation", None)
            row[into] = text
