"""Forget requests: file one for a scope (the forget grant), and read one's status. A
request that is not completed yet answers 202 with the URL to follow."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status
from pydantic import StrictBool

from memory_ledger.errors import NotFound
from memory_ledger.forgetting.scope import ForgetScope
from memory_ledger.http.auth import Caller, ForgettingLedger
from memory_ledger.write_policy import StrictModel

router = APIRouter(prefix="/v1", tags=["forget"])


class ForgetRequestBody(StrictModel):
    """A scope in the shape of the Python API's `forget_scope`, and whether to only
    resolve it."""

    scope: ForgetScope
    dry_run: StrictBool = False


@router.post("/forget-requests", status_code=status.HTTP_200_OK)
def file_request(
    ledger: ForgettingLedger, body: ForgetRequestBody, response: Response
) -> dict[str, Any]:
    report = ledger.forget_scope(body.scope, dry_run=body.dry_run)
    location = f"/v1/forget-requests/{report.request_id}"
    response.headers["Location"] = location
    if report.status in ("pending", "partial"):
        response.status_code = status.HTTP_202_ACCEPTED
    return {**report.to_dict(), "status_url": location}


@router.get("/forget-requests/{request_id}")
def request_status(request: Request, caller: Caller, request_id: str) -> dict[str, Any]:
    """A request of the token's subtree: an agent's own, or any a compliance token
    covers. Ids and counts only; another subtree's request is not found."""
    service = request.app.state.service
    try:
        report = service.requests.report(request_id)
    except NotFound:
        raise NotFound(f"no forget request {request_id}") from None
    if caller.role == "ops" or not caller.covers(report.namespace):
        raise NotFound(f"no forget request {request_id}")
    return report.to_dict()
