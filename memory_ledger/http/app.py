"""The FastAPI application: one MemoryService and one TokenStore per process, problem+json
errors, a bound on every request body (memory_ledger/http/limits.py), the gate a
restore closes, the /v1 routes, the root pointer and the offline API docs
(memory_ledger/http/docs.py), and, when asked for, the access log
(memory_ledger/http/access_log.py)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryService
from memory_ledger.http import docs, idempotency, problems
from memory_ledger.http.access_log import AccessLog
from memory_ledger.http.idempotency import IdempotencyKeys
from memory_ledger.http.limits import BodyLimit
from memory_ledger.http.routes import (
    agent_state,
    audit,
    compliance,
    feed,
    forget,
    health,
    holds,
    information,
    memories,
    ops,
    plans,
)
from memory_ledger.http.serving import Restoring, Serving

#: The largest request body: a batch of memories fits; anything larger is refused (413)
#: while it streams in, never buffered whole (memory_ledger/http/limits.py).
MAX_BODY_BYTES = 1024 * 1024
#: Served while a restore holds the gate: liveness, readiness, and the restore itself
#: (a restore that failed half-way is finished by running it again).
UNGATED = frozenset({"/v1/health", "/v1/ready", "/v1/ops/restores"})


def create_app(
    service: MemoryService,
    tokens: TokenStore,
    keys: IdempotencyKeys | None = None,
    reopen: Callable[[], MemoryService] | None = None,
    access_log: Callable[[str], object] | None = None,
    instance: str | None = None,
) -> FastAPI:
    """The app over `service`; `reopen` opens the same store again after a restore
    (default: with the same settings and master key). With `access_log`, each request's
    line (memory_ledger/http/access_log.py) is handed to it. `instance`: the id
    `/v1/health` answers with (memory_ledger/http/instance.py)."""
    app = FastAPI(
        title="memory-ledger",
        version="1",
        description="Event-sourced memory for AI agents, with governed, provable forgetting.",
        docs_url=None,  # served by memory_ledger/http/docs.py, with local assets
        redoc_url=None,
    )
    # A store opened again after a restore keeps the loaded embedder: it stays warm.
    app.state.serving = Serving(
        service,
        reopen or service.reopened,
    )
    app.state.serving.warm_up()  # /v1/ready says warming until the embedder answered
    app.state.serving.follow_erasures()  # other processes' erasures (PostgreSQL)
    app.state.tokens = tokens
    app.state.instance = instance
    problems.install(app)
    if keys is not None:
        idempotency.install(app, keys)

    app.add_middleware(Gate)
    # Added last, so outermost: a body is bounded (and its caller authenticated) before
    # the gate counts the request in flight or anything else reads the body.
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    if access_log is not None:  # outermost: it sees the body limit's refusals too
        app.add_middleware(AccessLog, write=access_log)

    for module in (
        memories,
        forget,
        plans,
        information,
        agent_state,
        feed,
        holds,
        ops,
        health,
        compliance,
        audit,
    ):
        app.include_router(module.router)
    docs.install(app)
    return app


class Gate:
    """Count each request in flight through the restore gate (`Serving.request`), and
    refuse it (503) while a restore holds the gate.

    A plain ASGI middleware rather than `@app.middleware("http")`: that wrapper runs
    every request through a task group and memory streams, which cost more than most
    routes. A request leaves the gate when its response starts, as it did under that
    wrapper: by then a JSON route has done its work, and a change feed that streams for
    minutes must not hold a restore back."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNGATED:
            await self.app(scope, receive, send)
            return
        serving: Serving = scope["app"].state.serving
        try:
            gate = serving.request()
            gate.__enter__()
        except Restoring as exc:
            response = problems.problem(503, "Service unavailable", str(exc))
            response.headers["Retry-After"] = "5"
            await response(scope, receive, send)
            return
        inside = True

        def leave() -> None:
            nonlocal inside
            if inside:
                inside = False
                gate.__exit__(None, None, None)

        async def started(message: Message) -> None:
            if message["type"] == "http.response.start":
                leave()
            await send(message)

        try:
            await self.app(scope, receive, started)
        finally:
            leave()
