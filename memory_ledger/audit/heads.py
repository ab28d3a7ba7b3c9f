"""Signed tree heads of the lifecycle ledger, and the key that signs them.

The key is Ed25519, derived from the master key (HKDF-SHA256, label
`memory-ledger/audit-signing-key/v1`): nothing more to keep, back up or lose beside the
master key, never written to disk, and rotated with it. Its id (the first 32 hex digits
of SHA-256 of the public key) is recorded in the ledger (`audit_key` entry) the first
time a head is signed with it, and again whenever the key changes.

The tree (memory_ledger/audit/merkle.py) is built from the ledger's chain hashes and kept
per open ledger: a later head reads only the entries appended since."""

from __future__ import annotations

import base64
import threading
import weakref
from dataclasses import asdict, dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from memory_ledger.audit.merkle import MerkleTree, leaf_hash
from memory_ledger.audit.verifier import (
    check_head,
    head_message,
    key_id,
    read_head,
    statement_message,
    verify_consistency,
)
from memory_ledger.crypto import MasterKey
from memory_ledger.errors import IntegrityError, InvalidWrite
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.times import canonical_time, now

SIGNING_LABEL = b"memory-ledger/audit-signing-key/v1"


class AuditKey:
    """The ledger's signing key, derived from the master key."""

    def __init__(self, master: MasterKey) -> None:
        self._private = Ed25519PrivateKey.from_private_bytes(master.subkey(SIGNING_LABEL))
        self.public_bytes = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.key_id = key_id(self.public_bytes)

    @property
    def public_key(self) -> str:
        """Base64 of the 32 raw bytes of the public key."""
        return base64.b64encode(self.public_bytes).decode("ascii")

    def sign(self, message: bytes) -> str:
        return base64.b64encode(self._private.sign(message)).decode("ascii")


@dataclass(frozen=True)
class SignedHead:
    """The tree of the ledger's first `size` entries: its root, when it was signed, by
    which key, and the signature over `verifier.head_message`."""

    size: int
    root: str
    time: str
    key_id: str
    signature: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_trees: weakref.WeakKeyDictionary[LifecycleLedger, MerkleTree] = weakref.WeakKeyDictionary()
_trees_lock = threading.Lock()


def ledger_tree(ledger: LifecycleLedger) -> MerkleTree:
    """The ledger's tree as of now: the one kept for this open ledger, extended by the
    entries appended since it was last read (only their chain hashes are read)."""
    with _trees_lock:
        tree = _trees.setdefault(ledger, MerkleTree())
        size = tree.size
        added = ledger.chain_hashes(after=max(size - 1, 0))
        if size:  # the last leaf kept must still be the ledger's: read again, compared
            if not added or added[0][0] != size or _leaf(added[0][1]) != tree.levels[0][-1]:
                raise IntegrityError(
                    f"ledger entry {size} is not the one this process read before: the "
                    "ledger was altered; run `memory-ledger audit verify`"
                )
            added = added[1:]
        for offset, (seq, _) in enumerate(added):
            if seq != tree.size + offset + 1:
                raise IntegrityError(
                    f"the ledger's seqs skip at {tree.size + offset + 1}: the ledger was "
                    "altered; run `memory-ledger audit verify`"
                )
        tree.extend(_leaf(digest) for _, digest in added)
        return tree


def _leaf(entry_hash: str) -> bytes:
    return leaf_hash(bytes.fromhex(entry_hash))


class Auditor:
    """Heads, proofs and packs of one ledger, signed with the key of one master key."""

    def __init__(self, ledger: LifecycleLedger, master: MasterKey) -> None:
        self.ledger = ledger
        self.key = AuditKey(master)

    def record_key(self, by: str = "memory-ledger") -> bool:
        """Record this key in the ledger unless it is the key recorded last. True when
        an entry was appended."""
        for _ in range(3):  # another process may record it at the same moment
            recorded = self.ledger.entries_of_type(EntryType.AUDIT_KEY)
            last = recorded[-1].payload["key_id"] if recorded else None
            if last == self.key.key_id:
                return False
            payload: dict[str, Any] = {
                "key_id": self.key.key_id,
                "algorithm": "ed25519",
                "source": "master_key",
                "recorded_by": by,
            }
            if last is not None:
                payload["replaces"] = last
            try:
                self.ledger.append(f"audit-key-{len(recorded) + 1}", EntryType.AUDIT_KEY, payload)
            except InvalidWrite:
                continue
            return True
        return False

    def tree(self) -> MerkleTree:
        return ledger_tree(self.ledger)

    def head(self, size: int | None = None) -> SignedHead:
        """A signed head of the tree at `size` (default: the whole ledger, after the key
        is recorded in it). IntegrityError when the ledger's hash chain does not verify:
        a signature over a chain `audit verify` calls broken would vouch for it."""
        self.require_intact()
        self.record_key()
        tree = self.tree()
        size = tree.size if size is None else size
        root = tree.root(size).hex()
        at = canonical_time(now())
        signature = self.key.sign(head_message(size, root, at, self.key.key_id))
        return SignedHead(size, root, at, self.key.key_id, signature)

    def require_intact(self) -> None:
        """The whole hash chain verified now (what `audit verify` checks), or
        IntegrityError naming where it breaks. Nothing is signed over a broken chain."""
        audit = self.ledger.verify()
        if not audit.ok:
            raise IntegrityError(
                f"the ledger's hash chain does not verify ({audit.explanation}): nothing "
                "was signed; run `memory-ledger audit verify`",
                code="ledger_chain_broken",
            )

    def extends(self, old: dict[str, Any], size: int) -> tuple[list[tuple[str, str]], list[bytes]]:
        """Why the ledger's tree of `size` entries does not extend the kept head `old`
        (fields as `verifier.read_head` gives them), and the consistency proof: no
        problems when it does. A kept head signed by this key must also verify."""
        problems: list[tuple[str, str]] = []
        if old["key_id"] == self.key.key_id:
            problems += check_head(old, self.key.public_bytes)
        if old["size"] > size:
            problems.append(("truncated", f"the kept head has {old['size']} entries, the "
                             f"ledger {size}: newest entries were removed"))  # fmt: skip
            return problems, []
        tree = self.tree()
        proof = tree.consistency_proof(old["size"], size)
        if not verify_consistency(
            old["size"], size, bytes.fromhex(old["root"]), tree.root(size), proof
        ):
            why = f"the tree of size {old['size']} is not a prefix of the ledger's tree now"
            problems.append(("consistency_failed", why + ": the ledger was rewritten"))
        return problems, proof

    def consistency(self, kept: Any) -> dict[str, Any]:
        """Whether the ledger's tree now extends a head kept earlier (its dict, as
        `audit head --json` printed it): a new signed head, the proof, and the verdict.
        A kept head that is not a head at all is refused (InvalidWrite)."""
        from memory_ledger.audit.verifier import Malformed

        try:
            old = read_head(kept, "kept head")
        except Malformed as exc:
            raise InvalidWrite(f"not a signed head: {exc}") from None
        head = self.head()
        problems, proof = self.extends(old, head.size)
        return {
            "ok": not problems,
            "failures": [{"reason": r, "detail": d} for r, d in problems],
            "kept": old,
            "head": head.to_dict(),
            "public_key": self.key.public_key,
            "from_size": old["size"],
            "proof": [p.hex() for p in proof],
            "key_checked": old["key_id"] == self.key.key_id,
        }

    def statement(self, request_id: str, head: SignedHead, seqs: list[int]) -> str:
        return self.key.sign(statement_message(request_id, head.size, head.root, seqs))
