"""A consistent copy of a PostgreSQL store's event and key tables, as an SQLite file.

A backup of a PostgreSQL store copies what cannot be rebuilt: the events, the
snapshots, the key store and the store's meta rows (the key check). They are read in
one REPEATABLE READ, READ ONLY transaction, so they and the restore point are of one
instant while writers go on (the consistency `pg_dump` gets from its snapshot), with
`COPY ... TO STDOUT (FORMAT BINARY)`, and written into an SQLite file holding the same
tables. That file is what the backup seals, so a backup of either backend is one
SQLite file to verify, check against the ledger and inspect, and a restore needs no
`pg_dump`/`pg_restore` matching the server's version on the host that runs it.

The projections are not copied (a restore rebuilds them from the log), and neither is
the lifecycle ledger, which lives in its own schema and is what a restore replays from.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError
from memory_ledger.keystore import KEYS_TABLE, META_TABLE

EVENTS_TABLE = "memory_ledger_events"
_BATCH = 5_000


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[tuple[str, str], ...]  # (column, PostgreSQL type)

    @property
    def names(self) -> str:
        return ", ".join(c for c, _ in self.columns)

    @property
    def types(self) -> list[str]:
        return [t for _, t in self.columns]


TABLES = (
    Table(
        EVENTS_TABLE,
        (
            ("originator_id", "uuid"),
            ("originator_version", "int8"),
            ("topic", "text"),
            ("state", "bytea"),
            ("notification_id", "int8"),
        ),
    ),
    Table(
        "memory_ledger_snapshots",
        (
            ("originator_id", "uuid"),
            ("originator_version", "int8"),
            ("topic", "text"),
            ("state", "bytea"),
        ),
    ),
    Table(
        KEYS_TABLE,
        (
            ("item_id", "text"),
            ("generation", "int4"),
            ("wrapped", "bytea"),
            ("created_at", "text"),
            ("destroyed_at", "text"),
        ),
    ),
    Table(META_TABLE, (("name", "text"), ("value", "text"))),
)


def _schema(settings: Settings) -> str:
    assert settings.postgres is not None
    return f'"{settings.postgres.schema}"'


def dump(settings: Settings, dest: Path) -> int:
    """Copy the store's tables into a new SQLite file at `dest`; returns the restore
    point (the last notification id in the copy)."""
    from psycopg import IsolationLevel

    schema = _schema(settings)
    lite = sqlite3.connect(dest)
    try:
        with settings._pg_connect() as conn:
            conn.autocommit = False
            conn.isolation_level = IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            with conn.transaction(), conn.cursor() as cur:
                found = cur.execute(
                    "SELECT to_regclass(%s)", (f"{schema}.{EVENTS_TABLE}",)
                ).fetchone()
                if not (found and found[0]):
                    raise ConfigurationError(
                        f"{settings.describe()} holds no memory-ledger store to back up"
                    )
                for table in TABLES:
                    lite.execute(f"CREATE TABLE {table.name} ({table.names})")
                    insert = (
                        f"INSERT INTO {table.name} VALUES ({', '.join('?' * len(table.columns))})"
                    )
                    sql = f"COPY (SELECT {table.names} FROM {schema}.{table.name}) TO STDOUT"
                    with cur.copy(sql + " (FORMAT BINARY)") as copy:
                        copy.set_types(table.types)
                        batch: list[tuple[Any, ...]] = []
                        for row in copy.rows():
                            batch.append(tuple(_to_sqlite(v) for v in row))
                            if len(batch) >= _BATCH:
                                lite.executemany(insert, batch)
                                batch.clear()
                        lite.executemany(insert, batch)
                row = cur.execute(f"SELECT max(notification_id) FROM {schema}.{EVENTS_TABLE}")
                position = int(row.fetchone()[0] or 0)
        lite.commit()
    finally:
        lite.close()
    return position


def load(settings: Settings, source: Path) -> None:
    """Replace the store's tables with the copy's rows, in one transaction (a load
    interrupted anywhere leaves the tables as they were). The tables must exist (the
    caller opened the store once). The notification sequence continues above both the
    copy's last id and the one it replaces, so a host whose index had read further
    still sees every event appended from now on (the replayed tombstones first)."""
    schema = _schema(settings)
    lite = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        with settings._pg_connect() as conn:
            conn.autocommit = False
            with conn.transaction(), conn.cursor() as cur:
                events = f"{schema}.{EVENTS_TABLE}"
                before = cur.execute(f"SELECT max(notification_id) FROM {events}").fetchone()
                names = ", ".join(f"{schema}.{t.name}" for t in TABLES)
                cur.execute(f"TRUNCATE {names}")
                for table in TABLES:
                    rows = lite.execute(f"SELECT {table.names} FROM {table.name}")
                    with cur.copy(
                        f"COPY {schema}.{table.name} ({table.names}) FROM STDIN (FORMAT BINARY)"
                    ) as copy:
                        copy.set_types(table.types)
                        uuids = [i for i, (_, t) in enumerate(table.columns) if t == "uuid"]
                        for row in rows:
                            values = list(row)
                            for i in uuids:
                                values[i] = UUID(values[i])
                            copy.write_row(values)
                loaded = cur.execute(f"SELECT max(notification_id) FROM {events}").fetchone()
                top = max(int(before[0] or 0), int(loaded[0] or 0))
                cur.execute(
                    "SELECT setval(pg_get_serial_sequence(%s, 'notification_id'), %s, %s)",
                    (events.replace('"', ""), max(top, 1), top > 0),
                )
    finally:
        lite.close()


def _to_sqlite(value: object) -> object:
    return str(value) if isinstance(value, UUID) else value
