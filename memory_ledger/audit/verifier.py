"""Check a memory-ledger evidence pack with nothing but this file.

    python verifier.py pack.json [--head kept-head.json] [--key-id HEX] [--json]

This file imports only the Python standard library and the `cryptography` package
(for Ed25519): copy it to a machine that has never seen memory-ledger and run it there.
Exit 0: every check passed. Exit 9: the evidence does not hold (each failure is named).
Exit 2: the files could not be read.

What a pack holds (all of it produced by `memory-ledger audit pack`):

- `head`: a signed tree head {size, root, time, key_id, signature}: the ledger's Merkle
  tree (RFC 9162 §2.1) over its first `size` entries, signed with the ledger's Ed25519
  key. The signed bytes are `head_message` below.
- `public_key`: that key, base64 of its 32 raw bytes. `key_id` is the first 32 hex
  digits of SHA-256 of those bytes.
- `entries`: every ledger entry of one request, as the ledger holds them (ids, codes,
  counts; never memory content), each with its leaf index and an inclusion proof.
- `statement` + `statement_signature`: the ledger's signed word that these seqs, in this
  order, are all of the request's entries in the tree of that head: an entry removed,
  added or moved is caught against it.
- `consistency` (optional): proofs that the tree of an earlier size, which an auditor
  may have kept as a head, is a prefix of this head's tree.

The checks, in order: the key id is the public key's; the head's signature; the kept
head's key and, when it is the same key, its signature (with `--head`); the expected key
id (with `--key-id`); the statement's signature and that the entries are exactly the
ones it lists; for each entry, that its fields produce its chain hash (so any changed
byte fails), that its leaf index is its seq - 1 and that its inclusion proof leads from
its leaf to the head's root; and, with `--head`, that the kept head is the same tree
(same size) or a prefix of it (a consistency proof in the pack).

The leaf of an entry is its chain hash (32 bytes): SHA-256 of the previous entry's hash,
its seq, request id, type, time and payload, joined by newlines. The tree is built over
the leaves in ledger order: leaf hash = SHA-256(0x00 || leaf), node hash =
SHA-256(0x01 || left || right), as in RFC 9162 (Certificate Transparency 2.0).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import re
import sys
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PACK_FORMAT = "memory-ledger-evidence-pack/1"
HEAD_CONTEXT = b"memory-ledger tree head v1\n"
STATEMENT_CONTEXT = b"memory-ledger evidence statement v1\n"
EXIT_FAILED = 9
EXIT_UNREADABLE = 2

#: Every reason a check can fail, and what it means. The `reason` of each failure.
REASONS = {
    "malformed": "the file is not an evidence pack or head of the expected shape",
    "key_id_mismatch": "the key id is not the fingerprint of the public key given",
    "unexpected_key": "the head is signed by another key than the one expected",
    "bad_signature": "the head's signature does not verify with the public key",
    "bad_statement_signature": "the statement's signature does not verify with the public key",
    "statement_mismatch": "the statement is not about this head or this request",
    "entries_mismatch": "the entries are not exactly those the statement lists, in its "
    "order: an entry was removed, added or moved",
    "wrong_request": "an entry belongs to another request",
    "chain_hash_mismatch": "an entry's fields do not produce its chain hash: the entry was edited",
    "leaf_index_mismatch": "an entry's leaf index is not its seq - 1",
    "inclusion_failed": "an inclusion proof does not lead from the entry to the head's root",
    "head_mismatch": "the kept head has the same size but another root: the ledger was rewritten",
    "consistency_missing": "the pack holds no consistency proof from the kept head's size",
    "consistency_failed": "the consistency proof does not show the kept head's tree is a "
    "prefix of this one: the ledger was rewritten",
    "bad_document_signature": "a signed document (backup manifest, drill report) is not "
    "what its key signed: a byte was changed, or the key id is not the key's",
}


# -- hashing (RFC 9162 §2.1.1) ---------------------------------------------------------


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def leaf_hash(leaf: bytes) -> bytes:
    return sha256(b"\x00" + leaf)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


EMPTY_ROOT = sha256(b"")  # the hash of a tree with no leaves


def chain_hash(
    prev_hash: str, seq: int, request_id: str, entry_type: str, recorded_at: str, payload: str
) -> str:
    """An entry's hash in the ledger's chain, in hex: also the bytes of its leaf."""
    text = "\n".join((prev_hash, str(seq), request_id, entry_type, recorded_at, payload))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_leaf(entry: dict[str, Any]) -> bytes:
    """The leaf hash of an entry as given: recomputed from its fields, never taken on trust."""
    digest = chain_hash(
        entry["prev_hash"],
        entry["seq"],
        entry["request_id"],
        entry["entry_type"],
        entry["recorded_at"],
        entry["payload"],
    )
    return leaf_hash(bytes.fromhex(digest))


# -- proofs (RFC 9162 §2.1.3.2 and §2.1.4.2) -------------------------------------------


def verify_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    """Whether `proof` shows the leaf hash `leaf` at `index` in the tree (`size`, `root`)."""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: list[bytes]
) -> bool:
    """Whether `proof` shows the tree (`first`, `first_root`) is a prefix of the tree
    (`second`, `second_root`). The empty tree is a prefix of every tree."""
    if not 0 <= first <= second:
        return False
    if first == second:
        return not proof and first_root == second_root
    if first == 0:
        return not proof and first_root == EMPTY_ROOT
    if not proof:
        return False
    path = list(proof)
    if first & (first - 1) == 0:  # a power of two: its root is a node of the proof
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == first_root and sr == second_root


# -- signatures ------------------------------------------------------------------------


def key_id(public_key: bytes) -> str:
    return hashlib.sha256(public_key).hexdigest()[:32]


def head_message(size: int, root: str, time: str, key: str) -> bytes:
    """The bytes a tree head's signature covers."""
    return HEAD_CONTEXT + f"{size}\n{root}\n{time}\n{key}".encode("ascii")


