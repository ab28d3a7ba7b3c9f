"""The memory item aggregate and its events.

An item's events are never deleted or rewritten. Personal content lives only in
`sealed` fields (ciphertext under the item's data key); everything else an event holds
is an identifier, a code or a timestamp, so the log can be replayed, audited and
enumerated after any key has been destroyed.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from memory_ledger.errors import InvalidTransition


class MemoryItem(Aggregate):
    """One remembered fact, preference or transcript turn, in one namespace; or one of
    the items an agent keeps for its own work (memory_ledger/agent_state): a run, its
    scratch or a checkpoint, or a memory file."""

    @event("Recorded")
    def __init__(
        self,
        *,
        namespace: str,
        kind: str,
        subject: str,
        predicate: str,
        category: str,
        origin: str,
        confidence: float,
        sensitivity: str,
        provenance: dict[str, Any],
        retention: dict[str, Any],
        redaction: dict[str, Any],
        derived_from: list[dict[str, Any]],
        scope: str,
        strength: float,
        valid_from: str,
        valid_to: str | None,
        key_generation: int,
        sealed: str,
        flags: list[str] | None = None,
        cardinality: str | None = None,
        replaces: list[str] | None = None,
        policy_version: int | None = None,
    ) -> None:
        self.namespace = namespace
        self.kind = kind
        self.subject = subject
        self.predicate = predicate
        self.category = category
        self.origin = origin
        self.confidence = confidence
        self.sensitivity = sensitivity
        self.provenance = provenance
        self.retention = retention
        self.redaction = redaction
        self.derived_from = derived_from
        self.scope = scope
        self.strength = strength
        self.valid_from = valid_from
        self.valid_to = valid_to
        self.key_generation = key_generation
        self.sealed: str | None = sealed
        #: Codes about the content decided at write time (e.g. `instruction_like`): clear.
        self.flags = list(flags or [])
        #: Facts: `one` or `many`, decided at write time from the policy, and the ids of
        #: the set members this fact replaces (memory_ledger/policy/cardinality.py). Absent
        #: (None) in events written before cardinality existed: they behave as `one`.
        self.cardinality = cardinality
        self.replaces = list(replaces or [])
        #: The retention policy version in force when it was written (audit only: the
        #: version in force when it is read decides its life). None before policies.
        self.policy_version = policy_version
        self.suppressed = False
        self.archived = False
        self.erased = False
        #: Memory files: when an agent last read it (None: never since it was written).
        self.viewed_at: str | None = None

    def require_live(self, operation: str) -> None:
        if self.erased:
            raise InvalidTransition(f"item {self.id} was erased; it cannot be {operation}")

    def supersede(
        self,
        *,
        sealed: str,
        provenance: dict[str, Any],
        confidence: float,
        valid_from: str,
        flags: list[str] | None = None,
    ) -> None:
        self.require_live("updated")
        if self.kind == "turn":
            raise InvalidTransition("transcript turns are not edited; redact or forget them")
        self._superseded(
            sealed=sealed,
            key_generation=self.key_generation,
            provenance=provenance,
            confidence=confidence,
            valid_from=valid_from,
            flags=list(flags or []),
        )

    @event("Superseded")
    def _superseded(
        self,
        *,
        sealed: str,
        key_generation: int,
        provenance: dict[str, Any],
        confidence: float,
        valid_from: str,
        flags: list[str] | None = None,
    ) -> None:
        self.sealed = sealed
        self.provenance = provenance
        self.confidence = confidence
        self.valid_from = valid_from
        self.flags = list(flags or [])

    def record_context(
        self, *, items: list[dict[str, Any]], context_mac: str, key_generation: int
    ) -> None:
        """What the model was shown for this turn: item ids and versions, and a MAC of
        the rendered text under this turn's data key (unconfirmable once it is erased)."""
        self.require_live("given a context")
        if self.kind != "turn":
            raise InvalidTransition("a context is recorded on the transcript turn it served")
        self._context_served(items=items, context_mac=context_mac, key_generation=key_generation)

    @event("ContextServed")
    def _context_served(
        self, *, items: list[dict[str, Any]], context_mac: str, key_generation: int
    ) -> None:
        pass  # nothing about the turn changes: the event itself is the record

    def view(self, *, at: str) -> None:
        """An agent read this memory file (memory_ledger/agent_state/files.py) at `at`: a
        record without content, from which a file unread for too long expires."""
        self.require_live("read")
        if self.kind != "file":
            raise InvalidTransition("only a memory file records its reads")
        self._viewed(at=at)

    @event("Viewed")
    def _viewed(self, *, at: str) -> None:
        self.viewed_at = at

    def suppress(self, *, reason: str) -> None:
        self.require_live("suppressed")
        if not self.suppressed:
            self._suppressed(reason=reason)

    @event("Suppressed")
    def _suppressed(self, *, reason: str) -> None:
        self.suppressed = True

    def unsuppress(self) -> None:
        self.require_live("unsuppressed")
        if self.suppressed:
            self._unsuppressed()

    @event("Unsuppressed")
    def _unsuppressed(self) -> None:
        self.suppressed = False

    def archive(self, *, period: int, strength: float, rule: str) -> bool:
        """Move to the archived tier (recall skips it unless asked): decay's verb, kept
        apart from update, stop-using and forget. Idempotent: False if already there."""
        self.require_live("archived")
        if self.archived:
            return False
        self._archived(period=period, strength=round(strength, 6), rule=rule)
        return True

    @event("Archived")
    def _archived(self, *, period: int, strength: float, rule: str) -> None:
        self.archived = True

    def unarchive(self, *, period: int, strength: float, rule: str) -> bool:
        """Back to the active tier, once reinforcement lifted its strength again."""
        self.require_live("unarchived")
        if not self.archived:
            return False
        self._unarchived(period=period, strength=round(strength, 6), rule=rule)
        return True

    @event("Unarchived")
    def _unarchived(self, *, period: int, strength: float, rule: str) -> None:
        self.archived = False

    def redact(self, *, fields: list[str], key_generation: int, sealed: str) -> list[int]:
        """Rewrite content under a fresh key generation; returns the generations to destroy."""
        self.require_live("redacted")
        retired = list(range(1, self.key_generation + 1))
        self._redacted(
            fields=fields, key_generation=key_generation, sealed=sealed, retired_generations=retired
        )
        return retired

    @event("Redacted")
    def _redacted(
        self, *, fields: list[str], key_generation: int, sealed: str, retired_generations: list[int]
    ) -> None:
        self.key_generation = key_generation
        self.sealed = sealed
        self.redaction = {"state": "applied", "fields": sorted(set(fields))}

    def erase(self, *, reason: str, request_id: str | None) -> None:
        """Tombstone: records that content was destroyed, and carries none of it."""
        if not self.erased:
            self._erased(reason=reason, request_id=request_id)

    @event("Erased")
    def _erased(self, *, reason: str, request_id: str | None) -> None:
        self.erased = True
        self.sealed = None

    @property
    def item_id(self) -> UUID:
        return self.id


#: Events that record a use of an item (a context the turn served, a memory file's read)
#: and change nothing a reader is served of it: a drill does not count them as changes.
USE_RECORDS = ("ContextServed", "Viewed")

EVENT_NAMES = (
    "Recorded",
    "Superseded",
    "Suppressed",
    "Unsuppressed",
    "Archived",
    "Unarchived",
    "Redacted",
    "Erased",
)
