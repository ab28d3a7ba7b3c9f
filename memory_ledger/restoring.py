"""The `restoring` mark: while it is set, the store serves nothing.

A store being restored may hold, until its tombstones are replayed and verified,
what was erased since the backup was taken. The mark is written before anything is
loaded and removed only when the restore has verified its replay, and every process
that opens the store (`MemoryService`) refuses while it is there. It also carries the
restore's progress (which steps are done), so a restore killed at any step is run
again to the same result (`restore --resume`), or abandoned for the store it replaced
(`restore --abort`).

Where it lives follows where the store lives, so that every process opening the store
sees it: a file in the data directory on SQLite, a one-row table in the store's schema
on PostgreSQL (every host of a database sees it; a file on one host would not stop
the others).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError
from memory_ledger.projections.vector_files import write_atomic

MARKER_FILE = "RESTORING.json"
MARKER_TABLE = "memory_ledger_restoring"
#: What an operator does with a store left restoring (restore/restore.py `resume`, `abort`).
WAY_FORWARD = (
    "run `memory-ledger restore --resume` to finish it, or `memory-ledger restore --abort` "
    "to put back the store it replaced"
)


class RestoreMarker:
    """Read, set and clear the mark of one store."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    def _file(self) -> Path:
        return self.settings.data_dir / MARKER_FILE

    @property
    def _table(self) -> str:
        assert self.settings.postgres is not None
        return f'"{self.settings.postgres.schema}".{MARKER_TABLE}'

    def read(self) -> dict[str, Any] | None:
        """The restore's recorded state, or None when the store is not being restored."""
        if self.settings.postgres is None:
            try:
                raw = self._file.read_text(encoding="utf-8")
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise ConfigurationError(
                    f"the restore mark {self._file} is unreadable: {exc}"
                ) from None
        else:
            with self.settings._pg_connect() as conn:
                exists = conn.execute(
                    "SELECT to_regclass(%s)", (self._table.replace('"', ""),)
                ).fetchone()
                if not (exists and exists[0]):
                    return None
                row = conn.execute(f"SELECT state FROM {self._table} WHERE id = 1").fetchone()
            if row is None:
                return None
            raw = str(row[0])
        try:
            return dict(json.loads(raw))
        except ValueError:
            raise ConfigurationError(f"the restore mark of {self.where} is unreadable") from None

    def write(self, state: dict[str, Any]) -> None:
        """Set the mark (or update the progress it records), durably."""
        body = json.dumps(state)
        if self.settings.postgres is None:
            self.settings.data_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self._file.parent, self._file.name, body.encode("utf-8"))
            return
        with self.settings.schema_lock(), self.settings._pg_connect() as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} "
                "(id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL)"
            )
            conn.execute(
                f"INSERT INTO {self._table} (id, state) VALUES (1, %s) "
                "ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state",
                (body,),
            )

    def clear(self) -> None:
        """Remove the mark: the store serves again."""
        if self.settings.postgres is None:
            self._file.unlink(missing_ok=True)
            return
        if self.read() is not None:
            with self.settings._pg_connect() as conn:
                conn.execute(f"DELETE FROM {self._table}")

    @property
    def where(self) -> str:
        return (
            str(self.settings.data_dir)
            if self.settings.postgres is None
            else (f"{self.settings.describe()} (schema {self.settings.postgres.schema})")
        )


def refuse_while_restoring(settings: Settings) -> None:
    """A store marked `restoring` refuses every read and write: until the tombstones are
    replayed and verified it may hold what was erased since the backup."""
    marker = RestoreMarker(settings)
    if marker.read() is not None:
        raise ConfigurationError(
            f"the store at {marker.where} is being restored and serves nothing until the "
            f"restore finishes: {WAY_FORWARD}"
        )
