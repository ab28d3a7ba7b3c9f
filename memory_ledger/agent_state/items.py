"""The items an agent keeps for its own work: runs, their scratch and checkpoints, and
memory files. They live in the same log, sealed under their own data keys like every
memory, so the one forget request path erases them, and a rebuild replays them.

They never pass through `MemoryWrite`, which takes what is said about a person (facts,
preferences, turns), and no reader of memories (recall, context, summaries, the
vector and keyword indexes) takes their kinds: a run's tool results and an agent's
notes reach the user's long-term memory only through a run's promotion gate.

Every change is compare-and-set on the item's version: a writer that read version 4
and finds version 5 is refused (`StaleState`), and two writers racing from the same
version cannot both commit (the event store's unique (item, version) key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.persistence import IntegrityError

from memory_ledger.domain import MemoryItem
from memory_ledger.errors import InvalidTransition, InvalidWrite, NotFound
from memory_ledger.event_log import ERASED, EventLog
from memory_ledger.times import canonical_time
from memory_ledger.write_policy import AgentKind, Provenance, parse_input


@dataclass(frozen=True)
class Version:
    """One version of an agent item's content, as its event carried it."""

    version: int
    provenance: dict[str, Any]
    fields: dict[str, str] | None
    flags: list[str]


class StaleState(InvalidTransition):
    """A compare-and-set lost: the item moved on since the caller read it (HTTP 409)."""


#: The attributes the catalog and the policy see for each kind: clear codes only.
CATEGORY = {
    "run": "agent_runs",
    "run_operation": "agent_runs",
    "run_scratch": "agent_runs",
    "run_checkpoint": "agent_runs",
    "file": "memory_files",
}


