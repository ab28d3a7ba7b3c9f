"""Who is calling: the bearer token, resolved to its access, and the ledger an agent
token acts on. The namespace is the token's; a route never takes one from the caller.

The dependencies are `async def` although they do no I/O of their own but a token
lookup (in memory once verified: memory_ledger/access/tokens.py): FastAPI runs a plain
`def` dependency in its thread pool, and three such hops per request, each a task, a
queue and a wake-up, cost more than the work they carried."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from memory_ledger.access import Access, TokenStore
from memory_ledger.api import MemoryLedger
from memory_ledger.errors import Forbidden, Unauthenticated
from memory_ledger.http.serving import Serving
from memory_ledger.operations import Operations


def bearer(tokens: TokenStore, authorization: str | None) -> Access:
    """The access of an `Authorization: Bearer <token>` header; `Unauthenticated` for a
    missing, malformed, unknown, expired or revoked token alike. The one check of a
    bearer token: the routes' dependency below, and the body limit (which authenticates
    before it reads a body: memory_ledger/http/limits.py)."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("a valid bearer token is needed")
    return tokens.authenticate(token.strip())


#: Where the body limit leaves the access it authenticated (request.state).
ACCESS_STATE = "access"


async def access(request: Request) -> Access:
    """The access the body limit found, or the bearer header's (a request without a body)."""
    found = getattr(request.state, ACCESS_STATE, None)
    if isinstance(found, Access):
        return found
    return bearer(request.app.state.tokens, request.headers.get("authorization"))


Caller = Annotated[Access, Depends(access)]


def serving_of(request: Request) -> Serving:
    """What this process serves (memory_ledger/http/serving.py)."""
    serving: Serving = request.app.state.serving
    return serving


async def serving_operations(request: Request) -> Operations:
    """The store-wide operations of the store this process serves now (a restore
    replaces the store, and with it these)."""
    return serving_of(request).operations


Ops = Annotated[Operations, Depends(serving_operations)]


async def agent_ledger(request: Request, caller: Caller) -> MemoryLedger:
    """The ledger of an agent token's principal; other roles read no memory content."""
    return _agent_ledger(serving_of(request), caller)


def _agent_ledger(serving: Serving, caller: Access) -> MemoryLedger:
    if caller.role != "agent":
        raise Forbidden(
            f"a token of role {caller.role} reads no memory content; use an agent token"
        )
    return serving.ledger_for(caller.principal())


Ledger = Annotated[MemoryLedger, Depends(agent_ledger)]


async def forgetting_ledger(request: Request, caller: Caller) -> MemoryLedger:
    """An agent ledger that may also erase: forget is a grant of its own."""
    ledger = _agent_ledger(serving_of(request), caller)
    if not caller.may_forget(ledger.namespace):
        raise Forbidden("this token may read and write but not erase: it lacks the forget grant")
    return ledger


ForgettingLedger = Annotated[MemoryLedger, Depends(forgetting_ledger)]
