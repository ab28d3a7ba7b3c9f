"""Builders for valid writes, so each test states only what it is about."""

from __future__ import annotations

import secrets
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_ledger.config import Settings

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def provenance(turn: str = "t1", session: str = "s1", at: datetime = T0, **extra: Any) -> dict:
    return {
        "writer": "test-agent",
        "written_at": at.isoformat(),
        "turn_id": turn,
        "session_id": session,
        **extra,
    }


def fact(
    predicate: str,
    value: str,
    *,
    subject: str = "user",
    origin: str = "explicit",
    at: datetime = T0,
    turn: str = "t1",
    **extra: Any,
) -> dict:
    return {
        "kind": "fact",
        "subject": subject,
        "predicate": predicate,
        "value": value,
        "category": extra.pop("category", "general"),
        "origin": origin,
        "sensitivity": extra.pop("sensitivity", "personal"),
        "provenance": provenance(turn=turn, at=at),
        **extra,
    }


def preference(
    predicate: str,
    value: str,
    *,
    scope: str = "global",
    origin: str = "explicit",
    at: datetime = T0,
    **extra: Any,
) -> dict:
    return {
        "kind": "preference",
        "subject": "user",
        "predicate": predicate,
        "value": value,
        "category": "travel",
        "origin": origin,
        "sensitivity": "internal",
        "scope": scope,
        "provenance": provenance(at=at),
        **extra,
    }


def turn(text: str, *, turn_id: str = "t1", session: str = "s1", at: datetime = T0) -> dict:
    return {
        "kind": "turn",
        "subject": "user",
        "content": text,
        "origin": "explicit",
        "sensitivity": "personal",
        "provenance": provenance(turn=turn_id, session=session, at=at),
    }


def later(days: int) -> datetime:
    return T0 + timedelta(days=days)


def sqlite_files(settings: Settings) -> list[Path]:
    return sorted(p for p in settings.data_dir.iterdir() if p.is_file())


def file_bytes_contain(paths: list[Path], needle: str) -> list[str]:
    raw = needle.encode("utf-8")
    return [p.name for p in paths if p.exists() and raw in p.read_bytes()]


def store_bytes_contain(settings: Settings, needle: str) -> list[str]:
    """Where the store's bytes hold `needle`: the data directory's files, and on
    PostgreSQL the rows of the store's schema too (a data-only pg_dump of it)."""
    found = file_bytes_contain(
        sorted(p for p in settings.data_dir.rglob("*") if p.is_file()), needle
    )
    if settings.postgres is not None:
        pg = settings.postgres
        dump = subprocess.run(
            [
                "pg_dump",
                "--dbname",
                f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}",
                "--data-only",
                "--schema",
                pg.schema,
            ],
            capture_output=True,
            check=True,
            timeout=120,
        ).stdout
        found += [f"schema {pg.schema}"] if needle.encode("utf-8") in dump else []
    return found


def cli_location(settings: Settings) -> list[str]:
    """The CLI options that open this store: its data directory, and its URL on PostgreSQL."""
    where = ["--data-dir", str(settings.data_dir)]
    if settings.postgres:
        pg = settings.postgres
        where += ["--url", f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}"]
    return where


def cli(*args: str) -> tuple[int, str]:
    """Run the CLI in-process. Exit code, and stdout for --json calls (so warnings on
    stderr don't break parsing)."""
    from typer.testing import CliRunner

    from memory_ledger.cli import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "240"})
    return result.exit_code, result.stdout if "--json" in args else result.output


def expiring(value: str, hours: int = 1) -> dict:
    """A fact (of a fresh predicate) that expires `hours` after T0, on consent."""
    expires = (T0 + timedelta(hours=hours)).isoformat()
    return fact(
        f"note_{secrets.token_hex(3)}",
        value,
        at=T0,
        retention={"basis": "consent", "expires_at": expires},
    )


def reread(settings: Settings) -> Settings:
    """The same location with the settings a process started now would read: the
    environment is read once, into `Settings`, so a test that changes a variable
    takes the settings again, as a restarted process would."""
    return Settings(settings.data_dir, settings.postgres)


def jobs_reread(service: Any) -> Any:
    """`service.job_context` with its settings read again (see `reread`)."""
    from dataclasses import replace

    return replace(service.job_context, settings=reread(service.settings))
