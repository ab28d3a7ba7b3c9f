"""Keeps projections caught up with the log, and rebuilds them from it.

Each projection's tracking position lives in `projection_tracking`, written in the same
transaction as that batch's rows: a crash between batches loses nothing and applies
nothing twice. On SQLite the runner polls the notification log; callers invoke
`catch_up()` before reading, so every read sees every write that preceded it.

The projections database holds nothing the log cannot rebuild. A SQLite file of it that
is damaged (not a database, or failing SQLite's integrity check) is refused with
ProjectionsDamaged, and `discard_damaged_projections` (which `memory-ledger rebuild`
runs first) overwrites and removes it, so the rebuild starts from an empty file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Integer,
    Table,
    Text,
    create_engine,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from memory_ledger.config import SQLITE_HEADER, Settings
from memory_ledger.errors import (
    BackendUnavailable,
    InvalidWrite,
    MemoryLedgerError,
    ProjectionsDamaged,
)
from memory_ledger.event_log import EventLog
from memory_ledger.projections.base import Projection, metadata
from memory_ledger.projections.catalog import CatalogProjection
from memory_ledger.projections.cells import Opened
from memory_ledger.projections.events import (
    Progress,
    ProjectedEvent,
    decode_batch,
    decode_sealed,
)
from memory_ledger.projections.facts import FactsProjection
from memory_ledger.projections.keyword_index import KeywordIndexProjection
from memory_ledger.projections.memory_files import MemoryFilesProjection
from memory_ledger.projections.mention_index import MentionIndexProjection
from memory_ledger.projections.preferences import PreferencesProjection
from memory_ledger.projections.summaries import SummariesProjection
from memory_ledger.projections.transcripts import TranscriptsProjection
from memory_ledger.projections.vector_files import shred
from memory_ledger.residue import checkpoint_evidence

log = logging.getLogger("memory_ledger.projections")

tracking = Table(
    "projection_tracking",
    metadata,
    Column("name", Text, primary_key=True),
    Column("position", Integer, nullable=False),
)

DEFAULT_BATCH = 1000
#: On PostgreSQL, the projections' tables are analysed again after this many events
#: applied by one runner. Their statements bind id lists as one array (`among`), which
#: the planner joins by its table statistics: a table filled faster than autovacuum
#: analyses it (or where autovacuum is off) was planned as nearly empty, and one 1,000-id
#: lookup scanned 60,000 rows per id (10 s a query at 200,000 items).
ANALYZE_EVERY = 50_000

#: Told each batch a catch-up applied, decoded and opened: (the log position it was read
#: after, its events, its last position). A full rebuild hands the vector index its
#: batches this way (`VectorIndex.replay`), so the log is read and opened once for both.
BatchListener = Callable[[int, list[ProjectedEvent], int], None]


def all_projections(log: EventLog | None = None) -> list[Projection]:
    """In the order a batch is applied. The keyword index and summaries come after the
    projections whose tables they read, so they see them as they are after the batch;
    the keyword index, an index of items like the tables before it, precedes the
    summary, which mixes items and is the last copy the forget fan-out visits. Without a
    log they serve for names and tables only: those two open sealed cells with its keys."""
    return [
        TranscriptsProjection(),
        FactsProjection(),
        PreferencesProjection(),
        MemoryFilesProjection(),
        CatalogProjection(),
        KeywordIndexProjection(log),
        MentionIndexProjection(log),
        SummariesProjection(log),
    ]


def check_projection_names(names: Sequence[str], known: Sequence[str] | None = None) -> None:
    """Refuse a list of projection names that names none, or one that is no
    projection's (`known`: all of them by default), with an InvalidWrite listing the
    known ones: a misspelt name must not rebuild or run nothing and report success."""
    known = list(known) if known is not None else [p.name for p in all_projections()]
    if isinstance(names, str) or not names:
        raise InvalidWrite(f"name one or more projections as a list; known: {known}")
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise InvalidWrite(
            f"unknown projection(s) {unknown}; known: {known} (the vector index is "
            "rebuilt with everything, when no projection is named)",
            [f"projection: {name!r} is unknown" for name in unknown],
        )


def make_engine(settings: Settings) -> Engine:
    """One engine for all projections. SQLite files zero deleted content (secure_delete)."""
    if settings.postgres is None:
        engine = create_engine(settings.projections_url(), connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA secure_delete=ON")
            cursor.close()

        return engine
    schema = settings.postgres.schema
    return create_engine(
        settings.projections_url(),
        pool_pre_ping=True,
        connect_args={"options": f"-csearch_path={schema}"},
    )


@dataclass(frozen=True)
class ProjectionStatus:
    name: str
    position: int
    behind: int


class ProjectionRunner:
    def __init__(
        self,
        log: EventLog,
        engine: Engine,
        projections: Sequence[Projection] | None = None,
        batch_size: int = DEFAULT_BATCH,
    ) -> None:
        self.log = log
        self.engine = engine
        self.projections = list(projections or all_projections(log))
        self.batch_size = batch_size
        self._thread_lock = threading.Lock()
        #: Inside `one_check`, the log head a catch-up of this thread last reached.
        self._reached = threading.local()
        #: Events applied since the tables were last analysed (`_keep_statistics`).
        self._unanalysed = 0
        try:
            with self._damage_guard():
                self._drop_outdated_tables()
                metadata.create_all(engine)
                self._ensure_tracking_rows()
        except SQLAlchemyError as exc:
            raise BackendUnavailable(f"cannot open the projections database: {exc}") from None

    @contextlib.contextmanager
    def _damage_guard(self) -> Iterator[None]:
        """SQLite's own word for a damaged file becomes ProjectionsDamaged, with the repair."""
        try:
            yield
        except DBAPIError as exc:
            reason = sqlite_damage(exc.orig)
            if reason is None or self.engine.dialect.name != "sqlite":
                raise
            raise ProjectionsDamaged(damaged_message(self.engine.url.database, reason)) from None

    def _drop_outdated_tables(self) -> None:
        """A projection whose tables were created by an older version of its code (or
        are partly missing) is dropped and replayed from the log: projections are
        derived, never migrated."""
        with self.engine.begin() as conn:
            has_tracking = inspect(conn).has_table(tracking.name)
            for projection in self.projections:
                if not projection.is_outdated(conn):
                    continue
                for table in projection.tables:
                    table.drop(conn, checkfirst=True)
                if has_tracking:
                    conn.execute(
                        tracking.update()
                        .where(tracking.c.name == projection.name)
                        .values(position=0)
                    )

    def _ensure_tracking_rows(self) -> None:
        with self.engine.begin() as conn:
            present = set(conn.execute(select(tracking.c.name)).scalars())
            wanted = [p.name for p in self.projections]
            missing = [{"name": n, "position": 0} for n in wanted if n not in present]
            if missing:
                try:
                    conn.execute(tracking.insert(), missing)
                except IntegrityError:
                    conn.rollback()  # another process created them first: that is fine

    def positions(self, conn: Connection | None = None) -> dict[str, int]:
        if conn is None:
            with self.engine.connect() as fresh:
                return self.positions(fresh)
        found = dict(conn.execute(select(tracking.c.name, tracking.c.position)).all())
        return {p.name: int(found.get(p.name, 0)) for p in self.projections}

    def _lock(self, conn: Connection) -> dict[str, int]:
        """Serialise runners of the same projections across processes, then read the
        positions under the lock.

        A no-op UPDATE of each of this runner's projections' tracking rows, one at a
        time in name order, takes SQLite's write lock or PostgreSQL row locks before we
        read: two runners sharing a projection never apply the same batch twice, and,
        all taking rows in the same order, never deadlock; runners of different
        projections (`memory-ledger run --projection NAME`, one process each) go side
        by side on PostgreSQL.
        """
        for name in sorted(p.name for p in self.projections):
            conn.execute(
                tracking.update()
                .where(tracking.c.name == name)
                .values(position=tracking.c.position)
            )
        return self.positions(conn)

    @contextlib.contextmanager
    def held(self) -> Iterator[tuple[Connection, int]]:
        """A connection on which the projections stand still, and the log position they
        all reflect: what is read on it is the store exactly as of that position.

        The tracking rows are locked as a catch-up locks them (SQLite's write lock,
        PostgreSQL row locks), so no runner, in this process or another, applies a
        batch until the block ends; nothing is written. A forget request resolves its
        scope here, so its cut is exact: what was written at or before the position is
        resolved, anything later is not (the position is recorded with the request)."""
        with self._thread_lock, self.engine.connect() as conn:
            positions = self._lock(conn)
            try:
                yield conn, min(positions.values(), default=0)
            finally:
                conn.rollback()  # the no-op updates only took the locks

    def only(self, names: Sequence[str]) -> ProjectionRunner:
        """A runner of just the named projections, on the same log and database."""
        check_projection_names(names, [p.name for p in self.projections])
        chosen = [p for p in self.projections if p.name in names]
        return ProjectionRunner(self.log, self.engine, chosen, self.batch_size)

    @contextlib.contextmanager
    def one_check(self) -> Iterator[None]:
        """A block in which a catch-up that finds the log head where this thread's last
        catch-up left it returns at once, without reading the positions again: a forget
        fans out to every projection's store, and each asks for a catch-up first. Kept
        to the block (one request) so that a read outside it always reads the positions
        (another process's rebuild may have set them back)."""
        self._reached.head = -1
        try:
            yield
        finally:
            del self._reached.head

    def catch_up(self, progress: Progress | None = None, also: BatchListener | None = None) -> int:
        """Apply every event not yet applied; returns how many notifications were read.
        `progress` is told the log position reached after each batch, and the head;
        `also` is handed each batch, decoded and opened (`BatchListener`)."""
        with self._damage_guard():
            return self._catch_up(progress, also)

    def behind_after_catch_up(self) -> list[str]:
        """Catch up if possible, then name the projections still behind the log (a
        catch-up that failed, e.g. on a corrupted key entry): what a verification must
        not read as evidence, because the events they miss may be the tombstones."""
        try:
            self.catch_up()
        except MemoryLedgerError as exc:
            log.warning("projection catch-up before verifying failed: %s", exc)
        return [s.name for s in self.status() if s.behind > 0]

    def _catch_up(self, progress: Progress | None = None, also: BatchListener | None = None) -> int:
        """Each batch is read, decoded and, when a projection reads its cells back (or
        `also` wants the text), opened once, for every projection: those that read
        cells in `settle` take the opened events' fields (`Opened`) instead of opening
        their rows' cells again. Projections keep each event's blob as it is stored."""
        applied = 0
        opening = also is not None or any(p.reads_cells for p in self.projections)
        opened = Opened() if opening else None
        with self._thread_lock:
            head = self.log.max_position()
            reached = getattr(self._reached, "head", None)
            if reached is not None and reached == head:
                return 0  # in one request: nothing was appended since its last catch-up
            if min(self.positions().values()) >= head:
                self._note_reached(head)
                return 0  # the common case on every read: no write lock taken
            while True:
                self._keep_statistics()
                with self.engine.begin() as conn:
                    positions = self._lock(conn)
                    low = min(positions.values())
                    batch = self.log.notifications(low, self.batch_size) if low < head else []
                    decode = decode_batch if opening else decode_sealed
                    events = decode(self.log, batch) if batch else []
                    if opened is not None:
                        opened.remember(events)
                    for projection in self.projections:
                        mine = [e for e in events if e.position > positions[projection.name]]
                        if mine:
                            projection.apply(conn, mine)
                            conn.execute(
                                tracking.update()
                                .where(tracking.c.name == projection.name)
                                .values(position=batch[-1].id)
                            )
                    applied += len(batch)
                    self._unanalysed += len(batch)
                    if also is not None and batch:
                        also(low, events, batch[-1].id)
                    if progress is not None and batch:
                        progress("projections", batch[-1].id, head)
                    if not batch or batch[-1].id >= head:
                        # The batch that reaches the head settles deferred work in its
                        # own transaction: no committed end state is left unsettled.
                        for projection in self.projections:
                            projection.settle(conn, opened)
                        self._note_reached(head)
                        return applied

    def _keep_statistics(self) -> None:
        """ANALYZE the projections' tables on PostgreSQL once ANALYZE_EVERY events were
        applied since the last time (sampled: about a second for all of them)."""
        if self._unanalysed < ANALYZE_EVERY or self.engine.dialect.name != "postgresql":
            return
        self._unanalysed = 0
        tables = ", ".join(t.name for p in self.projections for t in p.tables)
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"ANALYZE {tables}"))

    def _note_reached(self, head: int) -> None:
        if getattr(self._reached, "head", None) is not None:
            self._reached.head = head

    def rebuild(
        self,
        names: Sequence[str] | None = None,
        progress: Progress | None = None,
        also: BatchListener | None = None,
    ) -> int:
        """Drop the named projections (all by default) and replay the whole log into them.
        A name that is no projection's is refused (InvalidWrite), never skipped. `also`
        is handed every batch of the replay, decoded and opened (`BatchListener`)."""
        if names is not None:
            check_projection_names(names, [p.name for p in self.projections])
        chosen = [p for p in self.projections if names is None or p.name in names]
        with self._damage_guard(), self._thread_lock, self.engine.begin() as conn:
            self._lock(conn)
            for projection in chosen:
                for table in projection.tables:
                    table.drop(conn, checkfirst=True)
                    table.create(conn)
                conn.execute(
                    tracking.update().where(tracking.c.name == projection.name).values(position=0)
                )
        self.compact()
        return self.catch_up(progress, also)

    def status(self) -> list[ProjectionStatus]:
        head = self.log.max_position()
        return [ProjectionStatus(n, p, head - p) for n, p in self.positions().items()]

    def snapshot(self) -> dict[str, list[dict]]:  # type: ignore[type-arg]
        with self.engine.connect() as conn:
            return {p.name: p.snapshot(conn) for p in self.projections}

    def compact(self) -> list[str]:
        """Push deleted bytes out of the files: WAL checkpoint on SQLite, VACUUM on PostgreSQL.

        Returns evidence lines for the erasure report.
        """
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as conn:
                busy, *_ = conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)")).one()
            return [checkpoint_evidence("projections", int(busy))]
        tables = [t.name for p in self.projections for t in p.tables]
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            for table in tables:
                conn.execute(text(f"VACUUM (PARALLEL 0) {table}"))
        return [f"projections: VACUUM {', '.join(tables)}"]


