"""Where the data lives: a data directory of SQLite files, or a PostgreSQL URL.

The same code runs on both; only this module knows how a location turns into the
`eventsourcing` environment and a SQLAlchemy URL. Settings come from arguments first,
then the environment, so SQLite vs PostgreSQL never needs a code change.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from memory_ledger.errors import BackendUnavailable, ConfigurationError, StoreNotFound

DATA_DIR_ENV = "MEMORY_LEDGER_DATA_DIR"
URL_ENV = "MEMORY_LEDGER_URL"
DEFAULT_DATA_DIR = ".memory-ledger"
EVENTS_FILE = "events.sqlite"
PROJECTIONS_FILE = "projections.sqlite"
SQLITE_HEADER = b"SQLite format 3\x00"
SCHEMA_LOCK_ID = 0x6D656D6C  # "meml": any constant shared by every memory-ledger process


@dataclass(frozen=True)
class PostgresLocation:
    host: str
    port: int
    dbname: str
    user: str
    password: str
    schema: str

    def sqlalchemy_url(self) -> str:
        from sqlalchemy.engine import URL

        return URL.create(
            "postgresql+psycopg",
            username=self.user,
            password=self.password or None,
            host=self.host,
            port=self.port,
            database=self.dbname,
        ).render_as_string(hide_password=False)

    def masked(self) -> str:
        auth = f"{self.user}:***@" if self.password else f"{self.user}@"
        return f"postgresql://{auth}{self.host}:{self.port}/{self.dbname}"


ENV_PREFIX = "MEMORY_LEDGER_"
MASTER_KEY_ENV = "MEMORY_LEDGER_MASTER_KEY"
NEW_MASTER_KEY_ENV = "MEMORY_LEDGER_NEW_MASTER_KEY"
EMBEDDER_ENV = "MEMORY_LEDGER_EMBEDDER"
SUMMARIZER_ENV = "MEMORY_LEDGER_SUMMARIZER"
EXTRACTOR_ENV = "MEMORY_LEDGER_EXTRACTOR"
EXTRA_STORES_ENV = "MEMORY_LEDGER_EXTRA_STORES"
SIDE_BY_SIDE_ENV = "MEMORY_LEDGER_REBUILD_SIDE_BY_SIDE"
_FLAG_VALUES = {"": False, "0": False, "false": False, "no": False, "off": False}
_FLAG_VALUES.update({"1": True, "true": True, "yes": True, "on": True})


def environment() -> Mapping[str, str]:
    """The MEMORY_LEDGER_* variables as they are now: the one place the settings are
    read from the environment (`Settings` keeps this copy, so a setting is read once,
    when the settings are made, and passed down from there)."""
    return MappingProxyType({k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)})


@dataclass(frozen=True)
class Settings:
    """A resolved storage location, and the deployment's settings read with it.

    `data_dir` always exists: it holds the dev key too. `env` is the MEMORY_LEDGER_*
    environment as it was when these settings were made; the properties and
    `number`/`flag` below resolve each setting from it, with its default, and refuse a
    bad value with a ConfigurationError naming the variable. A setting is checked where
    it is used (a job's, when the scheduler starts), so that a bad one stops only what
    needs it, as before."""

    data_dir: Path
    postgres: PostgresLocation | None = None
    env: Mapping[str, str] = field(default_factory=environment, compare=False, repr=False)

    @classmethod
    def from_env(cls) -> Settings:
        """The settings the environment gives (MEMORY_LEDGER_DATA_DIR or _URL, etc.)."""
        return cls.resolve()

    # -- the deployment's settings, beyond the location ---------------------------------

    def text(self, name: str) -> str:
        """A variable's value, stripped; empty when unset."""
        return self.env.get(name, "").strip()

    @property
    def master_key(self) -> str | None:
        """MEMORY_LEDGER_MASTER_KEY (base64), or None: then a development key file."""
        return self.env.get(MASTER_KEY_ENV) or None

    @property
    def new_master_key(self) -> str | None:
        """MEMORY_LEDGER_NEW_MASTER_KEY: the key `keys rotate` rotates to, or None."""
        return self.env.get(NEW_MASTER_KEY_ENV) or None

    @property
    def embedder(self) -> str:
        """MEMORY_LEDGER_EMBEDDER: `use` (the default), `hashing[:DIM]` or `module:factory`."""
        return self.text(EMBEDDER_ENV) or "use"

    @property
    def summarizer(self) -> str:
        """MEMORY_LEDGER_SUMMARIZER: `module:factory`, or empty for the default."""
        return self.text(SUMMARIZER_ENV)

    @property
    def extractor(self) -> str:
        """MEMORY_LEDGER_EXTRACTOR: `module:factory`, or empty for the default."""
        return self.text(EXTRACTOR_ENV)

    @property
    def extra_stores(self) -> tuple[str, ...]:
        """MEMORY_LEDGER_EXTRA_STORES: `module:factory` specs, comma-separated."""
        return tuple(filter(None, (s.strip() for s in self.text(EXTRA_STORES_ENV).split(","))))

    @property
    def rebuild_side_by_side(self) -> str:
        """MEMORY_LEDGER_REBUILD_SIDE_BY_SIDE: `1` always, `0` never, empty to decide."""
        return self.text(SIDE_BY_SIDE_ENV)

    def flag(self, name: str) -> bool:
        """A yes/no setting: unset, 0/false/no/off, or 1/true/yes/on."""
        found = _FLAG_VALUES.get(self.text(name).lower())
        if found is None:
            raise ConfigurationError(f"{name}: expected 1/true/yes or 0/false/no")
        return found

    def number(
        self, name: str, default: float, accept: Callable[[float], bool], rule: str
    ) -> float:
        """A number setting (a scheduled job's): unset gives the default, and anything
        `accept` refuses (or that is not a number) raises "<name> must be <rule>"."""
        raw = self.text(name)
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")  # accepted by no range
        if not accept(value):
            raise ConfigurationError(f"{name} must be {rule}")
        return value

    @classmethod
    def resolve(cls, data_dir: str | Path | None = None, url: str | None = None) -> Settings:
        env = environment()
        raw_dir = data_dir or env.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
        raw_url = url or env.get(URL_ENV) or None
        directory = Path(raw_dir).expanduser().resolve()
        if raw_url is None or raw_url.startswith("sqlite"):
            if raw_url:
                directory = _sqlite_dir(raw_url)
            return cls(directory, None, env)
        return cls(directory, _parse_postgres(raw_url), env)

    @property
    def backend(self) -> str:
        return "postgresql" if self.postgres else "sqlite"

    @property
    def events_path(self) -> Path:
        return self.data_dir / EVENTS_FILE

    @property
    def projections_path(self) -> Path:
        return self.data_dir / PROJECTIONS_FILE

    def describe(self) -> str:
        if self.postgres:
            return self.postgres.masked()
        return str(self.data_dir)

    def event_store_env(self) -> dict[str, str]:
        # Snapshots are enabled for operators who want them (`take_snapshot`); they are
        # safe because aggregate state holds sealed content only.
        env = {"IS_SNAPSHOTTING_ENABLED": "yes"}
        if self.postgres is None:
            env.update(
                PERSISTENCE_MODULE="eventsourcing.sqlite",
                SQLITE_DBNAME=str(self.events_path),
                SQLITE_LOCK_TIMEOUT="30",
                APPLICATION_RECORDER_TOPIC="memory_ledger.recorders:SQLiteMemoryRecorder",
            )
        else:
            pg = self.postgres
            env.update(
                PERSISTENCE_MODULE="eventsourcing.postgres",
                POSTGRES_DBNAME=pg.dbname,
                POSTGRES_HOST=pg.host,
                POSTGRES_PORT=str(pg.port),
                POSTGRES_USER=pg.user,
                POSTGRES_PASSWORD=pg.password,
                POSTGRES_SCHEMA=pg.schema,
                POSTGRES_CONNECT_TIMEOUT="5",
                APPLICATION_RECORDER_TOPIC="memory_ledger.postgres_recorder:PostgresMemoryRecorder",
            )
        return env

    def projections_url(self) -> str:
        if self.postgres:
            return self.postgres.sqlalchemy_url()
        return f"sqlite:///{self.projections_path}"

    def _pg_connect(self) -> Any:
        import psycopg

        pg = self.postgres
        assert pg is not None
        return psycopg.connect(
            host=pg.host,
            port=pg.port,
            dbname=pg.dbname,
            user=pg.user,
            password=pg.password or None,
            connect_timeout=5,
            autocommit=True,
        )

    def store_exists(self) -> bool:
        """Whether a store was already created here (so a new dev key must not be made)."""
        if self.postgres is None:
            return self.events_path.exists() and self.events_path.stat().st_size > 0
        with self._pg_connect() as conn:
            found = conn.execute(
                "SELECT to_regclass(%s)", (f'"{self.postgres.schema}".memory_ledger_meta',)
            ).fetchone()
        return bool(found and found[0])

    def require_store(self, *side_files: str) -> None:
        """For what only reads a store: StoreNotFound unless one was created here, and
        nothing created on the way (no directory, no file, no dev key). `side_files` are
        files of the data directory that count as well (the token store's `access.sqlite`
        is made by `tokens create` before any memory is); on PostgreSQL, with side files
        named, a reachable database is enough (their tables are created on demand)."""
        if self.postgres is None:
            present = [self.data_dir / name for name in side_files]
            if self.store_exists() or any(p.is_file() and p.stat().st_size for p in present):
                return
            raise StoreNotFound(f"no store at {self.data_dir} (nothing was created)")
        self.check_reachable()  # connects only: a clear error for an unreachable server
        if side_files or self.store_exists():
            return
        raise StoreNotFound(f"no store at {self.postgres.masked()} (nothing was created)")

    @contextmanager
    def schema_lock(self) -> Iterator[None]:
        """Serialise table creation across processes.

        PostgreSQL rejects concurrent CREATE ... IF NOT EXISTS of the same objects
        ("tuple concurrently updated"), so processes opening one database at the same
        moment take turns under an advisory lock. SQLite's own file lock suffices.
        """
        if self.postgres is None:
            yield
            return
        with self._pg_connect() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_ID,))
            try:
                schema = self.postgres.schema
                # Only when missing: CREATE needs a privilege a least-privilege role lacks.
                if not conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
                ).fetchone():
                    conn.execute(f'CREATE SCHEMA "{schema}"')
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_ID,))

    def check_reachable(self) -> None:
        """Fail early, with the location named (password masked), before anything is written."""
        if self.postgres is None:
            _check_sqlite_dir(self)
            return
        import psycopg

        try:
            with self._pg_connect():
                pass
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackendUnavailable(
                f"cannot connect to {self.postgres.masked()}: {reason}; nothing was changed"
            ) from None

    # -- two more settings. The names are class attributes, not fields (unannotated).
    ERASURE_DEADLINE_ENV = "MEMORY_LEDGER_ERASURE_DEADLINE_DAYS"
    DEFAULT_ERASURE_DEADLINE_DAYS = 30
    RESTORE_KILL_AFTER_ENV = "MEMORY_LEDGER_TEST_KILL_AFTER_RESTORE_STEP"

    @property
    def erasure_deadline_days(self) -> int:
        """The erasure deadline the compliance console counts overdue requests by:
        MEMORY_LEDGER_ERASURE_DEADLINE_DAYS, a whole number of days from 1 to 3660, 30
        when unset (data-protection law commonly gives a month)."""
        from memory_ledger.errors import InvalidWrite

        name = self.ERASURE_DEADLINE_ENV
        # Read when the console asks, not from `env`: a running console answers for the
        # deadline in force, and a bad value is a 422 of that call, not a refused start.
        raw = os.environ.get(name, "").strip()
        if not raw:
            return self.DEFAULT_ERASURE_DEADLINE_DAYS
        if not raw.isdigit() or not 1 <= int(raw) <= 3660:
            raise InvalidWrite(f"{name} must be a whole number of days from 1 to 3660")
        return int(raw)

    @property
    def restore_kill_after_step(self) -> str | None:
        """Fault injection for the kill -9 tests of a restore: the step after which the
        restoring process kills itself (restore/restore.py). Unset in production."""
        return self.env.get(self.RESTORE_KILL_AFTER_ENV) or None


