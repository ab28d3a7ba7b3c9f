"""The model protocol over HTTP (forgetting/planning/located.py): find where values are
said (reads only), and plan forgetting them everywhere. Planning destroys nothing, but
a plan from values is a deletion the caller means to carry out: it needs the forget
grant, as the plan's execution does. The namespace is the token's, never the body's."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, status
from pydantic import Field, StrictStr

from memory_ledger.http.auth import ForgettingLedger, Ledger
from memory_ledger.operations.shapes import (
    MAX_CHOSEN,
    MAX_DESCRIPTION_CHARS,
    MAX_REASON_CHARS,
    MAX_VALUE_CHARS,
    MAX_VALUES,
    Identifier,
    StrictModel,
)

router = APIRouter(prefix="/v1", tags=["forget plans"])

Value = Annotated[StrictStr, Field(min_length=1, max_length=MAX_VALUE_CHARS)]
Values = Annotated[tuple[Value, ...], Field(max_length=MAX_VALUES)]


class FindBody(StrictModel):
    """Values to look for, or a description to find the nearest memories of."""

    values: Values = ()
    description: (
        Annotated[StrictStr, Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS)] | None
    ) = None


class Chosen(StrictModel):
    description: Value
    item_id: Identifier


class ForgetBody(StrictModel):
    """Values to forget everywhere, places chosen for descriptions, what stays, why."""

    values: Values = ()
    chosen: Annotated[tuple[Chosen, ...], Field(max_length=MAX_CHOSEN)] = ()
    keeps: Values = ()
    reason: Annotated[StrictStr, Field(min_length=1, max_length=MAX_REASON_CHARS)] | None = None


@router.post("/information/find")
def find(ledger: Ledger, body: FindBody) -> dict[str, Any]:
    return ledger.find_information(list(body.values), description=body.description)


@router.post("/information/forget", status_code=status.HTTP_201_CREATED)
def forget(ledger: ForgettingLedger, body: ForgetBody) -> dict[str, Any]:
    return ledger.forget_information(
        list(body.values),
        chosen=[c.model_dump() for c in body.chosen],
        keeps=list(body.keeps),
        reason=body.reason,
    ).to_dict()
