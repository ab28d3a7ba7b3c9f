"""The retention policy as operators review and change it: show the one in force, diff
a candidate against the items held now, install one, run the decay pass.

A diff or an install reads the catalog, so the projections are caught up first; the
policy in force is read through the service's accessor (another process may have
installed a newer one: memory_ledger/api.py `MemoryService.retention`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from memory_ledger.jobs.context import JobContext
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.policy.retention import RetentionPolicy
from memory_ledger.policy.review import PolicyDiff, diff, install, read_candidate


class Policies:
    """Review and installation of the retention policy of one open store."""

    def __init__(
        self,
        engine: Engine,
        ledger: LifecycleLedger,
        data_dir: Path,
        *,
        retention: Callable[[], RetentionPolicy],
        sources: Callable[[], Sequence[str]],
        catch_up: Callable[[], object],
        jobs: Callable[[], JobContext],
    ) -> None:
        self._engine = engine
        self._ledger = ledger
        self._data_dir = data_dir
        self._retention = retention
        self._sources = sources
        self._catch_up = catch_up
        self._jobs = jobs

    def in_force(self) -> RetentionPolicy:
        """The retention policy in force now."""
        return self._retention()

    def shown(self) -> dict[str, Any]:
        """The policy in force as data: version, sources, classes and decay."""
        policy = self._retention()
        return {
            "version": policy.version,
            "sources": list(self._sources()),
            "retention": policy.table.model_dump(by_alias=True),
            "decay": policy.decay.model_dump(by_alias=True),
        }

    def diff(self, file: Path, now: datetime) -> PolicyDiff:
        """What installing `file` would change for the items held now; changes nothing."""
        _, candidate = read_candidate(file)
        self._catch_up()
        return diff(self._engine, self._retention(), candidate, now)

    def install(self, file: Path, installed_by: str) -> tuple[RetentionPolicy, PolicyDiff]:
        """Validate `file` whole and install it; the old policy stays if anything is
        wrong. Returns the installed policy and what it changed."""
        text, candidate = read_candidate(file)
        self._catch_up()
        changes = install(
            self._engine, self._ledger, self._data_dir, self._retention(), text, candidate,
            installed_by,
        )  # fmt: skip
        return candidate, changes

    def decay(self, now: datetime) -> dict[str, int]:
        """Run the decay pass once (idempotent per decay period)."""
        from memory_ledger.jobs.decay import decay_pass

        return decay_pass(self._jobs(), now)
