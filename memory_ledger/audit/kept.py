"""The heads the `audit-head` job keeps (`audit-heads.jsonl` in the data directory), and
the check that the ledger still extends the last of them.

A kept head is a promise: every later tree has it as a prefix. The ledger rolled back
to an older copy (sizes 43, 64, then 43 again) or rewritten after a head was kept
breaks that promise, and a new head signed over it would bury the break in the
history an auditor is shipped. So before a head is kept, the ledger's tree now is
checked against the last head kept (its size, its root by a consistency proof, its
signature when it is this key's): a rollback or fork is refused with IntegrityError
and nothing is appended. `doctor` and the compliance console run the same check, so
the break is reported where an operator or an auditor looks, not only in a job log."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memory_ledger.audit.heads import Auditor, SignedHead
from memory_ledger.audit.verifier import Malformed, read_head
from memory_ledger.errors import IntegrityError

HEADS_FILE = "audit-heads.jsonl"
#: What `doctor` and the job say to do when the ledger no longer extends the last head.
REPAIR = (
    "restore the lifecycle ledger from its own backup taken after that head (the heads "
    "file names its size and root), then run `memory-ledger doctor` again. If the "
    "rollback is deliberate and whoever keeps your heads has been told, move "
    "audit-heads.jsonl aside (keep it: it is the evidence of the earlier tree) and the "
    "next head starts a new history"
)


def heads_path(data_dir: Path) -> Path:
    return data_dir / HEADS_FILE


def last_kept(data_dir: Path) -> dict[str, Any] | None:
    """The last head in the heads file (None when there is none). A last line that is
    not a head (a write torn by a crash) is passed over for the one before it."""
    path = heads_path(data_dir)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise IntegrityError(f"cannot read {path}: {exc}", code="audit_heads_unreadable") from None
    for line in reversed(lines):
        try:
            return read_head(json.loads(line), "kept head")
        except (ValueError, RecursionError, Malformed):
            continue
    return None


def problems_since_kept(auditor: Auditor, data_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """The last kept head and why the ledger's tree now does not extend it ("" when it
    does, or when no head was kept)."""
    kept = last_kept(data_dir)
    if kept is None:
        return None, ""
    problems, _ = auditor.extends(kept, auditor.tree().size)
    detail = "; ".join(d for _, d in problems)
    if not problems:
        return kept, ""
    return kept, f"the last kept head (size {kept['size']}, signed {kept['time']}): {detail}"


def keep_head(auditor: Auditor, data_dir: Path) -> SignedHead:
    """Sign the ledger's head now and append it to the heads file, made durable before
    returning (a head the job reported is one a restart still has). IntegrityError,
    with nothing signed or appended, when the ledger does not extend the last kept head
    or its hash chain does not verify."""
    _, problem = problems_since_kept(auditor, data_dir)
    if problem:
        raise IntegrityError(
            f"the ledger does not extend {problem}. No head was signed or kept",
            code="audit_head_not_extended",
            repair=REPAIR,
        )
    head = auditor.head()
    path = heads_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as file:
        torn = False  # a last line without its newline: start this head on a line of its own
        if file.seek(0, os.SEEK_END) > 0:
            file.seek(-1, os.SEEK_END)
            torn = file.read(1) != b"\n"
        line = json.dumps(head.to_dict(), sort_keys=True) + "\n"
        file.write((b"\n" if torn else b"") + line.encode("utf-8"))
        file.flush()
        os.fsync(file.fileno())
    return head
