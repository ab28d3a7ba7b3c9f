"""The scheduled signed head of the lifecycle ledger (issue 29).

A head an operator signs on demand proves little on its own: what binds the operator is
a head someone else kept earlier, against which any later tree must show a consistency
proof. This job signs one on a schedule and appends it, one JSON line each, to
`audit-heads.jsonl` in the data directory: the history an operator ships to wherever
heads are kept (an auditor, a ticket, a transparency log), and the head any
`GET /v1/audit/head` caller could have recorded at that time. Sizes and roots only: a
head holds no entry, no id, no content.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from memory_ledger.api import MemoryService
from memory_ledger.audit.heads import Auditor

HEADS_FILE = "audit-heads.jsonl"


def sign_and_keep(service: MemoryService) -> dict[str, int]:
    """Sign the ledger's head now and append it to the heads file (made durable before
    returning: a head the job reported is one a restart still has)."""
    head = Auditor(service.ledger, service.log.master).head()
    path: Path = service.settings.data_dir / HEADS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(head.to_dict(), sort_keys=True) + "\n")
        file.flush()
        os.fsync(file.fileno())
    return {"size": head.size}
