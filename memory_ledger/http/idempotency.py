"""Idempotency keys: a retried POST with the same `Idempotency-Key` gets the first
result, and runs nothing again.

A key belongs to the token that used it, for a day. Its first use claims it before the
operation runs (of two requests racing with one key, the second is told to retry), and
the result is kept only if the operation succeeded: a failure leaves nothing behind, so
the retry runs it. The same key with another body is refused. What is kept is the
response of a write or an erasure: ids, counts and codes, never content.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta

from fastapi import FastAPI, Response
from sqlalchemy import Column, Integer, MetaData, Table, Text, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_ledger import side_tables
from memory_ledger.access.tokens import ACCESS_FILE
from memory_ledger.config import Settings
from memory_ledger.errors import MemoryLedgerError
from memory_ledger.http import auth, problems
from memory_ledger.times import canonical_time

HEADER = "idempotency-key"
#: The POSTs a key applies to: writes and erasures, whose answers are ids, counts and
#: codes. A context or a plan answers with memory content, which must not be kept in
#: clear here (nor outlive a forget): a key on those is refused.
KEYED = re.compile(
    r"/v1/memories|/v1/forget-requests|/v1/memories/[^/]+/(?:redact|suppress|unsuppress)"
    r"|/v1/forget-plans/[^/]+/execute"
)
KEPT = timedelta(days=1)
MAX_KEY = 200

idempotency_metadata = MetaData()
idempotency_table = Table(
    "memory_ledger_idempotency",
    idempotency_metadata,
    Column("token_id", Text, primary_key=True),
    Column("key_sha256", Text, primary_key=True),
    Column("route", Text, nullable=False),
    Column("body_sha256", Text, nullable=False),
    Column("status", Integer),  # None while the first request runs
    Column("response", Text),
    Column("location", Text),
    Column("created_at", Text, nullable=False),
)


class IdempotencyKeys:
    def __init__(self, settings: Settings, clock: Callable[[], datetime]) -> None:
        self.engine = side_tables.open_engine(settings, ACCESS_FILE)
        self.clock = clock
        side_tables.create_tables(self.engine, settings, [idempotency_table])

    def close(self) -> None:
        self.engine.dispose()

    def claim(self, token_id: str, key: str, route: str, body: bytes) -> Response | None:
        """None: the key is new and now claimed, run the operation. A response: the
        first result, or a refusal (another body, or the first request still running)."""
        now = self.clock()
        key_hash = hashlib.sha256(key.encode()).hexdigest()
        body_hash = hashlib.sha256(body).hexdigest()
        row = idempotency_table.c
        with self.engine.begin() as conn:
            conn.execute(
                delete(idempotency_table).where(row.created_at < canonical_time(now - KEPT))
            )
            try:
                conn.execute(
                    insert(idempotency_table).values(
                        token_id=token_id,
                        key_sha256=key_hash,
                        route=route,
                        body_sha256=body_hash,
                        created_at=canonical_time(now),
                    )
                )
                return None
            except IntegrityError:
                pass
        with self.engine.connect() as conn:
            first = (
                conn.execute(
                    select(idempotency_table).where(
                        row.token_id == token_id, row.key_sha256 == key_hash
                    )
                )
                .mappings()
                .first()
            )
        if first is None:
            return problems.problem(409, "Conflict", "the key was just released; retry")
        if (first["route"], first["body_sha256"]) != (route, body_hash):
            return problems.problem(
                422,
                "Invalid request",
                "this Idempotency-Key was used for another request; use a new key",
                ["Idempotency-Key: reused"],
            )
        if first["status"] is None:
            return problems.problem(
                409, "Conflict", "the first request with this key is still running; retry"
            )
        headers = {"Location": first["location"]} if first["location"] else None
        return JSONResponse(json.loads(first["response"]), first["status"], headers=headers)

    def settle(self, token_id: str, key: str, response: Response, body: bytes) -> None:
        """Keep a success; release the key after anything else (the retry runs it)."""
        key_hash = hashlib.sha256(key.encode()).hexdigest()
        where = (idempotency_table.c.token_id == token_id) & (
            idempotency_table.c.key_sha256 == key_hash
        )
        with self.engine.begin() as conn:
            if 200 <= response.status_code < 300:
                conn.execute(
                    update(idempotency_table)
                    .where(where)
                    .values(
                        status=response.status_code,
                        response=body.decode("utf-8"),
                        location=response.headers.get("location"),
                    )
                )
            else:
                conn.execute(delete(idempotency_table).where(where))


def install(app: FastAPI, keys: IdempotencyKeys) -> None:
    app.add_middleware(Idempotent, keys=keys)


class Idempotent:
    """The keys' middleware. A plain ASGI one: a request without a key (nearly all of
    them) passes straight through, without the task group and streams that
    `@app.middleware("http")` puts around every request."""

    def __init__(self, app: ASGIApp, keys: IdempotencyKeys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        key = headers.get(HEADER)
        if key is None:
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if not KEYED.fullmatch(path):
            await problems.problem(
                422, "Invalid request", "an Idempotency-Key applies to writes and erasures "
                "(memories, forget requests, redactions, executing a plan) only",
                ["Idempotency-Key: not for this route"],
            )(scope, receive, send)  # fmt: skip
            return
        if not (1 <= len(key) <= MAX_KEY and key.isascii() and key.isprintable()):
            await problems.problem(
                422, "Invalid request", f"an Idempotency-Key is 1 to {MAX_KEY} printable ASCII "
                "characters", ["Idempotency-Key: invalid"],
            )(scope, receive, send)  # fmt: skip
            return
        try:
            caller = auth.bearer(scope["app"].state.tokens, headers.get("authorization"))
        except MemoryLedgerError:
            await self.app(scope, receive, send)  # the route answers 401 itself
            return
        body, receive = await _read_body(receive)
        first = self.keys.claim(caller.token_id, key, path, body)
        if first is not None:
            await first(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def kept(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        try:
            await self.app(scope, receive, kept)
        except BaseException:
            self.keys.settle(caller.token_id, key, Response(status_code=500), b"")
            raise
        if start is None:  # nothing was answered: release the key, answer nothing
            self.keys.settle(caller.token_id, key, Response(status_code=500), b"")
            return
        content = b"".join(chunks)
        response = Response(content, start["status"])
        response.raw_headers = list(start.get("headers", []))
        self.keys.settle(caller.token_id, key, response, content)
        await send(start)
        await send({"type": "http.response.body", "body": content, "more_body": False})


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole body (bounded already: memory_ledger/http/limits.py), and a `receive`
    that gives it again to the route."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(parts)
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replayed
