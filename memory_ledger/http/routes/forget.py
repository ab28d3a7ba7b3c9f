"""Forget requests: file one for a scope (the forget grant), and read one's status. A
request that is not completed yet answers 202 with the URL to follow."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response, status
from pydantic import Field, StrictBool, StrictStr

from memory_ledger.access import Access
from memory_ledger.errors import Forbidden, InvalidWrite, NotFound
from memory_ledger.http.auth import Caller, ForgettingLedger, Ops
from memory_ledger.operations import Operations, RequestReport
from memory_ledger.operations.shapes import ForgetScope, StrictModel

router = APIRouter(prefix="/v1", tags=["forget"])

#: A request in one of these has reached its end; in any other (pending, blocked by a
#: hold, partial, waiting on a projection or a verification) it is still on its way.
SETTLED = frozenset({"completed", "refused", "dry_run"})


def answer_status(request_status: str) -> int:
    """200 for a settled request, else 202: follow its status URL."""
    return status.HTTP_200_OK if request_status in SETTLED else status.HTTP_202_ACCEPTED


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
    response.status_code = answer_status(report.status)
    return {**report.to_dict(), "status_url": location}


def _visible(ops: Operations, caller: Access, request_id: str) -> RequestReport:
    """A request of the token's subtree: an agent's own, or any a compliance token
    covers. Another subtree's request is not found, as a missing one is."""
    try:
        report = ops.requests.report(request_id)
    except NotFound:
        raise NotFound(f"no forget request {request_id}") from None
    if caller.role == "ops" or not caller.covers(report.namespace):
        raise NotFound(f"no forget request {request_id}")
    return report


MAX_PAGE = 200
_CURSOR = re.compile(r"o([0-9]{1,12})")


@router.get("/forget-requests")
def list_requests(
    ops: Ops,
    caller: Caller,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
) -> dict[str, Any]:
    """The forget requests of the token's subtree, oldest first, a page at a time. The
    ledger only grows, so a cursor (`next_cursor`) always continues where the page
    ended; a page may hold fewer than `limit` when others' requests lie in between."""
    if caller.role == "ops":
        raise Forbidden("forget requests are read by agent and compliance tokens")
    start = 0
    if cursor is not None:
        match = _CURSOR.fullmatch(cursor)
        if match is None:
            raise InvalidWrite(
                "unknown cursor: start again without one, and follow next_cursor",
                ["cursor: invalid"],
            )
        start = int(match.group(1))
    page = ops.requests.page(start, limit, caller.covers)
    rows = [row.to_dict() for row in page.rows]
    return {
        "requests": rows,
        "next_cursor": f"o{page.next_offset}" if page.next_offset is not None else None,
    }


@router.get("/forget-requests/{request_id}")
def request_status(ops: Ops, caller: Caller, request_id: str) -> dict[str, Any]:
    """Where a request stands, with its receipts per store: ids and counts only."""
    return _visible(ops, caller, request_id).to_dict()


@router.post("/forget-requests/{request_id}/verify")
def verify(ops: Ops, caller: Caller, request_id: str) -> dict[str, Any]:
    """Ask every store again for evidence that the targets are absent."""
    _visible(ops, caller, request_id)
    return ops.requests.verify(request_id).to_dict()


class RedactionBody(StrictModel):
    """Spans (substrings) or whole fields to remove from one item; the rest stays."""

    spans: Annotated[tuple[StrictStr, ...], Field(max_length=64)] = ()
    fields: Annotated[tuple[Literal["value", "content"], ...], Field(max_length=2)] = ()
    dry_run: StrictBool = False


@router.post("/memories/{item_id}/redact")
def redact(
    ledger: ForgettingLedger, item_id: str, body: RedactionBody, response: Response
) -> dict[str, Any]:
    """A redaction is an erasure of part of an item: it needs the forget grant."""
    report = ledger.redact(item_id, body.fields, spans=body.spans, dry_run=body.dry_run)
    response.headers["Location"] = f"/v1/forget-requests/{report.request_id}"
    response.status_code = answer_status(report.status)
    return report.to_dict()
