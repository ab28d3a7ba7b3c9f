"""The data map: every place that holds user data, behind one small protocol.

A forget request fans out to every registered store and waits for each one's receipt;
`verify` asks each store for evidence that the targets are absent. Adding a place that
keeps copies (an index, a cache, a subscriber, a backup) means registering a store here,
and the shared contract tests then hold it to the same promises as the rest.

Receipts and evidence carry ids, counts and codes only: never content.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from sqlalchemy import select

from memory_ledger.config import EXTRA_STORES_ENV
from memory_ledger.errors import ConfigurationError
from memory_ledger.forgetting.redaction import span_pattern
from memory_ledger.keystore import KeyDestruction
from memory_ledger.projections.cells import Cells
from memory_ledger.store_protocol import (
    SUBSCRIBER_PREFIX as SUBSCRIBER_PREFIX,  # re-exported: the data map's public names
)
from memory_ledger.store_protocol import Evidence as Evidence
from memory_ledger.store_protocol import Receipt as Receipt
from memory_ledger.store_protocol import RedactingStore as RedactingStore
from memory_ledger.store_protocol import Store as Store
from memory_ledger.store_protocol import StoreRegistry as StoreRegistry

if TYPE_CHECKING:
    from memory_ledger.config import Settings
    from memory_ledger.event_log import EventLog
    from memory_ledger.projections.base import Projection
    from memory_ledger.projections.runner import ProjectionRunner
    from memory_ledger.projections.vector_index import VectorIndex

log = logging.getLogger("memory_ledger.stores")


def redact_at(store: Store, item_ids: Sequence[str], spans: Sequence[str]) -> Receipt:
    """One store's part of a redaction request; a failure is a failed receipt."""
    try:
        if isinstance(store, RedactingStore):
            return store.redact(item_ids, spans)
        return store.erase(item_ids)
    except Exception as exc:  # a failed store leaves the request partial, never half-done
        log.warning("store %s failed during redaction: %s", store.name, type(exc).__name__)
        return Receipt(store.name, "redact", len(item_ids), "failed", {"error": type(exc).__name__})


def _still_holding(texts: Iterable[str], spans: Sequence[str]) -> int:
    """How many of the texts still contain a removed span, matched as a redaction does."""
    pattern = span_pattern(spans)
    return 0 if pattern is None else sum(1 for t in texts if pattern.search(t))


class EventLogStore:
    """The event log: erasure appends a tombstone; the sealed events stay, unreadable."""

    name = "event_log"
    holds = "sealed events (ciphertext only) and tombstones"

    def __init__(self, log: EventLog) -> None:
        self.log = log
        #: Log positions of the tombstones the last `erase` appended, for the ledger.
        self.tombstones: dict[str, int] = {}

    def erase(
        self, item_ids: Sequence[str], reason: str = "user_request", request_id: str | None = None
    ) -> Receipt:
        """Tombstone the items; `reason` (the request's basis) and the request's id are
        all a tombstone says (the change feed's erasure notices carry both)."""
        self.tombstones = self.log.tombstone(item_ids, reason, request_id=request_id)
        return Receipt(
            self.name,
            "tombstoned",
            len(item_ids),
            "ok",
            {"new_tombstones": len(self.tombstones)},
        )

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        """No item is live in the log. One the log does not hold is absent too: a
        restored copy older than an item that was written and erased after it (the
        restore's replay verifies those) never held it."""
        held = self.log.get_many([UUID(i) for i in item_ids])
        live = sum(1 for item in held.values() if not item.erased)
        return Evidence(self.name, live == 0, {"tombstoned": len(held) - live})

    def redact(self, item_ids: Sequence[str], spans: Sequence[str]) -> Receipt:
        """The rewritten items' current content, read from the log, holds no span."""
        log = self.log
        current = [log.read(log.get(UUID(i))) for i in item_ids]
        texts = [t for fields in current if isinstance(fields, dict) for t in fields.values()]
        left = _still_holding(texts, spans)
        return Receipt(
            self.name,
            "rewritten",
            len(item_ids),
            "ok" if left == 0 else "failed",
            {"items_holding_spans": left, "spans_checked": bool(spans)},
        )

    def rebuild(self) -> int:
        return 0  # the log is the source of truth; nothing to rebuild

    def at_rest(self) -> Iterator[bytes]:
        log = self.log
        position = 0
        while batch := log.notifications(position, 1000):
            for notification in batch:
                yield bytes(notification.state)
            position = batch[-1].id


