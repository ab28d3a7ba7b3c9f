"""Documents signed with the ledger's key: a backup's manifest and a drill's report
(its JSON, and the markdown to attach to a ticket, which carries its signature on its
last line so that the file alone is checked as the JSON is).

The same Ed25519 key that signs the ledger's heads (memory_ledger/audit/heads.py)
signs them, so an ops team's evidence is checked as a compliance pack is: by the
standalone verifier (`python verifier.py --document FILE [--key-id ID]`), with only the
public key, which the document carries and whose id the ledger records. A signature
says the holder of the master key produced these exact bytes; it does not say the
backup's files are intact (the manifest's checksums and `backup verify` say that) or
that the drill's findings are true (the drill's checks do)."""

from __future__ import annotations

import json
from typing import Any

from memory_ledger.audit.heads import AuditKey
from memory_ledger.audit.verifier import (
    MARKDOWN_SIGNATURE,
    MARKDOWN_SIGNATURE_END,
    Malformed,
    check_document,
    document_message,
)
from memory_ledger.crypto import MasterKey


def signed(kind: str, document: dict[str, Any], master: MasterKey) -> dict[str, Any]:
    """`document` with its `signature` (kind, key id, public key, value) added."""
    key = AuditKey(master)
    body = {k: v for k, v in document.items() if k != "signature"}
    return {
        **body,
        "signature": {
            "kind": kind,
            "key_id": key.key_id,
            "public_key": key.public_key,
            "value": key.sign(document_message(kind, body)),
        },
    }


def signed_markdown(kind: str, text: str, master: MasterKey) -> str:
    """`text` (ending in a newline) and a blank line (so that every renderer reads the
    comment as a block of its own, hidden), then a last line that signs them: the
    document {"markdown": all above it} signed as `signed` signs any, its signature as
    one line of JSON in an HTML comment (`verifier.load_document` reads it back)."""
    text += "\n"
    signature = signed(kind, {"markdown": text}, master)["signature"]
    line = json.dumps(signature, sort_keys=True, separators=(",", ":"))
    return f"{text}{MARKDOWN_SIGNATURE}{line}{MARKDOWN_SIGNATURE_END}\n"


def signature_problems(document: Any, master: MasterKey) -> list[str]:
    """Why a signed document does not hold for this store's key (none if it does)."""
    try:
        found = check_document(document, AuditKey(master).key_id)
    except Malformed as exc:
        found = [("malformed", str(exc))]
    return [f"{reason}: {detail}" for reason, detail in found]
