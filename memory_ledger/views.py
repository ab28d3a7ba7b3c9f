"""What the API returns. Plain dataclasses so the CLI, tests and HTTP share one shape."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from memory_ledger.audit import verifier as verifier  # re-exported, see below
from memory_ledger.errors import InvalidWrite

#: `verifier` is the offline checker of what the audit calls return (evidence packs,
#: signed heads, proofs): one dependency-free module an auditor may copy and run alone.
#: It is re-exported here so that a surface (the CLI's `verify-pack`) checks a pack with
#: the library's view of it, not by reaching into memory_ledger/audit.


@dataclass(frozen=True)
class Remembered:
    item_id: str
    version: int
    kind: str
    position: int
    #: Facts: the predicate's cardinality as recorded (`one`/`many`), and the ids of the
    #: set members this fact replaced. None and () for preferences and turns.
    cardinality: str | None = None
    replaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class Added:
    """A turn stored by `MemoryLedger.add`: its ids, and the session and turn ids it was
    recorded under (generated when the caller gave none), so the caller can continue
    the session and later forget by source (`{"kind": "source", "session_id": ...}`)."""

    item_id: str
    version: int
    kind: str
    position: int
    session_id: str
    turn_id: str
    writer: str
    written_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Memory:
    """A live memory as recall returns it. `text` is the value (facts, preferences) or
    the content (turns); `status` is current or conflict for facts."""

    item_id: str
    version: int
    kind: str
    subject: str
    predicate: str
    text: str | None
    category: str
    origin: str
    confidence: float
    sensitivity: str
    status: str
    scope: str
    strength: float | None
    valid_from: str | None
    valid_to: str | None
    expires_at: str | None
    suppressed: bool
    provenance: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ItemState:
    """One item read from the log itself: content, or ERASED once its key is gone."""

    item_id: str
    version: int
    kind: str
    subject: str
    predicate: str
    text: str | None
    erased: bool
    suppressed: bool
    redaction: dict[str, Any]
    provenance: dict[str, Any]
    #: Past its retention (memory_ledger/policy/retention.py): its text is withheld, as
    #: recall withholds it, until the retention sweep erases it.
    expired: bool = False
    archived: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Summary:
    """A namespace's profile summary and exactly the inputs it was built from, so a
    caller can cite them (as `derived_from`) or check that none of them has changed."""

    namespace: str
    text: str
    inputs: tuple[tuple[str, int], ...]  # (item_id, version), by item id
    summarizer: str

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["inputs"] = [{"item_id": i, "version": v} for i, v in self.inputs]
        return data


_RECALL_CURSOR = re.compile(r"p([0-9]{1,15})")


def parse_recall_cursor(cursor: object) -> int | None:
    """The log position a `RecallPage.next_cursor` names (None: from the newest)."""
    if cursor is None:
        return None
    match = _RECALL_CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if match is None:
        raise InvalidWrite(
            "unknown cursor: list again without one, and follow next_cursor", ["cursor: invalid"]
        )
    return int(match.group(1))


@dataclass(frozen=True)
class RecallPage:
    """One page of a listing: the memories, and the cursor of the next page (None at
    the end)."""

    memories: list[Memory]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"memories": [m.to_dict() for m in self.memories], "next_cursor": self.next_cursor}
