"""Memories: remember (one, a batch, or a turn as plain text), read one, its history,
update, stop and resume using it, the context for a turn, and the profile summary.
Agent tokens only.

The routes answer with `JSONBytes` (memory_ledger/http/encoding.py): encoded once, in
the worker thread, not validated again against `dict[str, Any]` on another hop. The two
an agent calls every turn, remember and context, hop to a worker thread themselves
(memory_ledger/http/threads.py), which costs less than FastAPI's way."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, status
from pydantic import Discriminator, StrictStr, Tag

from memory_ledger.errors import InvalidWrite
from memory_ledger.http.auth import Ledger
from memory_ledger.http.encoding import JSONBytes, fields
from memory_ledger.http.threads import in_thread
from memory_ledger.operations.shapes import (
    ContextRequest,
    Identifier,
    MemoryUpdate,
    MemoryWrite,
    Origin,
    Sensitivity,
    StrictModel,
)

router = APIRouter(prefix="/v1", tags=["memories"])
MAX_BATCH = 500
MAX_PAGE = 500


class TextTurn(StrictModel):
    """A conversation turn as plain text (`MemoryLedger.add`): the service fills in the
    rest. `origin` is required; the writer defaults to the token's user, the time is
    the service's, and a session (and turn) id is generated when none is given and
    returned. Validated by the same write boundary as the full form."""

    text: StrictStr
    origin: Origin
    session_id: Identifier | None = None
    turn_id: Identifier | None = None
    role: Identifier = "user"
    sensitivity: Sensitivity = "personal"
    category: Identifier = "general"
    writer: Identifier | None = None


def _form(body: Any) -> str:
    """Which form a body is: an array is a batch; an object with `text` and no `kind`
    is a text turn; anything else is the full form (and is refused as it). Only that
    form's problems are reported. The tags hold `[`: the problem list leaves them out."""
    if isinstance(body, list):
        return "list[MemoryWrite]"
    if isinstance(body, dict) and "text" in body and "kind" not in body:
        return "[TextTurn]"
    return "[MemoryWrite]"


RememberBody = Annotated[
    Annotated[MemoryWrite, Tag("[MemoryWrite]")]
    | Annotated[TextTurn, Tag("[TextTurn]")]
    | Annotated[list[MemoryWrite], Tag("list[MemoryWrite]")],
    Discriminator(_form),
]


@router.post("/memories", status_code=status.HTTP_201_CREATED)
async def remember(ledger: Ledger, body: Annotated[RememberBody, Body()]) -> JSONBytes:
    """Store one memory, or a batch (a JSON array, at most 500) in one transaction, or a
    conversation turn as plain text (`{"text", "origin", "session_id"?}`), which answers
    with the `session_id` and `turn_id` it was recorded under as well."""
    if isinstance(body, TextTurn):
        turn = body.model_dump(exclude_none=True)
        text = turn.pop("text")

        def added() -> JSONBytes:
            done = ledger.add(text, **turn)
            memory = {
                "item_id": done.item_id,
                "version": done.version,
                "kind": done.kind,
                "position": done.position,
                "cardinality": None,
                "replaces": [],
            }
            answer = {
                "memories": [memory],
                "session_id": done.session_id,
                "turn_id": done.turn_id,
                "writer": done.writer,
                "written_at": done.written_at,
            }
            return JSONBytes(answer, status.HTTP_201_CREATED)

        return await in_thread(added)
    writes = body if isinstance(body, list) else [body]
    if not 1 <= len(writes) <= MAX_BATCH:
        raise InvalidWrite(f"a batch holds 1 to {MAX_BATCH} memories", ["body: size"])

    def stored() -> JSONBytes:
        return JSONBytes({"memories": ledger.remember_many(writes)}, status.HTTP_201_CREATED)

    return await in_thread(stored)


@router.get("/memories")
def list_memories(
    ledger: Ledger,
    subject: Annotated[str | None, Query(max_length=200)] = None,
    predicate: Annotated[str | None, Query(max_length=200)] = None,
    kind: Annotated[Literal["fact", "preference", "turn"] | None, Query()] = None,
    category: Annotated[str | None, Query(max_length=200)] = None,
    include_archived: bool = False,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: Annotated[str | None, Query(max_length=20)] = None,
) -> JSONBytes:
    """Recall: the live memories of the token's namespace, newest written first, a page
    at a time (follow `next_cursor`; a changed memory is seen by starting again)."""
    page = ledger.recall_page(
        subject, predicate, kind, category, limit, include_archived, cursor=cursor
    )
    return JSONBytes(page.to_dict())


@router.get("/memories/{item_id}")
def get(ledger: Ledger, item_id: str) -> JSONBytes:
    """One item read from the log: its text, or `erased`."""
    return JSONBytes(ledger.get(item_id).to_dict())


@router.get("/memories/{item_id}/history")
def history(ledger: Ledger, item_id: str) -> JSONBytes:
    return JSONBytes({"versions": [m.to_dict() for m in ledger.history(item_id)]})


@router.patch("/memories/{item_id}")
def update(ledger: Ledger, item_id: str, body: MemoryUpdate) -> JSONBytes:
    """A new version of the value; the previous one stays as history."""
    return JSONBytes({"item_id": item_id, "version": ledger.update(item_id, body)})


@router.post("/memories/{item_id}/suppress")
def suppress(ledger: Ledger, item_id: str) -> JSONBytes:
    """Stop using: kept, but never recalled or derived from."""
    return JSONBytes({"item_id": item_id, "version": ledger.suppress(item_id)})


@router.post("/memories/{item_id}/unsuppress")
def unsuppress(ledger: Ledger, item_id: str) -> JSONBytes:
    return JSONBytes({"item_id": item_id, "version": ledger.unsuppress(item_id)})


@router.post("/context")
async def context(ledger: Ledger, body: ContextRequest) -> JSONBytes:
    """What to show the model for one turn: ranked items with labels and provenance."""
    options = body.model_dump(exclude_unset=True)

    def found() -> JSONBytes:
        context = ledger.context(options.pop("query"), **options)
        return JSONBytes({**fields(context), "rendered": context.render()})  # its to_dict

    return await in_thread(found)


@router.get("/summary")
def summary(ledger: Ledger) -> JSONBytes:
    found = ledger.summary()
    return JSONBytes({"summary": found.to_dict() if found is not None else None})


@router.get("/export")
def export(ledger: Ledger) -> dict[str, Any]:
    """Everything held about the token's person (data subject access), versioned JSON."""
    return ledger.export()  # rare, and its values are many kinds: FastAPI's own encoder
