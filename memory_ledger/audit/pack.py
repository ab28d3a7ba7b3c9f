"""An evidence pack: one request's ledger entries, exactly as the ledger holds them (ids,
codes, counts; never memory content), each with its inclusion proof against a signed
head included in the pack, the public key, and the ledger's signed statement that these
are all of the request's entries in that tree. memory_ledger/audit/verifier.py checks
it with nothing else installed."""

from __future__ import annotations

from typing import Any

from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.merkle import leaf_hash
from memory_ledger.audit.verifier import PACK_FORMAT, chain_hash
from memory_ledger.errors import IntegrityError, NotFound
from memory_ledger.identifiers import is_identifier


def build_pack(auditor: Auditor, request_id: str, since: list[int] | None = None) -> dict[str, Any]:
    """The pack of `request_id` at the ledger's head now. `since`: earlier tree sizes (of
    heads an auditor kept) to include consistency proofs from.

    NotFound when the ledger has no such id; IntegrityError when a stored entry does not
    hash to its stored chain hash (the pack would not verify: run `audit verify`)."""
    entries = auditor.ledger.entries(request_id) if is_identifier(request_id) else []
    if not entries:
        raise NotFound(f"no request {request_id} in the lifecycle ledger")
    head = auditor.head()
    tree = auditor.tree()
    listed = []
    for e in entries:
        recomputed = chain_hash(
            e.prev_hash, e.seq, e.request_id, e.entry_type.value, e.recorded_at, e.payload_json
        )
        if recomputed != e.entry_hash or tree.levels[0][e.seq - 1] != leaf_hash(
            bytes.fromhex(e.entry_hash)
        ):
            raise IntegrityError(
                f"ledger entry {e.seq} does not hash to its stored hash: the ledger was "
                "altered; run `memory-ledger audit verify`. No pack was made"
            )
        listed.append(
            {
                "seq": e.seq,
                "leaf_index": e.seq - 1,
                "request_id": e.request_id,
                "entry_type": e.entry_type.value,
                "recorded_at": e.recorded_at,
                "payload": e.payload_json,
                "prev_hash": e.prev_hash,
                "entry_hash": e.entry_hash,
                "inclusion_proof": [p.hex() for p in tree.inclusion_proof(e.seq - 1, head.size)],
            }
        )
    seqs = [e.seq for e in entries]
    consistency = []
    for size in sorted(set(since or ())):
        if not 0 <= size <= head.size:
            raise NotFound(f"the ledger has no tree of size {size} (its size is {head.size})")
        proof = tree.consistency_proof(size, head.size)
        consistency.append({"from_size": size, "proof": [p.hex() for p in proof]})
    return {
        "format": PACK_FORMAT,
        "request_id": request_id,
        "head": head.to_dict(),
        "public_key": auditor.key.public_key,
        "statement": {
            "request_id": request_id,
            "size": head.size,
            "root": head.root,
            "seqs": seqs,
        },
        "statement_signature": auditor.statement(request_id, head, seqs),
        "entries": listed,
        "consistency": consistency,
    }