def _sqlite_dir(url: str) -> Path:
    # sqlite:///path/to/dir names a data directory, not a single file.
    path = url.split(":///", 1)[1] if ":///" in url else ""
    if not path:
        raise ConfigurationError(f"a sqlite URL must name a data directory: {url!r}")
    return Path(path).expanduser().resolve()


def _parse_postgres(url: str) -> PostgresLocation:
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise ConfigurationError(
            f"unsupported database URL scheme {parts.scheme!r}: use postgresql://... "
            "or a data directory for SQLite"
        )
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        raise ConfigurationError("the PostgreSQL URL must name a database: postgresql://host/db")
    query = parse_qs(parts.query)
    schema = query.get("schema", ["public"])[0]
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
        raise ConfigurationError(f"invalid schema name {schema!r}")
    return PostgresLocation(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        dbname=dbname,
        user=unquote(parts.username or os.environ.get("PGUSER", "postgres")),
        password=unquote(parts.password or ""),
        schema=schema,
    )


def _check_sqlite_dir(settings: Settings) -> None:
    directory = settings.data_dir
    if directory.exists() and not directory.is_dir():
        raise BackendUnavailable(f"data directory {directory} exists and is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackendUnavailable(f"cannot create data directory {directory}: {exc}") from None
    if not os.access(directory, os.W_OK):
        raise BackendUnavailable(f"data directory {directory} is not writable")
    for path in (settings.events_path, settings.projections_path):
        # Read the header instead of connecting: a connection would create -wal/-shm
        # files, and a failed check must leave the directory exactly as it was.
        if path.exists() and path.stat().st_size > 0:
            with path.open("rb") as handle:
                header = handle.read(16)
            if header != SQLITE_HEADER:
                raise BackendUnavailable(f"{path} is not a readable SQLite database")
