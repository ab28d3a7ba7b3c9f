"""Closes the verification window of finished forget requests.

While a request's window is open, `verify REQUEST_ID` can scan every file again with
keyed fingerprints of the erased texts. Those fingerprints are derived from the erased
data: kept forever, they would be a lasting (if keyed) trace of it. So once a request
has been `completed` for longer than the window (30 days by default, or
`MEMORY_LEDGER_VERIFICATION_DAYS`), this job destroys the fingerprints' key and records
that in the ledger as a `files` / `verification_closed` receipt. Later verifications
check the stores only, and say why.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from memory_ledger.config import Settings
from memory_ledger.forgetting.residue_check import WINDOW_CLOSED_ACTION as CLOSED
from memory_ledger.jobs.context import JobContext

log = logging.getLogger("memory_ledger.jobs")

WINDOW_ENV = "MEMORY_LEDGER_VERIFICATION_DAYS"
DEFAULT_WINDOW = timedelta(days=30)


def window_setting(settings: Settings) -> timedelta:
    days = settings.number(
        WINDOW_ENV, DEFAULT_WINDOW.days, lambda d: 0 <= d <= 3650, "a number of days from 0 to 3650"
    )
    return timedelta(days=days)


def close_elapsed_windows(
    context: JobContext, window: timedelta, now: datetime | None = None
) -> list[str]:
    """Close every window that has elapsed; returns the request ids closed this time."""
    deadline = (now or datetime.now(UTC)) - window
    completed_at: dict[str, datetime] = {}
    closed: set[str] = set()
    for entry in context.ledger.entries():
        payload = entry.payload
        if entry.entry_type == "status":
            if payload["status"] == "completed":
                completed_at[entry.request_id] = _parse(entry.recorded_at)
            else:
                completed_at.pop(entry.request_id, None)
        elif entry.entry_type == "receipt" and payload["action"] == CLOSED:
            closed.add(entry.request_id)
    due = [r for r, at in completed_at.items() if r not in closed and at <= deadline]
    for request_id in due:
        held = context.requests.residue.fingerprints(request_id) is not None
        context.requests.close_verification(request_id)
        context.ledger.append(
            request_id,
            "receipt",
            {
                "store": "files",
                "action": CLOSED,
                "targets": 0,
                "status": "ok",
                "evidence": {"fingerprints_destroyed": held},
            },
        )
    if due:
        log.info("closed the verification window of %d forget request(s)", len(due))
    return due


def _parse(recorded_at: str) -> datetime:
    return datetime.strptime(recorded_at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
