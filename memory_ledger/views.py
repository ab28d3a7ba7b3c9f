"""What the API returns. Plain dataclasses so the CLI, tests and HTTP share one shape."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Remembered:
    item_id: str
    version: int
    kind: str
    position: int


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StoreCheck:
    store: str
    absent: bool
    evidence: str


@dataclass(frozen=True)
class ErasedItem:
    item_id: str
    kind: str
    already_erased: bool
    key_generations_destroyed: int


@dataclass(frozen=True)
class ErasureReport:
    """What an erasure did, and what was checked afterwards.

    Holds ids, counts and file names only: never the erased content.
    """

    items: list[ErasedItem]
    tombstone_position: int
    checks: list[StoreCheck] = field(default_factory=list)
    compaction: list[str] = field(default_factory=list)
    residue_checked: bool = False
    residue_scan: str = ""
    residue_files: list[str] = field(default_factory=list)
    residue_scanned_files: int = 0

    @property
    def verified(self) -> bool:
        """Every store check passed and no residue was found. When the byte scan could
        not run (`residue_checked` is false), `residue_scan` says why."""
        return all(c.absent for c in self.checks) and not self.residue_files

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verified"] = self.verified
        return out
