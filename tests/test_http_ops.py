"""Operations, legal holds and listing over HTTP, against a real server process: ops
tokens take, verify and drill backups, run jobs and restore the store the server
serves (nothing erased comes back, nothing is served mid-restore); compliance tokens
place and lift holds in their subtree; agents list their memories a page at a time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from factories import store_bytes_contain
from http_server import server_on_scratch_store

from memory_ledger.access import TokenStore
from memory_ledger.config import Settings
from memory_ledger.http.serving import Restoring, Serving
from memory_ledger.times import now

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Settings]]:
    with server_on_scratch_store(tmp_path_factory, "http-ops") as served:
        yield served


@pytest.fixture(scope="module")
def tokens(server: tuple[str, Settings]) -> Iterator[dict[str, str]]:
    store = TokenStore(server[1], now)
    made = {
        "ops": store.create("acme", "ops")[1],
        "dana": store.create("acme/dana", "agent", ["forget"])[1],
        "erin": store.create("acme/erin", "agent", ["forget"])[1],
        "legal": store.create("acme", "compliance")[1],
        "other_legal": store.create("globex", "compliance")[1],
    }
    yield {k: f"Bearer {v}" for k, v in made.items()}
    store.close()


def _fact(value: str, predicate: str) -> dict[str, object]:
    return {
        "kind": "fact", "subject": "user", "predicate": predicate, "value": value,
        "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "http-agent", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1"},
    }  # fmt: skip


def _remember(base: str, token: str, value: str, predicate: str) -> str:
    r = httpx.post(f"{base}/v1/memories", json=_fact(value, predicate),
                   headers={"Authorization": token})  # fmt: skip
    assert r.status_code == 201, r.text
    return str(r.json()["memories"][0]["item_id"])


def test_memories_are_listed_a_page_at_a_time_in_the_tokens_namespace(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    dana = {"Authorization": tokens["dana"]}
    ids = [_remember(base, tokens["dana"], f"list value {i}", f"list_{i}") for i in range(7)]
    _remember(base, tokens["erin"], "erin's own", "list_0")
    seen, cursor = [], None
    while True:
        params = {"limit": 3, "kind": "fact", **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{base}/v1/memories", params=params, headers=dana)
        assert page.status_code == 200, page.text
        seen += [m["item_id"] for m in page.json()["memories"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))  # newest first, each once, only dana's
    erin = httpx.get(f"{base}/v1/memories", headers={"Authorization": tokens["erin"]}).json()
    assert [m["text"] for m in erin["memories"]] == ["erin's own"]
    bad = httpx.get(f"{base}/v1/memories", params={"cursor": "o1"}, headers=dana)
    assert bad.status_code == 422 and "without one" in bad.json()["detail"]
    refused = httpx.get(f"{base}/v1/memories", headers={"Authorization": tokens["legal"]})
    assert refused.status_code == 403  # compliance reads no content


def test_holds_are_placed_and_lifted_by_compliance_in_its_subtree(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    legal, other = {"Authorization": tokens["legal"]}, {"Authorization": tokens["other_legal"]}
    dana = {"Authorization": tokens["dana"]}
    hold = {"name": "case_2026_044", "namespace": "acme/dana", "reason": "case-2026-044"}
    assert httpx.post(f"{base}/v1/holds", json=hold, headers=dana).status_code == 403
    outside = httpx.post(f"{base}/v1/holds", json={**hold, "namespace": "acme/dana"}, headers=other)
    assert outside.status_code == 403
    placed = httpx.post(f"{base}/v1/holds", json=hold, headers=legal)
    assert placed.status_code == 201, placed.text
    assert placed.json()["placed_by"].startswith("token:")
    item = _remember(base, tokens["dana"], "held value", "held_thing")
    scope = {"scope": {"kind": "item", "item_ids": [item]}}
    filed = httpx.post(f"{base}/v1/forget-requests", json=scope, headers=dana)
    assert filed.status_code == 202 and filed.json()["status"] == "blocked", filed.text
    assert [h["name"] for h in httpx.get(f"{base}/v1/holds", headers=legal).json()["holds"]] == [
        "case_2026_044"
    ]
    assert httpx.get(f"{base}/v1/holds", headers=other).json()["holds"] == []
    assert httpx.delete(f"{base}/v1/holds/case_2026_044", headers=other).status_code == 404
    lifted = httpx.delete(f"{base}/v1/holds/case_2026_044", headers=legal)
    assert lifted.status_code == 200, lifted.text
    assert lifted.json()["resumed"] == [
        {"request_id": filed.json()["request_id"], "status": "completed"}
    ]
    assert httpx.get(f"{base}/v1/memories/{item}", headers=dana).json()["erased"] is True


def _comparable(response: httpx.Response) -> tuple[int, Any]:
    """A response without what differs between any two runs (ids, times, token ids)."""
    body = response.json()
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k not in ("hold_id", "placed_at", "placed_by")}
        if "holds" in body:
            body["holds"] = [_comparable_hold(h) for h in body["holds"]]
        if "resumed" in body:
            body["resumed"] = [r["status"] for r in body["resumed"]]
    return response.status_code, body


def _comparable_hold(hold: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in hold.items() if k not in ("hold_id", "placed_at", "placed_by")}


def test_a_hold_name_in_another_subtree_changes_no_answer(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    """Hold names are scoped to the subtree a hold is placed in: what a compliance
    token for acme/bob is told is the same whether or not acme/alice has a hold of the
    same name (no 422 that says one exists, no other subtree's hold lifted)."""
    base, settings = server
    store = TokenStore(settings, now)
    bob_legal = {"Authorization": f"Bearer {store.create('acme/bob', 'compliance')[1]}"}
    alice_legal = {"Authorization": f"Bearer {store.create('acme/alice', 'compliance')[1]}"}
    bob_agent = f"Bearer {store.create('acme/bob', 'agent', ['forget'])[1]}"
    alice_agent = f"Bearer {store.create('acme/alice', 'agent', ['forget'])[1]}"
    store.close()
    tenant = {"Authorization": tokens["legal"]}  # covers acme: both subtrees

    def bobs_answers(item: str) -> list[tuple[int, Any]]:
        hold = {"name": "case_77", "namespace": "acme/bob", "reason": "case-77"}
        scope = {"scope": {"kind": "item", "item_ids": [item]}}
        lift = f"{base}/v1/holds/case_77"
        forget = f"{base}/v1/forget-requests"
        return [
            _comparable(httpx.post(f"{base}/v1/holds", json=hold, headers=bob_legal)),
            _comparable(httpx.post(f"{base}/v1/holds", json=hold, headers=bob_legal)),
            _comparable(httpx.get(f"{base}/v1/holds", headers=bob_legal)),
            (httpx.post(forget, json=scope, headers={"Authorization": bob_agent}).status_code, 0),
            _comparable(httpx.delete(lift, params={"namespace": "acme/alice"}, headers=bob_legal)),
            _comparable(httpx.delete(lift, headers=bob_legal)),
            _comparable(httpx.delete(lift, headers=bob_legal)),
            _comparable(httpx.delete(lift, params={"namespace": "acme/bob"}, headers=bob_legal)),
        ]

    alone = bobs_answers(_remember(base, bob_agent, "bob one", "bob_thing_1"))
    # acme/alice now has a hold of the same name, and a request it blocks.
    placed = httpx.post(
        f"{base}/v1/holds",
        json={"name": "case_77", "namespace": "acme/alice", "reason": "case-9"},
        headers=alice_legal,
    )
    assert placed.status_code == 201, placed.text
    alices = _remember(base, alice_agent, "alice one", "alice_thing_1")
    scope = {"scope": {"kind": "item", "item_ids": [alices]}}
    filed = httpx.post(
        f"{base}/v1/forget-requests", json=scope, headers={"Authorization": alice_agent}
    )
    assert filed.json()["status"] == "blocked", filed.text
    beside = bobs_answers(_remember(base, bob_agent, "bob two", "bob_thing_2"))

    assert beside == alone
    assert [a[0] for a in alone] == [201, 422, 200, 202, 403, 200, 404, 404], alone
    assert alone[5][1]["resumed"] == ["completed"] and alone[5][1]["namespace"] == "acme/bob"
    # Alice's hold stayed in force through all of it; the tenant's officer sees it.
    listed = httpx.get(f"{base}/v1/holds", headers=tenant).json()["holds"]
    assert [(h["name"], h["namespace"]) for h in listed] == [("case_77", "acme/alice")]
    report = httpx.get(f"{base}/v1/forget-requests/{filed.json()['request_id']}",
                       headers={"Authorization": alice_agent})  # fmt: skip
    assert report.json()["status"] == "blocked"
    # Someone who covers both subtrees must say which one a name means.
    assert httpx.post(f"{base}/v1/holds", json={"name": "case_77", "namespace": "acme/bob",
                      "reason": "case-77"}, headers=bob_legal).status_code == 201  # fmt: skip
    ambiguous = httpx.delete(f"{base}/v1/holds/case_77", headers=tenant)
    assert ambiguous.status_code == 422 and "acme/alice, acme/bob" in ambiguous.json()["detail"]
    for where in ("acme/bob", "acme/alice"):
        done = httpx.delete(f"{base}/v1/holds/case_77", params={"namespace": where}, headers=tenant)
        assert done.status_code == 200 and done.json()["namespace"] == where, done.text
    assert httpx.get(f"{base}/v1/holds", headers=tenant).json()["holds"] == []


def test_ops_back_up_drill_and_run_jobs(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    ops = {"Authorization": tokens["ops"]}
    for token in (tokens["dana"], tokens["legal"]):
        assert (
            httpx.get(f"{base}/v1/ops/backups", headers={"Authorization": token}).status_code == 403
        )
    assert httpx.get(f"{base}/v1/memories", headers=ops).status_code == 403  # no content
    made = httpx.post(f"{base}/v1/ops/backups", json={"keep_days": 7}, headers=ops)
    assert made.status_code == 201, made.text
    backup_id = made.json()["backup_id"]
    assert "path" not in made.json() and "wrapped_file_key" not in made.json()
    listed = httpx.get(f"{base}/v1/ops/backups", headers=ops).json()["backups"]
    assert backup_id in [b["backup_id"] for b in listed]
    checked = httpx.post(f"{base}/v1/ops/backups/{backup_id}/verify", headers=ops)
    assert checked.status_code == 200 and checked.json()["verified"] is True
    missing = httpx.post(f"{base}/v1/ops/backups/bk-0000000000000000/verify", headers=ops)
    assert missing.status_code == 404
    traversal = httpx.post(f"{base}/v1/ops/backups/..%2F..%2Fetc/verify", headers=ops)
    assert traversal.status_code in (404, 422)
    drill = httpx.post(f"{base}/v1/ops/drills", json={"backup_id": backup_id}, headers=ops,
                       timeout=120)  # fmt: skip
    assert drill.status_code == 200, drill.text
    assert drill.json()["outcome"] == "passed" and drill.json()["backup_id"] == backup_id
    jobs = httpx.get(f"{base}/v1/ops/jobs", headers=ops).json()["jobs"]
    assert "retention" in [j["name"] for j in jobs]
    run = httpx.post(f"{base}/v1/ops/jobs/retention/runs", headers=ops, timeout=120)
    assert run.status_code == 200 and run.json()["outcome"] == "ok", run.text
    after = httpx.get(f"{base}/v1/ops/jobs", headers=ops).json()["jobs"]
    assert (
        next(j for j in after if j["name"] == "retention")["last_run"]["run_id"]
        == (run.json()["run_id"])
    )
    assert httpx.post(f"{base}/v1/ops/jobs/no-such-job/runs", headers=ops).status_code == 404


def test_a_restore_over_http_replays_erasures_and_serves_only_when_verified(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, settings = server
    ops, erin = {"Authorization": tokens["ops"]}, {"Authorization": tokens["erin"]}
    kept = _remember(base, tokens["erin"], "kept through the restore", "kept_thing")
    erased = _remember(base, tokens["erin"], "Zq9-erased-after-backup", "gone_thing")
    backup_id = httpx.post(f"{base}/v1/ops/backups", json={}, headers=ops).json()["backup_id"]
    scope = {"scope": {"kind": "item", "item_ids": [erased]}}
    filed = httpx.post(f"{base}/v1/forget-requests", json=scope, headers=erin)
    assert filed.json()["status"] == "completed"
    after_backup = _remember(base, tokens["erin"], "written after the backup", "late_thing")
    plan = httpx.post(f"{base}/v1/ops/restores", json={"backup_id": backup_id, "dry_run": True},
                      headers=ops).json()  # fmt: skip
    assert erased in plan["erase_again"]
    assert httpx.get(f"{base}/v1/memories/{after_backup}", headers=erin).status_code == 200
    done = httpx.post(f"{base}/v1/ops/restores", json={"backup_id": backup_id}, headers=ops,
                      timeout=300)  # fmt: skip
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "restored" and done.json()["verified"] is True
    assert httpx.get(f"{base}/v1/ready").json() == {"status": "ready"}
    assert httpx.get(f"{base}/v1/memories/{erased}", headers=erin).json()["erased"] is True
    assert httpx.get(f"{base}/v1/memories/{kept}", headers=erin).json()["text"] == (
        "kept through the restore"
    )
    assert httpx.get(f"{base}/v1/memories/{after_backup}", headers=erin).status_code == 404
    context = httpx.post(f"{base}/v1/context", json={"query": "erased after backup"}, headers=erin)
    assert "Zq9-erased" not in context.text
    assert not store_bytes_contain(settings, "Zq9-erased-after-backup")


def test_the_gate_refuses_requests_while_a_restore_runs(tmp_path: object) -> None:
    """In process: while `replace` runs, no request is let in, and a second restore is
    refused; afterwards the new service is served."""

    class Fake:  # a stand-in with the one method the gate calls on a service
        closed = False

        def close(self) -> None:
            self.closed = True

    old, new = Fake(), Fake()
    serving = Serving(old, lambda: new)  # type: ignore[arg-type]
    entered, release = threading.Event(), threading.Event()

    def restore() -> str:
        entered.set()
        release.wait(10)
        return "restored"

    worker = threading.Thread(target=lambda: serving.replace(restore))
    worker.start()
    assert entered.wait(10)
    with pytest.raises(Restoring), serving.request():
        pass
    with pytest.raises(Exception, match="already running"):
        serving.replace(lambda: "again")
    release.set()
    worker.join(10)
    assert old.closed and serving.service is new and not serving.restoring
    with serving.request():
        pass


def test_memory_files_and_runs_over_http(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    dana, erin = {"Authorization": tokens["dana"]}, {"Authorization": tokens["erin"]}
    create = {"command": "create", "path": "/memories/http.md", "file_text": "over http",
              "session_id": "s1", "turn_id": "t1"}  # fmt: skip
    made = httpx.post(f"{base}/v1/memory-files", json=create, headers=dana)
    assert made.status_code == 200 and made.json()["result"].startswith("File created"), made.text
    view = {"command": "view", "path": "/memories/http.md", "session_id": "s1"}
    assert "over http" in httpx.post(f"{base}/v1/memory-files", json=view, headers=dana).text
    theirs = httpx.post(f"{base}/v1/memory-files", json=view, headers=erin)
    assert theirs.status_code == 404  # another namespace's file is not there
    escape = {"command": "view", "path": "/memories/../../secrets.env", "session_id": "s1"}
    refused = httpx.post(f"{base}/v1/memory-files", json=escape, headers=dana)
    assert refused.status_code == 422 and refused.json()["problems"] == ["path: traversal"]
    changes = httpx.get(f"{base}/v1/memory-files/changes", params={"turn_id": "t1"},
                        headers=dana).json()["changes"]  # fmt: skip
    assert [c["change"] for c in changes] == ["created"] and changes[0]["writer"].startswith(
        "token:"
    )
    start = {"action": "start", "task": "over http", "session_id": "s1"}
    run = httpx.post(f"{base}/v1/runs", json=start, headers=dana).json()
    step = {"action": "begin_step", "run_id": run["run_id"], "expected_version": run["version"],
            "step_id": "one"}  # fmt: skip
    assert httpx.post(f"{base}/v1/runs", json=step, headers=dana).status_code == 200
    stale = httpx.post(f"{base}/v1/runs", json={**step, "step_id": "two"}, headers=dana)
    assert stale.status_code == 409 and "read it again" in stale.json()["detail"]
    got = httpx.get(f"{base}/v1/runs/{run['run_id']}", headers=dana).json()
    assert got["steps"]["one"]["status"] == "running"
    assert httpx.get(f"{base}/v1/runs/{run['run_id']}", headers=erin).status_code == 404
    assert [r["run_id"] for r in httpx.get(f"{base}/v1/runs", headers=dana).json()["runs"]] == [
        run["run_id"]
    ]
    gone = httpx.post(f"{base}/v1/runs/{run['run_id']}/forget", headers=dana)
    assert gone.status_code == 200 and gone.json()["status"] == "completed"
    forgot = httpx.post(f"{base}/v1/memory-files/forget", json={"path": "/memories/http.md"},
                        headers=dana)  # fmt: skip
    assert forgot.status_code == 200 and forgot.json()["status"] == "completed"


def test_another_stores_backup_is_refused_over_http_unless_named(
    server: tuple[str, Settings], tokens: dict[str, str], tmp_path: Any
) -> None:
    import shutil

    from memory_ledger.api import MemoryService
    from memory_ledger.crypto import DEV_KEY_FILE
    from memory_ledger.restore.backup import BACKUPS_DIR, create

    base, settings = server
    ops = {"Authorization": tokens["ops"]}
    other = Settings.resolve(tmp_path / "other")  # shares the server's master key
    other.data_dir.mkdir()
    shutil.copy(settings.data_dir / DEV_KEY_FILE, other.data_dir / DEV_KEY_FILE)
    with MemoryService(other) as service:
        made = create(other, service.log.master, service.ledger, datetime.now(UTC),
                      settings.data_dir / BACKUPS_DIR)  # fmt: skip
        foreign = service.ledger.store_id
    backup_id = made.manifest.backup_id
    checked = httpx.post(f"{base}/v1/ops/backups/{backup_id}/verify", headers=ops).json()
    assert checked["verified"] is True and checked["taken_by_this_store"] is False
    body = {"backup_id": backup_id, "dry_run": True}
    refused = httpx.post(f"{base}/v1/ops/restores", json=body, headers=ops)
    assert refused.status_code == 503
    assert f'"accept_foreign": "{foreign}"' in refused.json()["detail"]
    named = httpx.post(f"{base}/v1/ops/restores", json={**body, "accept_foreign": foreign},
                       headers=ops)  # fmt: skip
    assert named.status_code == 200 and named.json()["foreign_accepted"] == foreign
    shutil.rmtree(made.path)  # the other tests of this module see only their own backups
