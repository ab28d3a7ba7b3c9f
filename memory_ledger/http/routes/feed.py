"""The change feed as server-sent events. The cursor is the event id: a client that
reconnects sends `Last-Event-ID` and resumes after it. A stream ends after `wait`
seconds without a notice (clients reconnect); an unknown or restored-over cursor is a
410 that says how to resynchronise. Notices of the token's subtree only, never content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from memory_ledger.errors import Forbidden
from memory_ledger.http.auth import Caller, Ops
from memory_ledger.operations import Notice

router = APIRouter(prefix="/v1", tags=["feed"])


@router.get("/feed", response_class=StreamingResponse)
def feed(
    ops: Ops,
    caller: Caller,
    last_event_id: Annotated[str | None, Header()] = None,
    after: Annotated[str | None, Query(max_length=200)] = None,
    wait: Annotated[float, Query(ge=0.1, le=60)] = 25.0,
) -> StreamingResponse:
    if caller.role == "ops":
        raise Forbidden("the change feed is for agent and compliance tokens")
    changes = ops.feed
    cursor = last_event_id or after
    changes.read(cursor, limit=1)  # an unknown cursor is refused before the stream starts

    def events() -> Iterator[str]:
        yield ": memory-ledger change feed\n\n"
        for notice in changes.subscribe(cursor, timeout=wait):
            if notice.namespace is not None and not caller.covers(notice.namespace):
                continue
            yield _event(notice)

    return StreamingResponse(events(), media_type="text/event-stream")


def _event(notice: Notice) -> str:
    data = {k: v for k, v in notice.to_dict().items() if k != "content" and v is not None}
    return f"id: {notice.cursor}\nevent: {notice.type}\ndata: {json.dumps(data)}\n\n"