# -- a damaged projections file ------------------------------------------------------------


def sqlite_damage(error: BaseException | None) -> str | None:
    """SQLite's reason when an error means the file is damaged, else None. A busy or
    locked database is not damage (OperationalError), nor is any non-SQLite error."""
    if isinstance(error, sqlite3.OperationalError) or not isinstance(error, sqlite3.DatabaseError):
        return None
    return str(error).strip() or type(error).__name__


def damaged_message(path: object, reason: str) -> str:
    return (
        f"the projections database {path} is damaged ({reason}); it holds only what the log "
        "can rebuild: run `memory-ledger rebuild`, which discards it and replays the log"
    )


def refuse_damaged_projections(settings: Settings) -> None:
    """At open: a projections file whose header is not SQLite's is refused with the
    repair (`rebuild`). Damage past the header shows when a page is read (`_damage_guard`)."""
    reason = projections_damage(settings, thorough=False)
    if reason is not None:
        raise ProjectionsDamaged(damaged_message(settings.projections_path, reason))


def projections_damage(settings: Settings, *, thorough: bool = True) -> str | None:
    """Why the SQLite projections file cannot be used, or None when it can (or does not
    exist, or lives in PostgreSQL). Reads the header; with `thorough`, also runs SQLite's
    `quick_check`, which reads every page: for `rebuild`, not for every open."""
    path = settings.projections_path
    if settings.postgres is not None or not path.exists() or path.stat().st_size == 0:
        return None
    with path.open("rb") as handle:
        if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            return "not a SQLite database: its header is not SQLite's"
    if not thorough:
        return None
    try:
        conn = sqlite3.connect(path, timeout=30)
    except sqlite3.Error as exc:
        raise BackendUnavailable(f"cannot open the projections database {path}: {exc}") from None
    try:
        rows = conn.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        reason = sqlite_damage(exc)
        if reason is None:
            raise BackendUnavailable(
                f"cannot check the projections database {path}: {exc}; nothing was changed"
            ) from None
        return reason
    finally:
        conn.close()
    problems = [str(r[0]) for r in rows if str(r[0]) != "ok"]
    return f"integrity check: {problems[0]}" if problems else None


