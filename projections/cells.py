"""Sealed cells: how a projection keeps personal content without holding it in clear.

A row that shows an item's content stores the ciphertext of the event that carried it
(the event's own `sealed` blob, under the item's data key) and the key generation it was
sealed under, never the text (../docs/DESIGN.md, "Sealed everywhere"). So destroying
the item's key erases the row's copy too, wherever its bytes still lie (a free page, a
WAL frame, a backup), and a forget needs no byte scan of the projections to be complete.

Readers open cells here, for a batch of rows at once: one key-store query per batch,
each key unwrapped once. A cell whose key is gone opens as None, like an erased value.

A catch-up has already opened the events whose blobs the rows keep (`decode_batch`), so
it hands their fields to the projections that read cells back (`Opened`): a cell that
is the very blob of an event the catch-up opened is taken from there instead of being
unwrapped and unsealed again, but only while its key is live in the key store as read
for this call, so a key destroyed since (a forget, a redaction) still makes the cell
unreadable, exactly as opening it would.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memory_ledger.event_log import ERASED, EventLog
from memory_ledger.keystore import KeyRing
from memory_ledger.projections.events import ProjectedEvent

#: (item id, key generation, sealed blob) as a projection row stores them.
Cell = tuple[str, int | None, str | None]


#: How many opened events a catch-up keeps for its projections (`Opened`): a bound on
#: the clear text held in memory by a long replay; a cell past it is simply opened.
OPENED_LIMIT = 50_000


class Opened:
    """The fields of the events a catch-up opened, by (item id, key generation, blob):
    a projection's cell that holds the same blob holds the same fields. Held in memory
    for one catch-up only (the runner drops it when it returns), at most `limit`
    events, the oldest dropped first."""

    def __init__(self, limit: int = OPENED_LIMIT) -> None:
        self.limit = limit
        self._fields: dict[tuple[str, int, str], dict[str, str]] = {}

    def remember(self, events: Iterable[ProjectedEvent]) -> None:
        for e in events:
            generation = e.key_generation
            if e.fields is None or e.sealed is None or generation is None:
                continue
            self._fields[(e.item_id, generation, e.sealed)] = e.fields
        while len(self._fields) > self.limit:
            del self._fields[next(iter(self._fields))]

    def get(self, item_id: str, generation: int, sealed: str) -> dict[str, str] | None:
        return self._fields.get((item_id, generation, sealed))

    def __len__(self) -> int:
        return len(self._fields)


class Cells:
    """Opens sealed cells with the key store's keys. Given the log, and, in a catch-up,
    the events it has opened already (`Opened`), nothing else."""

    def __init__(self, log: EventLog, opened: Opened | None = None) -> None:
        self.log = log
        self.opened = opened

    def _open_fields(
        self, keys: KeyRing, item_id: str, generation: int, sealed: str
    ) -> dict[str, str] | None:
        """The cell's fields, None when its key is gone; from `opened` when the catch-up
        opened this very blob and the key is still live."""
        if self.opened is not None:
            known = self.opened.get(item_id, generation, sealed)
            if known is not None:
                return known if keys.is_live(item_id, generation) else None
        fields = self.log.open_fields(keys, item_id, generation, sealed)
        return None if fields is ERASED else fields  # type: ignore[return-value]

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
            fields = self._open_fields(keys, item_id, generation, sealed)
            out.append(None if fields is None else fields.get(field))
        return out

    def ring(self, item_ids: Sequence[str]) -> KeyRing:
        """The keys of these items, fetched in one query and unwrapped only when used:
        for a reader that opens some of a batch's cells, one at a time (`open_one`)."""
        return self.log.keys_for(sorted(set(item_ids)))

    def open_one(self, ring: KeyRing, cell: Cell, field: str) -> str | None:
        item_id, generation, sealed = cell
        if sealed is None or generation is None:
            return None
        fields = self._open_fields(ring, item_id, generation, sealed)
        return None if fields is None else fields.get(field)

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
