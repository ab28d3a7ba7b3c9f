"""What a job is given: the parts of an open store it uses, named, and nothing else.

The composition root (`MemoryService`, memory_ledger/api.py) builds one `JobContext`
(`service.job_context`); every job, the registry and the scheduler take it. A job
therefore cannot reach for an arbitrary part of the service, and a test can see from
this one dataclass everything a job may touch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memory_ledger.feed.hosts import catch_up_vectors

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_ledger.config import Settings
    from memory_ledger.event_log import EventLog
    from memory_ledger.feed.subscribers import Subscribers
    from memory_ledger.forgetting.holds import Holds
    from memory_ledger.forgetting.requests import ForgetRequests
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.policy.retention import RetentionPolicy
    from memory_ledger.projections.runner import ProjectionRunner
    from memory_ledger.projections.vector_index import VectorIndex
    from memory_ledger.restore.drill import DrillReport
    from memory_ledger.views import ItemState, Remembered
    from memory_ledger.write_policy import MemoryWrite


class NamespaceLedger(Protocol):
    """The part of a namespace's ledger (`MemoryLedger`) that the writing jobs
    (consolidation, dedupe) use: they write derived items through the same validated
    path as any caller, and suppress the inputs they merged."""

    namespace: str

    def get(self, item_id: Any) -> ItemState: ...

    def remember(self, write: MemoryWrite | dict[str, Any]) -> Remembered: ...

    def remember_many(self, writes: Sequence[MemoryWrite | dict[str, Any]]) -> list[Remembered]: ...

    def suppress(self, item_id: Any, reason: str = ...) -> int: ...


#: A drill (restore/drill.py): (now, backup path or None for the newest, run by,
#: keep the scratch copy) -> its report.
DrillRun = Callable[[datetime, Path | None, str, bool], "DrillReport"]


@dataclass(frozen=True)
class JobContext:
    """The parts of one open store that jobs use.

    `retention` and `clock` are callables: the policy in force can change while a
    scheduler runs (`policy install` in another process), and tests and drills move
    the clock. `ledger_for(namespace)` is a namespace's ledger, for the jobs that write
    derived items. `drill` runs a restore drill (it opens a scratch store of its own)."""

    settings: Settings
    log: EventLog
    engine: Engine
    runner: ProjectionRunner
    ledger: LifecycleLedger
    requests: ForgetRequests
    holds: Holds
    vectors: VectorIndex
    subscribers: Subscribers
    retention: Callable[[], RetentionPolicy]
    clock: Callable[[], datetime]
    ledger_for: Callable[[str], NamespaceLedger]
    drill: DrillRun

    def catch_up_vectors(self) -> int:
        """This host's vector index caught up (and acknowledged, on PostgreSQL)."""
        return catch_up_vectors(
            self.vectors, self.settings, self.subscribers, self.ledger, self.requests
        )
