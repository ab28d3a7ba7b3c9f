"""The Python API: a memory ledger opened for one principal.

`MemoryService` is the process-wide part (event log, key store, projections); a
`MemoryLedger` binds it to an authenticated principal, and every read and write it does
is confined to that principal's namespace. Items of other namespaces answer NotFound,
exactly like ids that never existed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import select

from memory_ledger import consistency, times
from memory_ledger.agent_state import AGENT_KINDS, AgentItems, MemoryFiles, Runs
from memory_ledger.bounds import MAX_EMBED_CHARS, MAX_EMBED_TEXTS
from memory_ledger.config import Settings
from memory_ledger.crypto import DEV_KEY_FILE, MasterKey, load_master_key
from memory_ledger.domain import MemoryItem
from memory_ledger.embedders import Embedder, load_embedder
from memory_ledger.errors import (
    ConfigurationError,
    InvalidTransition,
    InvalidWrite,
    NotFound,
    StaleDerivation,
)
from memory_ledger.event_log import ERASED, EventLog
from memory_ledger.export import ExportSources, export
from memory_ledger.feed.feed import ChangeFeed
from memory_ledger.feed.follower import ErasureFollower
from memory_ledger.feed.hosts import awaiting, host_name, registered
from memory_ledger.feed.subscribers import Subscribers
from memory_ledger.forgetting.holds import Holds
from memory_ledger.forgetting.planning import (
    ForgetPlan,
    ForgetPlanning,
    ItemChanges,
    PlanOutcome,
    PlanRecords,
    PlansStore,
)
from memory_ledger.forgetting.redaction import RedactionRequest, rewrite_items
from memory_ledger.forgetting.requests import (
    ForgetRequests,
    RequestReport,
    readable_history,
    shred_history,
)
from memory_ledger.forgetting.residue_check import rewrite_sqlite_file
from memory_ledger.forgetting.scope import MAX_SCOPE_ITEMS, ForgetScope
from memory_ledger.jobs.context import JobContext
from memory_ledger.keystore import NewKey
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.policy import POLICY_FILE, load_policy
from memory_ledger.policy.cardinality import FactSets, SetChange
from memory_ledger.policy.cardinality import decide as decide_cardinality
from memory_ledger.policy.explain import explain as explain_item
from memory_ledger.policy.retention import RetentionPolicy, attributes_of
from memory_ledger.principal import Principal
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.cells import Cells
from memory_ledger.projections.events import Progress
from memory_ledger.projections.facts import facts
from memory_ledger.projections.preferences import preferences
from memory_ledger.projections.runner import (
    ProjectionRunner,
    make_engine,
    refuse_damaged_projections,
)
from memory_ledger.projections.side_by_side import rebuild_all
from memory_ledger.projections.summaries import SummariesProjection
from memory_ledger.projections.transcripts import transcripts
from memory_ledger.projections.vector_index import VECTORS_DIR, VectorIndex
from memory_ledger.restore.store import BackupsStore
from memory_ledger.restoring import refuse_while_restoring
from memory_ledger.retrieval.context import (
    MAX_RECALL_LIMIT,
    Context,
    ContextReader,
    context_mac,
    served,
)
from memory_ledger.retrieval.context import build as build_context
from memory_ledger.retrieval.context import parse_request as parse_context_request
from memory_ledger.retrieval.context_cache import ContextCache, ContextCacheStore
from memory_ledger.retrieval.instruction_like import content_flags
from memory_ledger.retrieval.state_files import STATE_DIR, StateFiles
from memory_ledger.stores import default_registry, extra_store_factories
from memory_ledger.views import (
    Added,
    ItemState,
    Memory,
    RecallPage,
    Remembered,
    Summary,
    parse_recall_cursor,
)
from memory_ledger.write_policy import (
    Identifier,
    MemoryUpdate,
    MemoryWrite,
    Origin,
    Sensitivity,
    canonical_time,
    parse_update,
    parse_write,
)

if TYPE_CHECKING:
    from memory_ledger.restore.drill import DrillReport

log = logging.getLogger("memory_ledger")
KINDS = ("fact", "preference", "turn")
#: An adapter's namespace secret is named `<identifier>:` (MemoryLedger.namespace_key).
_KEY_PREFIX = re.compile(r"[a-z][a-z0-9_-]{0,31}:")

if TYPE_CHECKING:  # built on first use (it imports the job code lazily)
    from memory_ledger.operations import Operations


class MemoryService:
    """Opens the stores once per process; share it between principals."""

    def __init__(
        self,
        settings: Settings,
        master: MasterKey | None = None,
        embedder: Embedder | None = None,
        *,
        restoring: bool = False,
        create: bool = True,
    ) -> None:
        if not create:  # a reader: a missing store is an error, and nothing is created
            settings.require_store()
        refuse_damaged_projections(settings)  # with its repair, before a generic refusal
        settings.check_reachable()
        if not restoring:  # a store being restored serves nothing (restore/restore.py)
            refuse_while_restoring(settings)
        embedder = embedder or load_embedder(settings.embedder)  # a bad one fails first
        self.policy = load_policy(settings.data_dir)  # so does a bad policy.toml
        #: The time reads decide expiry, validity and decay by. Injected by tests and
        #: drills (never a sleep); a store's recording time is the log's own.
        self.clock: Callable[[], datetime] = times.now
        self._policy_stamp = _stamp(settings.data_dir / POLICY_FILE)
        self.settings = settings
        self.dev_key_created = False
        if master is None:
            master, self.dev_key_created = load_master_key(
                settings, allow_dev_key=not settings.store_exists()
            )
        try:
            with settings.schema_lock():
                self.log = EventLog(settings, master)
                try:
                    self.engine = make_engine(settings)
                    self.runner = ProjectionRunner(self.log, self.engine)
                    self.ledger = LifecycleLedger(settings)
                    # its table is created here, under the schema lock: concurrent DDL
                    # of the same table fails on PostgreSQL even with IF NOT EXISTS
                    self.plans = PlanRecords(self.engine, self.log)
                except Exception:
                    self.log.close()
                    raise
            try:  # an empty ledger beside tombstones: refuse to serve (see consistency)
                consistency.check_ledger_present(self.log, self.ledger)
            except Exception:
                self.ledger.close()
                self.engine.dispose()
                self.log.close()
                raise
        except Exception:
            if self.dev_key_created:  # a failed open leaves no key behind
                (settings.data_dir / DEV_KEY_FILE).unlink(missing_ok=True)
            raise
        self.vectors = VectorIndex(self.log, settings.data_dir / VECTORS_DIR, embedder)
        # the recall states persist sealed beside the data: a fresh process loads them
        self.context_cache = ContextCache[Context](
            files=StateFiles(settings.data_dir / STATE_DIR, self.log.master)
        )
        self.reader = ContextReader(
            self.log,
            self.engine,
            self.vectors,
            self.runner.catch_up,
            lambda: self.retention,
            lambda: self.clock(),
            self.context_cache,
        )
        self.stores = default_registry(
            log=self.log,
            runner=self.runner,
            vectors=self.vectors,
            copies=[
                ContextCacheStore(self.context_cache),
                PlansStore(self.plans, lambda: self.clock()),
                BackupsStore(settings.data_dir, self.log, self.ledger),
            ],
        )
        for factory in extra_store_factories(settings.extra_stores):
            self.stores.register(factory(self.log, self.runner, settings))
        self.holds = Holds(self.ledger)
        local = host_name(settings.data_dir) if settings.postgres is not None else None
        self.subscribers = Subscribers(self.ledger, local)
        self.stores.add_provider(self.subscribers.stores)
        self.feed = ChangeFeed(self.log, self.engine, self.subscribers, self.runner.catch_up)
        self.requests = ForgetRequests(
            log=self.log,
            runner=self.runner,
            engine=self.engine,
            stores=self.stores,
            holds=self.holds,
            retention=lambda: self.retention,
            ledger=self.ledger,
            vectors=self.vectors,
            clock=lambda: self.clock(),
            settings=settings,
        )
        #: Follows the log for other processes' erasures, once started (`follow_erasures`).
        self._follower: ErasureFollower | None = None
        # A request interrupted by a crash is finished before anything else happens.
        self.requests.resume_unfinished()

    @cached_property
    def job_context(self) -> JobContext:
        """What the lifecycle jobs are given (jobs/context.py): the parts they use,
        wired here, so that no job sees this service."""
        return JobContext(
            settings=self.settings,
            log=self.log,
            engine=self.engine,
            runner=self.runner,
            ledger=self.ledger,
            requests=self.requests,
            holds=self.holds,
            vectors=self.vectors,
            subscribers=self.subscribers,
            retention=lambda: self.retention,
            clock=lambda: self.clock(),
            ledger_for=lambda namespace: self.for_principal(Principal.from_namespace(namespace)),
            drill=self._drill,
        )

    def _drill(
        self, now: datetime, backup_path: Path | None, run_by: str, keep_scratch: bool
    ) -> DrillReport:
        """A restore drill of this store (it opens a scratch store of its own)."""
        from memory_ledger.restore.drill import drill  # restore builds on this module

        return drill(self, now, backup_path, run_by, keep_scratch, open_store=MemoryService)

    def follow_erasures(self) -> ErasureFollower | None:
        """Start following the log for erasures made by other processes, for as long as
        this service is open (memory_ledger/feed/follower.py): what a long-running
        server calls on PostgreSQL, where each process keeps copies of its own (vector
        index, search codes, recall states, built contexts) that another process's
        forget cannot reach. None on SQLite: one host, whose copies the forget itself
        drops. Started once; a second call returns the same follower."""
        if self.settings.postgres is None:
            return None
        if self._follower is None:
            subscribers = self.subscribers
            local = str(subscribers.local)
            self._follower = ErasureFollower(
                self.log,
                ChangeFeed(self.log, self.engine, subscribers, self.runner.catch_up),
                start=lambda: int(self.vectors.status()["position"]),
                catch_up=lambda: self.job_context.catch_up_vectors(),
                awaited=lambda: awaiting(subscribers, self.ledger, self.requests, local),
                registered=lambda: registered(subscribers, local),
                evict=self._drop_local_copies,
            )
            self._follower.start()
        return self._follower

    def _drop_local_copies(self, item_ids: Sequence[str]) -> None:
        """Another process erased or redacted these items: drop them from this process's
        built contexts and recall states, and remove the files derived from them here
        (recall state files, search codes), which that process could not reach."""
        self.context_cache.evict(item_ids)
        self.vectors.codes.remove_all()

    def reopened(self) -> MemoryService:
        """The same store opened anew (after a restore replaced it), with this master
        key and the embedder already loaded: it stays warm."""
        return MemoryService(self.settings, self.log.master, embedder=self.vectors.embedder)

    @cached_property
    def operations(self) -> Operations:
        """The store-wide calls the CLI and the HTTP server make (memory_ledger/operations),
        built from this service's parts. The calls that run jobs receive the jobs'
        context and import their job module when first called: a command that runs no
        job never loads the scheduler (apscheduler)."""
        from memory_ledger.operations import Maintenance, Operations, Policies

        def jobs() -> JobContext:
            return self.job_context

        return Operations(
            self.settings,
            self.log.master,
            self.ledger,
            self.requests,
            self.holds,
            self.subscribers,
            self.feed,
            self.vectors,
            self.stores,
            open_store=MemoryService,
            jobs_context=jobs,
            policies=Policies(
                self.engine,
                self.ledger,
                self.settings.data_dir,
                retention=lambda: self.retention,
                sources=lambda: self.policy.sources,
                catch_up=self.runner.catch_up,
                jobs=jobs,
            ),
            maintenance=Maintenance(
                self.settings,
                self.log,
                self.ledger,
                self.engine,
                self.runner.catch_up,
                status=self.status,
                rebuild=self.rebuild,
                jobs=jobs,
            ),
            follow=self.follow_erasures,
        )

    @cached_property
    def planning(self) -> ForgetPlanning:
        """Forget plans, built on first use: its lexicon compiles some 4,000 phrase
        patterns (about 0.4 s), which a command that plans nothing never pays."""
        return ForgetPlanning(
            self.plans,
            lambda: self.clock(),
            engine=self.engine,
            log=self.log,
            vectors=self.vectors,
            runner=self.runner,
            requests=self.requests,
            store_names=self.stores.names,
        )

    @property
    def retention(self) -> RetentionPolicy:
        """The retention policy in force. A version installed by another process
        (`policy install`) takes effect at this process's next read: the file's stamp is
        checked each time (one stat). A file that became invalid keeps the old policy in
        force, with one error logged."""
        path = self.settings.data_dir / POLICY_FILE
        stamp = _stamp(path)
        if stamp != self._policy_stamp:
            self._policy_stamp = stamp
            try:
                self.policy = load_policy(self.settings.data_dir)
            except ConfigurationError as exc:
                log.error("the policy in force stays: %s", exc)
        assert self.policy.retention is not None  # the packaged defaults always have one
        return self.policy.retention

    @classmethod
    def open(
        cls, data_dir: str | Path | None = None, url: str | None = None, *, create: bool = True
    ) -> MemoryService:
        """The store at `data_dir` or `url` (see Settings.resolve), created there if there
        is none, unless `create=False`: then a missing store raises StoreNotFound and
        nothing is written (no directory, no development key)."""
        return cls(Settings.resolve(data_dir, url), create=create)

    def for_principal(self, principal: Principal) -> MemoryLedger:
        return MemoryLedger(self, principal)

    def status(self, *, check_consistency: bool = True) -> dict[str, Any]:
        """Counts and positions, and (unless `check_consistency` is False) the check of
        the log, the key store and the ledger against each other (`consistency.check`)."""
        events = self.log.max_position()
        vectors = self.vectors.status()  # local to this host: its files, not the database
        info = {
            "backend": self.settings.backend,
            "location": self.settings.describe(),
            "events": events,
            "keys": dict(zip(("live", "destroyed"), self.log.key_counts(), strict=True)),
            "projections": [vars(s) for s in self.runner.status()],
            "vector_index": {**vectors, "behind": max(0, events - vectors["position"])},
        }
        if check_consistency:
            report = consistency.check(self.log, self.ledger, self.settings)
            info["consistency"] = report.to_dict()
        return info

    def rebuild(self, names: Sequence[str] | None = None, progress: Progress | None = None) -> int:
        """Replay the log into the named projections (all, and the vector index, by
        default). `progress(stage, position, head)` is called as the replay goes. A name
        that is no projection's is refused (InvalidWrite). A full rebuild clears the
        note of discarded vector files (`self.vectors.cleared` says what it held)."""
        if names is not None:
            return self.runner.rebuild(names, progress)
        # Every projection, and the vector index too, in a second process beside them.
        replayed = rebuild_all(
            self.settings,
            self.log.master,
            self.vectors,
            lambda report, also: self.runner.rebuild(None, report, also),
            progress,
        )
        self.vectors.clear_discards()  # after the child's rebuild too: it notes its own
        return replayed

    def compact(self) -> list[str]:
        """Remove deleted bytes from the files; returns what was done, as evidence."""
        return self.log.compact() + self.runner.compact()

    def rotate_key(self, item: MemoryItem, fields: dict[str, str], redacted: list[str]) -> None:
        """Re-seal the item's current content (with `redacted` fields replaced) under a
        new key generation and destroy every older one, in one transaction: every earlier
        version becomes unreadable. Redaction and history shredding both use it."""
        rewrite_items(self.log, [(item, fields, redacted)])

    def shred_history(self, item_id: str) -> bool:
        """Make an item's earlier versions unreadable and keep its current value."""
        return shred_history(self.log, item_id)

    def readable_history(self, conn: Any, item_ids: list[str]) -> int:
        """How many earlier (superseded) versions of these items can still be read."""
        return readable_history(conn, item_ids)

    def rewrite_sqlite_file(self, path: Path) -> bool:
        """Rebuild one of our SQLite files (VACUUM, then truncate its WAL) so that only
        live rows remain in it; False if the path is not one of them."""
        return rewrite_sqlite_file(self.settings, self.engine, self.log, path)

    def close(self) -> None:
        if self._follower is not None:
            self._follower.stop()
            self._follower = None
        self.feed.close()
        self.vectors.close()
        self.ledger.close()
        self.engine.dispose()
        self.log.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_memory(
    principal: Principal, data_dir: str | Path | None = None, url: str | None = None
) -> MemoryLedger:
    """Open a ledger that owns its service: closing the ledger closes the stores."""
    ledger = MemoryService.open(data_dir, url).for_principal(principal)
    ledger.owns_service = True
    return ledger


