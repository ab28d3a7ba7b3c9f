"""The scheduled signed head of the lifecycle ledger (issue 29).

A head an operator signs on demand proves little on its own: what binds the operator is
a head someone else kept earlier, against which any later tree must show a consistency
proof. This job signs one on a schedule and appends it, one JSON line each, to
`audit-heads.jsonl` in the data directory: the history an operator ships to wherever
heads are kept (an auditor, a ticket, a transparency log), and the head any
`GET /v1/audit/head` caller could have recorded at that time. Sizes and roots only: a
head holds no entry, no id, no content. Each new head must extend the last one kept: a
ledger rolled back or rewritten since is reported, never signed over.
"""

from __future__ import annotations

from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.kept import HEADS_FILE, keep_head
from memory_ledger.jobs.context import JobContext

__all__ = ["HEADS_FILE", "sign_and_keep"]


def sign_and_keep(context: JobContext) -> dict[str, int]:
    """Sign the ledger's head now and append it to the heads file, after checking the
    ledger still extends the last head kept (memory_ledger/audit/kept.py): a rollback
    or fork fails the run (IntegrityError, exit 10) and keeps nothing."""
    head = keep_head(Auditor(context.ledger, context.log.master), context.settings.data_dir)
    return {"size": head.size}