class KeyStoreStore:
    """Wrapped data keys: destroying them is what makes the sealed events unreadable."""

    name = "key_store"
    holds = "wrapped data keys, one per item and key generation"

    def __init__(self, log: EventLog) -> None:
        self.log = log

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        # Keys are destroyed in the tombstone's transaction (EventLogStore.erase); this
        # repeats the destruction for any item whose tombstone predates a partial run.
        log = self.log
        log.save([], destroy=[KeyDestruction(i, None) for i in item_ids])
        evidence = self.verify_absent(item_ids)
        return Receipt(
            self.name,
            "keys_destroyed",
            len(item_ids),
            "ok" if evidence.absent else "failed",
            dict(evidence.detail),
        )

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        keys = self.log.keys_for(list(item_ids))
        live = [i for i in item_ids if not keys.is_destroyed(i)]
        return Evidence(self.name, not live, {"items_with_live_keys": len(live)})

    def redact(self, item_ids: Sequence[str], spans: Sequence[str]) -> Receipt:
        """Every key generation older than each item's current one is destroyed: the
        earlier wording is unreadable wherever it is sealed."""
        log = self.log
        keys = log.keys_for(list(item_ids))
        older_live = 0
        for item_id in item_ids:
            current = log.get(UUID(item_id)).key_generation
            if any(keys.data_key(item_id, g) is not None for g in range(1, current)):
                older_live += 1
        return Receipt(
            self.name,
            "old_generations_destroyed",
            len(item_ids),
            "ok" if older_live == 0 else "failed",
            {"items_with_older_live_keys": older_live},
        )

    def rebuild(self) -> int:
        return 0  # keys cannot be rebuilt: that is the point of destroying them

    def at_rest(self) -> Iterator[bytes]:
        yield from (repr(row).encode() for row in self.log.key_rows())


class ProjectionStore:
    """A read model: erasure purges its rows, and a rebuild replays only tombstoned data
    as unreadable, so erased items never come back."""

    def __init__(self, runner: ProjectionRunner, projection: Projection) -> None:
        self.runner = runner
        self.projection = projection
        self.name = projection.name
        self.holds = projection.holds

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        self.runner.catch_up()  # applies the tombstones, which purge the rows
        evidence = self._absent(item_ids, whole_projection=False)
        if not evidence.absent:  # rows the tombstones did not reach: purged directly
            with self.runner.engine.begin() as conn:
                self.projection.purge(conn, item_ids)
            evidence = self._absent(item_ids, whole_projection=False)
        return Receipt(
            self.name,
            "purged",
            len(item_ids),
            "ok" if evidence.absent else "failed",
            dict(evidence.detail),
        )

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        return self._absent(item_ids, whole_projection=True)

    def redact(self, item_ids: Sequence[str], spans: Sequence[str]) -> Receipt:
        """Apply the Redacted events, then check the items' rows hold no span."""
        self.runner.catch_up()
        with self.runner.engine.connect() as conn:
            texts = self.projection.texts_of(conn, Cells(self.runner.log), item_ids)
            left = _still_holding(texts, spans)
        return Receipt(
            self.name,
            "refreshed",
            len(item_ids),
            "ok" if left == 0 else "failed",
            {"rows_holding_spans": left, "spans_checked": bool(spans)},
        )

    def _absent(self, item_ids: Sequence[str], *, whole_projection: bool) -> Evidence:
        """The items' rows, and with `whole_projection` (which reads all of it, so for
        `verify`, not for the erasure's receipt) rows no item can be named for, such as
        keyword postings left without their document row."""
        with self.runner.engine.connect() as conn:
            detail = {"rows_left": self.projection.count_rows(conn, item_ids)}
            if whole_projection:
                detail["unattributed_rows"] = self.projection.unattributed_rows(conn)
        return Evidence(self.name, not any(detail.values()), detail)

    def rebuild(self) -> int:
        return self.runner.rebuild([self.name])

    def at_rest(self) -> Iterator[bytes]:
        with self.runner.engine.connect() as conn:
            for table in self.projection.tables:
                for row in conn.execute(select(table)):
                    yield repr(tuple(row)).encode("utf-8")


