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
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from fastapi import FastAPI, Request, Response
from sqlalchemy import Column, Integer, MetaData, Table, Text, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from starlette.responses import JSONResponse

from memory_ledger import side_tables
from memory_ledger.access.tokens import ACCESS_FILE
from memory_ledger.config import Settings
from memory_ledger.errors import MemoryLedgerError
from memory_ledger.http import problems
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
    @app.middleware("http")
    async def _idempotent(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        key = request.headers.get(HEADER)
        if key is None or request.method != "POST":
            return await call_next(request)
        if not KEYED.fullmatch(request.url.path):
            return problems.problem(
                422, "Invalid request", "an Idempotency-Key applies to writes and erasures "
                "(memories, forget requests, redactions, executing a plan) only",
                ["Idempotency-Key: not for this route"],
            )  # fmt: skip
        if not (1 <= len(key) <= MAX_KEY and key.isascii() and key.isprintable()):
            return problems.problem(
                422, "Invalid request", f"an Idempotency-Key is 1 to {MAX_KEY} printable ASCII "
                "characters", ["Idempotency-Key: invalid"],
            )  # fmt: skip
        try:
            caller = request.app.state.tokens.authenticate(
                request.headers.get("authorization", "").partition(" ")[2].strip()
            )
        except MemoryLedgerError:
            return await call_next(request)  # the route answers 401 itself
        body = await request.body()
        first = keys.claim(caller.token_id, key, request.url.path, body)
        if first is not None:
            return first
        try:
            response = await call_next(request)
        except BaseException:
            keys.settle(caller.token_id, key, Response(status_code=500), b"")
            raise
        chunks = [chunk async for chunk in response.body_iterator]  # type: ignore[attr-defined]
        content = b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks)
        keys.settle(caller.token_id, key, response, content)
        return Response(
            content,
            response.status_code,
            headers=dict(response.headers),
            media_type=response.media_type,
        )
