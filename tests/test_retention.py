"""The retention sweep: expired items are erased through the one erasure path.

Time is injected: the sweep is given `now`, nothing sleeps.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from uuid import UUID

from factories import T0, expiring, fact, file_bytes_contain, sqlite_files, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.jobs.retention import due_items, expire_due


def test_expired_items_are_erased_like_a_forget_and_the_rest_stays(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    token = f"zq{secrets.token_hex(8)}"
    soon = alice.remember(expiring(f"hotel code {token}", hours=1)).item_id
    later = alice.remember(expiring("gym locker 12", hours=24 * 365 * 5)).item_id
    kept = alice.remember(fact("city", "Hangzhou")).item_id  # no expiry at all
    alice.remember(turn("a turn without retention"))

    now = T0 + timedelta(hours=2)
    assert due_items(service.job_context, now) == {"acme/alice": [soon]}
    [report] = expire_due(service.job_context, now)

    assert report.completed, report.to_dict()
    assert report.targets == [soon] and report.basis == "retention_expiry"
    [request] = [e for e in service.ledger.entries(report.request_id) if e.entry_type == "request"]
    assert request.payload["basis"] == "retention_expiry"
    assert request.payload["requested_by"] == "retention_job"
    erased = [e for e in service.log.events_of(UUID(soon)) if type(e).__name__ == "Erased"]
    assert [e.reason for e in erased] == ["retention_expiry"]
    assert alice.get(soon).erased and not alice.get(later).erased
    assert {m.item_id for m in alice.recall()} >= {later, kept}
    assert expire_due(service.job_context, now) == []  # idempotent: nothing is due twice
    if settings.postgres is None:
        _, scan = service.requests.scan_files(report.request_id)
        assert scan is not None and scan.status == "ok"
        assert file_bytes_contain(sqlite_files(settings), token) == []


def test_a_later_sweep_takes_what_became_due(alice: MemoryLedger, service: MemoryService) -> None:
    first = alice.remember(expiring("first", hours=1)).item_id
    second = alice.remember(expiring("second", hours=5)).item_id
    assert [r.targets for r in expire_due(service.job_context, T0 + timedelta(hours=2))] == [
        [first]
    ]
    assert [r.targets for r in expire_due(service.job_context, T0 + timedelta(hours=6))] == [
        [second]
    ]


def test_namespaces_get_requests_of_their_own(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    mine = alice.remember(expiring("alice's", hours=1)).item_id
    theirs = bob.remember(expiring("bob's", hours=1)).item_id
    reports = expire_due(service.job_context, T0 + timedelta(hours=3))
    assert {(r.namespace, tuple(r.targets)) for r in reports} == {
        ("acme/alice", (mine,)),
        ("acme/bob", (theirs,)),
    }
    assert all(r.completed for r in reports)


def test_the_expire_command_sweeps_once_and_refuses_a_bad_time(
    alice: MemoryLedger, where: list[str]
) -> None:
    import json

    from factories import cli

    soon = alice.remember(expiring("ferry ticket 0713", hours=1)).item_id
    code, output = cli("expire", *where, "--now", (T0 + timedelta(hours=2)).isoformat(), "--json")
    assert code == 0, output
    [row] = json.loads(output)["requests"]
    assert (row["namespace"], row["erased"], row["status"]) == ("acme/alice", 1, "completed")
    assert alice.get(soon).erased
    code, output = cli("expire", *where, "--now", "2026-13-01", "--json")
    assert code == 2 and "Traceback" not in output


def test_the_sweep_reports_its_progress_per_request(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(expiring("alice's", hours=1))
    bob.remember(expiring("bob's", hours=1))
    seen: list[tuple[str, int, int]] = []
    reports = expire_due(service.job_context, T0 + timedelta(hours=3), lambda *a: seen.append(a))
    assert len(reports) == 2 and seen == [("retention", 1, 2), ("retention", 2, 2)]
