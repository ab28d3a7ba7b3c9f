"""`memory-ledger serve`: the HTTP service (memory_ledger/http) on uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_ledger.cli.common import DataDir, Url, app, fail
from memory_ledger.errors import MemoryLedgerError


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8765,
    data_dir: DataDir = None,
    url: Url = None,
) -> None:
    """Serve the /v1 HTTP API. Every call needs a bearer token (`tokens create`)."""
    import uvicorn

    from memory_ledger.access import TokenStore
    from memory_ledger.api import MemoryService
    from memory_ledger.http.app import create_app
    from memory_ledger.http.idempotency import IdempotencyKeys
    from memory_ledger.times import now

    try:
        service = MemoryService.open(data_dir, url)
    except MemoryLedgerError as exc:
        fail(exc, False)
    tokens = TokenStore(service.settings, now)
    keys = IdempotencyKeys(service.settings, now)
    app_ = create_app(service, tokens, keys)
    try:
        # No access log: at this level it was never shown, and each request still paid
        # for building its record. uvicorn picks httptools (its C parser) when installed.
        uvicorn.run(app_, host=host, port=port, log_level="warning", access_log=False)
    finally:
        keys.close()
        tokens.close()
        app_.state.serving.close()  # the service it serves now: a restore replaces it
