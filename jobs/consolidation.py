"""Background consolidation: extract inferred facts and preferences from new turns.

This is where agent memory systems usually write deleted data back: a job reads a turn,
the user deletes it, and the job's result lands afterwards. Here every proposal pins
the version of the turn it read, and the append refuses it at commit if that turn has
since been erased, suppressed or changed (StaleDerivation). Each turn is consolidated
once, so a conclusion the user erased or suppressed is not derived again.

The extractor is deterministic (a few phrase patterns), so tests can race it against
deletions; a model-based extractor would plug in behind the same `read`/`commit` seam.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Table, Text, select

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.errors import StaleDerivation
from memory_ledger.principal import Principal
from projections.base import metadata
from projections.catalog import catalog

log = logging.getLogger("memory_ledger.consolidation")

consolidated = Table(
    "consolidated_turns",
    metadata,
    Column("item_id", Text, primary_key=True),  # ids only: which turns were read
)

# (pattern, kind, predicate, category)
PATTERNS: list[tuple[re.Pattern[str], str, str, str]] = [
    (
        re.compile(r"\bmy (?:home )?address is (?P<v>[^.!?]+)", re.I),
        "fact",
        "home_address",
        "contact",
    ),
    (re.compile(r"\bI live (?:at|in) (?P<v>[^.!?,]+)", re.I), "fact", "home_address", "contact"),
    (re.compile(r"\bI(?:'m| am) allergic to (?P<v>[^.!?,]+)", re.I), "fact", "allergy", "health"),
    (re.compile(r"\bI work (?:at|for) (?P<v>[^.!?,]+)", re.I), "fact", "employer", "work"),
    (re.compile(r"\b(?:book|give) me an? (?P<v>\w+) seat", re.I), "preference", "seat", "travel"),
]


@dataclass(frozen=True)
class Proposal:
    """A derived memory, with the exact version of the turn it was read from."""

    write: dict[str, Any]
    turn_id: str


class Consolidator:
    def __init__(self, service: MemoryService) -> None:
        self.service = service
        metadata.create_all(service.engine, tables=[consolidated])

    def read(self, ledger: MemoryLedger) -> list[Proposal]:
        """Proposals from turns not consolidated yet. Nothing is written here."""
        with self.service.engine.connect() as conn:
            done = set(conn.execute(select(consolidated.c.item_id)).scalars())
        proposals = []
        for turn in ledger.recall(kind="turn", limit=10_000):
            if turn.item_id in done or turn.text is None:
                continue
            for pattern, kind, predicate, category in PATTERNS:
                match = pattern.search(turn.text)
                if match:
                    proposals.append(
                        Proposal(
                            _write(turn, kind, predicate, category, match.group("v").strip()),
                            turn.item_id,
                        )
                    )
            if not any(p.turn_id == turn.item_id for p in proposals):
                proposals.append(Proposal({}, turn.item_id))  # read, nothing to extract
        return proposals

    def commit(self, ledger: MemoryLedger, proposals: list[Proposal]) -> tuple[int, int]:
        """Write what is still valid; returns (written, refused)."""
        written = refused = 0
        turns_done: set[str] = set()
        for proposal in proposals:
            if proposal.write:
                try:
                    ledger.remember(proposal.write)
                    written += 1
                except StaleDerivation:
                    refused += 1  # its turn changed or was erased after we read it
                    log.info("consolidation refused a proposal from a changed turn")
            turns_done.add(proposal.turn_id)
        with self.service.engine.begin() as conn:
            known = set(conn.execute(select(consolidated.c.item_id)).scalars())
            new = [{"item_id": t} for t in sorted(turns_done - known)]
            if new:
                conn.execute(consolidated.insert(), new)
        return written, refused

    def run_once(self, ledger: MemoryLedger) -> tuple[int, int]:
        return self.commit(ledger, self.read(ledger))

    def run_all(self) -> tuple[int, int]:
        """One pass over every namespace that has memories (the scheduled job)."""
        self.service.runner.catch_up()
        with self.service.engine.connect() as conn:
            namespaces = sorted(set(conn.execute(select(catalog.c.namespace)).scalars()))
        written = refused = 0
        for namespace in namespaces:
            ledger = self.service.for_principal(Principal.from_namespace(namespace))
            w, r = self.run_once(ledger)
            written, refused = written + w, refused + r
        return written, refused


def _write(turn: Any, kind: str, predicate: str, category: str, value: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "subject": "user",
        "predicate": predicate,
        "value": value,
        "category": category,
        "origin": "observed" if kind == "preference" else "inferred",
        "confidence": 0.6,
        "sensitivity": "personal",
        "provenance": {
            "writer": "consolidation",
            "written_at": datetime.now(UTC).isoformat(),
            "turn_id": turn.provenance.get("turn_id"),
            "session_id": turn.provenance.get("session_id"),
        },
        "derived_from": [{"item_id": turn.item_id, "version": turn.version}],
    }
