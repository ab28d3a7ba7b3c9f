"""Store-wide operations: the one way the CLI and the HTTP server act on a store as a
whole. One concern per module: forget-request listings (requests.py), backups, restores
and drills (backups.py), jobs (jobs.py), the retention policy (policy.py), status,
rebuild and the doctor (maintenance.py); holds, subscribers, the ledger and its audit
evidence are here. shapes.py re-exports the input shapes the surfaces validate with.

Before this package each surface reached into the service's parts and assembled the
same operation itself (a restore twice, a request listing twice with different fields).
`Operations` receives the pieces it uses, never the service, so what a surface can do is
what is written here; `MemoryService.operations` builds it. Calls into jobs/ arrive
bound to the jobs' context, so that a command that runs no job never imports them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.kept import problems_since_kept
from memory_ledger.audit.pack import build_pack
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.feed.feed import ChangeFeed, Notice
from memory_ledger.feed.subscribers import Subscriber, Subscribers
from memory_ledger.forgetting.holds import Hold, Holds
from memory_ledger.forgetting.planning import ForgetPlan, PlanOutcome
from memory_ledger.forgetting.requests import ForgetRequests, RequestReport
from memory_ledger.jobs.context import JobContext
from memory_ledger.ledger import AuditResult, EntryType, LedgerEntry, LifecycleLedger
from memory_ledger.operations.backups import Backups, Restores
from memory_ledger.operations.jobs import (
    RUNNING,
    RUNS_KEPT,
    Jobs,
    RunRecord,
    job_listing,
    job_names,
)
from memory_ledger.operations.maintenance import Maintenance
from memory_ledger.operations.policy import Policies
from memory_ledger.operations.requests import RequestListing, RequestPage, RequestRow
from memory_ledger.projections.events import Progress
from memory_ledger.projections.vector_index import VectorIndex
from memory_ledger.restore.backup import (
    BACKUP_ID,
    DEFAULT_KEEP_DAYS,
    MAX_KEEP_DAYS,
    STORE_ID,
    Backup,
)
from memory_ledger.restore.drill import DrillReport
from memory_ledger.restore.live import StoreOpener
from memory_ledger.restore.restore import RestorePlan
from memory_ledger.store_protocol import StoreRegistry

__all__ = [
    "BACKUP_ID",
    "DEFAULT_KEEP_DAYS",
    "MAX_KEEP_DAYS",
    "RUNNING",
    "RUNS_KEPT",
    "STORE_ID",
    "AuditResult",
    "Auditor",
    "Backup",
    "Backups",
    "ChangeFeed",
    "DrillReport",
    "EntryType",
    "ForgetPlan",
    "Hold",
    "Jobs",
    "LedgerEntry",
    "LifecycleLedger",
    "Maintenance",
    "Notice",
    "Operations",
    "PlanOutcome",
    "Policies",
    "Progress",
    "RequestPage",
    "RequestReport",
    "RequestRow",
    "RestorePlan",
    "Restores",
    "RunRecord",
    "Subscriber",
    "job_listing",
    "job_names",
]


class Operations:
    """Store-wide calls over one open store's parts."""

    def __init__(
        self,
        settings: Settings,
        master: MasterKey,
        ledger: LifecycleLedger,
        requests: ForgetRequests,
        holds: Holds,
        subscribers: Subscribers,
        feed: ChangeFeed,
        vectors: VectorIndex,
        stores: StoreRegistry,
        *,
        open_store: StoreOpener,
        jobs_context: Callable[[], JobContext],
        policies: Policies,
        maintenance: Maintenance,
        follow: Callable[[], object] | None = None,
    ) -> None:
        self.settings = settings
        self._follow = follow
        self._master = master
        self._ledger = ledger
        self._requests = requests
        self._holds = holds
        self._subscribers = subscribers
        self._feed = feed
        self._vectors = vectors
        self._stores = stores
        self.jobs = Jobs(settings, jobs_context)
        self.requests = RequestListing(ledger, requests, subscribers)
        self.backups = Backups(settings, master, ledger, jobs_context)
        self.restores = Restores(settings, master, open_store)
        self.policies = policies
        self.maintenance = maintenance

    def follow_erasures(self) -> None:
        """Start following the log for erasures made by other processes, for as long as
        the store is open (memory_ledger/feed/follower.py): what a long-running server
        calls. Nothing on SQLite, where the forget itself drops every copy."""
        if self._follow is not None:
            self._follow()

    # -- the lifecycle ledger and its audit evidence ---------------------------------------

    @property
    def ledger(self) -> LifecycleLedger:
        """The open lifecycle ledger, for readers that fold it themselves (the compliance
        console's index): reads only, appends go through the calls here."""
        return self._ledger

    @property
    def store_id(self) -> str:
        return self._ledger.store_id

    def verify_ledger(self, anchor: tuple[int, str] | None = None) -> AuditResult:
        """Recompute the ledger's hash chain (against a pinned `SEQ:HASH` if given)."""
        return self._ledger.verify(anchor)

    def entries(self, request_id: str) -> list[LedgerEntry]:
        """The ledger entries recorded under one request id, in order."""
        return self._ledger.entries(request_id)

    def auditor(self) -> Auditor:
        """Signed heads, proofs and evidence packs of this ledger."""
        return Auditor(self._ledger, self._master)

    def evidence_pack(self, request_id: str, since: list[int] | None = None) -> dict[str, Any]:
        return build_pack(self.auditor(), request_id, since)

    def kept_head(self) -> tuple[dict[str, Any] | None, str]:
        """The last head the audit-head job kept, and why the ledger does not extend it
        now ("" when it does)."""
        return problems_since_kept(self.auditor(), self.settings.data_dir)

    def data_map(self) -> list[dict[str, Any]]:
        """Every registered store and what it holds: where an erasure must reach."""
        return [{"store": store.name, "holds": store.holds} for store in self._stores]

    # -- legal holds ---------------------------------------------------------------------

    def holds(self) -> list[Hold]:
        """The holds in force."""
        return self._holds.active()

    def place_hold(self, name: str, **fields: Any) -> Hold:
        return self._holds.place(name, **fields)

    def find_hold(
        self,
        name: str,
        *,
        namespace: str | None = None,
        within: Callable[[str], bool] | None = None,
    ) -> Hold:
        return self._holds.find(name, namespace=namespace, within=within)

    def lift_hold(
        self,
        name: str,
        *,
        lifted_by: str,
        namespace: str | None = None,
        within: Callable[[str], bool] | None = None,
    ) -> list[RequestReport]:
        """Lift a hold; the requests it alone blocked run now and are returned."""
        hold = self._holds.lift(name, lifted_by=lifted_by, namespace=namespace, within=within)
        return self._requests.resume_blocked(within=hold.namespace)

    # -- subscribers and the change feed -------------------------------------------------

    def subscribers(self) -> list[Subscriber]:
        return self._subscribers.active()

    def subscriber(self, name: str) -> Subscriber:
        return self._subscribers.get(name)

    def add_subscriber(
        self, name: str, namespaces: Sequence[str], *, added_by: str, deadline_hours: int
    ) -> Subscriber:
        """Register a downstream copy that must acknowledge each erasure it holds."""
        return self._subscribers.add(
            name, namespaces, added_by=added_by, deadline_hours=deadline_hours
        )

    def retire_subscriber(self, name: str, *, retired_by: str) -> list[str]:
        return self._subscribers.retire(self._requests, name, retired_by=retired_by)

    def ack(self, name: str, request_id: str) -> dict[str, Any]:
        return self._subscribers.ack(self._requests, name, request_id)

    def pending(self, subscriber: Subscriber) -> list[tuple[str, int]]:
        return self._subscribers.pending(self._requests, subscriber)

    def deadline(self, subscriber: Subscriber, request_id: str) -> datetime:
        return self._subscribers.deadline(subscriber, request_id)

    @property
    def feed(self) -> ChangeFeed:
        """The change feed (read a page, or subscribe for notices as they come)."""
        return self._feed

    # -- the vector index, local to this host ----------------------------------------------

    def warm_up(self) -> None:
        """Load the embedder and embed once: the first `context` then answers at full
        speed (the server is ready only after this)."""
        self._vectors.embed_query("warm up")

    @property
    def vector_directory(self) -> Path:
        """Where the vector index's files lie (this host's)."""
        return self._vectors.directory

    def vector_status(self) -> dict[str, Any]:
        return self._vectors.status()

    def new_vector_discards(self) -> list[str]:
        """Vector files discarded since last asked (said once per process)."""
        return self._vectors.new_discards()

    def noted_vector_discards(self) -> list[str]:
        return self._vectors.noted_discards()

    def cleared_vector_discards(self) -> list[str]:
        """What the last full rebuild cleared from the note of discarded vector files."""
        return self._vectors.cleared
