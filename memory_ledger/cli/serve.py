"""`memory-ledger serve`: the HTTP service (memory_ledger/http) on uvicorn.

What it prints, on stderr (line by line, so a container's log shows it at once): where
it listens, which store it serves (a database URL with its password masked), how many
tokens can call it; at `--log-level info` (the default) one line per request
(memory_ledger/http/access_log.py: method, route, status, milliseconds; never a body, a
query string or a token); and a last line when it stops (SIGINT or SIGTERM)."""

from __future__ import annotations

import signal
import sys
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_ledger.cli.common import DataDir, Url, app, fail
from memory_ledger.errors import MemoryLedgerError

if TYPE_CHECKING:
    from memory_ledger.access import TokenStore
    from memory_ledger.config import Settings

#: The variable `--log-level` is read from when it is not given.
LOG_LEVEL_ENV = "MEMORY_LEDGER_LOG_LEVEL"


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def say(line: str) -> None:
    """One line of what serve prints (stderr is line-buffered: it shows at once)."""
    sys.stderr.write(line + "\n")


def _stopped(signum: int, frame: object) -> None:
    """The signal uvicorn raises again once it has shut down: it has been handled."""


def live_tokens(tokens: TokenStore, at: datetime) -> int:
    """The tokens that can call the service now: neither revoked nor expired."""
    from memory_ledger.times import to_utc

    return sum(
        1
        for t in tokens.list()
        if t.revoked_at is None and (t.expires_at is None or to_utc(t.expires_at) > at)
    )


def store_text(settings: Settings) -> str:
    """The store served, as printed: a database URL with its password masked, or the
    SQLite data directory."""
    if settings.postgres is not None:
        return f"PostgreSQL {settings.describe()}"
    return f"SQLite data directory {settings.describe()}"


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8765,
    data_dir: DataDir = None,
    url: Url = None,
    log_level: Annotated[
        LogLevel,
        typer.Option(
            "--log-level",
            envvar=LOG_LEVEL_ENV,
            case_sensitive=False,
            help="info: one line per request (method, route, status, ms); "
            "warning: only warnings and errors.",
        ),
    ] = LogLevel.info,
    instance_file: Annotated[
        Path | None,
        typer.Option(
            "--instance-file",
            help="Where to write, once listening, this server's pid, port and instance id "
            "(/v1/health answers with the id); default: serve.json in the data directory.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the /v1 HTTP API. Every call needs a bearer token (`tokens create`)."""
    import uvicorn

    from memory_ledger.access import TokenStore
    from memory_ledger.api import MemoryService
    from memory_ledger.http import instance as instances
    from memory_ledger.http.app import create_app
    from memory_ledger.http.docs import package_version
    from memory_ledger.http.idempotency import IdempotencyKeys
    from memory_ledger.times import now

    try:
        service = MemoryService.open(data_dir, url)
    except MemoryLedgerError as exc:
        fail(exc, False)
    settings = service.operations.settings
    tokens = TokenStore(settings, now)
    keys = IdempotencyKeys(settings, now)
    logs_requests = log_level in (LogLevel.debug, LogLevel.info)
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    this = instances.Instance.new(host, port, base)
    where = instance_file or settings.data_dir / instances.INSTANCE_FILE
    app_ = create_app(
        service,
        tokens,
        keys,
        access_log=say if logs_requests else None,
        instance=this.instance,
    )
    held = live_tokens(tokens, now())

    class Server(uvicorn.Server):
        """uvicorn's server, saying where it listens once it does, and goodbye."""

        async def startup(self, sockets: object = None) -> None:
            await super().startup(sockets)  # type: ignore[arg-type]
            if self.should_exit:  # it could not listen: uvicorn said why
                return
            try:  # once it listens: the file says "this server is up"
                instances.write(where, this)
            except OSError as exc:  # a convenience for waiters: serving goes on
                say(f"memory-ledger: warning: cannot write the instance file {where}: {exc}")
            say(f"memory-ledger {package_version()} serving on {base} (API docs: {base}/docs)")
            say(f"  store: {store_text(settings)}")
            none_yet = "" if held else " (none yet: `memory-ledger tokens create`)"
            say(f"  tokens: {held} can call it{none_yet}")
            if logs_requests:
                say(f"  log: {log_level.value}, one line per request (--log-level warning: none)")

        async def shutdown(self, sockets: object = None) -> None:
            say("memory-ledger: stopping (finishing the requests in flight)")
            instances.remove_if_ours(where, this)
            await super().shutdown(sockets)  # type: ignore[arg-type]
            served = self.server_state.total_requests
            say(f"memory-ledger: stopped after {served} requests. Goodbye.")

    # uvicorn's own info lines (start, stop) repeat ours: its log shows from warning on,
    # or everything at debug; its access log never (ours replaces it). uvicorn picks
    # httptools (its C parser) when installed.
    quieter = LogLevel.warning if log_level is LogLevel.info else log_level
    config = uvicorn.Config(app_, host=host, port=port, log_level=quieter.value, access_log=False)
    server = Server(config)
    # uvicorn catches SIGINT and SIGTERM, shuts down, then raises the signal again for
    # the handler it found: this one ignores it, so a stop it was asked for exits 0 (as
    # `jobs run` does), after the store is closed below.
    before = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run()
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        keys.close()
        tokens.close()
        app_.state.serving.close()  # the service it serves now: a restore replaces it
