"""Helpers for the damage tests: run the CLI (in this process, failing on any exception
that is not an exit; or, with `fresh=True`, in a subprocess, whose stderr would show a
traceback), and change a store's rows by hand, as an operator or an attacker with
database access would, on SQLite or PostgreSQL."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import psycopg
from factories import cli_location
from typer.testing import CliRunner

from memory_ledger.cli import app
from memory_ledger.config import Settings

_runner = CliRunner()


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)

    def clean(self) -> Run:
        """No traceback, whatever the exit code: damage gets a message, never a crash."""
        assert "Traceback" not in self.stderr and "Traceback" not in self.stdout, self.stderr
        return self


def cli(
    settings: Settings, *args: str, env: dict[str, str] | None = None, fresh: bool = False
) -> Run:
    if not fresh:
        result = _runner.invoke(
            app, [*args, *cli_location(settings)], env={"COLUMNS": "200", **(env or {})}
        )
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"the CLI crashed: {result.exception!r}") from result.exception
        return Run(result.exit_code, result.stdout, result.stderr)
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("MEMORY_LEDGER_") or k == "MEMORY_LEDGER_TEST_PG"
    }
    environment.update({"MEMORY_LEDGER_EMBEDDER": "hashing", "COLUMNS": "200"}, **(env or {}))
    done = subprocess.run(
        [sys.executable, "-m", "memory_ledger.cli", *args, *cli_location(settings)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    return Run(done.returncode, done.stdout, done.stderr).clean()


def sql(settings: Settings, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the event store (or, for `ledger_entries`, nothing: use
    `ledger_sql`), outside memory-ledger. `?` marks parameters on both backends."""
    if settings.postgres is None:
        with sqlite3.connect(settings.events_path) as conn:
            rows = conn.execute(statement, params).fetchall()
        conn.close()
        return rows
    pg = settings.postgres
    with psycopg.connect(
        host=pg.host, port=pg.port, dbname=pg.dbname, user=pg.user, autocommit=True
    ) as conn:
        cursor = conn.execute(statement.replace("?", "%s"), params)  # type: ignore[arg-type]
        return list(cursor.fetchall()) if cursor.description else []


def events_table(settings: Settings) -> str:
    return "stored_events" if settings.postgres is None else "memory_ledger_events"


def delete_ledger(settings: Settings) -> None:
    """The lifecycle ledger gone: its file deleted, or its PostgreSQL schema dropped."""
    if settings.postgres is None:
        for suffix in ("", "-wal", "-shm"):
            (settings.data_dir / f"ledger.sqlite{suffix}").unlink(missing_ok=True)
    else:
        sql(settings, f'DROP SCHEMA "{settings.postgres.schema}_ledger" CASCADE')
