"""The retention sweep: items whose retention has run out are erased, like a user's forget.

Expiry is a read-time predicate first: recall, context, summaries and `show` never
return an item the retention policy (memory_ledger/policy/retention.py) says has
expired, whether or not this job has run. This job then erases those items for good:
for each namespace with due items it files one forget request for them (by item id)
with basis `retention_expiry`, which takes the same path as any erasure (the log's
tombstones, key destruction, every store's receipt, the key store's proof, the
scheduled byte scan) and records the basis in the ledger and on each tombstone.

Due = expired under the policy in force now (its classes, the item's own expiry, the
protect list), and not under a legal hold (a held item waits, still unreadable).

A crash mid-sweep leaves a `pending` request that the next start finishes, and items
not reached yet are simply still due at the next run, so the sweep is safe to repeat and
to run from two schedulers at once (an item already erased is no longer due). Time is
given (`now`), never read here: tests and drills decide what is due.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime

from sqlalchemy import select

from memory_ledger.config import Settings
from memory_ledger.forgetting.requests import RequestReport
from memory_ledger.forgetting.scope import MAX_SCOPE_ITEMS
from memory_ledger.jobs.context import JobContext
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.events import Progress

log = logging.getLogger("memory_ledger.jobs")

EVERY_ENV = "MEMORY_LEDGER_RETENTION_MINUTES"
DEFAULT_EVERY_MINUTES = 60.0
REQUESTED_BY = "retention_job"


def every_setting(settings: Settings) -> float:
    """Minutes between sweeps, from MEMORY_LEDGER_RETENTION_MINUTES (1 to 1,440)."""
    return settings.number(
        EVERY_ENV, DEFAULT_EVERY_MINUTES, lambda m: 1 <= m <= 1440, "a number of minutes, 1-1440"
    )


def due_items(context: JobContext, now: datetime) -> dict[str, list[str]]:
    """Namespace -> ids of its live items due at `now`: expired, not protected, not held."""
    context.runner.catch_up()
    query = (
        select(catalog.c.namespace, catalog.c.item_id)
        .where(context.retention().expired_clause(catalog.c), ~context.holds.clause(catalog.c))
        .order_by(catalog.c.namespace, catalog.c.item_id)
    )
    due: dict[str, list[str]] = defaultdict(list)
    with context.engine.connect() as conn:
        for namespace, item_id in conn.execute(query, context.retention().cutoffs(now)):
            due[namespace].append(item_id)
    return dict(due)


def expire_due(
    context: JobContext, now: datetime, progress: Progress | None = None
) -> list[RequestReport]:
    """Erase every item due at `now`: one request per namespace (and per 10,000 items).
    `progress` is told ("retention", items erased, items due) after each request."""
    reports = []
    due = due_items(context, now)
    total, done = sum(len(ids) for ids in due.values()), 0
    for namespace, ids in due.items():
        for start in range(0, len(ids), MAX_SCOPE_ITEMS):
            scope = {"kind": "item", "item_ids": ids[start : start + MAX_SCOPE_ITEMS]}
            reports.append(
                context.requests.submit(
                    namespace, scope, requested_by=REQUESTED_BY, basis="retention_expiry"
                )
            )
            done += len(scope["item_ids"])
            if progress is not None:
                progress("retention", done, total)
    if reports:
        erased = sum(len(r.all_targets) for r in reports)
        done = sum(1 for r in reports if r.completed)
        log.info(
            "retention sweep: %d item(s) in %d request(s), %d completed", erased, len(reports), done
        )
    return reports


def sweep_counts(reports: list[RequestReport]) -> dict[str, int]:
    """A sweep's outcome as counts (for job run records): never ids or content."""
    return {
        "requests": len(reports),
        "items": sum(len(r.all_targets) for r in reports),
        "completed": sum(1 for r in reports if r.completed),
        "blocked": sum(1 for r in reports if r.status == "blocked"),
    }
