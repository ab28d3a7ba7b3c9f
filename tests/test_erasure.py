"""Crypto-shredding end to end: after forget, nothing of the item is readable or present."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from factories import fact, file_bytes_contain, later, preference, provenance, sqlite_files, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidTransition, NotFound
from memory_ledger.principal import Principal

ADDRESS = "18 Haisong Road, Hangzhou"
NEW_ADDRESS = "7 Binjiang Avenue, Hangzhou"


SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])  # server files cannot be scanned


@SQLITE_ONLY
def test_event_store_files_never_hold_plaintext(alice: MemoryLedger, settings: Settings) -> None:
    alice.remember_many([fact("home_address", ADDRESS), turn(f"I live at {ADDRESS}")])
    alice.recall()  # projections hold plaintext by design; the event store must not
    events_files = [p for p in sqlite_files(settings) if p.name.startswith("events.sqlite")]
    assert any(p.name.endswith("-wal") for p in events_files), "expected the WAL to be scanned"
    assert file_bytes_contain(events_files, "Haisong") == []


def test_forget_removes_the_item_everywhere_and_keeps_neighbours(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    address = alice.remember(fact("home_address", ADDRESS, category="contact"))
    alice.update(address.item_id, {"value": NEW_ADDRESS, "provenance": provenance(at=later(3))})
    seat = alice.remember(preference("seat", "window"))
    trip = alice.remember(fact("upcoming_trip", "Kyoto in December", category="travel"))

    report = alice.forget(address.item_id)

    assert report.completed, report.to_dict()
    assert {r.store for r in report.receipts} == {
        "event_log",
        "key_store",
        "transcripts",
        "facts",
        "preferences",
        "memory_files",
        "catalog",
        "keyword_index",
        "mention_index",
        "summaries",
        "vector_index",
        "context_cache",
        "forget_plans",
        "backups",
        "files",
    }
    assert all(r.status == "ok" for r in report.receipts)
    assert report.targets == [address.item_id]
    texts = {m.text for m in alice.recall()}
    assert texts == {"window", "Kyoto in December"}
    assert {m.item_id for m in alice.recall()} == {seat.item_id, trip.item_id}
    assert alice.history(subject="user", predicate="home_address") == []
    state = alice.get(address.item_id)
    assert state.erased and state.text is None
    assert "Haisong" not in json.dumps(report.to_dict())
    if settings.postgres is None:
        proof = next(r for r in report.receipts if r.action == "key_bytes_gone")
        assert proof.evidence["checked"] and proof.evidence["keys_found"] == 0
        _, scan = service.requests.scan_files(report.request_id)
        assert scan is not None and scan.status == "ok"
        everything = sqlite_files(settings)
        assert file_bytes_contain(everything, "Haisong") == []
        assert file_bytes_contain(everything, "Binjiang") == []
        # Sealed everywhere: a neighbour is in no file in clear either (recall shows it).
        assert file_bytes_contain(everything, "Kyoto in December") == []


def test_forget_destroys_the_wrapped_key_bytes(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    stored = alice.remember(fact("phone", "+86 138 0000 0000"))
    keys = service.log.keys_for([stored.item_id])
    wrapped = keys._wrapped[(stored.item_id, 1)]
    assert wrapped
    alice.forget(stored.item_id)
    assert service.log.keys_for([stored.item_id]).data_key(stored.item_id, 1) is None
    if settings.postgres is None:
        assert [p.name for p in sqlite_files(settings) if wrapped in p.read_bytes()] == []


def test_forget_is_idempotent(alice: MemoryLedger, service: MemoryService) -> None:
    stored = alice.remember(fact("home_address", ADDRESS))
    alice.forget(stored.item_id)
    again = alice.forget(stored.item_id)
    assert again.completed
    assert again.targets == [stored.item_id]
    assert not again.residue_checked, "nothing is left to search for; the report must say so"
    assert again.residue_scan.startswith("not ")  # not scheduled, or not run (PostgreSQL)


def test_an_erased_item_cannot_be_updated_or_suppressed(alice: MemoryLedger) -> None:
    stored = alice.remember(fact("home_address", ADDRESS))
    alice.forget(stored.item_id)
    with pytest.raises(InvalidTransition):
        alice.update(stored.item_id, {"value": "x y z", "provenance": provenance(at=later(1))})
    with pytest.raises(InvalidTransition):
        alice.suppress(stored.item_id)


def test_another_namespace_cannot_forget_or_read(alice: MemoryLedger, bob: MemoryLedger) -> None:
    stored = alice.remember(fact("home_address", ADDRESS))
    for attempt in (lambda: bob.forget(stored.item_id), lambda: bob.get(stored.item_id)):
        with pytest.raises(NotFound) as refused:
            attempt()
        assert "Haisong" not in str(refused.value)
    assert [m.text for m in alice.recall()] == [ADDRESS]


def test_unknown_id_is_not_found(alice: MemoryLedger) -> None:
    with pytest.raises(NotFound):
        alice.forget("00000000-0000-4000-8000-000000000000")


def test_after_forget_a_new_value_is_accepted_without_the_old_one(alice: MemoryLedger) -> None:
    old = alice.remember(fact("home_address", ADDRESS))
    alice.forget(old.item_id)
    alice.remember(fact("home_address", NEW_ADDRESS, at=later(10)))
    assert [m.text for m in alice.recall(predicate="home_address")] == [NEW_ADDRESS]
    assert [m.text for m in alice.history(subject="user", predicate="home_address")] == [
        NEW_ADDRESS
    ]


def test_erasure_survives_rebuild_and_restart(settings: Settings) -> None:
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        gone = ledger.remember(fact("home_address", ADDRESS))
        kept = ledger.remember(preference("seat", "window"))
        ledger.forget(gone.item_id)
    with MemoryService(settings) as service:
        service.rebuild()
        ledger = service.for_principal(Principal("acme", "alice"))
        assert [m.item_id for m in ledger.recall()] == [kept.item_id]
        assert ledger.get(gone.item_id).erased


def test_recall_from_a_new_process_does_not_return_erased_items(settings: Settings) -> None:
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        gone = ledger.remember(fact("home_address", ADDRESS))
        ledger.remember(preference("seat", "window"))
        ledger.forget(gone.item_id)
    location = ["--url", _url(settings)] if settings.postgres else []
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_ledger.cli",
            "recall",
            "--namespace",
            "acme/alice",
            "--data-dir",
            str(settings.data_dir),
            *location,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    recalled = json.loads(result.stdout)
    assert [m["text"] for m in recalled] == ["window"]
    assert "Haisong" not in result.stdout + result.stderr


def test_redaction_shreds_the_old_content(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    stored = alice.remember(turn(f"Ship it to {ADDRESS}, thanks"))
    alice.redact(stored.item_id, ["content"])
    [memory] = alice.recall(kind="turn")
    assert memory.text == "[redacted]"
    assert alice.get(stored.item_id).redaction == {"state": "applied", "fields": ["content"]}
    service.rebuild()
    assert [m.text for m in alice.recall(kind="turn")] == ["[redacted]"]
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "Haisong") == []


def test_redacting_a_versioned_fact_erases_older_versions(alice: MemoryLedger) -> None:
    stored = alice.remember(fact("home_address", ADDRESS))
    alice.update(stored.item_id, {"value": NEW_ADDRESS, "provenance": provenance(at=later(2))})
    alice.redact(stored.item_id, ["value"])
    versions = alice.history(stored.item_id)
    assert [v.text for v in versions] == [None, "[redacted]"]


def _url(settings: Settings) -> str:
    pg = settings.postgres
    assert pg is not None
    return f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}"


def test_forget_after_every_kind_of_event(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    stored = alice.remember(fact("home_address", ADDRESS))
    alice.update(stored.item_id, {"value": NEW_ADDRESS, "provenance": provenance(at=later(1))})
    alice.suppress(stored.item_id)
    alice.unsuppress(stored.item_id)
    alice.redact(stored.item_id, ["value"])
    report = alice.forget(stored.item_id)
    assert report.completed
    assert alice.recall() == []
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "Haisong") == []
