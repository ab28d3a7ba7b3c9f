"""The decay pass: weak items move to the archived tier, reinforced ones come back.

Strength is not stored and rewritten every day: it is a function of what the log holds
(the strength an item was written with, each time a context served it) and of the
policy's decay table (memory_ledger/policy/retention.py `strength_at`), evaluated at
the start of the current decay period. So a pass is idempotent per period: run twice
in one period, or by two schedulers at once, it decides the same and the second run
changes nothing. What it changes is recorded as events on the item (`Archived`,
`Unarchived`, with the period, the strength and the rule), never as edits.

Archiving is decay's verb, kept apart from the other three: an update supersedes a
value, stop-using suppresses it, forget erases it; an archived item is intact and
readable, and recall and context skip it unless asked (`include_archived`). Protected
items (the retention protect list) never decay out.
"""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from sqlalchemy import select

from memory_ledger.jobs.context import JobContext
from memory_ledger.projections.catalog import catalog

log = logging.getLogger("memory_ledger.jobs")
SAVE_BATCH = 500


def decide_tiers(
    context: JobContext, now: datetime
) -> tuple[int, dict[str, tuple[str, float, str]]]:
    """(period, item id -> (tier it should be in, strength, rule)) for the items whose
    tier must change at `now`. Reads clear catalog columns only."""
    policy = context.retention()
    period, start = policy.period_start(now)
    query = select(
        catalog.c.item_id,
        catalog.c.kind,
        catalog.c.category,
        catalog.c.strength,
        catalog.c.recorded_at,
        catalog.c.reinforced_at,
        catalog.c.reinforcements,
        catalog.c.tier,
    ).where(~policy.protected_clause(catalog.c))
    changes: dict[str, tuple[str, float, str]] = {}
    with context.engine.connect() as conn:
        for row in conn.execute(query).mappings():
            strength, rule = policy.strength_of(row, start)
            wanted = "archived" if strength < policy.decay.archive_below else "active"
            if wanted != row["tier"]:
                changes[row["item_id"]] = (wanted, strength, rule)
    return period, changes


def decay_pass(context: JobContext, now: datetime) -> dict[str, int]:
    """Archive what decayed below the threshold; bring back what was reinforced."""
    context.runner.catch_up()
    period, changes = decide_tiers(context, now)
    counts = {"period": period, "archived": 0, "unarchived": 0, "skipped": 0}
    decided = sorted(changes.items())
    for start in range(0, len(decided), SAVE_BATCH):
        batch = decided[start : start + SAVE_BATCH]
        try:
            done = _apply(context, batch, period)
        except Exception:  # e.g. a version conflict with another writer: one by one
            done = []
            for one in batch:
                try:
                    done += _apply(context, [one], period)
                except Exception:  # erased or changed meanwhile: the next pass decides
                    counts["skipped"] += 1
        for tier in done:
            counts["archived" if tier == "archived" else "unarchived"] += 1
    if changes:
        log.info(
            "decay pass (period %d): %d archived, %d unarchived",
            period,
            counts["archived"],
            counts["unarchived"],
        )
    return counts


def _apply(
    context: JobContext, batch: list[tuple[str, tuple[str, float, str]]], period: int
) -> list[str]:
    """Record the tier changes of a batch in one save; returns the tiers changed to."""
    items, tiers = [], []
    for item_id, (tier, strength, rule) in batch:
        item = context.log.get(UUID(item_id))
        if item.erased:
            continue
        verb = item.archive if tier == "archived" else item.unarchive
        if verb(period=period, strength=strength, rule=rule):
            items.append(item)
            tiers.append(tier)
    if items:
        context.log.save(items)
    return tiers
