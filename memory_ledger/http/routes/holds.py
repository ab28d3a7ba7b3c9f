"""Legal holds over HTTP, for compliance tokens: list, place and lift the holds of the
token's subtree. A hold stops every erasure in its scope (forget requests wait as
`blocked`) until it is lifted; lifting one runs the requests it alone blocked.

A hold's name is unique within the subtree it is placed in (memory_ledger/forgetting/
holds.py), so no answer here depends on holds outside the token's subtree: placing a
name in use in another subtree succeeds, and lifting a name resolves among the token's
own holds (`?namespace=` picks one when the token has several of that name)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, status
from pydantic import Field, StrictStr

from memory_ledger.access import Access
from memory_ledger.errors import Forbidden, NotFound
from memory_ledger.http.auth import Caller, Ops
from memory_ledger.operations.shapes import Identifier, StrictModel

router = APIRouter(prefix="/v1", tags=["holds"])


async def _compliance(caller: Caller) -> Access:
    if caller.role != "compliance":
        raise Forbidden("legal holds are placed and lifted with a compliance token")
    return caller


Officer = Annotated[Access, Depends(_compliance)]


class HoldBody(StrictModel):
    """A hold over a namespace (tenant/user) or a whole tenant inside the token's
    subtree, optionally narrowed to one category or predicate; the reason is a code
    (a case number), never a description of the person."""

    name: Identifier
    namespace: Annotated[StrictStr, Field(max_length=200)]
    reason: Identifier
    category: Identifier | None = None
    predicate: Identifier | None = None


@router.get("/holds")
def list_holds(ops: Ops, caller: Officer) -> dict[str, Any]:
    """The holds in force inside the token's subtree."""
    return {"holds": [h.to_dict() for h in ops.holds() if caller.covers(h.namespace)]}


@router.post("/holds", status_code=status.HTTP_201_CREATED)
def place_hold(ops: Ops, caller: Officer, body: HoldBody) -> dict[str, Any]:
    if not caller.covers(body.namespace):
        raise Forbidden("a hold can be placed inside the token's subtree only")
    hold = ops.place_hold(
        body.name,
        namespace=body.namespace,
        reason=body.reason,
        placed_by=f"token:{caller.token_id}",
        category=body.category,
        predicate=body.predicate,
    )
    return hold.to_dict()


@router.delete("/holds/{name}")
def lift_hold(
    ops: Ops,
    caller: Officer,
    name: Annotated[str, Path(max_length=200)],
    namespace: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    """Lift a hold of the token's subtree; the requests it blocked (and no other hold
    does) run now. `namespace` names where it was placed, if the token has holds of
    that name in several namespaces."""
    if namespace is not None and not caller.covers(namespace):
        raise Forbidden("a hold can be lifted inside the token's subtree only")
    try:
        hold = ops.find_hold(name, namespace=namespace, within=caller.covers)
        by = f"token:{caller.token_id}"
        resumed = ops.lift_hold(name, lifted_by=by, namespace=hold.namespace)
    except NotFound:
        where = f" at {namespace}" if namespace is not None else ""
        raise NotFound(f"no hold named {name} is in force{where} in this token's subtree") from None
    return {
        "lifted": name,
        "namespace": hold.namespace,
        "resumed": [{"request_id": r.request_id, "status": r.status} for r in resumed],
    }