def statement_message(request_id: str, size: int, root: str, seqs: list[int]) -> bytes:
    """The bytes a pack statement's signature covers."""
    listed = ",".join(str(s) for s in seqs)
    return STATEMENT_CONTEXT + f"{request_id}\n{size}\n{root}\n{listed}".encode("ascii")


def signature_holds(public_key: bytes, signature: str, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(
            base64.b64decode(signature, validate=True), message
        )
    except (InvalidSignature, ValueError, binascii.Error):
        return False
    return True


DOCUMENT_CONTEXT = b"memory-ledger signed document v1\n"


def document_message(kind: str, document: dict[str, Any]) -> bytes:
    """What a signed document's signature covers: its kind and every field but
    `signature`, as canonical JSON (sorted keys, no spaces, ASCII)."""
    body = {k: v for k, v in document.items() if k != "signature"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return DOCUMENT_CONTEXT + kind.encode("ascii") + b"\n" + canonical.encode("ascii")


#: Where a signed markdown file (a drill's report, to attach to a ticket) carries its
#: signature: its last line, an HTML comment that renderers do not show. The signed
#: document is {"markdown": every character before that line}.
MARKDOWN_SIGNATURE = "<!-- memory-ledger signature "
MARKDOWN_SIGNATURE_END = " -->"


def load_document(text: str) -> Any:
    """A signed document from a file's text: JSON (a manifest, a drill's JSON report),
    or a signed markdown file, read as the document its last line signs. ValueError
    when it is JSON nested too deeply to be read (unreadable, as for `load_json`)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to be read") from None
    except ValueError:
        pass
    body, found, trailer = text.rpartition(MARKDOWN_SIGNATURE)
    trailer = trailer.rstrip()
    if not found or not trailer.endswith(MARKDOWN_SIGNATURE_END):
        raise Malformed("the file is neither JSON nor markdown ending in its signature")
    try:
        signature = json.loads(trailer[: -len(MARKDOWN_SIGNATURE_END)])
    except ValueError as exc:
        raise Malformed(f"the markdown's signature line is not JSON: {exc}") from None
    return {"markdown": body, "signature": signature}


def check_document(document: Any, expected_key_id: str | None = None) -> list[tuple[str, str]]:
    """A signed document (a backup manifest, a drill report): its signature holds for
    its own public key, and that key is the one expected when the caller knows it.
    Raises Malformed when the document is not of the expected shape."""
    signature = _field(document, "signature", dict, "document")
    kind = _field(signature, "kind", str, "signature")
    if not kind.isascii():
        raise Malformed("signature.kind: not ASCII")
    public_key = _public_key(signature, "signature")
    value = _field(signature, "value", str, "signature")
    try:
        message = document_message(kind, document)
    except (RecursionError, ValueError):  # nested deeper than JSON can be written again
        raise Malformed("document: not a JSON document that can be written again") from None
    failures = []
    if key_id(public_key) != _field(signature, "key_id", str, "signature"):
        failures.append(("bad_document_signature", "the key id is not the public key's"))
    elif not signature_holds(public_key, value, message):
        failures.append(("bad_document_signature", f"the {kind}'s bytes are not what was signed"))
    if expected_key_id is not None and key_id(public_key) != expected_key_id:
        failures.append(("unexpected_key", f"signed by {key_id(public_key)}"))
    return failures


# -- the checks ------------------------------------------------------------------------


class Malformed(Exception):
    """The input is not of the expected shape; the message says where."""


def _field(obj: Any, name: str, kind: type, where: str) -> Any:
    """`obj[name]`, checked to be a `kind`: every field the checks read comes through
    here, so a value of another shape is a Malformed verdict, never a crash. A string
    must be valid Unicode (JSON lets a lone surrogate through, which cannot be hashed)."""
    if not isinstance(obj, dict) or name not in obj:
        raise Malformed(f"{where}: missing {name}")
    value = obj[name]
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise Malformed(f"{where}.{name}: not a {kind.__name__}")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Malformed(f"{where}.{name}: not valid Unicode") from None
    return value


def _public_key(obj: Any, where: str) -> bytes:
    """The 32 raw bytes of an Ed25519 public key given as base64 in `obj["public_key"]`."""
    try:
        public_key = base64.b64decode(_field(obj, "public_key", str, where), validate=True)
    except (ValueError, binascii.Error):
        raise Malformed(f"{where}.public_key: not base64") from None
    if len(public_key) != 32:
        raise Malformed(f"{where}.public_key: not 32 bytes")
    return public_key


def _one_line(text: str, where: str) -> str:
    """A string that goes into signed bytes as ASCII: one line of it, or Malformed."""
    if not text.isascii() or "\n" in text:
        raise Malformed(f"{where}: not one line of ASCII")
    return text


def _hex32(text: str, where: str) -> bytes:
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise Malformed(f"{where}: not 64 hexadecimal digits")
    return raw


def read_head(head: Any, where: str = "head") -> dict[str, Any]:
    """A head's fields, checked for shape (not for truth)."""
    size = _field(head, "size", int, where)
    if size < 0:
        raise Malformed(f"{where}.size: negative")
    root = _field(head, "root", str, where)
    _hex32(root, f"{where}.root")
    time = _one_line(_field(head, "time", str, where), f"{where}.time")
    key = _field(head, "key_id", str, where)
    if len(key) != 32 or any(c not in "0123456789abcdef" for c in key):
        raise Malformed(f"{where}.key_id: not 32 lower-case hexadecimal digits")
    signature = _field(head, "signature", str, where)
    return {"size": size, "root": root, "time": time, "key_id": key, "signature": signature}


def check_head(head: dict[str, Any], public_key: bytes) -> list[tuple[str, str]]:
    """The failures of a head against a public key: its key id, then its signature."""
    if head["key_id"] != key_id(public_key):
        return [("key_id_mismatch", f"head key_id {head['key_id']} is not {key_id(public_key)}")]
    message = head_message(head["size"], head["root"], head["time"], head["key_id"])
    if not signature_holds(public_key, head["signature"], message):
        return [("bad_signature", f"the signature of the head of size {head['size']} fails")]
    return []


def check_pack(
    pack: Any, kept_head: Any = None, expected_key_id: str | None = None
) -> list[tuple[str, str]]:
    """Every failure of a pack, as (reason, detail); an empty list means it holds.
    Raises Malformed when the pack is not of the expected shape."""
    if _field(pack, "format", str, "pack") != PACK_FORMAT:
        raise Malformed(f"pack.format: not {PACK_FORMAT}")
    head = read_head(_field(pack, "head", dict, "pack"))
    public_key = _public_key(pack, "pack")
    failures = check_head(head, public_key)
    kept = read_head(kept_head, "kept head") if kept_head is not None else None
    if kept is not None and kept["key_id"] == head["key_id"]:  # the same key: check it too
        failures += [(r, f"kept head: {d}") for r, d in check_head(kept, public_key)]
    for expected in (expected_key_id, kept["key_id"] if kept else None):
        if expected is not None and expected != head["key_id"]:
            failures.append(("unexpected_key", f"the head is signed by key {head['key_id']}, "
                             f"not {expected}"))  # fmt: skip
    request_id = _field(pack, "request_id", str, "pack")
    root = bytes.fromhex(head["root"])

    statement = _field(pack, "statement", dict, "pack")
    seqs = _field(statement, "seqs", list, "statement")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seqs):
        raise Malformed("statement.seqs: not a list of integers")
    about = (
        _one_line(_field(statement, "request_id", str, "statement"), "statement.request_id"),
        _field(statement, "size", int, "statement"),
        _field(statement, "root", str, "statement"),
    )
    _hex32(about[2], "statement.root")
    if about != (request_id, head["size"], head["root"]):
        failures.append(("statement_mismatch", "the statement names another request or head"))
    message = statement_message(about[0], about[1], about[2], seqs)
    signature = _field(pack, "statement_signature", str, "pack")
    if not signature_holds(public_key, signature, message):
        failures.append(("bad_statement_signature", "the statement's signature fails"))

    entries = _field(pack, "entries", list, "pack")
    given = [_field(e, "seq", int, "entry") for e in entries]
    if given != seqs:
        failures.append(("entries_mismatch", f"entries have seqs {given}, the statement {seqs}"))
    for entry in entries:
        seq = entry["seq"]
        where = f"entry seq {seq}"
        for name in ("request_id", "entry_type", "recorded_at", "payload", "prev_hash"):
            _field(entry, name, str, where)
        index = _field(entry, "leaf_index", int, where)
        proof = [_hex32(p, f"{where}.inclusion_proof") if isinstance(p, str) else b""
                 for p in _field(entry, "inclusion_proof", list, where)]  # fmt: skip
        if entry["request_id"] != request_id:
            failures.append(("wrong_request", f"{where} belongs to {entry['request_id']!r}"))
        recomputed = chain_hash(
            entry["prev_hash"], seq, entry["request_id"], entry["entry_type"],
            entry["recorded_at"], entry["payload"],
        )  # fmt: skip
        if recomputed != _field(entry, "entry_hash", str, where):
            failures.append(("chain_hash_mismatch", f"{where}: its fields hash to {recomputed}"))
        if index != seq - 1:
            failures.append(("leaf_index_mismatch", f"{where} has leaf index {index}"))
        if not verify_inclusion(index, head["size"], entry_leaf(entry), proof, root):
            failures.append(("inclusion_failed", f"{where} is not in the tree of the head"))

    consistency = pack.get("consistency")
    if consistency is not None and not isinstance(consistency, list):
        raise Malformed("pack.consistency: not a list")
    if kept is not None:
        failures += _check_kept(consistency or [], head, kept)
    return failures


def _check_kept(
    consistency: list[Any], head: dict[str, Any], kept: dict[str, Any]
) -> list[tuple[str, str]]:
    """The kept head against the pack's head: the same tree, or a prefix of it."""
    if kept["size"] == head["size"]:
        if kept["root"] != head["root"]:
            return [("head_mismatch", f"size {kept['size']}: root {head['root']}, kept "
                     f"{kept['root']}")]  # fmt: skip
        return []
    if kept["size"] > head["size"]:
        return [("consistency_missing", f"the kept head (size {kept['size']}) is newer than "
                 f"the pack's (size {head['size']}): ask for a pack at least as new")]  # fmt: skip
    for item in consistency:
        if _field(item, "from_size", int, "consistency") == kept["size"]:
            proof = [_hex32(p, "consistency.proof") if isinstance(p, str) else b""
                     for p in _field(item, "proof", list, "consistency")]  # fmt: skip
            old, new = bytes.fromhex(kept["root"]), bytes.fromhex(head["root"])
            if verify_consistency(kept["size"], head["size"], old, new, proof):
                return []
            return [("consistency_failed", f"from size {kept['size']} to {head['size']}")]
    return [("consistency_missing", f"no proof from size {kept['size']} in the pack: ask for "
             f"a pack made with --since {kept['size']}")]  # fmt: skip


# -- the command -----------------------------------------------------------------------


def load_json(text: str | bytes) -> Any:
    """A JSON file's value. ValueError when it is not JSON, or nested too deeply to be
    read (Python's parser recurses: 100,000 `[` would end in a RecursionError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to be read") from None


def _load(path: str) -> Any:
    with open(path, "rb") as handle:
        return load_json(handle.read())


# C0 and C1 controls (ESC starts a terminal's escape sequences), DEL, the bidirectional
# controls (they reorder what a person reads), line separators and lone surrogates.
_UNPRINTABLE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def printable(value: object) -> str:
    """`value` as text safe to print: every character that could drive or deceive a
    terminal shown as a visible escape (ESC as `\\x1b`, U+202E as `\\u202e`, a newline as
    `\\n`). The CLI's sanitiser too (memory_ledger/cli/common.py). A pack or document is the
    sender's text; the verifier prints nothing of it raw."""

    return _UNPRINTABLE.sub(_visible, str(value))


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    return _NAMED.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def request_id_of(pack: Any) -> str | None:
    """The pack's request id when it is a string (anything else is not echoed back)."""
    found = pack.get("request_id") if isinstance(pack, dict) else None
    return found if isinstance(found, str) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check a memory-ledger evidence pack.")
    parser.add_argument("pack", help="the pack (JSON), from `memory-ledger audit pack`")
    parser.add_argument("--head", help="a signed head you kept earlier (JSON)")
    parser.add_argument("--key-id", help="the ledger key's id as you know it independently")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--document",
        action="store_true",
        help="the file is a signed document (a backup manifest, a drill report: JSON or "
        "markdown), not a pack",
    )
    args = parser.parse_args(argv)
    try:
        if args.document:
            with open(args.pack, encoding="utf-8") as handle:
                text = handle.read()
            try:
                given: Any = load_document(text)
            except Malformed as exc:  # reported as a failure below, as a bad pack's is
                given = exc
        else:
            given = _load(args.pack)
        kept = _load(args.head) if args.head and not args.document else None
    except (OSError, ValueError) as exc:
        print(printable(f"cannot read the input: {exc}"), file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        if isinstance(given, Malformed):
            raise given
        if args.document:
            failures = check_document(given, args.key_id)
        else:
            failures = check_pack(given, kept, args.key_id)
    except Malformed as exc:
        failures = [("malformed", str(exc))]
    if args.json:
        answer = {"ok": not failures, "failures": [{"reason": r, "detail": d} for r, d in failures]}
        if not args.document:
            answer["request_id"] = request_id_of(given)
        print(json.dumps(answer, indent=2))
    elif failures:
        for reason, detail in failures:
            print(printable(f"FAILED {reason}: {REASONS[reason]} ({detail})"))
    elif args.document:
        signature = given["signature"]
        print(printable(f"signed {signature['kind']} holds: signed by key {signature['key_id']}"))
    else:
        head = given["head"]
        print(printable(
            f"evidence pack holds: {len(given['entries'])} entries of {given['request_id']} "
            f"are in the ledger tree of size {head['size']} (root {head['root']}), "
            f"signed by key {head['key_id']}"
        ))  # fmt: skip
        if kept is not None:
            print(f"and that tree extends the kept head of size {kept['size']}")
    return EXIT_FAILED if failures else 0


if __name__ == "__main__":
    sys.exit(main())
