"""Events as projections see them: clear attributes plus opened personal fields.

Decoding happens once per batch for every projection: the batch's data keys are fetched
in one query and opened once, and an event whose key was destroyed arrives with
`fields=None`, which every projection treats as erased content.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.persistence import Notification

from memory_ledger.event_log import ERASED, EventLog

_ENVELOPE = {"originator_id", "originator_version", "timestamp", "originator_topic"}


@dataclass(frozen=True)
class ProjectedEvent:
    position: int
    item_id: str
    version: int
    name: str
    timestamp: datetime
    attrs: dict[str, Any]
    fields: dict[str, str] | None

    def text(self, name: str) -> str | None:
        return None if self.fields is None else self.fields.get(name)


def decode_batch(log: EventLog, notifications: Sequence[Notification]) -> list[ProjectedEvent]:
    decoded = [(n.id, log.decode(n)) for n in notifications]
    sealed_ids = sorted({str(e.originator_id) for _, e in decoded if getattr(e, "sealed", None)})
    keys = log.keys_for(sealed_ids)
    out = []
    for position, event in decoded:
        item_id = str(event.originator_id)
        attrs = {k: v for k, v in event.__dict__.items() if k not in _ENVELOPE}
        sealed = attrs.pop("sealed", None)
        fields = None
        if sealed is not None:
            opened = log.open_fields(keys, item_id, attrs["key_generation"], sealed)
            fields = None if opened is ERASED else opened  # type: ignore[assignment]
        out.append(
            ProjectedEvent(
                position=position,
                item_id=item_id,
                version=event.originator_version,
                name=type(event).__name__,
                timestamp=event.timestamp,
                attrs=attrs,
                fields=fields,  # type: ignore[arg-type]
            )
        )
    return out
