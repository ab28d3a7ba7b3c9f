"""The library is the only way in: the CLI and the HTTP server act on a store as a whole
through memory_ledger/operations, and these tests pin the mapping surface -> library
call -> output, and the boundary itself (what a surface may reach into; what it may
import is import-linter's contract, run by .ci/layers.py).

The behaviours behind the calls (a restore replays erasures, a drill finds residue, a
hold blocks a request...) are tested where they live; here it is the wiring: the same
call gives both surfaces the same answer."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from factories import cli, fact
from fastapi.testclient import TestClient

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.operations import Operations, RequestRow
from memory_ledger.principal import Principal
from memory_ledger.times import now

ROOT = Path(__file__).resolve().parent.parent
SURFACES = ("memory_ledger/cli", "memory_ledger/http")
#: Where a surface opens and closes the service; nowhere else may it name one.
OPEN_SITES = {"memory_ledger/http/app.py", "memory_ledger/http/serving.py"}


def _surface_files() -> list[Path]:
    return [p for where in SURFACES for p in sorted((ROOT / where).rglob("*.py"))]


def test_the_surfaces_reach_into_no_part_of_the_service() -> None:
    """`service.<part>` (or `x.service.<part>`) is a reach past the library; the facade's
    own calls (`operations`, `for_principal`, `close`...) are the way in."""
    facade = {"operations", "for_principal", "close", "dev_key_created", "reopened"}
    reached = []
    for path in _surface_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr in facade:
                continue
            owner = node.value
            named = isinstance(owner, ast.Name) and owner.id == "service"
            held = isinstance(owner, ast.Attribute) and owner.attr == "service"
            if named or held:
                reached.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert reached == []


def test_only_the_open_sites_take_a_memory_service() -> None:
    taking = []
    for path in _surface_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg in [*node.args.args, *node.args.kwonlyargs]:
                    note = ast.unparse(arg.annotation) if arg.annotation else ""
                    if "MemoryService" in note:
                        taking.append(f"{path.relative_to(ROOT)}:{node.name}({arg.arg})")
    assert {t.split(":")[0] for t in taking} <= OPEN_SITES


@pytest.fixture
def store(tmp_path: Path) -> Settings:
    """A store with two forget requests: one erased an item, one only resolved its scope."""
    settings = Settings.resolve(tmp_path / "data")
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        ledger.remember(fact("home_address", "18 Haisong Road"))
        scope = {"kind": "predicate", "subject": "user", "predicate": "home_address"}
        ledger.forget_scope(scope, dry_run=True)
        ledger.forget_scope(scope)
    return settings


def test_one_request_listing_serves_the_cli_and_http(store: Settings) -> None:
    """`memory-ledger requests` and `GET /v1/forget-requests` are the same library call
    (`Operations.requests.page`), so they show the same rows with the same fields."""
    with MemoryService(store) as service:
        ops = service.operations
        assert isinstance(ops, Operations)
        rows = ops.requests.page().rows
        assert [r.status for r in rows] == ["dry_run", "completed"]
        assert all(isinstance(r, RequestRow) and r.items == 1 for r in rows)
        listed = [r.to_dict() for r in rows]
        tokens = TokenStore(store, now)
        try:
            _, token = tokens.create("acme", "compliance")
            from memory_ledger.http.app import create_app

            client = TestClient(create_app(service, tokens))
            page = client.get(
                "/v1/forget-requests", headers={"Authorization": f"Bearer {token}"}
            ).json()
        finally:
            tokens.close()
    assert page == {"requests": json.loads(json.dumps(listed)), "next_cursor": None}
    code, output = cli("requests", "--data-dir", str(store.data_dir), "--json")
    assert code == 0 and json.loads(output) == json.loads(json.dumps(listed))


def test_a_page_continues_where_the_last_one_ended(store: Settings) -> None:
    with MemoryService(store) as service:
        listing = service.operations.requests
        first = listing.page(0, 1)
        assert len(first.rows) == 1 and first.next_offset == 1
        second = listing.page(first.next_offset, 1)
        assert second.next_offset is None
        assert [r.request_id for r in first.rows + second.rows] == [
            r.request_id for r in listing.page().rows
        ]
        assert listing.page(visible=lambda namespace: namespace != "acme/alice").rows == []


def test_backups_verify_and_the_restore_plan_are_one_call_for_both_surfaces(
    store: Settings,
) -> None:
    """The CLI's `backup verify` and `restore --dry-run` answer what the library's
    `Backups.verify` and `Restores.plan` do (HTTP calls the same, by id only)."""
    from datetime import UTC, datetime

    from memory_ledger.operations import Restores

    with MemoryService(store) as service:
        ops = service.operations
        made = ops.backups.take(datetime.now(UTC), taken_by="test")
        backup_id = made.manifest.backup_id
        checked, here = ops.backups.verify(backup_id, paths=False)
        assert here is True and checked.manifest.backup_id == backup_id
        assert [b.manifest.backup_id for b in ops.backups.known()] == [backup_id]
    planned = Restores.for_store(store, MemoryService).plan(backup_id).to_dict()
    where = ["--data-dir", str(store.data_dir)]
    code, output = cli("backup", "verify", backup_id, *where, "--json")
    shown = json.loads(output)
    assert code == 0 and shown["verified"] is True and shown["taken_by_this_store"] is True
    code, output = cli("restore", backup_id, "--dry-run", *where, "--json")
    assert code == 0 and json.loads(output) == json.loads(json.dumps(planned))
