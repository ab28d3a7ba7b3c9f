"""Liveness and readiness: ready only when the store serves (not while restoring)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memory_ledger.restoring import RestoreMarker

router = APIRouter(prefix="/v1", tags=["health"])


@router.get("/health")
def health() -> dict[str, Any]:
    return {"status": "ok"}


@router.get("/ready", response_model=None)
def ready(request: Request) -> dict[str, Any] | JSONResponse:
    serving = request.app.state.serving
    if serving.restoring or RestoreMarker(serving.service.settings).read() is not None:
        return JSONResponse({"status": "restoring"}, status_code=503)
    return {"status": "ready"}