class MemoryLedger:
    def __init__(self, service: MemoryService, principal: Principal) -> None:
        #: Private: what a ledger offers is its methods; adapters and tools use those
        #: (and `MemoryService`'s public API), never the service's parts.
        self._service = service
        self.principal = principal
        self.namespace = principal.namespace
        self.owns_service = False

    def close(self) -> None:
        if self.owns_service:
            self._service.close()

    def __enter__(self) -> MemoryLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _log(self) -> EventLog:
        return self._service.log

    # -- an agent's own work (memory_ledger/agent_state) --------------------------------

    @cached_property
    def _agent_items(self) -> AgentItems:
        service = self._service
        return AgentItems(
            self._log, self.namespace, lambda: service.clock(), service.retention.version
        )

    @cached_property
    def files(self) -> MemoryFiles:
        """The agent's memory files: the Claude memory tool's commands, in the log."""
        return MemoryFiles(
            self._agent_items,
            self._service.engine,
            Cells(self._log),
            self._service.runner.catch_up,
            lambda ids: self._erase(ids, "user_request"),
        )

    @cached_property
    def runs(self) -> Runs:
        """The agent's runs: exact workflow state with compare-and-set."""
        service = self._service
        return Runs(self._agent_items, service.engine, service.runner.catch_up, self, self._erase)

    def _erase(self, item_ids: list[str], basis: str) -> RequestReport:
        """Erase agent items through the one request path, with `basis` as the why."""
        return self._service.requests.submit(
            self.namespace,
            {"kind": "item", "item_ids": item_ids},
            requested_by=self.principal.user,
            basis=basis,  # type: ignore[arg-type]
        )

    # -- for adapters (memory_ledger/agents): small reads of this namespace only --------

    def now(self) -> datetime:
        """The time as the service's clock has it (moved by tests and drills): what an
        adapter stamps its writes with, so they agree with expiry and decay."""
        return self._service.clock()

    def catalog_rows(self, columns: Sequence[str], **equal_to: str) -> list[tuple[Any, ...]]:
        """The named catalog columns of this namespace's items whose columns equal the
        given values (clear columns only: nothing is opened), after catching up.
        Unknown columns or values that are not strings: InvalidWrite."""
        c = catalog.c
        known = set(c.keys())
        names = list(columns) if isinstance(columns, list | tuple) else []
        if (
            not names
            or any(not isinstance(n, str) or n not in known for n in names)
            or any(k not in known or not isinstance(v, str) for k, v in equal_to.items())
        ):
            raise InvalidWrite(
                "catalog_rows takes catalog column names and string values",
                ["columns: invalid"],
            )
        self._service.runner.catch_up()
        query = select(*(c[name] for name in columns)).where(
            c.namespace == self.namespace, *(c[name] == value for name, value in equal_to.items())
        )
        with self._service.engine.connect() as conn:
            return [tuple(row) for row in conn.execute(query)]

    def derived_from(self, item_id: str | UUID) -> list[tuple[str, int]]:
        """The (item id, version) inputs an item of this namespace was derived from."""
        item = self._owned(item_id)
        return [(str(r["item_id"]), int(r["version"])) for r in item.derived_from]

    def embed(self, texts: list[str]) -> Any:
        """Vectors from the service's embedder (the one its vector index and context
        builder use), for an adapter's own index. At most MAX_EMBED_TEXTS texts of at most
        MAX_EMBED_CHARS each: InvalidWrite otherwise."""
        if (
            not isinstance(texts, list | tuple)
            or len(texts) > MAX_EMBED_TEXTS
            or any(not isinstance(t, str) or len(t) > MAX_EMBED_CHARS for t in texts)
        ):
            raise InvalidWrite(
                f"embed takes a list of at most {MAX_EMBED_TEXTS} strings of at most "
                f"{MAX_EMBED_CHARS} characters",
                ["texts: invalid"],
            )
        return self._service.vectors.embedder.embed(list(texts))

    def namespace_key(self, prefix: str) -> bytes:
        """A secret of this namespace for `prefix` (an adapter's keyed lookups): a
        key-store row of its own, made on first use, wrapped by the master key, and
        destroyed like any data key. `prefix` is an identifier followed by ":"."""
        if not isinstance(prefix, str) or not _KEY_PREFIX.fullmatch(prefix):
            raise InvalidWrite("namespace_key takes a prefix like 'name:'", ["prefix: invalid"])
        live = self._service.log.derived_key(prefix + self.namespace, create=True)
        assert live is not None  # create=True makes one when none is live
        return live[1]

    # -- writes ------------------------------------------------------------------------

    @cached_property
    def _fact_sets(self) -> FactSets:
        service = self._service
        return FactSets(
            self.namespace,
            lambda predicate: service.policy.cardinality(predicate),
            self._owned,
            service.runner.catch_up,
            service.engine,
        )

    def remember(self, write: MemoryWrite | dict[str, Any]) -> Remembered:
        return self.remember_many([write])[0]

    def add(
        self,
        text: str,
        *,
        origin: Origin,
        session_id: str | None = None,
        turn_id: str | None = None,
        role: str = "user",
        sensitivity: Sensitivity = "personal",
        category: str = "general",
        writer: str | None = None,
    ) -> Added:
        """Store one conversation turn from its text: `remember` with the defaults a
        turn needs filled in, through the same validation and write path.

        `origin` is required (`explicit`, `observed` or `inferred`): where the words
        came from is never guessed. `role` is the speaker (the turn's subject),
        `sensitivity` defaults to `personal` (a conversation is about a person), the
        writer to the principal's user, the time to the service's clock. Without a
        `session_id` a new session is started; without a `turn_id` one is generated.
        Both are returned, so the caller can continue the session and later forget it
        by source. A refused turn raises `InvalidWrite` naming these parameters, and
        nothing is stored."""
        session = _new_id("session") if session_id is None else session_id
        turn = _new_id("turn") if turn_id is None else turn_id
        who = self.principal.user if writer is None else writer
        at = self._service.clock()
        write = {
            "kind": "turn",
            "subject": role,
            "content": text,
            "category": category,
            "origin": origin,
            "sensitivity": sensitivity,
            "provenance": {
                "writer": who,
                "written_at": at,
                "session_id": session,
                "turn_id": turn,
            },
        }
        try:
            done = self.remember(write)
        except InvalidWrite as exc:
            raise _as_turn_error(exc) from None
        return Added(
            done.item_id, done.version, done.kind, done.position, session, turn, who, _iso(at)
        )

    def remember_many(self, writes: Sequence[MemoryWrite | dict[str, Any]]) -> list[Remembered]:
        """Validate every write first; then append all of them in one transaction."""
        if not isinstance(writes, list | tuple):
            raise InvalidWrite(
                f"writes must be a list of writes, not {type(writes).__name__}; nothing was stored"
            )
        parsed = [parse_write(w) for w in writes]
        items, keys, changes = [], [], []
        earlier: list[tuple[MemoryWrite, str]] = []  # for a write replacing a whole set
        for write in parsed:
            self._check_inputs(write)
            change = decide_cardinality(self._fact_sets, write, earlier)
            item, key = self._new_item(write, change)
            items.append(item)
            keys.append(key)
            changes.append(change)
            earlier.append((write, str(item.id)))
        pinned = [(ref.item_id, ref.version) for w in parsed for ref in w.derived_from]
        position = self._log.save(items, keys, expect_versions=pinned)
        return [
            Remembered(str(i.id), i.version, i.kind, position, c.cardinality, c.replaces)
            for i, c in zip(items, changes, strict=True)
        ]

    def _check_inputs(self, write: MemoryWrite) -> None:
        """A derived write must cite inputs exactly as they are now, and usable."""
        for ref in write.derived_from:
            item = self._owned(ref.item_id)
            service = self._service
            state = _unusable_state(item, ref.version, service.retention, service.clock())
            if state is not None:
                log.warning(  # ids and the state's code only: never the write's content
                    "refused a derived write in %s: input %s is %s",
                    self.namespace,
                    ref.item_id,
                    state,
                )
                raise StaleDerivation(
                    f"derived write refused: input {ref.item_id} (read at version {ref.version}) "
                    f"is now {state}; nothing was stored"
                )

    def _new_item(self, write: MemoryWrite, change: SetChange) -> tuple[MemoryItem, NewKey]:
        item_id = uuid4()
        sealed, key = self._log.seal_new(item_id, 1, write.sealed_fields)
        item = MemoryItem._create(
            MemoryItem.Recorded,
            id=item_id,
            namespace=self.namespace,
            kind=write.kind,
            subject=write.subject,
            predicate=write.effective_predicate,
            category=write.category,
            origin=write.origin,
            confidence=write.confidence,
            sensitivity=write.sensitivity,
            provenance=write.provenance.event_data(),
            retention=write.retention.event_data(),
            redaction=write.redaction.event_data(),
            derived_from=[r.event_data() for r in write.derived_from],
            scope=write.scope,
            strength=write.effective_strength,
            valid_from=_iso(write.valid_from or write.provenance.written_at),
            valid_to=_iso(write.valid_to) if write.valid_to else None,
            key_generation=1,
            sealed=sealed,
            flags=content_flags(write.text),
            cardinality=change.cardinality,
            replaces=list(change.replaces),
            policy_version=self._service.retention.version,
        )
        return item, key

    def update(self, item_id: str | UUID, update: MemoryUpdate | dict[str, Any]) -> int:
        """A new version of the value; the previous version stays queryable as history."""
        parsed = parse_update(update)
        item = self._owned(item_id)
        item.require_live("updated")
        sealed = self._log.seal_existing(item.id, item.key_generation, {"value": parsed.value})
        item.supersede(
            sealed=sealed,
            provenance=parsed.provenance.event_data(),
            confidence=parsed.confidence if parsed.confidence is not None else item.confidence,
            valid_from=_iso(parsed.valid_from or parsed.provenance.written_at),
            flags=content_flags(parsed.value),
        )
        self._log.save([item])
        return item.version

    def suppress(self, item_id: str | UUID, reason: str = "user_request") -> int:
        """Stop using: excluded from recall and derivation; the data still exists."""
        item = self._owned(item_id)
        item.suppress(reason=_code(reason))
        self._log.save([item])
        return item.version

    def forget_conclusion(self, item_id: str | UUID) -> int:
        """ "Forget what you concluded": suppress an inference so it is neither used nor
        derived again, and leave its sources alone (erasing them is a separate request,
        which needs the user's explicit consent)."""
        item = self._owned(item_id)
        if item.origin != "inferred" and not item.derived_from:
            raise InvalidTransition(f"item {item.id} is not an inference; use forget to erase it")
        item.suppress(reason="conclusion_forgotten")
        self._log.save([item])
        return item.version

    def unsuppress(self, item_id: str | UUID) -> int:
        item = self._owned(item_id)
        item.unsuppress()
        self._log.save([item])
        return item.version

    def redact(
        self,
        item_id: str | UUID | Sequence[str | UUID],
        fields: Sequence[str] = (),
        *,
        spans: Sequence[str] = (),
        dry_run: bool = False,
    ) -> RequestReport:
        """Remove spans (substrings) or whole fields from one item or several: a forget
        request of its own (receipts, ledger entries, verification), which keeps the
        rest of the text readable under a fresh key and destroys every older key
        generation. What was derived from the items, or carried their words, loses the
        same spans. `dry_run` resolves and records the request, changing nothing."""
        # One value or a list of them; anything else goes to the request's parser as
        # given, which refuses it by name (InvalidWrite), as it refuses a bad list.
        request: RedactionRequest | dict[str, Any] = {
            "item_ids": _listed(item_id, str | UUID),
            "spans": _listed(spans, str),
            "fields": _listed(fields, str),
        }
        return self._service.requests.submit_redaction(
            self.namespace, request, dry_run=dry_run, requested_by=self.principal.user
        )

    def forget(self, *item_ids: str | UUID) -> RequestReport:
        """Erase items of this namespace by id: a forget request of kind `item`."""
        if not item_ids:
            raise InvalidWrite("forget needs at least one item id")
        ids = list(dict.fromkeys(str(i) for i in item_ids))
        return self.forget_scope({"kind": "item", "item_ids": ids})

    def end_session(self, session_id: str) -> list[RequestReport]:
        """Session-basis items end with their session: erase this namespace's items of
        retention basis `session` written in it (basis `session_end`, the same path as
        every erasure). Items of other bases from the session stay."""
        _validate_identifier("session_id", session_id)
        self._service.runner.catch_up()
        query = select(catalog.c.item_id).where(
            catalog.c.namespace == self.namespace,
            catalog.c.session_id == session_id,
            catalog.c.basis == "session",
        )
        with self._service.engine.connect() as conn:
            ids = sorted(conn.execute(query).scalars())
        return [
            self._service.requests.submit(
                self.namespace,
                {"kind": "item", "item_ids": ids[start : start + MAX_SCOPE_ITEMS]},
                requested_by="session_end",
                basis="session_end",
            )
            for start in range(0, len(ids), MAX_SCOPE_ITEMS)
        ]

    def forget_scope(
        self, scope: ForgetScope | dict[str, Any], *, dry_run: bool = False
    ) -> RequestReport:
        """Resolve a scope to explicit items, then erase them from every store.

        `dry_run` resolves and records the request without destroying anything.
        """
        return self._service.requests.submit(
            self.namespace, scope, dry_run=dry_run, requested_by=self.principal.user
        )

    # -- forget requests in words ------------------------------------------------------

    def plan_forget(
        self,
        text: str,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        timezone: str | None = None,
    ) -> ForgetPlan:
        """Read a user's request ("forget my old address", "把我的旧住址删掉") and plan
        it: intent, scope, targets, what stays, or a clarifying question. Destroys
        nothing and keeps no copy of the words. `session_id`/`turn_id` name the
        conversation it was said in ("this conversation"; an update's provenance);
        `timezone` (IANA) is whose "yesterday" it is (default UTC)."""
        return self._service.planning.plan(
            self.namespace,
            self.principal.user,
            text,
            session_id=session_id,
            turn_id=turn_id,
            timezone=timezone,
        )

    def find_information(
        self, values: Sequence[str] | None = None, *, description: str | None = None
    ) -> dict[str, Any]:
        """The model protocol, first call: every place each value is said in this
        principal's memory, in every written form, grouped by value with counts and a
        snippet each (`values[]`), and the items nearest a description (`nearest[]`), for
        the model to read. Changes nothing. Wrong types or sizes: InvalidWrite."""
        return self._service.planning.find_information(
            self.namespace, self.principal.user, values, description
        )

    def forget_information(
        self,
        values: Sequence[str] | None = None,
        *,
        chosen: Sequence[dict[str, str]] | None = None,
        keeps: Sequence[str] | None = None,
        reason: str | None = None,
    ) -> ForgetPlan:
        """The model protocol, second call: a plan (not yet executed) over every place
        each value is said, redacting the value there (erasing a fact whose whole value
        it is), and erasing each `chosen` place ({description, item_id} from
        find_information); `keeps` are shown and never cut. Execute it with
        `execute_plan` once the user confirmed. Wrong types or sizes: InvalidWrite."""
        return self._service.planning.forget_information(
            self.namespace, self.principal.user, values, chosen, keeps, reason
        )

    def choose_candidates(self, plan_id: str, item_ids: Sequence[str | UUID]) -> ForgetPlan:
        """Answer a plan's clarification: a new plan for some of its candidates only."""
        return self._service.planning.choose(
            self.namespace, self.principal.user, plan_id, _listed(item_ids, UUID)
        )

    def execute_plan(self, plan_id: str) -> PlanOutcome:
        """Carry out a confirmed plan, once; executing again after a crash resumes it."""
        changes = ItemChanges(self.get, self.suppress, self.forget_conclusion, self.update)
        return self._service.planning.execute(self.namespace, self.principal.user, plan_id, changes)

    def forget_plan(self, plan_id: str) -> ForgetPlan:
        """A plan as stored (its labels only while it is open)."""
        return self._service.planning.get(self.namespace, plan_id)

    def plan_outcome(self, plan_id: str) -> PlanOutcome:
        """Where an executed plan stands: its request's status, from the ledger."""
        return self._service.planning.outcome(self.namespace, plan_id)

    # -- reads -------------------------------------------------------------------------

    def recall(
        self,
        subject: str | None = None,
        predicate: str | None = None,
        kind: str | None = None,
        category: str | None = None,
        limit: int = 100,
        include_archived: bool = False,
    ) -> list[Memory]:
        """Live memories of this namespace: not suppressed, not erased, not expired under
        the retention policy, not archived by decay (unless `include_archived`), and for
        facts only the current version (conflicts are returned, marked). Newest first by
        the time they hold from."""
        _check_recall_limit(limit)
        found = self._recall_rows(subject, predicate, kind, category, limit, include_archived)
        out = [memory for _, memory in found]
        out.sort(key=lambda m: m.valid_from or "", reverse=True)
        return out[:limit]

    def recall_page(
        self,
        subject: str | None = None,
        predicate: str | None = None,
        kind: str | None = None,
        category: str | None = None,
        limit: int = 100,
        include_archived: bool = False,
        cursor: str | None = None,
    ) -> RecallPage:
        """The memories `recall` returns, a page at a time, newest written first, for
        listing them all. The cursor is the log position the page ended at, so paging is
        stable while writes go on: a memory written or changed after the first page is
        not seen by the later ones (start again to see it); none is returned twice."""
        _check_recall_limit(limit)
        before = parse_recall_cursor(cursor)
        found = self._recall_rows(
            subject, predicate, kind, category, limit + 1, include_archived, before
        )
        found.sort(key=lambda row: row[0], reverse=True)
        page = found[:limit]
        more = len(found) > limit
        return RecallPage(
            [memory for _, memory in page], f"p{page[-1][0]}" if more and page else None
        )

    def _recall_rows(
        self,
        subject: str | None,
        predicate: str | None,
        kind: str | None,
        category: str | None,
        limit: int,
        include_archived: bool,
        before: int | None = None,
    ) -> list[tuple[int, Memory]]:
        """(log position, memory) of up to `limit` live memories per kind, newest written
        first, below position `before` when given."""
        if not isinstance(include_archived, bool):
            raise InvalidWrite("include_archived must be true or false")
        for name, value in (("subject", subject), ("predicate", predicate), ("category", category)):
            if value is not None:
                if not isinstance(value, str):
                    raise InvalidWrite(f"invalid {name}: a str, not {type(value).__name__}")
                _validate_identifier(name, value)
        if kind is not None and (not isinstance(kind, str) or kind not in KINDS):
            raise InvalidWrite(f"unknown kind; expected one of {', '.join(KINDS)}")
        self._service.runner.catch_up()
        at = self._service.clock()
        now = _iso(at)
        times = self._service.retention.cutoffs(at)
        lapsed = self._service.retention.expired_clause(catalog.c)
        out: list[tuple[int, Memory]] = []
        with self._service.engine.connect() as conn:
            for table, table_kind in (
                (facts, "fact"),
                (preferences, "preference"),
                (transcripts, "turn"),
            ):
                if kind not in (None, table_kind):
                    continue
                query = (
                    select(table)
                    .join(catalog, catalog.c.item_id == table.c.item_id)
                    .where(
                        table.c.namespace == self.namespace,
                        table.c.suppressed.is_(False),
                        ~lapsed,
                    )
                )
                if before is not None:
                    query = query.where(table.c.position < before)
                if not include_archived:
                    query = query.where(catalog.c.tier == "active")
                subject_col = table.c.speaker if table_kind == "turn" else table.c.subject
                if subject is not None:
                    query = query.where(subject_col == subject)
                if predicate is not None:
                    if table_kind == "turn":
                        if predicate != "turn":
                            continue
                    else:
                        query = query.where(table.c.predicate == predicate)
                if category is not None:
                    query = query.where(table.c.category == category)
                if table_kind == "fact":
                    query = query.where(
                        table.c.status.in_(("current", "conflict")),
                        (table.c.valid_to.is_(None)) | (table.c.valid_to > now),
                    )
                query = query.order_by(table.c.position.desc()).limit(limit)
                rows = [dict(r) for r in conn.execute(query, times).mappings()]
                text = "content" if table_kind == "turn" else "value"
                Cells(self._log).fill(rows, text, text)
                out.extend((int(r["position"]), _memory(table_kind, r)) for r in rows)
        return out

    def history(
        self,
        item_id: str | UUID | None = None,
        *,
        subject: str | None = None,
        predicate: str | None = None,
    ) -> list[Memory]:
        """Every version of a fact (by id), or of every fact about subject+predicate;
        none of an item expired under the retention policy (its text is withheld as
        everywhere else, until the sweep erases it)."""
        self._service.runner.catch_up()
        retention = self._service.retention
        query = (
            select(facts)
            .join(catalog, catalog.c.item_id == facts.c.item_id)
            .where(facts.c.namespace == self.namespace, ~retention.expired_clause(catalog.c))
        )
        if item_id is not None:
            item = self._owned(item_id)
            query = query.where(facts.c.item_id == str(item.id))
        elif subject and predicate:
            _validate_identifier("subject", subject)
            _validate_identifier("predicate", predicate)
            query = query.where(facts.c.subject == subject, facts.c.predicate == predicate)
        else:
            raise InvalidWrite("history needs an item id, or a subject and a predicate")
        query = query.order_by(facts.c.valid_from, facts.c.position)
        times = retention.cutoffs(self._service.clock())
        with self._service.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(query, times).mappings()]
        Cells(self._log).fill(rows, "value", "value")
        return [_memory("fact", r) for r in rows]

    def export(self) -> dict[str, Any]:
        """Everything held about this person (the namespace and its projects), for a
        data subject access request: see memory_ledger/export.py for the schema."""
        service = self._service
        return export(
            ExportSources(
                namespace=self.namespace,
                log=service.log,
                engine=service.engine,
                catch_up=service.runner.catch_up,
                journal=service.ledger,
                summary=self.summary,
                history=lambda namespace, item_id: self._owner(namespace).history(item_id),
                file_versions=lambda namespace, item: self._owner(namespace).files.items.versions(
                    item
                ),
            )
        )

    def _owner(self, namespace: str) -> MemoryLedger:
        """The ledger of an item's own namespace (this one, or one of its projects)."""
        if namespace == self.namespace:
            return self
        return self._service.for_principal(Principal.from_namespace(namespace))

    def summary(self) -> Summary | None:
        """This namespace's profile summary, composed from its live facts and preferences,
        with the (item id, version) of every input; None when nothing live is left."""
        self._service.runner.catch_up()
        found = [p for p in self._service.runner.projections if isinstance(p, SummariesProjection)]
        if not found:
            raise ConfigurationError("the summaries projection is not registered")
        service = self._service
        with service.engine.connect() as conn:
            return found[0].read(conn, self.namespace, service.clock(), service.retention)

    def context(self, query: str, *, for_turn: str | UUID | None = None, **options: Any) -> Context:
        """Recall for one turn: filter, rank (vector + keyword + recency), fit the token
        budget. Options: token_budget, kinds, category, workspace, task, session, limit,
        rank (hybrid|vector|keyword). With `for_turn`, what was served is recorded on
        that turn (item ids and a keyed MAC, no text)."""
        request = parse_context_request({"query": query, **options})
        turn = str(self._owned(for_turn).id) if for_turn is not None else None
        context = build_context(self._service.reader, self.namespace, request, self.summary)
        if turn is not None:
            mac = self.record_context(turn, context)
            context = replace(context, context_mac=mac, recorded_on=turn)
        return context

    def record_context(self, turn_id: str, context: Context) -> str:
        item = self._owned(turn_id)
        key = self._log.keys_for([str(item.id)]).data_key(str(item.id), item.key_generation)
        if key is None:
            raise InvalidTransition(f"turn {item.id} was erased; nothing can be recorded on it")
        mac = context_mac(key, context.render())
        item.record_context(
            items=served(context.items), context_mac=mac, key_generation=item.key_generation
        )
        self._log.save([item])
        return mac

    def explain(self, item_id: str | UUID, now: datetime | None = None) -> dict[str, Any]:
        """Why an item is kept, archived, due to expire, held or protected, with the rule
        that decided it, as of `now` (default: the service's clock). Ids, codes, times
        and numbers only: never the item's content."""
        if now is not None and not isinstance(now, datetime):
            raise InvalidWrite(f"now must be a datetime, not {type(now).__name__}")
        item = self._owned(item_id)
        service = self._service
        service.runner.catch_up()
        with service.engine.connect() as conn:
            at = now or service.clock()
            return explain_item(item, conn, service.retention, service.holds, at)

    def get(self, item_id: str | UUID) -> ItemState:
        """Read one item straight from the log: content, or None with erased=True."""
        item = self._owned(item_id)
        fields = self._log.read(item)
        # A turn may seal its candidates beside its content: name the field.
        field_name = "content" if item.kind == "turn" else "value"
        text = None if fields is ERASED else fields.get(field_name)  # type: ignore[union-attr]
        expired = not item.erased and self._service.retention.decide(attributes_of(item)).expired(
            self._service.clock()
        )
        if expired:
            text = None
        return ItemState(
            expired=expired,
            archived=item.archived,
            item_id=str(item.id),
            version=item.version,
            kind=item.kind,
            subject=item.subject,
            predicate=item.predicate,
            text=text,
            erased=item.erased,
            suppressed=item.suppressed,
            redaction=dict(item.redaction),
            provenance=dict(item.provenance),
        )

    def _owned(self, item_id: str | UUID) -> MemoryItem:
        try:
            ident = item_id if isinstance(item_id, UUID) else UUID(str(item_id))
        except ValueError:
            raise InvalidWrite(f"{item_id!r} is not a memory item id") from None
        item = self._log.get(ident)
        if item.namespace != self.namespace:
            # Same answer as a missing id: another namespace's ids cannot be probed.
            log.warning("refused access to an item outside namespace %s", self.namespace)
            raise NotFound(f"no memory item {ident}")
        if item.kind in AGENT_KINDS:  # kept by its own handler, under its own rules
            what, handler = ("memory file", "files") if item.kind == "file" else (
                item.kind.replace("_", " "), "runs")  # fmt: skip
            raise InvalidWrite(f"item {ident} is a {what}: use ledger.{handler}")
        return item

    # -- the agent tools' names, the same methods (docs/vocabulary.md) -------------------

    #: `suppress`, by the name of the agent tool (`stop_using`).
    stop_using = suppress
    #: `recall`, by the name of the agent tool and of the HTTP client (`list_memories`).
    list_memories = recall
    #: `choose_candidates`, by the name of the agent tool.
    choose_forget_candidates = choose_candidates
    #: `execute_plan`, by the name of the agent tool.
    execute_forget = execute_plan


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size)


