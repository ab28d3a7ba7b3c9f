"""The consistency check: do the event log, the key store and the lifecycle ledger agree?

Each of them can be damaged on its own, and none of that shows in ordinary use: a key
row deleted by hand reads like an erased item, a ledger file deleted comes back empty
and verifies as intact, a fingerprint row deleted looks like a closed verification
window. What must hold, and the finding when it does not:

- an item without a tombstone has a key row (`key_missing`), and a live key
  (`key_destroyed_without_tombstone`);
- an item with a tombstone has no live key (`erased_item_has_live_key`);
- every tombstone in the log is explained by the ledger: a tombstone entry, a target of
  a recorded request, or an acknowledged loss of entries (`tombstone_unexplained`);
- every item the ledger records as erased (a tombstone entry, or a target of a
  completed request) is erased in the log (`erased_item_not_erased`) and exists in it
  (`ledger_item_not_in_log`);
- a request whose byte scan kept fingerprints still has their key row, live while its
  verification window is open and destroyed once it closed, unless the closing was
  recorded in the ledger (`fingerprints_missing`);
- with `chain=True`, the ledger's hash chain verifies (`ledger_chain_broken`).

The check reads each store once, whatever its size, and sends no query per item: the
events table's index for the items and its rows for the tombstones, the key store, the
ledger (about 0.6 s at 100,000 items). It is given the parts it needs, not the service,
so `doctor` can run it on a store that refuses to open as a service. Findings name items
and requests by id only, never content.

Two problems stop a store from opening at all, and are raised where they are found:
KeyCheckMissing (by the event log) and LedgerMissing (`check_ledger_present`, below).
"""

from __future__ import annotations

import getpass
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from memory_ledger.config import Settings
from memory_ledger.errors import LedgerMissing, MemoryLedgerError, NotFound
from memory_ledger.event_log import EventLog
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.store_protocol import Receipt

#: How many ids a finding lists in its output; `count` always says how many there are.
SAMPLE = 20
_RESIDUE_PREFIX = "residue:"
_ACTOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")

EXPLANATIONS = {
    "key_check_missing": (
        "the master-key check row is gone from the event store's meta table, so no "
        "offered master key can be told right from wrong: the store refuses to open"
    ),
    "ledger_missing": (
        "the lifecycle ledger is empty beside an event log that holds tombstones: it was "
        "deleted or replaced, so the store refuses to open"
    ),
    "projections_damaged": (
        "the projections database is damaged; it holds only what the log can rebuild"
    ),
    "key_missing": (
        "items that were never erased have no row in the key store (memory_keys): their "
        "content cannot be read, and a rebuild replays them as unreadable. Key rows are "
        "never deleted by memory-ledger: this is damage or a hand-made change"
    ),
    "key_destroyed_without_tombstone": (
        "items that were never erased have only destroyed keys: their content cannot be "
        "read, and nothing in the log or the ledger says they were erased"
    ),
    "erased_item_has_live_key": (
        "items with a tombstone still have a live data key: their sealed content is "
        "readable again by anyone with the master key (a key store restored from a copy "
        "older than the erasure?)"
    ),
    "tombstone_unexplained": (
        "tombstones in the log that no ledger entry explains: the lifecycle ledger lost "
        "entries (deleted, recreated, or restored from an older copy), so there is no "
        "record of why these items were erased, and a restore could not replay them"
    ),
    "erased_item_not_erased": (
        "items the ledger records as erased have no tombstone in the log: erased data is "
        "back (the event store restored from a copy older than the erasure?)"
    ),
    "ledger_item_not_in_log": (
        "items the ledger records as erased do not exist in the log at all (the event "
        "store replaced or restored from a copy older than the items?)"
    ),
    "fingerprints_missing": (
        "requests whose byte scan kept keyed fingerprints have no fingerprint key row, "
        "and their verification window was never recorded as closed: the row was "
        "deleted. `verify` cannot scan the files for these requests"
    ),
    "catalog_disagrees_with_log": (
        "catalog rows name another namespace, kind, subject, predicate, category or "
        "sensitivity than the item's Recorded event, or an item the log does not hold: "
        "the projections file was damaged or edited. Forget requests refuse such targets "
        "(ProjectionMismatch) rather than erase the wrong data"
    ),
    "catalog_missing_items": (
        "live items of the log have no catalog row, so no forget scope other than their "
        "id can reach them: the projections file was damaged or edited"
    ),
    "ledger_chain_broken": (
        "the lifecycle ledger's hash chain does not verify: entries were changed, "
        "removed, inserted or reordered"
    ),
    "audit_head_not_extended": (
        "the lifecycle ledger's tree does not extend the last head the audit-head job "
        "kept (audit-heads.jsonl): the ledger was rolled back to an older copy or "
        "rewritten after that head was signed. The job signs no new head until this is "
        "resolved"
    ),
}