@dataclass(frozen=True)
class Discarded:
    """A projections file overwritten and removed because it was damaged."""

    path: str
    reason: str
    files: int  # the database and its -wal/-shm, as found


def discard_damaged_projections(settings: Settings) -> list[Discarded]:
    """If the SQLite projections file is damaged, overwrite it (and its WAL and shared
    memory files) with zeros and remove them, so the next open starts from an empty
    database and replays the log. The file may hold decrypted text, hence no plain
    unlink. Run it with no process holding the store open. Returns what was discarded."""
    reason = projections_damage(settings)
    if reason is None:
        return []
    path = settings.projections_path
    files = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]
    present = [f for f in files if f.exists()]
    for f in present:
        shred(f)
    log.warning("discarded the damaged projections database %s: %s", path, reason)
    return [Discarded(str(path), reason, len(present))]


def turns_cited_by_consolidation(log_: EventLog) -> list[str]:
    """The turns the consolidation job has read, as far as the log shows it: every turn
    a `consolidation` write cites in `derived_from`. After a discarded projections file
    this restores the job's `consolidated_turns`, so a conclusion that was erased or
    suppressed is not derived again from its turn."""
    cited: set[str] = set()
    position = 0
    while True:
        batch = log_.notifications(position, DEFAULT_BATCH)
        if not batch:
            break
        for n in batch:
            if not n.topic.endswith(".Recorded"):
                continue
            try:
                state = json.loads(n.state)
            except ValueError:  # a cipher or compressor wraps the stored state
                state = vars(log_.decode(n))
            if (state.get("provenance") or {}).get("writer") == "consolidation":
                cited.update(str(ref["item_id"]) for ref in state.get("derived_from") or ())
        position = batch[-1].id
    return sorted(cited)
