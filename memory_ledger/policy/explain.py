"""`explain ID`: why an item is kept, archived, due to expire, held or protected.

Every lifecycle decision about an item is a rule of the policy in force applied to the
item's clear attributes and its events, so it can be shown with the rule that made it.
The answer holds ids, codes, times and numbers only, never the item's content: it is
meant for operators and compliance as much as for the user.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from memory_ledger.domain import MemoryItem
from memory_ledger.forgetting.holds import Holds
from memory_ledger.policy.retention import RetentionPolicy, attributes_of
from memory_ledger.projections.catalog import catalog
from memory_ledger.times import canonical_time


def explain(
    item: MemoryItem,
    conn: Connection,
    policy: RetentionPolicy,
    holds: Holds,
    now: datetime,
) -> dict[str, Any]:
    attrs = attributes_of(item)
    out: dict[str, Any] = {
        "item_id": str(item.id),
        "kind": item.kind,
        "category": item.category,
        "predicate": item.predicate,
        "origin": item.origin,
        "basis": attrs["basis"],
        "recorded_at": attrs["recorded_at"],
        "written_under_policy": item.policy_version,
        "policy_in_force": policy.version,
        "at": canonical_time(now),
    }
    if item.erased:
        return {**out, "state": "erased", "reasons": ["erased: its keys are destroyed"]}
    decision = policy.decide(attrs)
    held = [h.name for h in holds.active() if h.covers({**attrs, "namespace": item.namespace})]
    row = conn.execute(select(catalog).where(catalog.c.item_id == str(item.id))).mappings().first()
    out["retention"] = {
        "rule": decision.rule,
        "ttl": decision.ttl,
        "expires_at": decision.expires_at,
        "protected_by": decision.protected_by,
    }
    out["holds"] = held
    reasons = []
    if decision.protected_by:
        reasons.append(f"protected ({decision.protected_by}): never forgotten automatically")
    elif decision.expires_at is None:
        reasons.append(f"kept: {decision.rule} sets no time to live")
    elif decision.expired(now):
        reasons.append(f"expired at {decision.expires_at} ({decision.rule}): never recalled")
    else:
        reasons.append(f"due to expire at {decision.expires_at} ({decision.rule})")
    if held:
        reasons.append(f"held ({', '.join(held)}): no deletion until the hold is lifted")
    if item.suppressed:
        reasons.append("suppressed: not used (stop-using), kept")
    if row is not None:
        period, start = policy.period_start(now)  # as the decay pass computes it
        strength, rule = policy.strength_of(row, start)
        out["decay"] = {
            "strength": round(strength, 4),
            "rule": rule,
            "period": period,
            "archive_below": policy.decay.archive_below,
            "reinforcements": row["reinforcements"],
            "last_reinforced_at": row["reinforced_at"],
            "tier": row["tier"],
        }
        if row["tier"] == "archived":
            reasons.append(f"archived: strength {strength:.3f} below the threshold ({rule})")
    expired = decision.expired(now)
    if expired and held:
        state = "held"
    elif expired:
        state = "expired"
    elif item.archived:
        state = "archived"
    elif decision.protected_by:
        state = "protected"
    elif decision.expires_at is not None:
        state = "due_to_expire"
    else:
        state = "kept"
    return {**out, "state": state, "reasons": reasons}