@dataclass(frozen=True)
class Finding:
    """One kind of problem, with every id it concerns and what to do about it."""

    code: str
    item_ids: tuple[str, ...] = ()
    request_ids: tuple[str, ...] = ()
    repair: str = ""
    detail: str = ""

    @property
    def count(self) -> int:
        return max(len(self.item_ids), len(self.request_ids), 1)

    @property
    def explanation(self) -> str:
        text = EXPLANATIONS.get(self.code, self.code)
        return f"{text} ({self.detail})" if self.detail else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "count": self.count,
            "explanation": self.explanation,
            "repair": self.repair,
            "item_ids": list(self.item_ids[:SAMPLE]),
            "request_ids": list(self.request_ids[:SAMPLE]),
        }


@dataclass(frozen=True)
class ConsistencyReport:
    findings: tuple[Finding, ...]
    items: int = 0
    erased: int = 0
    key_rows: int = 0
    ledger_entries: int = 0
    #: Tombstones no entry explains, accepted by an operator (`recovery` entries).
    acknowledged_tombstones: int = 0
    chain_checked: bool = False
    location: str = ""

    @property
    def ok(self) -> bool:
        return not self.findings

    def concerning(self, request_id: str, item_ids: Iterable[str]) -> list[Finding]:
        """The findings about this request or any of these items."""
        wanted = set(item_ids)
        return [
            f
            for f in self.findings
            if request_id in f.request_ids or wanted.intersection(f.item_ids)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": sum(f.count for f in self.findings),
            "findings": [f.to_dict() for f in self.findings],
            "checked": {
                "items": self.items,
                "erased": self.erased,
                "key_rows": self.key_rows,
                "ledger_entries": self.ledger_entries,
                "acknowledged_tombstones": self.acknowledged_tombstones,
                "ledger_chain": self.chain_checked,
            },
        }


