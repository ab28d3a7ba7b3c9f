"""Liveness and readiness: ready only when the store serves (not while restoring) and
the embedder has answered once (not while its model loads: a `context` would wait)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memory_ledger.http.auth import serving_of

router = APIRouter(prefix="/v1", tags=["health"])


@router.get("/health")
def health(request: Request) -> dict[str, Any]:
    """Up; and, under `serve`, which server this is (its instance id, also in its
    instance file: memory_ledger/http/instance.py), so a client waiting for the server
    it started can tell it from another on the same port."""
    instance = request.app.state.instance
    return {"status": "ok"} if instance is None else {"status": "ok", "instance": instance}


@router.get("/ready", response_model=None)
def ready(request: Request) -> dict[str, Any] | JSONResponse:
    serving = serving_of(request)
    if serving.restoring or serving.operations.restores.marked():
        return JSONResponse({"status": "restoring"}, status_code=503)
    if not serving.warm.is_set():
        if serving.warm_error is not None:
            body = {"status": "embedder_failed", "detail": serving.warm_error}
            return JSONResponse(body, status_code=503)
        return JSONResponse({"status": "warming"}, status_code=503, headers={"Retry-After": "1"})
    return {"status": "ready"}
