"""Evidence an auditor checks alone, over HTTP (memory_ledger/audit): a signed head of
the lifecycle ledger's Merkle tree, for any token (it shows the ledger's size and a
root, nothing else), a consistency proof from an earlier size, and a request's evidence
pack, for a compliance token whose subtree holds the request."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from memory_ledger.errors import Forbidden, NotFound
from memory_ledger.http.auth import Caller, Ops
from memory_ledger.operations import EntryType

router = APIRouter(prefix="/v1/audit", tags=["audit"])

Size = Annotated[int, Field(ge=0, le=10**15)]
Sizes = Annotated[list[Size] | None, Query(max_length=16)]


@router.get("/head")
def head(ops: Ops, caller: Caller) -> dict[str, Any]:
    """The ledger's tree head now, signed, with the public key that checks it: keep it,
    and later ask for a consistency proof from its size."""
    auditor = ops.auditor()
    return {**auditor.head().to_dict(), "public_key": auditor.key.public_key}


@router.get("/consistency")
def consistency(
    ops: Ops, caller: Caller, from_size: Annotated[int, Query(alias="from", ge=0)]
) -> dict[str, Any]:
    """A signed head now and the proof that the tree of `from` entries is its prefix."""
    auditor = ops.auditor()
    now = auditor.head()
    if from_size > now.size:
        raise NotFound(f"the ledger has no tree of size {from_size} (its size is {now.size})")
    proof = auditor.tree().consistency_proof(from_size, now.size)
    return {
        "head": now.to_dict(),
        "public_key": auditor.key.public_key,
        "from_size": from_size,
        "proof": [p.hex() for p in proof],
    }


@router.get("/requests/{request_id}/pack")
def pack(ops: Ops, caller: Caller, request_id: str, since: Sizes = None) -> dict[str, Any]:
    """A request's evidence pack (memory_ledger/audit/verifier.py checks it offline);
    `?since=SIZE` adds a consistency proof from a head the auditor kept."""
    if caller.role != "compliance":
        raise Forbidden("evidence packs are made for compliance tokens")
    entries = ops.entries(request_id)
    first = entries[0] if entries else None
    namespace = first.payload.get("namespace") if first else None
    if (
        first is None
        or first.entry_type is not EntryType.REQUEST
        or not (isinstance(namespace, str) and caller.covers(namespace))
    ):
        raise NotFound(f"no forget request {request_id}")  # another subtree's: not found
    return ops.evidence_pack(request_id, since)