@dataclass
class _LedgerFacts:
    """What one pass over the ledger says about erasures."""

    entries: int = 0
    tombstoned: dict[str, str] = field(default_factory=dict)  # item -> request
    targets: dict[str, list[str]] = field(default_factory=dict)  # request -> targets
    dry_run: set[str] = field(default_factory=set)
    #: Redactions: their targets are rewritten and kept, never erased.
    redactions: set[str] = field(default_factory=set)
    status: dict[str, str] = field(default_factory=dict)
    kept_fingerprints: set[str] = field(default_factory=set)
    closed_windows: set[str] = field(default_factory=set)
    acknowledged_upto: int = 0

    @classmethod
    def read(cls, ledger: LifecycleLedger) -> _LedgerFacts:
        facts = cls()
        for entry in ledger.entries():
            facts.entries += 1
            kind, rid = entry.entry_type, entry.request_id
            if kind is EntryType.RECEIPT:
                if '"store":"files"' not in entry.payload_json:  # canonical JSON: cheap test
                    continue
                payload = entry.payload
                if _says_fingerprints_kept(payload):
                    facts.kept_fingerprints.add(rid)
                elif payload["action"] == "verification_closed":
                    facts.closed_windows.add(rid)
            elif kind is EntryType.TOMBSTONE:
                facts.tombstoned[str(entry.payload["item_id"])] = rid
            elif kind is EntryType.RESOLVED:
                payload = entry.payload
                facts.targets[rid] = [*payload["targets"], *payload.get("cascaded", ())]
            elif kind is EntryType.REQUEST:
                if entry.payload.get("dry_run"):
                    facts.dry_run.add(rid)
                if entry.payload["scope"]["kind"] == "redaction":
                    facts.redactions.add(rid)
            elif kind is EntryType.STATUS:
                facts.status[rid] = str(entry.payload["status"])
            elif kind is EntryType.RECOVERY:
                position = int(entry.payload["log_position"])
                facts.acknowledged_upto = max(facts.acknowledged_upto, position)
        return facts

    def requested(self) -> dict[str, str]:
        """Every item a (not dry-run) request targeted: item -> the first such request."""
        out: dict[str, str] = {}
        for rid, items in self.targets.items():
            if rid not in self.dry_run and rid not in self.redactions:
                for item in items:
                    out.setdefault(item, rid)
        return out

    def recorded_erased(self) -> dict[str, str]:
        """Items the ledger says are erased: tombstone entries, and the targets of
        completed requests (a target erased earlier gets no tombstone entry of its own)."""
        out = dict(self.tombstoned)
        for rid, items in self.targets.items():
            if self.status.get(rid) == "completed" and rid not in self.redactions:
                for item in items:
                    out.setdefault(item, rid)
        return out


