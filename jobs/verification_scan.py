"""The scheduled verification scan: every file, for what each finished request erased.

A forget request is `completed` on its stores' receipts and the key store's proof that
the destroyed keys' bytes are gone; it does not wait for a read of every byte of every
file, whose cost is every other user's data (memory_ledger/forgetting/residue_check.py).
This job runs that read for each completed request whose scan is still due, with the
request's keyed fingerprints (its texts, their distinctive fragments, its destroyed
keys' bytes), and records the result in the ledger as the request's `files` /
`residue_scan` receipt. Residue reopens the request as `partial` with the store `files`
named, so `requests` shows it and a retry runs again; `verify REQUEST_ID` runs the same
scan on demand.
"""

from __future__ import annotations

import logging

from memory_ledger.config import Settings
from memory_ledger.jobs.context import JobContext
from memory_ledger.projections.events import Progress

log = logging.getLogger("memory_ledger.jobs")

EVERY_ENV = "MEMORY_LEDGER_SCAN_MINUTES"
DEFAULT_EVERY_MINUTES = 10.0


def every_setting(settings: Settings) -> float:
    """Minutes between runs, from MEMORY_LEDGER_SCAN_MINUTES (1 to 1,440)."""
    return settings.number(
        EVERY_ENV, DEFAULT_EVERY_MINUTES, lambda m: 1 <= m <= 1440, "a number of minutes, 1-1440"
    )


def due_requests(context: JobContext) -> list[str]:
    """Completed requests that kept fingerprints and have no scan since they completed."""
    due: dict[str, bool] = {}
    for entry in context.ledger.entries():
        payload = entry.payload
        if entry.entry_type == "status":
            if payload["status"] != "completed":
                due.pop(entry.request_id, None)
            elif entry.request_id in due:
                due[entry.request_id] = True
        elif entry.entry_type == "receipt" and payload["store"] == "files":
            evidence = payload.get("evidence") or {}
            if payload["action"] == "scan_scheduled" and evidence.get("fingerprints_kept"):
                due[entry.request_id] = False  # completed by a status entry next
            elif payload["action"] in ("residue_scan", "verification_closed"):
                due.pop(entry.request_id, None)
    return [request_id for request_id, completed in due.items() if completed]


def scan_due(
    context: JobContext, progress: Progress | None = None, due: list[str] | None = None
) -> dict[str, str]:
    """Scan for every due request (`due`, if the caller has read them already); returns
    request id -> receipt status (ids only). `progress` is told ("verification_scan",
    requests scanned, requests due): each scan reads every file, so a backlog of them is
    a long run."""
    done: dict[str, str] = {}
    due = due_requests(context) if due is None else due
    for request_id in due:
        _, receipt = context.requests.scan_files(request_id)
        done[request_id] = receipt.status if receipt is not None else "not run"
        if progress is not None:
            progress("verification_scan", len(done), len(due))
    if done:
        found = sum(1 for s in done.values() if s == "failed")
        log.info("verification scan of %d request(s): %d with residue", len(done), found)
    unchecked = [r for r, s in done.items() if s == "not run"]
    if unchecked:
        log.warning(
            "verification scan could not check %d request(s) (their fingerprints are "
            "gone; see `memory-ledger doctor`): %s",
            len(unchecked),
            ", ".join(unchecked[:10]),
        )
    return done
