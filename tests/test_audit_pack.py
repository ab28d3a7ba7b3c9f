"""Evidence an auditor checks alone (memory_ledger/audit): signed tree heads, the key
recorded in the ledger, a request's evidence pack, and the standalone verifier that
checks it, on SQLite and PostgreSQL, from Python, the CLI and HTTP.

The tamper table: each way of changing a pack is detected by verify-pack, for the
reason named; the table in docs/compliance.md is the one this test generates (set
MEMORY_LEDGER_UPDATE_DOCS=1 to rewrite it)."""

from __future__ import annotations

import ast
import base64
import copy
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from factories import cli, cli_location, fact
from fastapi.testclient import TestClient
from waits import HUNG

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.audit import verifier
from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.merkle import MerkleTree, leaf_hash
from memory_ledger.audit.pack import build_pack
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.errors import IntegrityError, NotFound
from memory_ledger.http.app import create_app
from memory_ledger.ledger import LEDGER_FILE, EntryType
from memory_ledger.times import now

ROOT = Path(__file__).resolve().parent.parent
VERIFIER = ROOT / "memory_ledger" / "audit" / "verifier.py"
DOC = ROOT / "docs" / "compliance.md"


def erase_one(alice: MemoryLedger, value: str = "18 Haisong Road") -> str:
    stored = alice.remember(fact("home_address", value))
    return alice.forget(stored.item_id).request_id


def auditor(service: MemoryService) -> Auditor:
    return Auditor(service.ledger, service.log.master)


# -- heads, the key, packs: both backends ----------------------------------------------------


def test_a_head_is_signed_and_its_key_is_recorded_once(
    service: MemoryService, alice: MemoryLedger
) -> None:
    erase_one(alice)
    audit = auditor(service)
    first = audit.head()
    keys = service.ledger.entries_of_type(EntryType.AUDIT_KEY)
    assert [k.payload["key_id"] for k in keys] == [audit.key.key_id]
    assert keys[0].request_id == "audit-key-1" and first.size == keys[0].seq  # recorded first
    second = audit.head()
    assert len(service.ledger.entries_of_type(EntryType.AUDIT_KEY)) == 1
    assert (second.size, second.root) == (first.size, first.root)
    fields = verifier.read_head(first.to_dict())
    assert verifier.check_head(fields, audit.key.public_bytes) == []
    entries = service.ledger.entries()
    direct = MerkleTree(leaf_hash(bytes.fromhex(e.entry_hash)) for e in entries)
    assert first.root == direct.root().hex()
    assert service.ledger.verify().ok  # the audit_key entry is an ordinary ledger entry