def _unusable_state(
    item: MemoryItem, read_version: int, retention: RetentionPolicy, now: datetime
) -> str | None:
    """Why an input can no longer feed a derivation, or None if it still can."""
    if item.erased:
        return "erased"
    if item.suppressed:
        return "suppressed"
    if retention.decide(attributes_of(item)).expired(now):
        return "expired"
    if item.version != read_version:
        return f"at version {item.version}"
    return None


def _memory(kind: str, row: dict[str, Any]) -> Memory:
    return Memory(
        item_id=row["item_id"],
        version=row["version"],
        kind=kind,
        subject=row["speaker"] if kind == "turn" else row["subject"],
        predicate="turn" if kind == "turn" else row["predicate"],
        text=row["content"] if kind == "turn" else row["value"],
        category=row["category"],
        origin=row["origin"],
        confidence=row.get("confidence", 1.0),
        sensitivity=row["sensitivity"],
        status=row.get("status", "current"),
        scope=row.get("scope", "global"),
        strength=row.get("strength"),
        valid_from=row.get("valid_from") or row.get("written_at"),
        valid_to=row.get("valid_to"),
        expires_at=row["expires_at"],
        suppressed=bool(row["suppressed"]),
        provenance=json.loads(row["provenance"]),
    )


def _new_id(prefix: str) -> str:
    """A session or turn id for `add`: an identifier, unique without coordination."""
    return f"{prefix}-{uuid4().hex}"


