"""The compliance console's API (memory_ledger/http/compliance/): filters, keyset paging
that returns every request exactly once, search by id prefix, the CSV, totals, the
timeline of one request, the signed head and evidence pack through the audit routes when
they exist, other tokens refused, and no memory content anywhere in what it serves.

The store holds one real forget (of a memory with a known secret) and a few hundred
synthetic requests written into the ledger directly (benchmarks/bench_console.py)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from factories import fact
from fastapi.testclient import TestClient

from benchmarks.bench_console import fill
from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryService
from memory_ledger.audit import verifier
from memory_ledger.config import Settings
from memory_ledger.http.app import create_app
from memory_ledger.http.compliance import CSV_COLUMNS, DEADLINE_ENV
from memory_ledger.http.compliance.query import ConsoleIndex
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.principal import Principal
from memory_ledger.times import now

SECRET = "Quokka Terrace 4412"


class Console:
    def __init__(self, client: TestClient, service: MemoryService, tokens: dict[str, str]):
        self.client, self.service, self.tokens = client, service, tokens

    def get(self, url: str, who: str = "auditor", **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return self.client.get(url, params=params, headers=headers)

    def walk(self, who: str = "auditor", limit: int = 50, **filters: Any) -> list[dict]:
        rows: list[dict] = []
        after = None
        while True:
            params = {**filters, "limit": limit, **({"after": after} if after else {})}
            answer = self.get("/compliance/api/requests", who, **params)
            assert answer.status_code == 200, answer.text
            page = answer.json()
            assert len(page["requests"]) <= limit
            rows += page["requests"]
            if page["next"] is None:
                return rows
            after = page["next"]

    def requests(self) -> dict[str, dict[str, Any]]:
        """Each request from the ledger itself: its request payload and latest status."""
        out: dict[str, dict[str, Any]] = {}
        for entry in self.service.ledger.entries():
            if entry.entry_type.value == "request":
                out[entry.request_id] = {**entry.payload, "filed_at": entry.recorded_at}
            elif entry.entry_type.value == "status" and entry.request_id in out:
                out[entry.request_id]["status"] = entry.payload["status"]
        return out


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    data_dir = tmp_path_factory.mktemp("console") / "data"
    settings = Settings.resolve(data_dir)
    with MemoryService(settings) as service:
        store = TokenStore(settings, now)
        made = {
            "eraser": store.create("acme/alice", "agent", ["forget"])[1],
            "auditor": store.create("acme", "compliance")[1],
            "other": store.create("beta", "compliance")[1],
        }
        client = TestClient(create_app(service, store))
        headers = {"Authorization": f"Bearer {made['eraser']}"}
        written = client.post("/v1/memories", headers=headers, json={
            "kind": "fact", "subject": "user", "predicate": "home_address", "value": SECRET,
            "origin": "explicit", "sensitivity": "personal",
            "provenance": {"writer": "agent", "written_at": datetime.now(UTC).isoformat(),
                           "session_id": "s1", "turn_id": "t1"},
        }).json()["memories"][0]["item_id"]  # fmt: skip
        scope = {"scope": {"kind": "item", "item_ids": [written]}}
        forgotten = client.post("/v1/forget-requests", headers=headers, json=scope).json()
        assert forgotten["status"] == "completed"
        made["request_id"] = forgotten["request_id"]
        fill(data_dir, 400)
        yield Console(client, service, made)
        client.close()
        store.close()


def _in(namespace: str, subtree: str) -> bool:
    return namespace == subtree or namespace.startswith(subtree + "/")


def test_walking_every_page_returns_every_request_of_the_subtree_exactly_once(
    console: Console,
) -> None:
    expected = {r for r, p in console.requests().items() if _in(p["namespace"], "acme")}
    assert console.tokens["request_id"] in expected and len(expected) > 100
    for limit in (7, 50, 500):
        rows = console.walk(limit=limit)
        ids = [r["request_id"] for r in rows]
        assert len(ids) == len(set(ids)) == len(expected)
        assert set(ids) == expected
        seqs = [r["filed_seq"] for r in rows]
        assert seqs == sorted(seqs, reverse=True)  # newest filed first


def test_filters_select_what_the_ledger_says(console: Console) -> None:
    ledger = {r: p for r, p in console.requests().items() if _in(p["namespace"], "acme")}
    for field, value in (("status", "partial"), ("status", "completed"),
                         ("basis", "retention_expiry"), ("kind", "redaction")):  # fmt: skip
        got = {r["request_id"] for r in console.walk(**{field: value})}
        key = "scope" if field == "kind" else field
        want = {
            r for r, p in ledger.items()
            if (p[key]["kind"] if field == "kind" else p.get(key, "user_request")) == value
        }  # fmt: skip
        assert got == want and got, (field, value)
    # A subtree is the namespace and what is under it, never a sibling sharing a prefix.
    users = sorted({p["namespace"] for p in ledger.values()})
    user = next(u for u in users if any(v.startswith(u + "/") for v in users))
    got = {r["request_id"] for r in console.walk(namespace=user)}
    assert got == {r for r, p in ledger.items() if _in(p["namespace"], user)}
    sibling = user + "0"
    assert all(not _in(p["namespace"], sibling) for r, p in ledger.items() if r in got)
    # Outside the token's subtree: nothing, not an error.
    assert console.walk(namespace="beta") == []
    # A time range, on the filing time (until exclusive).
    times = sorted(p["filed_at"] for p in ledger.values())
    since, until = times[len(times) // 4], times[len(times) // 2]
    got = {r["request_id"] for r in console.walk(since=since, until=until)}
    assert got == {r for r, p in ledger.items() if since <= p["filed_at"] < until}
    # A filter that is not an identifier is refused without being echoed.
    answer = console.get("/compliance/api/requests", status="<b>x</b>")
    assert answer.status_code == 422 and "<b>" not in answer.text


def test_search_by_request_id_prefix(console: Console) -> None:
    request_id = console.tokens["request_id"]
    rows = console.walk(search=request_id[:9])
    assert request_id in {r["request_id"] for r in rows}
    assert all(r["request_id"].startswith(request_id[:9]) for r in rows)
    assert [r["request_id"] for r in console.walk(search=request_id)] == [request_id]
    assert console.walk(search="req-zzzz") == []


def test_one_row_per_request_with_its_stores_and_verification(console: Console) -> None:
    row = next(r for r in console.walk(search=console.tokens["request_id"]))
    assert row["status"] == "completed" and row["namespace"] == "acme/alice"
    assert row["basis"] == "user_request" and row["kind"] == "item"
    assert row["completed_at"] >= row["filed_at"] and row["done_seconds"] >= 0
    assert row["stores_ok"] == row["stores_total"] >= 10
    assert row["key_proof"] == "ok"


def test_the_csv_has_one_row_per_request_and_the_documented_columns(console: Console) -> None:
    answer = console.get("/compliance/api/requests.csv", status="completed")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    assert "attachment" in answer.headers["content-disposition"]
    rows = list(csv.reader(io.StringIO(answer.text)))
    assert tuple(rows[0]) == CSV_COLUMNS
    listed = console.walk(status="completed")
    assert [r[0] for r in rows[1:]] == [r["request_id"] for r in listed]
    assert {r[CSV_COLUMNS.index("status")] for r in rows[1:]} == {"completed"}


def test_totals_count_statuses_bases_overdue_and_time_to_completion(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = {r: p for r, p in console.requests().items() if _in(p["namespace"], "acme")}
    totals = console.get("/compliance/api/totals").json()
    assert totals["total"] == len(ledger) == sum(totals["by_status"].values())
    assert sum(totals["by_basis"].values()) == len(ledger)
    assert totals["by_basis"]["retention_expiry"] == sum(
        1 for p in ledger.values() if p.get("basis") == "retention_expiry"
    )
    assert totals["deadline_days"] == 30
    cutoff = (datetime.now(UTC) - timedelta(days=30)).isoformat()[:19]
    open_statuses = {"pending", "partial", "blocked", "needs_clarification", None}
    overdue = sum(
        1 for p in ledger.values()
        if p.get("status") in open_statuses and not p.get("dry_run") and p["filed_at"] < cutoff
    )  # fmt: skip
    assert totals["overdue"] == overdue > 0
    done = totals["completion_seconds"]
    assert done["count"] == totals["by_status"]["completed"]
    assert 0 <= done["median"] <= done["p90"]
    monkeypatch.setenv(DEADLINE_ENV, "365")
    assert console.get("/compliance/api/totals").json()["overdue"] == 0
    monkeypatch.setenv(DEADLINE_ENV, "soon")
    assert console.get("/compliance/api/totals").status_code == 422


def test_the_detail_is_a_timeline_of_the_requests_ledger_entries(console: Console) -> None:
    request_id = console.tokens["request_id"]
    detail = console.get(f"/compliance/api/requests/{request_id}").json()
    steps = detail["timeline"]
    assert [s["seq"] for s in steps] == [e.seq for e in console.service.ledger.entries(request_id)]
    phases = [s["phase"] for s in steps]
    assert phases[0] == "filed" and "resolved" in phases and "key proof" in phases
    assert "store" in phases and "scan" in phases and "status" in phases
    assert any(s["line"].startswith("event_log: tombstoned ok") for s in steps)
    assert all(len(s["entry_hash"]) == 64 and s["at"] for s in steps)
    assert detail["pack_url"] == f"/v1/audit/requests/{request_id}/pack"


def test_other_tokens_are_refused(console: Console) -> None:
    request_id = console.tokens["request_id"]
    for url in ("/compliance/api/requests", "/compliance/api/totals",
                "/compliance/api/requests.csv", f"/compliance/api/requests/{request_id}",
                "/compliance/api/ledger", "/compliance/api/head"):  # fmt: skip
        assert console.get(url, "eraser").status_code == 403, url
        assert console.get(url, "").status_code == 401, url
    # Another tenant's auditor sees none of acme's requests, and not this one's detail.
    theirs = console.walk("other")
    assert theirs and all(_in(r["namespace"], "beta") for r in theirs)
    assert console.get(f"/compliance/api/requests/{request_id}", "other").status_code == 404
    assert console.get("/compliance/api/totals", "other").json()["total"] == len(theirs)
    assert console.walk("other", namespace="acme") == []


def test_a_cursor_or_page_size_out_of_range_is_refused_not_a_server_error(
    console: Console,
) -> None:
    """`after` is a ledger seq: above the largest integer SQLite holds it overflowed the
    driver (a 500); it is refused (422, problem+json) like any number out of range."""
    largest = console.get("/compliance/api/requests", after=2**63 - 1, limit=1)
    assert largest.status_code == 200 and len(largest.json()["requests"]) == 1
    for params in ({"after": 2**63}, {"after": 10**30}, {"after": -1}, {"limit": 2**64},
                   {"limit": 0}):  # fmt: skip
        answer = console.get("/compliance/api/requests", **params)
        assert answer.status_code == 422, (params, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json"), params


def test_the_ledger_verdict_says_when_the_verification_scan_is_due(console: Console) -> None:
    """What the page's "not yet" ends with: the verification-scan job's next run (none
    here: no scheduler has it), and the kept-head check (no head kept: nothing to say)."""
    verdict = console.get("/compliance/api/ledger").json()
    assert verdict["scan"] == {"job": "verification-scan", "every_minutes": 10.0, "next_run": None}
    assert verdict["kept_head"] == {"ok": True, "size": None, "explanation": ""}


def test_a_request_with_no_scan_scheduled_is_not_left_not_yet(tmp_path: Path) -> None:
    """Nothing readable erased: its `scan_scheduled` receipt kept no fingerprints, so no
    scan will come; the row says so (`not_scheduled`) rather than "not yet" forever."""
    settings = Settings.resolve(tmp_path)
    with LifecycleLedger(settings) as ledger:
        item = "00000000-0000-4000-8000-000000000001"
        ledger.append(
            "req-noscan",
            "request",
            {
                "namespace": "acme/alice",
                "scope": {"kind": "item", "item_ids": [item]},
                "requested_by": "acme/alice",
                "basis": "user_request",
                "dry_run": False,
            },
        )
        ledger.append(
            "req-noscan",
            "receipt",
            {
                "store": "files",
                "action": "scan_scheduled",
                "targets": 1,
                "status": "ok",
                "evidence": {"fingerprints_kept": False},
            },
        )
        ledger.append("req-noscan", "status", {"status": "completed"})  # fmt: skip
        index = ConsoleIndex(tmp_path / "console.sqlite", ledger)
        try:
            assert index.one("req-noscan")["verified"] == "not_scheduled"
        finally:
            index.close()


def test_the_signed_head_and_pack_come_from_the_audit_routes(tmp_path: Path) -> None:
    """The console asks the audit routes inside the server with the caller's token: the
    head it shows is the ledger's signed head, and a request's pack downloads (a browser
    link carries no bearer token, so the download goes through the console)."""
    settings = Settings.resolve(tmp_path / "data")
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        item = ledger.remember(fact("city", "Lyon")).item_id
        request_id = ledger.forget(item).request_id
        store = TokenStore(settings, now)
        token = store.create("acme", "compliance")[1]
        client = TestClient(create_app(service, store))
        client.headers["Authorization"] = f"Bearer {token}"
        answer = client.get("/compliance/api/head").json()
        assert answer["available"] is True
        head = answer["head"]
        assert head["size"] >= 1 and len(head["root"]) == 64 and head["signature"]
        got = client.get(f"/compliance/requests/{request_id}/pack")
        assert got.status_code == 200
        pack = got.json()
        assert pack["request_id"] == request_id
        assert not verifier.check_pack(pack, None, head["key_id"])
        assert client.get("/compliance/requests/req-0123456789abcdef/pack").status_code == 404
        client.close()
        store.close()


def test_no_memory_content_anywhere_the_console_serves(console: Console) -> None:
    request_id = console.tokens["request_id"]
    served = [
        json.dumps(console.walk()),
        console.get("/compliance/api/requests.csv").text,
        console.get("/compliance/api/totals").text,
        console.get(f"/compliance/api/requests/{request_id}").text,
        console.get("/compliance/api/ledger").text,
    ]
    console.client.cookies.set("ml_compliance", console.tokens["auditor"])
    page = console.client.get("/compliance")
    console.client.cookies.clear()
    assert page.status_code == 200 and "Forget requests" in page.text
    served.append(page.text)
    served += [
        console.client.get(f"/compliance/static/{n}").text for n in ("console.js", "console.css")
    ]
    for text in served:
        assert SECRET not in text and "Quokka" not in text
    # and the summary file the console keeps holds none either
    data_dir = console.service.settings.data_dir
    assert b"Quokka" not in (data_dir / "compliance_console.sqlite").read_bytes()


def test_a_new_request_appears_on_the_first_page_at_the_next_read(console: Console) -> None:
    before = console.get("/compliance/api/totals").json()["total"]
    headers = {"Authorization": f"Bearer {console.tokens['eraser']}"}
    scope = {"scope": {"kind": "predicate", "subject": "user", "predicate": "pet_name"}}
    filed = console.client.post("/v1/forget-requests", headers=headers, json=scope).json()
    first = console.get("/compliance/api/requests", limit=1).json()["requests"][0]
    assert first["request_id"] == filed["request_id"]
    assert first["status"] == filed["status"] == "nothing_matched"
    assert console.get("/compliance/api/totals").json()["total"] == before + 1


def test_the_summary_is_rebuilt_when_the_ledger_behind_it_is_another(tmp_path: Path) -> None:
    from memory_ledger.http.compliance.query import ConsoleIndex, Filters
    from memory_ledger.ledger import LifecycleLedger

    first, second = tmp_path / "one", tmp_path / "two"
    fill(first, 40, tenants=("acme",))
    fill(second, 25, seed=5, tenants=("acme",))
    summary = tmp_path / "console.sqlite"
    for data_dir, count in ((first, 40), (second, 25), (first, 40)):
        with LifecycleLedger(Settings.resolve(data_dir)) as ledger:
            index = ConsoleIndex(summary, ledger)
            rows, _ = index.page("acme", Filters(), limit=500)
            ids = {e.request_id for e in ledger.entries() if e.entry_type.value == "request"}
            assert len(rows) == count and {r["request_id"] for r in rows} == ids
            index.close()
    summary.unlink()  # derived: deleted, it is built again
    with LifecycleLedger(Settings.resolve(first)) as ledger:
        index = ConsoleIndex(summary, ledger)
        assert len(index.page("acme", Filters(), limit=500)[0]) == 40
        index.close()