class AgentItems:
    """Record, change and read one namespace's agent items. Given the log and the
    namespace, nothing else."""

    def __init__(
        self,
        log: EventLog,
        namespace: str,
        clock: Callable[[], datetime],
        policy_version: int | None,
    ) -> None:
        self.log = log
        self.namespace = namespace
        self.clock = clock
        self.policy_version = policy_version

    def source(
        self,
        writer: str,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> Provenance:
        """The provenance of one change, validated as every write's is."""
        made = {"writer": writer, "written_at": self.clock(), "session_id": session_id,
                "turn_id": turn_id, "tool_call_id": tool_call_id}  # fmt: skip
        return parse_input(Provenance, made, "provenance", "nothing changed")

    def record(
        self,
        kind: AgentKind,
        predicate: str,
        fields: dict[str, str],
        source: Provenance,
        *,
        flags: Sequence[str] = (),
        derived_from: Sequence[MemoryItem] = (),
        item_id: UUID | None = None,
        subject: str = "agent",
    ) -> MemoryItem:
        """A new item of `kind`, its fields sealed under a new data key, saved. An
        `item_id` chosen by the caller makes a second record of it fail (`StaleState`)."""
        ident = item_id or uuid4()
        sealed, key = self.log.seal_new(ident, 1, fields)
        now = canonical_time(self.clock())
        item = MemoryItem._create(
            # eventsourcing's @event makes this class when MemoryItem is defined: no
            # declaration a type checker can see exists for it.
            MemoryItem.Recorded,  # type: ignore[attr-defined]
            id=ident,
            namespace=self.namespace,
            kind=kind,
            subject=subject,
            predicate=predicate,
            category=CATEGORY[kind],
            origin="observed",
            confidence=1.0,
            sensitivity="personal",
            provenance=_event_data(source),
            retention={"basis": "indefinite", "expires_at": None},
            redaction={"state": "none", "fields": []},
            derived_from=[{"item_id": str(d.id), "version": d.version} for d in derived_from],
            scope="global",
            strength=1.0,
            valid_from=now,
            valid_to=None,
            key_generation=1,
            sealed=sealed,
            flags=list(flags),
            cardinality=None,
            replaces=[],
            policy_version=self.policy_version,
        )
        self._save([item], [key])
        return item

    def change(
        self,
        item: MemoryItem,
        fields: dict[str, str],
        source: Provenance,
        *,
        expected_version: int,
        flags: Sequence[str] = (),
    ) -> int:
        """A new version of the item's fields, if it is still at `expected_version`."""
        self.expect(item, expected_version)
        sealed = self.log.seal_existing(item.id, item.key_generation, fields)
        item.supersede(
            sealed=sealed,
            provenance=_event_data(source),
            confidence=1.0,
            valid_from=canonical_time(self.clock()),
            flags=list(flags),
        )
        self._save([item])
        return int(item.version)

    def save(self, item: MemoryItem) -> int:
        """Save an item's pending events (a read, a deletion mark) under the same check."""
        self._save([item])
        return int(item.version)

    def expect(self, item: MemoryItem, expected_version: int) -> None:
        if isinstance(expected_version, bool) or not isinstance(expected_version, int):
            raise InvalidWrite("expected_version must be an int (the version you read)")
        if item.version != expected_version:
            raise StaleState(
                f"{_what(item)} is at version {item.version}, not {expected_version}: read it "
                "again and decide on what it holds now; nothing changed"
            )

    def _save(self, items: list[MemoryItem], keys: Sequence[Any] = ()) -> None:
        try:
            self.log.save(items, list(keys))
        except IntegrityError:
            raise StaleState(
                f"{_what(items[0])} was changed by another writer at the same time: read it "
                "again; nothing changed"
            ) from None

    def owned(self, item_id: str | UUID, kinds: Sequence[str]) -> MemoryItem:
        """This namespace's live or erased item of one of `kinds`; anything else (another
        namespace's, another kind, no such id) is not found alike."""
        try:
            ident = item_id if isinstance(item_id, UUID) else UUID(str(item_id))
        except ValueError:
            raise InvalidWrite(f"{item_id!r} is not an id") from None
        try:
            item = self.log.get(ident)
        except NotFound:
            item = None
        if item is None or item.namespace != self.namespace or item.kind not in kinds:
            raise NotFound(f"no {' or '.join(kinds)} {ident}")
        return item

    def find(self, item_id: UUID, kind: str) -> MemoryItem | None:
        """This namespace's item of `kind` with this id, or None if there is none."""
        try:
            return self.owned(item_id, (kind,))
        except NotFound:
            return None

    def fields(self, item: MemoryItem) -> dict[str, str] | None:
        """The item's current fields from the log; None once it is erased."""
        found = self.log.read(item)
        return None if found is ERASED else dict(found)

    def versions(self, item: MemoryItem) -> list[Version]:
        """Every version of the content, oldest first, read from the log's events
        (`fields` None where the key is gone)."""
        ident = str(item.id)
        keys = self.log.keys_for([ident])
        out = []
        for event in self.log.events_of(item.id):
            sealed = getattr(event, "sealed", None)
            if type(event).__name__ not in ("Recorded", "Superseded", "Redacted") or not sealed:
                continue
            generation = int(getattr(event, "key_generation", item.key_generation))
            fields = self.log.open_fields(keys, ident, generation, sealed)
            opened = None if fields is ERASED else dict(fields)
            flags = list(getattr(event, "flags", None) or [])
            made = dict(getattr(event, "provenance", None) or {})  # a redaction has none
            out.append(Version(int(event.originator_version), made, opened, flags))
        return out


def _what(item: MemoryItem) -> str:
    return f"{item.kind.replace('_', ' ')} {item.id}"


def _event_data(source: Provenance) -> dict[str, Any]:
    """The provenance recorded with a change. `source` comes from `source(...)`; any
    other value is refused as a bad input (InvalidWrite), not an AttributeError."""
    if not isinstance(source, Provenance):
        raise InvalidWrite(
            f"source must be the provenance `source(...)` returns, not {type(source).__name__}",
            ["source: invalid"],
        )
    return source.event_data()