def check(
    log: EventLog, ledger: LifecycleLedger, settings: Settings, *, chain: bool = False
) -> ConsistencyReport:
    """Check the log, the key store and the ledger against each other (see the module
    docstring). `chain` also recomputes the ledger's hash chain (what `audit verify`
    does): for `doctor`, not for `status`, which runs on every health check."""
    items = log.item_tombstones()
    keys = log.key_states()
    facts = _LedgerFacts.read(ledger)
    findings: list[Finding] = []

    live = [i for i, t in items.items() if t is None]
    erased = {i: t for i, t in items.items() if t is not None}
    no_row = [i for i in live if i not in keys]
    dead = [i for i in live if i in keys and keys[i][0] == 0]
    back = [i for i in erased if keys.get(i, (0, 0))[0] > 0]
    recorded = facts.recorded_erased()
    not_erased = sorted(i for i in recorded if i in items and items[i] is None)
    if dead or not_erased:
        # The log was read first: a forget that committed since then shows here as a
        # destroyed key, or a ledger entry, without its tombstone. Read the log again.
        now = log.item_tombstones()
        dead = [i for i in dead if now.get(i) is None]
        not_erased = [i for i in not_erased if now.get(i) is None]
    if no_row:
        findings.append(
            Finding(
                "key_missing",
                tuple(sorted(no_row)),
                repair=(
                    "restore the rows from a backup of the key store (memory_keys) if one "
                    "holds them; otherwise the content is lost: record that as an erasure "
                    f"with {_forget_hint(log, no_row)}, one namespace at a time"
                ),
            )
        )
    if dead:
        findings.append(
            Finding(
                "key_destroyed_without_tombstone",
                tuple(sorted(dead)),
                repair=(
                    "the content cannot be recovered (a destroyed key is gone): record the "
                    f"loss as an erasure with {_forget_hint(log, dead)}"
                ),
            )
        )
    if back:
        findings.append(
            Finding(
                "erased_item_has_live_key",
                tuple(sorted(back)),
                repair=f"destroy the keys again: {_forget_hint(log, back)} (a forget of an "
                "erased item is idempotent: it destroys its keys, appends no second tombstone)",
            )
        )

    requested = facts.requested()
    unexplained = sorted(
        i
        for i, position in erased.items()
        if i not in facts.tombstoned and i not in requested and position > facts.acknowledged_upto
    )
    acknowledged = sum(
        1
        for i, position in erased.items()
        if i not in facts.tombstoned and i not in requested and position <= facts.acknowledged_upto
    )
    if unexplained:
        findings.append(
            Finding(
                "tombstone_unexplained",
                tuple(unexplained),
                repair=(
                    f"restore the lifecycle ledger ({ledger.location}) from its own backup "
                    "(never from the store's), with no process holding the store open; if "
                    "no backup holds these entries, record the loss: `memory-ledger doctor "
                    "--acknowledge-ledger-loss`"
                ),
            )
        )

    unknown = sorted(i for i in recorded if i not in items)
    if not_erased:
        findings.append(
            Finding(
                "erased_item_not_erased",
                tuple(not_erased),
                tuple(sorted({recorded[i] for i in not_erased})),
                repair=f"erase them again: {_forget_hint(log, not_erased)}",
            )
        )
    if unknown:
        findings.append(
            Finding(
                "ledger_item_not_in_log",
                tuple(unknown),
                tuple(sorted({recorded[i] for i in unknown})),
                repair=(
                    "nothing of these items is left to erase; find out why the event store "
                    "lost them (which copy was restored) before you trust it"
                ),
            )
        )

    if settings.postgres is None:
        lost = sorted(
            rid
            for rid in facts.kept_fingerprints - facts.closed_windows
            if _RESIDUE_PREFIX + rid not in keys
        )
        if lost:  # the ledger was read after the keys: a request may have kept them since
            ring = log.keys_for([_RESIDUE_PREFIX + rid for rid in lost])
            lost = [rid for rid in lost if not ring.rows_of(_RESIDUE_PREFIX + rid)]
        if lost:
            findings.append(
                Finding(
                    "fingerprints_missing",
                    request_ids=tuple(lost),
                    repair=(
                        "restore the rows `residue:<request id>` of memory_keys from a "
                        "backup of the event store; otherwise record the window as closed: "
                        f"`memory-ledger doctor --close-verification {lost[0]}`"
                    ),
                )
            )

    if chain:
        audit = ledger.verify()
        if not audit.ok:
            findings.append(
                Finding(
                    "ledger_chain_broken",
                    repair=(
                        "see `memory-ledger audit verify`; restore the ledger from its own "
                        "backup and investigate who changed it (compliance.md, auditing "
                        "the ledger)"
                    ),
                    detail=audit.explanation,
                )
            )

    return ConsistencyReport(
        tuple(findings),
        items=len(items),
        erased=len(erased),
        key_rows=sum(total for _, total in keys.values()),
        ledger_entries=facts.entries,
        acknowledged_tombstones=acknowledged,
        chain_checked=chain,
        location=settings.describe(),
    )


def _forget_hint(log: EventLog, item_ids: Sequence[str]) -> str:
    """The forget command for the first item, with its namespace (one read of one item)."""
    if not item_ids:
        return "`memory-ledger forget scope -n NAMESPACE ITEM_ID`"
    first = sorted(item_ids)[0]
    try:
        namespace = log.get(UUID(first)).namespace
    except (MemoryLedgerError, ValueError):
        namespace = "NAMESPACE"
    more = " (and likewise for each id listed)" if len(item_ids) > 1 else ""
    return f"`memory-ledger forget scope -n {namespace} {first}`{more}"


# -- checks at open, and the repairs doctor offers -----------------------------------------


def check_ledger_present(log: EventLog, ledger: LifecycleLedger) -> None:
    """Refuse a store whose ledger is empty while its log holds tombstones: the ledger
    was deleted (and has just been created again, empty) or replaced. Serving would
    let `audit verify` call an empty ledger intact, and a restore replay nothing."""
    if ledger.is_empty() and log.has_tombstones():
        raise LedgerMissing(
            f"the lifecycle ledger at {ledger.location} is empty, but the event log holds "
            "tombstones: the ledger was deleted or replaced, and nothing records why those "
            "items were erased. Nothing is served until an operator acts: restore the "
            "ledger from its own backup, or record the loss with `memory-ledger doctor "
            "--acknowledge-ledger-loss`",
            code="ledger_missing",
            repair="memory-ledger doctor --acknowledge-ledger-loss",
        )


