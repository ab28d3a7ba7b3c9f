"""Forget requests in words over HTTP: plan (destroys nothing), answer a clarification,
execute once. Executing a deletion or a redaction needs the forget grant; stopping use
or updating does not."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request, Response, status
from pydantic import Field, StrictStr

from memory_ledger.errors import Forbidden
from memory_ledger.http.auth import Caller, Ledger
from memory_ledger.http.routes.forget import answer_status
from memory_ledger.operations.shapes import (
    MAX_CHOICES,
    MAX_REQUEST_CHARS,
    Identifier,
    ItemId,
    StrictModel,
)

router = APIRouter(prefix="/v1", tags=["forget plans"])


class PlanBody(StrictModel):
    """The user's words, and where they were said."""

    text: Annotated[StrictStr, Field(min_length=1, max_length=MAX_REQUEST_CHARS)]
    session_id: Identifier | None = None
    turn_id: Identifier | None = None
    timezone: Annotated[StrictStr, Field(min_length=1, max_length=64)] | None = None


class ChooseBody(StrictModel):
    item_ids: Annotated[list[ItemId], Field(min_length=1, max_length=MAX_CHOICES)]


@router.post("/forget-plans", status_code=status.HTTP_201_CREATED)
def plan(ledger: Ledger, body: PlanBody) -> dict[str, Any]:
    return ledger.plan_forget(
        body.text, session_id=body.session_id, turn_id=body.turn_id, timezone=body.timezone
    ).to_dict()


@router.get("/forget-plans/{plan_id}")
def get_plan(ledger: Ledger, plan_id: str) -> dict[str, Any]:
    return ledger.forget_plan(plan_id).to_dict()


@router.post("/forget-plans/{plan_id}/choose", status_code=status.HTTP_201_CREATED)
def choose(ledger: Ledger, plan_id: str, body: ChooseBody) -> dict[str, Any]:
    return ledger.choose_candidates(plan_id, [str(i) for i in body.item_ids]).to_dict()


@router.post("/forget-plans/{plan_id}/execute")
def execute(
    request: Request, ledger: Ledger, caller: Caller, plan_id: str, response: Response
) -> dict[str, Any]:
    planned = ledger.forget_plan(plan_id)
    if planned.intent in ("delete", "redact") and not caller.may_forget(ledger.namespace):
        raise Forbidden("this token may plan but not erase: it lacks the forget grant")
    outcome = ledger.execute_plan(plan_id)
    if outcome.request_id:
        response.headers["Location"] = f"/v1/forget-requests/{outcome.request_id}"
        response.status_code = answer_status(outcome.status)
    return outcome.to_dict()
