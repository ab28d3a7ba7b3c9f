"""The HTTP service as a caller in another language sees it: a real server process on
loopback, a real HTTP client, bearer tokens; the namespace comes from the token only."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from factories import store_bytes_contain
from http_server import server_on_scratch_store

from memory_ledger.access import TokenStore
from memory_ledger.config import Settings
from memory_ledger.times import now

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Settings]]:
    with server_on_scratch_store(tmp_path_factory, "http") as served:
        yield served


@pytest.fixture(scope="module")
def tokens(server: tuple[str, Settings]) -> Iterator[dict[str, str]]:
    store = TokenStore(server[1], now)
    made = {
        "alice": store.create("acme/alice", "agent")[1],
        "alice_forget": store.create("acme/alice", "agent", ["forget"])[1],
        "bob": store.create("acme/bob", "agent", ["forget"])[1],
        "auditor": store.create("acme", "compliance")[1],
        "carol": store.create("acme/carol", "agent", ["forget"])[1],  # the guide's examples
    }
    info, revoked = store.create("acme/alice", "agent")
    store.revoke(info.token_id)
    made["revoked"] = revoked
    yield made
    store.close()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _fact(value: str, predicate: str = "home_address", **extra: object) -> dict[str, object]:
    return {
        "kind": "fact", "subject": "user", "predicate": predicate, "value": value,
        "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "http-agent", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1", "turn_id": "t1"},
        **extra,
    }  # fmt: skip


def test_health_readiness_and_the_openapi_document(server: tuple[str, Settings]) -> None:
    base, _ = server
    health = httpx.get(f"{base}/v1/health").json()
    assert set(health) == {"status", "instance"} and health["status"] == "ok"
    assert re.fullmatch(r"mli-[0-9a-f]{32}", health["instance"])  # this server's, see serve
    assert httpx.get(f"{base}/v1/ready").json() == {"status": "ready"}
    document = httpx.get(f"{base}/openapi.json").json()
    paths = set(document["paths"])
    assert {"/v1/memories", "/v1/forget-requests", "/v1/forget-plans", "/v1/export"} <= paths
    assert all(p.startswith("/v1/") for p in paths)
    body = document["components"]["schemas"]["MemoryWrite"]["properties"]
    assert "namespace" not in body  # the namespace is the token's


def test_missing_bad_and_revoked_tokens_are_401_alike(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    answers = []
    for headers in ({}, {"Authorization": "Basic x"}, _auth("mlt_nope"), _auth(tokens["revoked"])):
        r = httpx.get(f"{base}/v1/summary", headers=headers)
        assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
        assert r.headers["www-authenticate"] == "Bearer"
        answers.append(r.json()["detail"])
    assert len(set(answers)) == 1


def test_remember_read_update_context_over_http(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice = _auth(tokens["alice"])
    r = httpx.post(f"{base}/v1/memories", json=_fact("18 Haisong Road"), headers=alice)
    assert r.status_code == 201, r.text
    [stored] = r.json()["memories"]
    batch = [_fact("window seat", predicate="seat_note"), _fact("Acme", predicate="employer")]
    r = httpx.post(f"{base}/v1/memories", json=batch, headers=alice)
    assert r.status_code == 201 and len(r.json()["memories"]) == 2
    item = httpx.get(f"{base}/v1/memories/{stored['item_id']}", headers=alice).json()
    assert item["text"] == "18 Haisong Road" and item["provenance"]["writer"] == "http-agent"
    update = {"value": "7 Binjiang Avenue", "provenance": _fact("x")["provenance"]}
    r = httpx.patch(f"{base}/v1/memories/{stored['item_id']}", json=update, headers=alice)
    assert r.status_code == 200 and r.json()["version"] == 2
    versions = httpx.get(f"{base}/v1/memories/{stored['item_id']}/history", headers=alice)
    assert [v["text"] for v in versions.json()["versions"]] == [
        "18 Haisong Road",
        "7 Binjiang Avenue",
    ]
    query = {"query": "Binjiang Avenue home address"}
    r = httpx.post(f"{base}/v1/context", json=query, headers=alice)
    assert r.status_code == 200
    assert stored["item_id"] in [i["item_id"] for i in r.json()["items"]]


def test_the_namespace_is_the_tokens_only(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice, bob = _auth(tokens["alice"]), _auth(tokens["bob"])
    r = httpx.post(f"{base}/v1/memories", json=_fact("1 Secret Way", namespace="acme/bob"),
                   headers=alice)  # fmt: skip
    assert r.status_code == 422 and any("namespace" in p for p in r.json()["problems"])
    mine = httpx.post(f"{base}/v1/memories", json=_fact("bob's own"), headers=bob).json()
    item_id = mine["memories"][0]["item_id"]
    guessed = httpx.get(f"{base}/v1/memories/{item_id}", headers=alice)
    missing = httpx.get(f"{base}/v1/memories/6f1c0e4e-0b7a-4d43-9d51-8d0c1b1f0a11", headers=alice)
    assert guessed.status_code == missing.status_code == 404
    assert "bob's own" not in guessed.text


def test_forget_is_a_grant_of_its_own_and_answers_with_its_status(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice, eraser = _auth(tokens["alice"]), _auth(tokens["alice_forget"])
    made = httpx.post(f"{base}/v1/memories", json=_fact("+86 138 0000", predicate="phone"),
                      headers=alice).json()  # fmt: skip
    item_id = made["memories"][0]["item_id"]
    body = {"scope": {"kind": "item", "item_ids": [item_id]}}
    refused = httpx.post(f"{base}/v1/forget-requests", json=body, headers=alice)
    assert refused.status_code == 403 and "forget grant" in refused.json()["detail"]
    assert httpx.get(f"{base}/v1/memories/{item_id}", headers=alice).json()["erased"] is False
    r = httpx.post(f"{base}/v1/forget-requests", json=body, headers=eraser)
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    status_url = r.headers["location"]
    assert "+86 138 0000" not in r.text
    assert httpx.get(f"{base}{status_url}", headers=alice).json()["status"] == "completed"
    assert httpx.get(f"{base}{status_url}", headers=_auth(tokens["bob"])).status_code == 404
    audit = httpx.get(f"{base}{status_url}", headers=_auth(tokens["auditor"]))
    assert audit.status_code == 200 and audit.json()["targets"] == [item_id]
    content = httpx.get(f"{base}/v1/memories/{item_id}", headers=_auth(tokens["auditor"]))
    assert content.status_code == 403  # compliance never reads memory content
    export = httpx.get(f"{base}/v1/export", headers=alice).json()
    assert export["format"] == "memory-ledger-export/1" and export["namespace"] == "acme/alice"
    assert item_id in [e["item_id"] for e in export["erased"]] and "+86 138 0000" not in str(export)
    assert httpx.get(f"{base}/v1/export", headers=_auth(tokens["auditor"])).status_code == 403


def test_bad_bodies_get_problem_details(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice = _auth(tokens["alice"])
    r = httpx.post(f"{base}/v1/memories", content=b"{not json", headers={**alice,
                   "content-type": "application/json"})  # fmt: skip
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    big = _fact("x" * (2 * 1024 * 1024))
    assert httpx.post(f"{base}/v1/memories", json=big, headers=alice).status_code == 413
    r = httpx.post(f"{base}/v1/context", json={"query": "x", "limit": "five"}, headers=alice)
    assert r.status_code == 422 and any(p.startswith("limit") for p in r.json()["problems"])
    r = httpx.get(f"{base}/v1/memories/not-an-id", headers=alice)
    assert r.status_code == 422 and "Traceback" not in r.text


def test_a_refusal_lists_at_most_twenty_problems(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice = _auth(tokens["alice"])
    for refs, listed, last in [
        (256, 21, "... and 748 more problems"),  # three problems per malformed input
        (20_000, 1, "at most 256 derived_from inputs, not 20000"),  # refused by length
    ]:
        write = _fact("Acme", "employer", derived_from=[{"bad": i} for i in range(refs)])
        r = httpx.post(f"{base}/v1/memories", json=write, headers=alice)
        assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
        problems = r.json()["problems"]
        assert len(problems) == listed and problems[-1].endswith(last), r.text
        assert len(r.content) < 4000


def _events(base: str, headers: dict[str, str], **params: object) -> list[dict[str, object]]:
    """Every event of one stream (it ends after `wait` seconds without a notice)."""
    found: list[dict[str, object]] = []
    with httpx.stream("GET", f"{base}/v1/feed", headers=headers, params=params, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        event: dict[str, object] = {}
        for line in r.iter_lines():
            if line.startswith("id: "):
                event["id"] = line[4:]
            elif line.startswith("event: "):
                event["event"] = line[7:]
            elif line.startswith("data: "):
                event["data"] = json.loads(line[6:])
            elif not line and event:
                found.append(event)
                event = {}
    return found


def test_the_feed_streams_the_tokens_subtree_and_resumes(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice, bob = _auth(tokens["alice"]), _auth(tokens["bob"])
    mine = httpx.post(f"{base}/v1/memories", json=_fact("feed one", predicate="note_a"),
                      headers=alice).json()["memories"][0]["item_id"]  # fmt: skip
    theirs = httpx.post(f"{base}/v1/memories", json=_fact("feed two", predicate="note_b"),
                        headers=bob).json()["memories"][0]["item_id"]  # fmt: skip
    seen = _events(base, alice, wait=1)
    ids = [e["data"].get("item_id") for e in seen]  # type: ignore[union-attr]
    assert mine in ids and theirs not in ids
    assert all(e["data"].get("namespace") in (None, "acme/alice") for e in seen)  # type: ignore[union-attr]
    assert "feed one" not in json.dumps(seen)  # notices, never content
    last = str(seen[-1]["id"])
    later = httpx.post(f"{base}/v1/memories", json=_fact("feed three", predicate="note_c"),
                       headers=alice).json()["memories"][0]["item_id"]  # fmt: skip
    resumed = _events(base, {**alice, "Last-Event-ID": last}, wait=1)
    assert [e["data"].get("item_id") for e in resumed if e["event"] == "memory_recorded"] == [later]  # type: ignore[union-attr]
    gone = httpx.get(f"{base}/v1/feed", headers={**alice, "Last-Event-ID": "9.9.9"})
    assert (
        gone.status_code in (410, 422)
        and gone.headers["content-type"] == "application/problem+json"
    )


def test_forget_in_words_and_redaction_over_http(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice, eraser = _auth(tokens["alice"]), _auth(tokens["alice_forget"])
    made = httpx.post(f"{base}/v1/memories", json=_fact("PA-12345", predicate="passport_number"),
                      headers=alice).json()["memories"][0]["item_id"]  # fmt: skip
    plan = httpx.post(f"{base}/v1/forget-plans", json={"text": "delete my passport number"},
                      headers=alice)  # fmt: skip
    assert plan.status_code == 201 and plan.json()["targets"] == [made], plan.text
    plan_id = plan.json()["plan_id"]
    assert (
        httpx.get(f"{base}/v1/forget-plans/{plan_id}", headers=alice).json()["status"] == "planned"
    )
    assert (
        httpx.get(f"{base}/v1/forget-plans/{plan_id}", headers=_auth(tokens["bob"])).status_code
        == 404
    )
    refused = httpx.post(f"{base}/v1/forget-plans/{plan_id}/execute", headers=alice)
    assert refused.status_code == 403  # planning is free; erasing needs the grant
    done = httpx.post(f"{base}/v1/forget-plans/{plan_id}/execute", headers=eraser)
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    verified = httpx.post(
        f"{base}{done.headers['location']}/verify", headers=_auth(tokens["auditor"])
    )
    assert verified.status_code == 200 and verified.json()["status"] == "completed"
    turn = httpx.post(f"{base}/v1/memories", json={
        "kind": "turn", "subject": "user", "content": "we met at 3:30 pm at the cafe",
        "origin": "explicit", "sensitivity": "personal", "provenance": _fact("x")["provenance"],
    }, headers=alice).json()["memories"][0]["item_id"]  # fmt: skip
    body = {"spans": ["3:30 pm"]}
    assert (
        httpx.post(f"{base}/v1/memories/{turn}/redact", json=body, headers=alice).status_code == 403
    )
    r = httpx.post(f"{base}/v1/memories/{turn}/redact", json=body, headers=eraser)
    assert r.status_code == 200 and r.json()["status"] == "completed", r.text
    assert httpx.get(f"{base}/v1/memories/{turn}", headers=alice).json()["text"] == (
        "we met at [redacted] at the cafe"
    )


def test_a_retried_post_with_its_idempotency_key_gets_the_first_result(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    alice = {**_auth(tokens["alice_forget"]), "Idempotency-Key": "write-0001"}
    write = _fact("Idem Street 1", predicate="idem_address")
    first = httpx.post(f"{base}/v1/memories", json=write, headers=alice)
    again = httpx.post(f"{base}/v1/memories", json=write, headers=alice)
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    item_id = first.json()["memories"][0]["item_id"]
    plain = _auth(tokens["alice_forget"])
    context = httpx.post(f"{base}/v1/context", json={"query": "Idem Street"}, headers=plain)
    found = [i for i in context.json()["items"] if i["predicate"] == "idem_address"]
    assert [i["item_id"] for i in found] == [item_id]  # stored once
    other = httpx.post(f"{base}/v1/memories", json=_fact("Elsewhere 2"), headers=alice)
    assert other.status_code == 422 and "another request" in other.json()["detail"]
    forget = {"scope": {"kind": "item", "item_ids": [item_id]}}
    keyed = {**alice, "Idempotency-Key": "forget-0001"}
    one = httpx.post(f"{base}/v1/forget-requests", json=forget, headers=keyed)
    two = httpx.post(f"{base}/v1/forget-requests", json=forget, headers=keyed)
    assert one.json()["request_id"] == two.json()["request_id"], (one.text, two.text)
    assert two.headers["location"] == one.headers["location"]
    bad = httpx.post(f"{base}/v1/memories", json=write, headers={**alice, "Idempotency-Key": ""})
    assert bad.status_code == 422
    # a context answers with content: no key may keep it
    keyed_read = {**plain, "Idempotency-Key": "read-0001"}
    refused = httpx.post(f"{base}/v1/context", json={"query": "Idem Street"}, headers=keyed_read)
    assert refused.status_code == 422 and "writes and erasures" in refused.json()["detail"]
    _, settings = server
    assert not store_bytes_contain(settings, "Idem Street 1")  # not in access.sqlite either


def test_the_guides_curl_examples_run(server: tuple[str, Settings], tokens: dict[str, str]) -> None:
    """The HTTP section's curl block, run as written against the live server."""
    guide = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    marker = "this block is run by\n`tests/test_http.py`"
    assert marker in guide
    block = guide.split(marker, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    base, _ = server
    env = {**os.environ, "BASE": base, "TOKEN": tokens["carol"]}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    outputs = done.stdout.strip().split("\n")
    assert json.loads(outputs[0])["memories"][0]["kind"] == "fact"
    assert "18 Haisong Road" in json.loads(outputs[1])["rendered"]
    assert json.loads(outputs[2])["status"] == "planned"
    assert outputs[3] == "401"


def test_requests_are_listed_a_page_at_a_time_in_the_tokens_subtree(
    server: tuple[str, Settings], tokens: dict[str, str]
) -> None:
    base, _ = server
    eraser, bob = _auth(tokens["alice_forget"]), _auth(tokens["bob"])
    for i in range(3):
        made = httpx.post(f"{base}/v1/memories", json=_fact(f"page {i}", predicate=f"page_{i}"),
                          headers=eraser).json()["memories"][0]["item_id"]  # fmt: skip
        body = {"scope": {"kind": "item", "item_ids": [made]}}
        assert (
            httpx.post(f"{base}/v1/forget-requests", json=body, headers=eraser).status_code == 200
        )
    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{base}/v1/forget-requests", params=params, headers=eraser).json()
        seen += page["requests"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) >= 3 and {r["namespace"] for r in seen} == {"acme/alice"}
    assert len({r["request_id"] for r in seen}) == len(seen)  # no page repeats another
    theirs = httpx.get(f"{base}/v1/forget-requests", params={"limit": 200}, headers=bob).json()
    assert not {r["request_id"] for r in theirs["requests"]} & {r["request_id"] for r in seen}
    audit = httpx.get(f"{base}/v1/forget-requests", params={"limit": 200},
                      headers=_auth(tokens["auditor"])).json()  # fmt: skip
    assert {r["request_id"] for r in seen} <= {r["request_id"] for r in audit["requests"]}
    bad = httpx.get(f"{base}/v1/forget-requests", params={"cursor": "zz"}, headers=eraser)
    assert bad.status_code == 422 and "start again" in bad.json()["detail"]
