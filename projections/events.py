"""Events as projections see them: clear attributes plus opened personal fields.

Decoding happens once per batch for every projection: the batch's data keys are fetched
in one query and opened once, and an event whose key was destroyed arrives with
`fields=None`, which every projection treats as erased content.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.persistence import Notification

from memory_ledger.event_log import ERASED, EventLog
from memory_ledger.write_policy import canonical_time

#: Told (stage, log position reached, log head) as a long replay goes: for a progress bar.
Progress = Callable[[str, int, int], None]

_ENVELOPE = {"originator_id", "originator_version", "timestamp", "originator_topic"}


@dataclass
class ProjectedEvent:
    position: int
    item_id: str
    version: int
    name: str
    timestamp: str  # canonical UTC text
    attrs: dict[str, Any]
    fields: dict[str, str] | None
    #: The event's ciphertext as stored, under the item's data key of `key_generation`:
    #: what projections keep instead of the text (projections/cells.py).
    sealed: str | None = None
    #: Whether `sealed` can still be opened (its key is live); None if not looked up.
    readable: bool | None = None

    @property
    def key_generation(self) -> int | None:
        generation = self.attrs.get("key_generation")
        return None if generation is None else int(generation)

    def text(self, name: str) -> str | None:
        return None if self.fields is None else self.fields.get(name)


def decode_batch(log: EventLog, notifications: Sequence[Notification]) -> list[ProjectedEvent]:
    """Decode a batch, opening every sealed field with one key query for the batch."""
    decode = _decode_json if _is_plain_json(log) else _decode_with_library
    decoded = [decode(log, n) for n in notifications]
    sealed_ids = sorted({e.item_id for e in decoded if "sealed" in e.attrs})
    keys = log.keys_for(sealed_ids)
    for event in decoded:
        sealed = event.sealed = event.attrs.pop("sealed", None)
        if sealed is not None:
            opened = log.open_fields(keys, event.item_id, event.attrs["key_generation"], sealed)
            event.fields = None if opened is ERASED else opened  # type: ignore[assignment]
            event.readable = event.fields is not None
    return decoded


def decode_sealed(log: EventLog, notifications: Sequence[Notification]) -> list[ProjectedEvent]:
    """Decode a batch for projections that keep sealed cells: clear attributes, the
    sealed blob as stored, and whether its key is still live (`readable`), with one key
    query for the batch and nothing unwrapped or opened. A rebuild replays every event:
    opening each one cost more than the projections' own work."""
    decoded = decode_clear(log, notifications)
    keys = log.keys_for(sorted({e.item_id for e in decoded if e.sealed is not None}))
    for event in decoded:
        if event.sealed is not None:
            event.readable = keys.is_live(event.item_id, int(event.attrs["key_generation"]))
    return decoded


def decode_clear(log: EventLog, notifications: Sequence[Notification]) -> list[ProjectedEvent]:
    """Decode a batch without opening anything: clear attributes only (`fields` None),
    for checks that compare identifiers, never content."""
    decode = _decode_json if _is_plain_json(log) else _decode_with_library
    decoded = [decode(log, n) for n in notifications]
    for event in decoded:
        event.sealed = event.attrs.pop("sealed", None)
    return decoded


def _is_plain_json(log: EventLog) -> bool:
    mapper = log.app.mapper
    return mapper.cipher is None and mapper.compressor is None


def _decode_json(log: EventLog, n: Notification) -> ProjectedEvent:
    """Read the stored JSON directly: about five times cheaper than rebuilding event
    objects through the library's mapper, which matters for full rebuilds. Used only
    when no cipher or compressor wraps the stored state."""
    attrs = json.loads(n.state)
    stamp = attrs.pop("timestamp")["_data_"]
    attrs.pop("originator_topic", None)
    return ProjectedEvent(
        position=n.id,
        item_id=str(n.originator_id),
        version=n.originator_version,
        name=n.topic.rsplit(".", 1)[-1],
        timestamp=_canonical(stamp),
        attrs=attrs,
        fields=None,
    )


def _decode_with_library(log: EventLog, n: Notification) -> ProjectedEvent:
    event = log.decode(n)
    attrs = {k: v for k, v in event.__dict__.items() if k not in _ENVELOPE}
    return ProjectedEvent(
        position=n.id,
        item_id=str(event.originator_id),
        version=event.originator_version,
        name=type(event).__name__,
        timestamp=canonical_time(event.timestamp),
        attrs=attrs,
        fields=None,
    )


def _canonical(stamp: str) -> str:
    # The library writes datetime.isoformat(); ours is the same instant ending in "Z".
    if len(stamp) == 32 and stamp.endswith("+00:00"):
        return stamp[:26] + "Z"
    return canonical_time(datetime.fromisoformat(stamp))
