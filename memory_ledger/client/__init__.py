"""A typed Python client for the memory-ledger HTTP service (`memory-ledger serve`).

    from memory_ledger.client import MemoryLedgerClient

    with MemoryLedgerClient("http://127.0.0.1:8765", token) as memory:
        added = memory.add("I moved to Hangzhou.", origin="explicit")
        memory.add("Noted.", origin="observed", role="assistant", session_id=added.session_id)
        print(memory.context("where does the user live").rendered)

`AsyncMemoryLedgerClient` has the same methods for asyncio. Results are dataclasses
(memory_ledger.client.models); errors are `ClientError`s (memory_ledger.client.errors).
The client needs httpx and the standard library only: it does not import the service.
"""

from memory_ledger.client._async import AsyncMemoryLedgerClient
from memory_ledger.client._sync import MemoryLedgerClient
from memory_ledger.client.errors import (
    ClientError,
    Conflict,
    CursorGone,
    Forbidden,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    Unauthenticated,
)
from memory_ledger.client.models import (
    Added,
    Context,
    ContextItem,
    ForgetPlan,
    FoundInformation,
    FoundValue,
    ItemState,
    Memory,
    MemoryPage,
    Notice,
    PlanOutcome,
    Receipt,
    Remembered,
    RequestPage,
    RequestReport,
    RequestSummary,
    Summary,
)

__all__ = [
    "Added",
    "AsyncMemoryLedgerClient",
    "ClientError",
    "Conflict",
    "Context",
    "ContextItem",
    "CursorGone",
    "Forbidden",
    "ForgetPlan",
    "FoundInformation",
    "FoundValue",
    "InvalidRequest",
    "ItemState",
    "Memory",
    "MemoryLedgerClient",
    "MemoryPage",
    "NotFound",
    "Notice",
    "PayloadTooLarge",
    "PlanOutcome",
    "RateLimited",
    "Receipt",
    "Remembered",
    "RequestPage",
    "RequestReport",
    "RequestSummary",
    "ServerError",
    "ServiceUnavailable",
    "Summary",
    "Unauthenticated",
]
