"""Where the lifecycle ledger's rows live: its own SQLite file, or its own PostgreSQL
schema. Only storage is here (connections, DDL with the append-only triggers, locking);
what may be written, and the hash chain, are in `memory_ledger.ledger`."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_ledger.config import Settings
from memory_ledger.errors import BackendUnavailable, ConfigurationError

log = logging.getLogger("memory_ledger")
LEDGER_FILE = "ledger.sqlite"
GENESIS_HASH = "0" * 64
SCHEMA_SUFFIX = "_ledger"
TABLE = "ledger_entries"
#: One row: the id of the store this ledger belongs to (`LifecycleLedger.store_id`).
IDENTITY_TABLE = "store_identity"
_SETUP_LOCK_CLASS = 0x6C656467  # "ledg": serialises ledger schema creation on PostgreSQL
_SQLITE_TIMEOUT = 30.0
COLUMNS = "seq, request_id, entry_type, payload, recorded_at, prev_hash, entry_hash"
#: Holds, subscribers, policies are read by entry type on every forget: without it, each
#: read was a scan of the whole ledger, which grows with every request.
BY_TYPE = f"{TABLE}_by_type"


def open_backend(settings: Settings, ledger_url: str | None) -> _SQLiteBackend | _PgBackend:
    """Default: beside the store but apart from it. An explicit URL or directory wins."""
    if ledger_url is None:
        where = settings
    elif not ledger_url.strip():
        raise ConfigurationError("ledger_url is empty: give a postgresql:// URL or a directory")
    elif "://" in ledger_url:
        where = Settings.resolve(settings.data_dir, ledger_url)
    else:  # a directory (not via Settings.resolve, which would consult the environment)
        return _SQLiteBackend(Path(ledger_url).expanduser().resolve() / LEDGER_FILE)
    if where.postgres is None:
        return _SQLiteBackend(where.data_dir / LEDGER_FILE)
    schema = where.postgres.schema + SCHEMA_SUFFIX
    if len(schema) > 63:
        raise ConfigurationError(f"ledger schema name {schema!r} exceeds 63 characters")
    return _PgBackend(where, schema)


_SQLITE_DDL = [
    f"CREATE TABLE IF NOT EXISTS {TABLE} (seq INTEGER PRIMARY KEY, request_id TEXT NOT NULL, "
    "entry_type TEXT NOT NULL, payload TEXT NOT NULL, recorded_at TEXT NOT NULL, "
    "prev_hash TEXT NOT NULL, entry_hash TEXT NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_by_request ON {TABLE} (request_id, seq)",
    f"CREATE INDEX IF NOT EXISTS {BY_TYPE} ON {TABLE} (entry_type, seq)",
    f"CREATE TRIGGER IF NOT EXISTS {TABLE}_no_update BEFORE UPDATE ON {TABLE} "
    "BEGIN SELECT RAISE(ABORT, 'the lifecycle ledger is append-only: UPDATE refused'); END",
    f"CREATE TRIGGER IF NOT EXISTS {TABLE}_no_delete BEFORE DELETE ON {TABLE} "
    "BEGIN SELECT RAISE(ABORT, 'the lifecycle ledger is append-only: DELETE refused'); END",
    # Also closes INSERT OR REPLACE, whose implicit delete fires no DELETE trigger.
    f"CREATE TRIGGER IF NOT EXISTS {TABLE}_chain BEFORE INSERT ON {TABLE} "
    f"WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq), 0) + 1 FROM {TABLE}) "
    f"OR NEW.prev_hash IS NOT COALESCE((SELECT entry_hash FROM {TABLE} ORDER BY seq DESC "
    f"LIMIT 1), '{GENESIS_HASH}') "
    "BEGIN SELECT RAISE(ABORT, 'a ledger entry must extend the chain'); END",
    f"CREATE TABLE IF NOT EXISTS {IDENTITY_TABLE} "
    "(id INTEGER PRIMARY KEY CHECK (id = 1), store_id TEXT NOT NULL)",
]


class _SQLiteBackend:
    """Its own file, WAL with synchronous=FULL: an acknowledged entry survives power loss."""

    param = "?"
    table = TABLE
    identity = IDENTITY_TABLE
    unavailable: tuple[type[Exception], ...] = (sqlite3.OperationalError,)

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(
                path, timeout=_SQLITE_TIMEOUT, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as exc:
            raise BackendUnavailable(
                f"cannot open the lifecycle ledger at {path}: {first_line(exc)}"
            ) from None
        try:
            self._use_wal()
            self.conn.execute("PRAGMA synchronous=FULL")
            with self.write() as cur:
                for statement in _SQLITE_DDL:
                    cur.execute(statement)
        except sqlite3.Error as exc:
            self.conn.close()
            raise BackendUnavailable(
                f"cannot open the lifecycle ledger at {path}: {first_line(exc)}"
            ) from None

    def _use_wal(self) -> None:
        # Switching a new file to WAL does not wait on the busy handler: when several
        # processes open a fresh ledger at once, the losers see "database is locked".
        deadline = time.monotonic() + _SQLITE_TIMEOUT
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")  # the write lock, before reading the head
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    @contextmanager
    def scan(self, sql: str) -> Iterator[Iterator[tuple[Any, ...]]]:
        cursor = self.conn.execute(sql)
        try:
            yield iter(cursor)
        finally:
            cursor.close()

    def close(self) -> None:
        self.conn.close()


def _pg_ddl(schema: str) -> list[str]:
    s = f'"{schema}"'
    t = f"{s}.{TABLE}"
    return [
        f"CREATE TABLE {t} (seq BIGINT PRIMARY KEY, request_id TEXT NOT NULL, "
        "entry_type TEXT NOT NULL, payload TEXT NOT NULL, recorded_at TEXT NOT NULL, "
        "prev_hash TEXT NOT NULL, entry_hash TEXT NOT NULL)",
        f"CREATE INDEX {TABLE}_by_request ON {t} (request_id, seq)",
        f"CREATE INDEX {BY_TYPE} ON {t} (entry_type, seq)",
        f"CREATE FUNCTION {s}.ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'the lifecycle ledger is append-only: % refused', TG_OP; END $$",
        f"CREATE FUNCTION {s}.ledger_check_link() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "DECLARE last_seq BIGINT; last_hash TEXT; BEGIN "
        f"SELECT seq, entry_hash INTO last_seq, last_hash FROM {t} ORDER BY seq DESC LIMIT 1; "
        "IF NEW.seq IS DISTINCT FROM COALESCE(last_seq, 0) + 1 OR NEW.prev_hash IS DISTINCT "
        f"FROM COALESCE(last_hash, '{GENESIS_HASH}') THEN "
        "RAISE EXCEPTION 'a ledger entry must extend the chain'; END IF; RETURN NEW; END $$",
        f"CREATE TRIGGER {TABLE}_no_change BEFORE UPDATE OR DELETE ON {t} "
        f"FOR EACH ROW EXECUTE FUNCTION {s}.ledger_refuse_change()",
        f"CREATE TRIGGER {TABLE}_no_truncate BEFORE TRUNCATE ON {t} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {s}.ledger_refuse_change()",
        f"CREATE TRIGGER {TABLE}_chain BEFORE INSERT ON {t} "
        f"FOR EACH ROW EXECUTE FUNCTION {s}.ledger_check_link()",
        _pg_identity_ddl(schema),
    ]


def _pg_identity_ddl(schema: str) -> str:
    return (
        f'CREATE TABLE IF NOT EXISTS "{schema}".{IDENTITY_TABLE} '
        "(id INTEGER PRIMARY KEY CHECK (id = 1), store_id TEXT NOT NULL)"
    )


class _PgBackend:
    """A schema of its own, so the store's dumps and restores never touch it."""

    param = "%s"

    def __init__(self, settings: Settings, schema: str) -> None:
        import psycopg

        assert settings.postgres is not None
        self.unavailable: tuple[type[Exception], ...] = (psycopg.OperationalError,)
        self.settings = settings
        self.schema = schema
        self.table = f'"{schema}".{TABLE}'
        self.identity = f'"{schema}".{IDENTITY_TABLE}'
        self.location = f"{settings.postgres.masked()} (schema {schema})"
        self.conn: Any = None
        try:
            self._connection()
            self._create_if_missing()
        except psycopg.Error as exc:
            self.close()
            raise BackendUnavailable(
                f"cannot open the lifecycle ledger at {self.location}: {first_line(exc)}"
            ) from None

    def _connection(self) -> Any:
        if self.conn is None or self.conn.closed:  # reconnect after a dropped connection
            self.conn = self.settings._pg_connect()
        return self.conn

    def _create_if_missing(self) -> None:
        conn = self._connection()
        # A plain query of pg_class, not to_regclass: after waiting on the advisory lock,
        # the catalog cache may not yet show a table another process just committed.
        exists = (
            "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s"
        )
        if conn.execute(exists, (self.schema, TABLE)).fetchone():
            if not conn.execute(exists, (self.schema, BY_TYPE)).fetchone():
                self._add_type_index(conn)  # a ledger created before the index was
            if not conn.execute(exists, (self.schema, IDENTITY_TABLE)).fetchone():
                self._add_identity_table(conn)  # a ledger created before store ids
            return
        with conn.transaction():
            # Concurrent CREATE ... of the same objects fails in PostgreSQL: take turns.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s::int4, hashtext(%s))",
                (_SETUP_LOCK_CLASS, self.schema),
            )
            if conn.execute(exists, (self.schema, TABLE)).fetchone():
                return
            # Only when missing: CREATE SCHEMA needs a privilege a least-privilege role lacks.
            if not conn.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
            ).fetchone():
                conn.execute(f'CREATE SCHEMA "{self.schema}"')
            for statement in _pg_ddl(self.schema):
                conn.execute(statement)

    def _add_type_index(self, conn: Any) -> None:
        """Add the by-type index to a ledger made before it; a role that may not create
        it (not the table's owner) reads the ledger without it, only slower."""
        import psycopg

        index = f'CREATE INDEX IF NOT EXISTS {BY_TYPE} ON "{self.schema}".{TABLE} '
        try:
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s::int4, hashtext(%s))",
                    (_SETUP_LOCK_CLASS, self.schema),
                )
                conn.execute(index + "(entry_type, seq)")
        except psycopg.errors.InsufficientPrivilege:
            log.warning("ledger index %s not created: this role may not create it", BY_TYPE)

    def _add_identity_table(self, conn: Any) -> None:
        """Give a ledger made before store ids the table that holds its store's id."""
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s::int4, hashtext(%s))",
                (_SETUP_LOCK_CLASS, self.schema),
            )
            conn.execute(_pg_identity_ddl(self.schema))

    @contextmanager
    def write(self) -> Iterator[Any]:
        conn = self._connection()
        with conn.transaction(), conn.cursor() as cur:
            # EXCLUSIVE blocks other writers until commit and still lets readers read.
            cur.execute(f"LOCK TABLE {self.table} IN EXCLUSIVE MODE")
            yield cur

    def read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return list(self._connection().execute(sql, params).fetchall())

    @contextmanager
    def scan(self, sql: str) -> Iterator[Iterator[tuple[Any, ...]]]:
        conn = self._connection()
        with conn.transaction(), conn.cursor(name="ledger_scan") as cur:
            cur.itersize = 2000  # a server-side cursor: memory stays flat on long ledgers
            cur.execute(sql)
            yield iter(cur)

    def close(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.close()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
