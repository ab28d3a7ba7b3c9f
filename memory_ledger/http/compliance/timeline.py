"""A request's timeline for the console: one step per ledger entry, in chain order, with
its seq (the entry's id in the ledger), its time, a phase (filed, resolved, store, key
proof, scan, subscriber, status, ...) and a line saying what it records. Built from the
payloads, which hold ids, codes, counts and flags only, so the lines do too."""

from __future__ import annotations

import json
from typing import Any

from memory_ledger.operations import EntryType, LedgerEntry

_KEY_PROOF = {"keys_destroyed", "key_bytes_gone", "index_keys_destroyed"}
_SCAN = {"scan_scheduled", "residue_scan", "verification_closed"}


def timeline(entries: list[LedgerEntry]) -> list[dict[str, Any]]:
    return [_step(e) for e in entries]


def _step(entry: LedgerEntry) -> dict[str, Any]:
    p = entry.payload
    kind = entry.entry_type
    ok: bool | None = None
    if kind is EntryType.REQUEST:
        phase = "filed"
        line = (
            f"filed: basis {p.get('basis', 'user_request')}, scope {p['scope']['kind']}, "
            f"by {p['requested_by']}"
            + (", dry run" if p.get("dry_run") else "")
            + (f", plan {p['plan_id']}" if p.get("plan_id") else "")
        )
    elif kind is EntryType.RESOLVED:
        phase = "resolved"
        parts = [f"{len(p.get('targets', ()))} target(s)", f"{len(p.get('cascaded', ()))} cascaded"]
        for extra in ("history", "mentions"):
            if p.get(extra):
                parts.append(f"{len(p[extra])} {extra}")
        line = "resolved: " + ", ".join(parts)
    elif kind is EntryType.RECEIPT:
        action = p["action"]
        phase = "key proof" if action in _KEY_PROOF else "scan" if action in _SCAN else "store"
        ok = p["status"] == "ok"
        evidence = p.get("evidence") or {}
        shown = (
            ", ".join(f"{k}={_value(v)}" for k, v in sorted(evidence.items()))
            if isinstance(evidence, dict)
            else ", ".join(evidence)
        )
        line = (
            f"{p['store']}: {action} {p['status']} ({p['targets']} target(s), attempt "
            f"{p.get('attempt', 1)})" + (f": {shown}" if shown else "")
        )
    elif kind is EntryType.STATUS:
        phase = "status"
        ok = p["status"] == "completed" if p["status"] in ("completed", "partial") else None
        failed = p.get("failed_stores") or ()
        line = f"status: {p['status']}" + (f" (failed: {', '.join(failed)})" if failed else "")
    elif kind is EntryType.TOMBSTONE:
        phase = "tombstone"
        line = f"tombstone: item {p['item_id']} at log position {p['position']}"
    elif kind is EntryType.ACK:
        phase = "subscriber"
        line = (
            f"subscriber {p['subscriber']}: "
            + ("retired before acknowledging" if p.get("retired") else "acknowledged")
            + f" ({p['targets']} target(s), by {p['by']})"
        )
        ok = not p.get("retired")
    elif kind is EntryType.BLOCKED:
        phase = "blocked"
        line = f"blocked by legal hold(s) {', '.join(p['holds'])}: {len(p['items'])} item(s)"
        ok = False
    elif kind is EntryType.REFUSAL:
        phase = "refused"
        items = f" ({len(p['items'])} item(s))" if p.get("items") else ""
        line = f"refused: {p['reason']}{items}"
        ok = False
    elif kind is EntryType.NEEDS_CLARIFICATION:
        phase = "clarification"
        line = f"needs clarification: {len(p['candidates'])} candidate(s)"
    else:
        phase, line = kind.value, kind.value
    return {
        "seq": entry.seq,
        "at": entry.recorded_at,
        "type": kind.value,
        "phase": phase,
        "line": line,
        "ok": ok,
        "entry_hash": entry.entry_hash,
    }


def _value(value: object) -> str:
    """An evidence value as the ledger's JSON says it (true, not True)."""
    return json.dumps(value) if isinstance(value, bool) else str(value)
