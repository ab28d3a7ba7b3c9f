"""Tables that must outlive a `rebuild`, kept beside the stores: the scheduler's job runs
and leases (jobs/runs.py), the service's access tokens (memory_ledger/access).

A rebuild drops and replays the projections, and a damaged projections file is
discarded whole, so on SQLite each concern has a file of its own in the data directory;
on PostgreSQL they live in the projections' database and schema, whose tables a rebuild
of ours never drops except the projections'. They hold ids, codes, times and hashes,
never content.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine, Table, create_engine, event
from sqlalchemy.schema import CreateIndex, CreateTable

from memory_ledger.config import Settings


def open_engine(settings: Settings, file_name: str) -> Engine:
    """`<data_dir>/<file_name>` on SQLite, or the projections' PostgreSQL schema."""
    if settings.postgres is not None:
        from memory_ledger.projections.runner import make_engine

        return make_engine(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        f"sqlite:///{settings.data_dir / file_name}", connect_args={"timeout": 30}
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def create_tables(engine: Engine, settings: Settings, tables: Sequence[Table]) -> None:
    """CREATE ... IF NOT EXISTS, so processes starting together do not trip over each
    other (on PostgreSQL also under the store's schema lock: concurrent DDL of the same
    objects fails there even with IF NOT EXISTS)."""
    with settings.schema_lock(), engine.begin() as conn:
        for table in tables:
            conn.execute(CreateTable(table, if_not_exists=True))
            for index in sorted(table.indexes, key=lambda i: str(i.name)):
                conn.execute(CreateIndex(index, if_not_exists=True))