def test_a_pack_verifies_and_extends_a_kept_head(
    service: MemoryService, alice: MemoryLedger
) -> None:
    first = erase_one(alice)
    audit = auditor(service)
    kept = {**audit.head().to_dict(), "public_key": audit.key.public_key}
    second = erase_one(alice, "7 Binjiang Avenue")
    pack = build_pack(audit, first, since=[kept["size"]])
    assert pack["head"]["size"] > kept["size"]
    assert [e["seq"] for e in pack["entries"]] == [e.seq for e in service.ledger.entries(first)]
    assert {e["request_id"] for e in pack["entries"]} == {first}
    assert verifier.check_pack(pack) == []
    assert verifier.check_pack(pack, kept, kept["key_id"]) == []
    other = build_pack(audit, second)
    assert verifier.check_pack(other, kept) == [
        (
            "consistency_missing",
            f"no proof from size {kept['size']} in the pack: ask for a "
            f"pack made with --since {kept['size']}",
        )
    ]
    assert "18 Haisong Road" not in json.dumps(pack)  # ids, codes and counts only
    with pytest.raises(NotFound):
        build_pack(audit, "req-nothing-here")
    consistent = audit.consistency(kept)
    assert consistent["ok"] and consistent["key_checked"]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_ledger_altered_around_its_triggers_makes_no_pack(
    service: MemoryService, alice: MemoryLedger, settings: Settings
) -> None:
    request_id = erase_one(alice)
    conn = sqlite3.connect(settings.data_dir / LEDGER_FILE, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER ledger_entries_no_update")
        conn.execute(
            "UPDATE ledger_entries SET payload = replace(payload, '\"ok\"', '\"failed\"') "
            "WHERE request_id = ? AND entry_type = 'receipt'",
            (request_id,),
        )
    finally:
        conn.close()
    with pytest.raises(IntegrityError, match="audit verify"):
        build_pack(auditor(service), request_id)


# -- the tamper table ------------------------------------------------------------------------

ATTACKER = Ed25519PrivateKey.generate()
ATTACKER_PUBLIC = ATTACKER.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def _rehash(entry: dict[str, Any]) -> None:
    entry["entry_hash"] = verifier.chain_hash(
        entry["prev_hash"], entry["seq"], entry["request_id"], entry["entry_type"],
        entry["recorded_at"], entry["payload"],
    )  # fmt: skip


def _of_type(pack: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(e for e in pack["entries"] if e["entry_type"] == kind)


def edit_entry(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    entry = _of_type(pack, "request")
    entry["payload"] = entry["payload"].replace('"alice"', '"mallory"')
    return pack, None, None


def edit_and_rehash(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    entry = _of_type(pack, "request")
    entry["recorded_at"] = "2020-01-01T00:00:00.000000Z"  # backdated
    _rehash(entry)
    return pack, None, None


def remove_entry(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    pack["entries"].remove(_of_type(pack, "receipt"))
    return pack, None, None


def reorder_entries(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    pack["entries"][1], pack["entries"][2] = pack["entries"][2], pack["entries"][1]
    return pack, None, None


def change_receipt(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    entry = _of_type(pack, "receipt")
    entry["payload"] = entry["payload"].replace('"status":"ok"', '"status":"failed"')
    _rehash(entry)
    return pack, None, None


def move_entry(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    entry = pack["entries"][-1]
    entry["leaf_index"] -= 1
    return pack, None, None


def add_foreign_entry(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    foreign = copy.deepcopy(pack["entries"][-1])
    foreign["request_id"] = "req-someone-else"
    _rehash(foreign)
    pack["entries"].append(foreign)
    return pack, None, None


def truncate_proof(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    pack["entries"][0]["inclusion_proof"].pop()
    return pack, None, None


def _resign(pack: dict[str, Any]) -> None:
    head = pack["head"]
    message = verifier.head_message(head["size"], head["root"], head["time"], head["key_id"])
    head["signature"] = base64.b64encode(ATTACKER.sign(message)).decode()


def resign_head(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    pack["head"]["time"] = "2030-01-01T00:00:00.000000Z"
    _resign(pack)
    return pack, None, None


def _forge_whole_pack(pack: dict[str, Any]) -> dict[str, Any]:
    """A pack remade by someone with their own key: a receipt changed, the tree rebuilt
    over the changed entries, head and statement signed, the public key replaced."""
    change_receipt(pack, {})
    entries = pack["entries"]
    size = pack["head"]["size"]
    leaves = [leaf_hash(bytes([i % 256]) * 32) for i in range(size)]
    for e in entries:
        leaves[e["leaf_index"]] = verifier.entry_leaf(e)
    tree = MerkleTree(leaves)
    for e in entries:
        e["inclusion_proof"] = [p.hex() for p in tree.inclusion_proof(e["leaf_index"], size)]
    head = pack["head"]
    head["root"] = pack["statement"]["root"] = tree.root().hex()
    head["key_id"] = verifier.key_id(ATTACKER_PUBLIC)
    pack["public_key"] = base64.b64encode(ATTACKER_PUBLIC).decode()
    _resign(pack)
    statement = pack["statement"]
    message = verifier.statement_message(
        statement["request_id"], statement["size"], statement["root"], statement["seqs"]
    )
    pack["statement_signature"] = base64.b64encode(ATTACKER.sign(message)).decode()
    pack["consistency"] = []
    return pack


def forge_with_key_id(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    return _forge_whole_pack(pack), None, kept["key_id"]


def forge_with_kept_head(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    forged = _forge_whole_pack(pack)
    same_size = {**kept, "size": forged["head"]["size"], "root": kept["root_at_pack_size"]}
    return forged, same_size, None


#: The operator's own key and the ledger's leaves at the pack's size (set by `evidence`):
#: what an operator who rewrites the ledger holds.
OPERATOR: dict[str, Any] = {}


def rewrite_since_kept(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    """The operator rewrites a receipt the kept head covers, rebuilds the tree and signs
    everything with the ledger's own key: only the kept head can tell."""
    change_receipt(pack, kept)
    leaves = list(OPERATOR["leaves"])
    for e in pack["entries"]:
        leaves[e["leaf_index"]] = verifier.entry_leaf(e)
    tree = MerkleTree(leaves)
    for e in pack["entries"]:
        e["inclusion_proof"] = [p.hex() for p in tree.inclusion_proof(e["leaf_index"])]
    head, statement, key = pack["head"], pack["statement"], OPERATOR["key"]
    head["root"] = statement["root"] = tree.root().hex()
    head["signature"] = key.sign(
        verifier.head_message(head["size"], head["root"], head["time"], head["key_id"])
    )
    pack["statement_signature"] = key.sign(
        verifier.statement_message(request_id := statement["request_id"], head["size"],
                                   head["root"], statement["seqs"])
    )  # fmt: skip
    assert request_id == pack["request_id"]
    proof = tree.consistency_proof(kept["size"])
    pack["consistency"] = [{"from_size": kept["size"], "proof": [p.hex() for p in proof]}]
    assert verifier.check_pack(pack) == []  # without the kept head, nothing to see
    return pack, kept, None


def alter_consistency(pack: dict[str, Any], kept: dict[str, Any]) -> Any:
    proof = pack["consistency"][0]["proof"]
    proof[0] = ("0" if proof[0][0] != "0" else "1") + proof[0][1:]
    return pack, kept, None


TAMPERING: list[tuple[str, Callable[..., Any]]] = [
    ("an entry's payload edited (its `entry_hash` left as it was)", edit_entry),
    ("an entry's time changed and its `entry_hash` recomputed", edit_and_rehash),
    ("an entry removed", remove_entry),
    ("two entries swapped", reorder_entries),
    ("a receipt's status changed from `ok` to `failed`, hash recomputed", change_receipt),
    ("an entry given another leaf index", move_entry),
    ("an entry of another request added", add_foreign_entry),
    ("an inclusion proof truncated", truncate_proof),
    ("the head changed and re-signed with another key", resign_head),
    ("the whole pack remade with another key, checked with `--key-id`", forge_with_key_id),
    ("the whole pack remade with another key, checked with `--head`", forge_with_kept_head),
    (
        "a receipt rewritten by the operator, all re-signed with the ledger's key (`--head`)",
        rewrite_since_kept,
    ),
    ("a consistency proof altered (`--head`)", alter_consistency),
]


@pytest.fixture
def evidence(service: MemoryService, alice: MemoryLedger) -> tuple[dict[str, Any], dict]:
    request_id = erase_one(alice)
    audit = auditor(service)
    kept = {**audit.head().to_dict(), "public_key": audit.key.public_key}
    erase_one(alice, "7 Binjiang Avenue")
    pack = build_pack(audit, request_id, since=[kept["size"]])
    kept["root_at_pack_size"] = pack["head"]["root"]
    OPERATOR.update(key=audit.key, leaves=audit.tree().levels[0][: pack["head"]["size"]])
    return pack, kept


def tamper_table(evidence: tuple[dict[str, Any], dict]) -> str:
    pack, kept = evidence
    rows = ["| tampering | verify-pack reports |", "|---|---|"]
    for label, tamper in TAMPERING:
        changed, head, key = tamper(copy.deepcopy(pack), copy.deepcopy(kept))
        try:
            failures = verifier.check_pack(changed, head, key)
        except verifier.Malformed as exc:
            failures = [("malformed", str(exc))]
        reasons = sorted({reason for reason, _ in failures})
        assert reasons, f"not detected: {label}"
        rows.append(f"| {label} | {', '.join(f'`{r}`' for r in reasons)} |")
    return "\n".join(rows) + "\n"


#: Read at import: the autouse fixture clears MEMORY_LEDGER_* variables before each test.
UPDATE_DOCS = bool(os.environ.get("MEMORY_LEDGER_UPDATE_DOCS"))
MARK_START, MARK_END = "<!-- tamper-table -->\n", "<!-- /tamper-table -->"


@pytest.mark.parametrize("backend", ["sqlite"])
def test_every_tampering_is_detected_and_the_doc_shows_the_table(
    evidence: tuple[dict[str, Any], dict],
) -> None:
    pack, kept = evidence
    assert verifier.check_pack(pack, kept) == []  # the untouched pack holds
    table = tamper_table(evidence)
    text = DOC.read_text(encoding="utf-8")
    start = text.index(MARK_START) + len(MARK_START)
    end = text.index(MARK_END)
    if UPDATE_DOCS:
        DOC.write_text(text[:start] + table + text[end:], encoding="utf-8")
        text = DOC.read_text(encoding="utf-8")
        end = text.index(MARK_END)
    assert text[start:end] == table, "docs/compliance.md: rerun with MEMORY_LEDGER_UPDATE_DOCS=1"
    for reason, meaning in verifier.REASONS.items():  # and every reason's meaning
        assert f"| `{reason}` | {meaning} |" in text, reason


# -- the verifier alone ------------------------------------------------------------------------


def test_the_verifier_imports_only_the_standard_library_and_cryptography() -> None:
    tree = ast.parse(VERIFIER.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported - sys.stdlib_module_names == {"cryptography"}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_verifier_runs_alone_on_a_copy(
    evidence: tuple[dict[str, Any], dict], tmp_path: Path
) -> None:
    pack, kept = evidence
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(VERIFIER, alone / "verifier.py")
    (alone / "pack.json").write_text(json.dumps(pack))
    (alone / "head.json").write_text(json.dumps(kept))
    bad = copy.deepcopy(pack)
    change_receipt(bad, kept)
    (alone / "bad.json").write_text(json.dumps(bad))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        # -I: isolated, neither the working tree nor an installed memory_ledger on the path
        # would be found first; -S would also drop cryptography's site-packages.
        return subprocess.run(
            [sys.executable, "-I", "verifier.py", *args],
            cwd=alone, capture_output=True, text=True, timeout=HUNG,
        )  # fmt: skip

    good = run("pack.json", "--head", "head.json")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "evidence pack holds" in good.stdout and "kept head of size" in good.stdout
    failed = run("bad.json", "--json")
    assert failed.returncode == verifier.EXIT_FAILED
    assert {f["reason"] for f in json.loads(failed.stdout)["failures"]} == {"inclusion_failed"}
    assert run("missing.json").returncode == verifier.EXIT_UNREADABLE


# -- the command line --------------------------------------------------------------------------


def test_the_audit_commands(
    service: MemoryService, alice: MemoryLedger, settings: Settings, tmp_path: Path
) -> None:
    where = cli_location(settings)
    request_id = erase_one(alice)
    head_file = tmp_path / "head.json"
    code, output = cli("audit", "head", "--out", str(head_file), "--json", *where)
    assert code == 0, output
    head = json.loads(output)
    assert json.loads(head_file.read_text()) == head
    erase_one(alice, "7 Binjiang Avenue")
    code, output = cli("audit", "consistency", str(head_file), "--json", *where)
    assert code == 0 and json.loads(output)["ok"], output
    pack_file = tmp_path / "pack.json"
    code, output = cli(
        "audit", "pack", request_id, "--out", str(pack_file), "--since", str(head["size"]), *where
    )
    assert code == 0, output
    code, output = cli("audit", "verify-pack", str(pack_file), "--head", str(head_file))
    assert code == 0 and "evidence pack holds" in output, output
    pack = json.loads(pack_file.read_text())
    remove_entry(pack, head)
    pack_file.write_text(json.dumps(pack))
    code, output = cli("audit", "verify-pack", str(pack_file), "--json")
    assert code == verifier.EXIT_FAILED
    assert [f["reason"] for f in json.loads(output)["failures"]] == ["entries_mismatch"]
    head_file.write_text(json.dumps({**head, "root": "cd" * 32}))
    code, output = cli("audit", "consistency", str(head_file), *where)
    assert code == verifier.EXIT_FAILED and "NOT consistent" in output, output
    code, output = cli("audit", "pack", "req-none", "--out", str(pack_file), *where)
    assert code == NotFound.exit_code


# -- HTTP --------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_audit_routes(service: MemoryService, alice: MemoryLedger) -> None:
    request_id = erase_one(alice)
    tokens = TokenStore(service.settings, now)
    try:
        tokens_of = {
            "agent": tokens.create("acme/alice", "agent")[1],
            "officer": tokens.create("acme", "compliance")[1],
            "other": tokens.create("globex", "compliance")[1],
        }
        client = TestClient(create_app(service, tokens))

        def get(path: str, who: str) -> Any:
            return client.get(path, headers={"Authorization": f"Bearer {tokens_of[who]}"})

        head = get("/v1/audit/head", "agent")
        assert head.status_code == 200
        assert (
            verifier.check_head(
                verifier.read_head(head.json()), base64.b64decode(head.json()["public_key"])
            )
            == []
        )
        assert client.get("/v1/audit/head").status_code == 401
        size = head.json()["size"]
        pack = get(f"/v1/audit/requests/{request_id}/pack?since={size}", "officer")
        assert pack.status_code == 200
        assert verifier.check_pack(pack.json(), head.json()) == []
        assert get(f"/v1/audit/requests/{request_id}/pack", "agent").status_code == 403
        assert get(f"/v1/audit/requests/{request_id}/pack", "other").status_code == 404
        assert get("/v1/audit/requests/req-none/pack", "officer").status_code == 404
        proof = get(f"/v1/audit/consistency?from={size}", "officer").json()
        assert verifier.verify_consistency(
            size, proof["head"]["size"], bytes.fromhex(head.json()["root"]),
            bytes.fromhex(proof["head"]["root"]), [bytes.fromhex(p) for p in proof["proof"]],
        )  # fmt: skip
    finally:
        tokens.close()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_new_master_key_records_a_new_audit_key_that_replaces_the_old(
    service: MemoryService, alice: MemoryLedger
) -> None:
    request_id = erase_one(alice)
    old = auditor(service)
    kept = {**old.head().to_dict(), "public_key": old.key.public_key}
    new = Auditor(service.ledger, MasterKey.generate())
    pack = build_pack(new, request_id, since=[kept["size"]])
    keys = [e.payload for e in service.ledger.entries_of_type(EntryType.AUDIT_KEY)]
    assert [k["key_id"] for k in keys] == [old.key.key_id, new.key.key_id]
    assert keys[1]["replaces"] == old.key.key_id
    assert verifier.check_pack(pack) == []
    # Signed by another key than the kept head's: said, and the tree is still checked.
    assert [r for r, _ in verifier.check_pack(pack, kept)] == ["unexpected_key"]
    assert verifier.check_pack(pack, kept, new.key.key_id) == [
        ("unexpected_key", f"the head is signed by key {new.key.key_id}, not {old.key.key_id}")
    ]
    forged = {**kept, "root": "ab" * 32}
    assert [r for r, _ in verifier.check_pack(pack, forged)] == [
        "unexpected_key",
        "consistency_failed",
    ]
    checked = new.consistency(kept)
    assert checked["ok"] and not checked["key_checked"]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_kept_head_of_the_same_key_must_carry_its_signature(
    evidence: tuple[dict[str, Any], dict],
) -> None:
    pack, kept = evidence
    assert verifier.check_pack(pack, {**kept, "signature": pack["head"]["signature"]}) == [
        ("bad_signature", f"kept head: the signature of the head of size {kept['size']} fails")
    ]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_ledger_truncated_under_a_running_process_signs_no_head(
    service: MemoryService, alice: MemoryLedger, settings: Settings
) -> None:
    erase_one(alice)
    audit = auditor(service)
    audit.head()
    conn = sqlite3.connect(settings.data_dir / LEDGER_FILE, isolation_level=None)
    try:
        conn.execute("DROP TRIGGER ledger_entries_no_delete")
        conn.execute("DELETE FROM ledger_entries WHERE seq = (SELECT MAX(seq) FROM ledger_entries)")
    finally:
        conn.close()
    with pytest.raises(IntegrityError, match="altered"):
        audit.head()
