"""Who is calling: the bearer token, resolved to its access, and the ledger an agent
token acts on. The namespace is the token's; a route never takes one from the caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from memory_ledger.access import Access
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.errors import Forbidden, Unauthenticated


def access(request: Request) -> Access:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthenticated("a valid bearer token is needed")
    return request.app.state.tokens.authenticate(token.strip())


Caller = Annotated[Access, Depends(access)]


def serving_service(request: Request) -> MemoryService:
    """The service this process serves now (a restore replaces it)."""
    return request.app.state.serving.service


Service = Annotated[MemoryService, Depends(serving_service)]


def agent_ledger(service: Service, caller: Caller) -> MemoryLedger:
    """The ledger of an agent token's principal; other roles read no memory content."""
    if caller.role != "agent":
        raise Forbidden(f"a {caller.role} token reads no memory content; use an agent token")
    return service.for_principal(caller.principal())


Ledger = Annotated[MemoryLedger, Depends(agent_ledger)]


def forgetting_ledger(service: Service, caller: Caller) -> MemoryLedger:
    """An agent ledger that may also erase: forget is a grant of its own."""
    ledger = agent_ledger(service, caller)
    if not caller.may_forget(ledger.namespace):
        raise Forbidden("this token may read and write but not erase: it lacks the forget grant")
    return ledger


ForgettingLedger = Annotated[MemoryLedger, Depends(forgetting_ledger)]
