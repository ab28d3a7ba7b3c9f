"""Errors as RFC 9457 problem details (`application/problem+json`): a title, the status,
a detail that says what to do, and the failing fields; never a traceback, never the
offending value (it may be personal)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from memory_ledger.errors import (
    ConfigurationError,
    CursorGone,
    Forbidden,
    InvalidTransition,
    InvalidWrite,
    MemoryLedgerError,
    NotFound,
    Unauthenticated,
    cap_problems,
    field_message,
)

log = logging.getLogger("memory_ledger.http")
MEDIA_TYPE = "application/problem+json"
#: Each error class's status and title; the first match in this order wins.
STATUS: list[tuple[type[MemoryLedgerError], int, str]] = [
    (Unauthenticated, 401, "Unauthenticated"),
    (Forbidden, 403, "Forbidden"),
    (NotFound, 404, "Not found"),
    (InvalidTransition, 409, "Conflict"),
    (CursorGone, 410, "Cursor gone"),
    (InvalidWrite, 422, "Invalid request"),
    (ConfigurationError, 503, "Service unavailable"),
]


def problem(
    status: int, title: str, detail: str, problems: list[str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if problems:
        body["problems"] = cap_problems(problems)  # as InvalidWrite caps its own list
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def install(app: FastAPI) -> None:
    """Map every error a route can raise to its problem response."""

    @app.exception_handler(MemoryLedgerError)
    async def _ours(_: Request, exc: MemoryLedgerError) -> JSONResponse:
        for kind, status, title in STATUS:
            if isinstance(exc, kind):
                return problem(status, title, str(exc), list(getattr(exc, "problems", []) or []))
        log.warning("request failed: %s", type(exc).__name__)
        return problem(500, "Internal error", "the operation failed; nothing can be assumed done")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in _one_branch(list(exc.errors()), exc.body):
            where = ".".join(str(p) for p in error["loc"] if not _tag(p)) or "body"
            problems.append(f"{where}: {field_message(error)}")
        return problem(422, "Invalid request", "the request was refused; nothing changed", problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem(exc.status_code, str(exc.detail), str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected failure: %s", type(exc).__name__)
        return problem(500, "Internal error", "the operation failed; nothing can be assumed done")


def _tag(part: object) -> bool:
    """A location part that names no field: `body`, or a union member's tag."""
    return part == "body" or (isinstance(part, str) and "[" in part)


def _one_branch(errors: list[Any], body: object) -> list[Any]:
    """A body that may be one object or a list of them (`POST /v1/memories`) fails both
    members of the union; only the member of the body's own shape is worth reporting."""
    tagged = [e for e in errors if len(e["loc"]) > 1 and _tag(e["loc"][1])]
    if not tagged:
        return errors
    as_list = isinstance(body, list)
    kept = [e for e in errors if e not in tagged or str(e["loc"][1]).startswith("list[") == as_list]
    return kept or errors
