"""Reviewing and installing a retention policy version: `policy diff`, `policy install`.

A retention policy is reviewed once and then enforced everywhere, so the review must
show what a new version would do to the items already held before it does it: `diff`
evaluates every live item's decision under the policy in force and under the proposed
file (clear catalog columns only, nothing decrypted) and counts what changes. `install`
validates the file whole (an invalid file changes nothing, and the old policy stays in
force), requires a higher version, replaces `<data_dir>/policy.toml` atomically and
records the installation in the lifecycle ledger. From then on every read applies it
(a running service notices the new file at its next read), and the next retention sweep
erases what it made due.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from memory_ledger.errors import ConfigurationError
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.policy import POLICY_FILE, policy_from_text
from memory_ledger.policy.retention import RetentionPolicy
from memory_ledger.projections.catalog import catalog

MAX_LISTED_IDS = 20


@dataclass
class PolicyDiff:
    """What installing a policy would change, at `now`: counts and a few ids."""

    current_version: int
    new_version: int
    items: int = 0
    #: "old rule -> new rule" -> items whose deciding rule changes.
    rule_changes: dict[str, int] = field(default_factory=dict)
    newly_due: int = 0  # expired under the new policy, not under the current one
    no_longer_due: int = 0
    newly_protected: int = 0
    no_longer_protected: int = 0
    earlier_expiry: int = 0
    later_expiry: int = 0
    newly_due_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def counts(self) -> dict[str, int]:
        return {
            "items": self.items,
            "newly_due": self.newly_due,
            "no_longer_due": self.no_longer_due,
            "newly_protected": self.newly_protected,
            "no_longer_protected": self.no_longer_protected,
        }


def read_candidate(path: Path) -> tuple[str, RetentionPolicy]:
    """A proposed policy file's text and its retention policy, validated whole
    (ConfigurationError with the line and the reason)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the policy file {path}: {exc}") from None
    policy = policy_from_text(text, str(path)).retention
    assert policy is not None  # the packaged defaults always have one
    return text, policy


def diff(
    engine: Engine, current: RetentionPolicy, new: RetentionPolicy, now: datetime
) -> PolicyDiff:
    """Every live item's decision under `current` and `new`, compared."""
    out = PolicyDiff(current.version, new.version)
    changes: Counter[str] = Counter()
    columns = [catalog.c[name] for name in _DECIDED_ON]
    with engine.connect() as conn:
        for row in conn.execute(select(catalog.c.item_id, *columns)).mappings():
            out.items += 1
            before, after = current.decide(row), new.decide(row)
            if before.rule != after.rule:
                changes[f"{before.rule} -> {after.rule}"] += 1
            was, will = before.expired(now), after.expired(now)
            if will and not was:
                out.newly_due += 1
                if len(out.newly_due_ids) < MAX_LISTED_IDS:
                    out.newly_due_ids.append(row["item_id"])
            out.no_longer_due += int(was and not will)
            out.newly_protected += int(bool(after.protected_by) and not before.protected_by)
            out.no_longer_protected += int(bool(before.protected_by) and not after.protected_by)
            if before.expires_at != after.expires_at:
                if after.expires_at is not None and (
                    before.expires_at is None or after.expires_at < before.expires_at
                ):
                    out.earlier_expiry += 1
                else:
                    out.later_expiry += 1
    out.rule_changes = dict(sorted(changes.items()))
    return out


def install(
    engine: Engine,
    ledger: LifecycleLedger,
    data_dir: Path,
    current: RetentionPolicy,
    text: str,
    new: RetentionPolicy,
    installed_by: str,
) -> PolicyDiff:
    """Replace the policy file atomically and record the installation in the ledger,
    with what it changed at that moment (the catalog as the caller brought it)."""
    if new.version <= current.version:
        raise ConfigurationError(
            f"the new policy's retention.version ({new.version}) must be higher than the "
            f"one in force ({current.version}); nothing was installed"
        )
    changes = diff(engine, current, new, datetime.now(UTC))
    target = Path(data_dir) / POLICY_FILE
    temporary = target.with_name(f".{POLICY_FILE}.installing")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    payload = {
        "version": new.version,
        "fingerprint": hashlib.sha256(text.encode("utf-8")).hexdigest()[:32],
        "classes": len(new.table.classes),
        "installed_by": installed_by,
        "counts": changes.counts(),
    }
    # The ledger first: an installation it does not record never takes effect.
    ledger.append(f"policy-v{new.version}", EntryType.POLICY, payload)
    os.replace(temporary, target)
    return changes


_DECIDED_ON = (
    "kind",
    "category",
    "predicate",
    "sensitivity",
    "basis",
    "origin",
    "recorded_at",
    "expires_at",
)