#: The write's fields as `add` names them, for its errors.
_TURN_FIELDS = {
    "content": "text",
    "subject": "role",
    "provenance.writer": "writer",
    "provenance.written_at": "written_at",
    "provenance.session_id": "session_id",
    "provenance.turn_id": "turn_id",
}


def _as_turn_error(exc: InvalidWrite) -> InvalidWrite:
    """The write boundary's refusal, its problems named by `add`'s parameters (the
    check is the boundary's own; only the names change)."""
    if not exc.problems:
        return exc
    renamed = []
    for problem in exc.problems:
        where, sep, what = problem.partition(": ")
        if where == "write" and what.startswith("content "):  # the turn's own rules
            where, what = "text", "text" + what.removeprefix("content")
        renamed.append(f"{_TURN_FIELDS.get(where, where)}{sep}{what}")
    return InvalidWrite.listing("invalid turn; nothing was stored", renamed)


def _listed(value: Any, one: Any) -> Any:
    """`value` as the list a request's parser takes: a single value of type `one` in a
    list, a list or tuple as a list (its UUIDs as strings). Anything else is returned
    unchanged, for the parser to refuse with its own message: never iterated here, so a
    wrong type is an `InvalidWrite`, not a bare `TypeError`."""
    if isinstance(value, one):
        value = [value]
    if isinstance(value, list | tuple):
        return [str(v) if isinstance(v, UUID) else v for v in value]
    return value


def _check_recall_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidWrite(f"limit must be an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_RECALL_LIMIT:
        raise InvalidWrite(f"limit must be from 1 to {MAX_RECALL_LIMIT}")


def _iso(value: datetime) -> str:
    return canonical_time(value)


def _code(text: str) -> str:
    _validate_identifier("reason", text)
    return text


_IDENTIFIER = TypeAdapter(Identifier)


def _validate_identifier(name: str, value: str) -> None:
    try:
        _IDENTIFIER.validate_python(value)
    except ValidationError:
        raise InvalidWrite(
            # The value is not echoed: a rejected identifier may be free text.
            f"invalid {name}: use an identifier (letters, digits, _.:-, at most 128)"
        ) from None