class VectorIndexStore:
    """The vector index: erasure stops serving the rows now (without embedding what is
    pending), in every process and in memory. Its files hold each row sealed under the
    item's data key, so the key store's destruction of the key is what makes every copy
    unreadable (replaced segments in free blocks, backups): no byte scan on the forget's
    path. A row whose key is destroyed is listed dead in the manifest, its ciphertext
    left in its segment until compaction (the `vector-compaction` job, the verification
    scan, `rebuild`), which removes the bytes and proves it; the receipt says so.

    The receipt's re-check reads back only what the erasure wrote (the manifest, and any
    rewritten segment and sidecar) and answers for the other segments from memory, which
    was checked against their checksums when they were loaded. `verify_absent` (used by
    `verify`) reads every file.
    """

    name = "vector_index"
    holds = (
        "embeddings of live, unsuppressed items' text, each sealed under its item's data key "
        "(files under vectors/; opened in memory only; an erased row's ciphertext stays, "
        "listed dead and unreadable, until compaction), and large namespaces' search codes "
        "(vector-codes/, sealed; removed by every erasure)"
    )

    def __init__(self, vectors: VectorIndex) -> None:
        self.vectors = vectors

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        vectors = self.vectors
        done = vectors.erase(item_ids)
        found, repaired = done.check, False
        if not found.absent and not found.files_valid:
            vectors.repair()  # a damaged file is discarded, never trusted or served
            found, repaired = vectors.verify_absent(item_ids), True
        detail: dict[str, int | bool | str] = {
            **done.counts(),
            **found.detail(),
            "files_discarded": repaired,
        }
        status = "ok" if found.absent else "failed"
        return Receipt(self.name, "rows_removed", len(item_ids), status, detail)

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        found = self.vectors.verify_absent(item_ids)
        return Evidence(self.name, found.absent, found.detail())

    def rebuild(self) -> int:
        return self.vectors.rebuild()

    def at_rest(self) -> Iterator[bytes]:
        for path in sorted(self.vectors.directory.rglob("*")):
            if path.is_file():
                yield path.read_bytes()


def default_registry(
    *,
    log: EventLog,
    runner: ProjectionRunner,
    vectors: VectorIndex,
    copies: Sequence[Store] = (),
) -> StoreRegistry:
    """The built-in data map, from the pieces that hold data (given, not looked up on
    a service: a store sees only what it keeps): the log and its keys first, then the
    projections and the vector index, then `copies` (the context cache, the plans, the
    backups), which the composition root builds (memory_ledger/api.py): they live in
    the layers that build on this module."""
    registry = StoreRegistry()
    registry.register(EventLogStore(log))
    registry.register(KeyStoreStore(log))
    for projection in runner.projections:
        registry.register(ProjectionStore(runner, projection))
    registry.register(VectorIndexStore(vectors))
    for store in copies:
        registry.register(store)
    return registry


#: A deployment's own store: built from the log (its key store too), the projection
#: runner (its engine, and `catch_up`) and the settings (where the data lives).
StoreFactory = Callable[["EventLog", "ProjectionRunner", "Settings"], Store]


def extra_store_factories(specs: Sequence[str] = ()) -> list[StoreFactory]:
    """The factories of stores named `module:factory` (`Settings.extra_stores`, from
    MEMORY_LEDGER_EXTRA_STORES, comma-separated): how a deployment registers a
    subscriber or cache that keeps its own copies. Each is called with
    `(log, runner, settings)`."""
    factories = []
    for spec in specs:
        module_name, _, attribute = spec.partition(":")
        try:
            factories.append(getattr(importlib.import_module(module_name), attribute))
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(f"{EXTRA_STORES_ENV}: cannot load {spec!r}: {exc}") from None
    return factories