@dataclass(frozen=True)
class Acknowledged:
    request_id: str
    log_position: int
    tombstones_unexplained: int
    ledger_was_empty: bool


def acknowledge_ledger_loss(
    log: EventLog, ledger: LifecycleLedger, settings: Settings, by: str | None = None
) -> Acknowledged | None:
    """Record in the ledger that its entries for the tombstones it cannot explain are
    lost: a `recovery` entry with the log position and the count (ids stay in the log).
    None when there is nothing to acknowledge."""
    was_empty = ledger.is_empty()
    report = check(log, ledger, settings)
    unexplained = [f for f in report.findings if f.code == "tombstone_unexplained"]
    if not unexplained:
        return None
    count = unexplained[0].count
    position = log.max_position()
    request_id = f"recovery-{uuid.uuid4().hex[:16]}"
    ledger.append(
        request_id,
        EntryType.RECOVERY,
        {
            "action": "ledger_loss_acknowledged",
            "log_position": position,
            "tombstones_unexplained": count,
            "ledger_was_empty": was_empty,
            "acknowledged_by": _actor(by),
        },
    )
    return Acknowledged(request_id, position, count, was_empty)


def close_lost_verification(ledger: LifecycleLedger, request_id: str) -> None:
    """Record that a request's verification window is closed because its fingerprints'
    key row was lost: the same `files` / `verification_closed` receipt the scheduled
    job records, with `fingerprints_destroyed` false and `fingerprints_missing` true."""
    if not ledger.entries(request_id):
        raise NotFound(f"no forget request {request_id}")
    ledger.append(
        request_id,
        EntryType.RECEIPT,
        {
            "store": "files",
            "action": "verification_closed",
            "targets": 0,
            "status": "ok",
            "evidence": {"fingerprints_destroyed": False, "fingerprints_missing": True},
        },
    )


def fingerprints_were_kept(ledger: LifecycleLedger, request_id: str) -> tuple[bool, bool]:
    """(kept, closed) for one request, from its ledger entries: whether its byte scan
    kept fingerprints, and whether the closing of its window was recorded."""
    kept = closed = False
    for entry in ledger.entries(request_id):
        if entry.entry_type is not EntryType.RECEIPT:
            continue
        payload = entry.payload
        if payload["store"] != "files":
            continue
        if _says_fingerprints_kept(payload):
            kept = True
        elif payload["action"] == "verification_closed":
            closed = True
    return kept, closed


def _says_fingerprints_kept(payload: dict[str, Any]) -> bool:
    """A `files` receipt saying the request kept fingerprints: its scheduling, or a scan
    that ran (a scan runs only with fingerprints)."""
    evidence = payload.get("evidence")
    if not isinstance(evidence, dict):
        return False
    if payload["action"] == "scan_scheduled":
        return evidence.get("fingerprints_kept") is True
    return payload["action"] == "residue_scan" and evidence.get("checked") is True


def request_receipt(report: ConsistencyReport, request_id: str, targets: list[str]) -> Receipt:
    """The consistency check as a verification receipt: failed when a finding concerns
    this request or its targets; problems elsewhere in the store are counted only."""
    mine = report.concerning(request_id, targets)
    evidence: dict[str, int | bool | str] = {
        "problems_in_store": sum(f.count for f in report.findings),
        "concerning_this_request": len(mine),
    }
    for finding in mine:
        evidence[finding.code] = finding.count
    return Receipt("consistency", "verified", len(targets), "failed" if mine else "ok", evidence)


def _actor(by: str | None) -> str:
    if by is None:
        try:
            by = getpass.getuser()
        except (KeyError, OSError):
            by = "operator"
    return by if _ACTOR.match(by) and not re.search(r"[0-9A-Fa-f]{40,}", by) else "operator"
