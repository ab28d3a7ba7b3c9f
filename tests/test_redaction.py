"""A redaction is a forget request at span granularity: the named spans go from the item
and from what carried or was derived from it, the rest stays readable, and the request
has receipts, ledger entries and verification like any erasure."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from factories import fact, file_bytes_contain, provenance, sqlite_files, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite, NotFound

MET = "We met at the harbour cafe at 14:35 on Tuesday"
CARD = "Please charge card 4111 1111 1111 1111 for the hotel"


def test_a_span_goes_and_the_rest_stays(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    said = alice.remember(turn(MET)).item_id
    report = alice.redact(said, spans=["14:35"])
    assert report.status == "completed", report.failed_stores
    assert alice.get(said).text == "We met at the harbour cafe at [redacted] on Tuesday"
    assert [m.text for m in alice.recall(kind="turn")] == [alice.get(said).text]
    stores = {r.store for r in report.receipts}
    assert {"event_log", "key_store", "transcripts", "vector_index", "files"} <= stores
    assert all(r.status == "ok" for r in report.receipts)
    # The ledger holds the request, not the span.
    entries = service.ledger.entries(report.request_id)
    kinds = [e.entry_type for e in entries]
    assert kinds[0] == "request" and kinds[-1] == "status"
    assert entries[0].payload["scope"] == {"kind": "redaction", "item_ids": [said], "spans": 1}
    assert "14:35" not in repr([e.payload for e in entries])
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "14:35") == []
        assert "14:35" not in (settings.data_dir / "ledger.sqlite").read_bytes().decode("latin-1")
    # Verification asks the stores again, and the rebuilt projections agree.
    assert service.requests.verify(report.request_id).failed_stores == []
    service.rebuild()
    assert alice.get(said).text.endswith("[redacted] on Tuesday")


def test_a_capitalised_span_keeps_its_lower_case_namesake(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """ "Rose" the witness goes; "the rose bushes" in the same turn stays (a span is as
    written where it was found), and every store's check agrees; a lower-case span
    still takes every case."""
    said = alice.remember(turn("Rose saw it from the rose bushes, Rose said.")).item_id
    report = alice.redact(said, spans=["Rose"])
    assert report.status == "completed", report.failed_stores
    assert alice.get(said).text == "[redacted] saw it from the rose bushes, [redacted] said."
    assert service.requests.verify(report.request_id).failed_stores == []
    other = alice.remember(turn("Grant approved the Grant form.", turn_id="t2")).item_id
    assert alice.redact(other, spans=["grant"]).status == "completed"
    assert alice.get(other).text == "[redacted] approved the [redacted] form."


def test_derived_items_lose_the_span_too(alice: MemoryLedger) -> None:
    card_turn = alice.remember(turn(CARD, turn_id="t3")).item_id
    stated = alice.get(card_turn)
    derived = alice.remember(
        {
            **fact("payment_card", "4111 1111 1111 1111", origin="inferred", turn="t3"),
            "derived_from": [{"item_id": card_turn, "version": stated.version}],
        }
    ).item_id
    unrelated = alice.remember(fact("hotel", "Harbour Inn", turn="t9")).item_id

    report = alice.redact(card_turn, spans=["4111 1111 1111 1111"])
    assert report.status == "completed"
    assert report.cascaded == [derived]
    assert alice.get(card_turn).text == "Please charge card [redacted] for the hotel"
    assert alice.get(derived).text == "[redacted]"
    assert alice.get(unrelated).text == "Harbour Inn"


def test_the_old_wording_is_unreadable_in_history(alice: MemoryLedger) -> None:
    stored = alice.remember(fact("meeting", "Lunch with Dana at 12:30")).item_id
    alice.update(stored, {"value": "Lunch with Dana at 13:00", "provenance": provenance()})
    report = alice.redact(stored, spans=["Dana"])
    assert report.completed
    assert [v.text for v in alice.history(stored)] == [None, "Lunch with [redacted] at 13:00"]


def test_a_dry_run_changes_nothing(alice: MemoryLedger) -> None:
    said = alice.remember(turn(MET)).item_id
    report = alice.redact(said, spans=["14:35"], dry_run=True)
    assert report.status == "dry_run"
    assert alice.get(said).text == MET


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"spans": ["16:00"]}, "occur in none"),
        ({"spans": ["4:35"]}, "occur in none"),  # inside "14:35": never a partial token
        ({"spans": ["harbour caf"]}, "occur in none"),  # nor a partial word
        ({"spans": []}, "exactly one"),
        ({"spans": ["14:35"], "fields": ["content"]}, "exactly one"),
        ({"spans": ["   "]}, "blank"),
        ({"fields": ["colour"]}, "fields"),
    ],
)
def test_bad_redactions_change_nothing(
    alice: MemoryLedger, service: MemoryService, kwargs: dict, problem: str
) -> None:
    said = alice.remember(turn(MET)).item_id
    before = service.log.max_position()
    with pytest.raises(InvalidWrite) as refused:
        alice.redact(said, **kwargs)
    assert problem in str(refused.value)
    for span in kwargs.get("spans", []):  # a refusal never repeats the text
        assert not span.strip() or span not in str(refused.value)
    assert service.log.max_position() == before
    assert alice.get(said).text == MET


def test_another_namespace_cannot_be_redacted(alice: MemoryLedger, bob: MemoryLedger) -> None:
    said = alice.remember(turn(MET)).item_id
    with pytest.raises(NotFound):
        bob.redact(said, spans=["14:35"])
    assert alice.get(said).text == MET


def test_whole_field_redaction_is_a_request_too(alice: MemoryLedger) -> None:
    said = alice.remember(turn(MET)).item_id
    report = alice.redact(said, ["content"])
    assert report.completed
    assert alice.get(said).text == "[redacted]"
    assert alice.get(said).redaction == {"state": "applied", "fields": ["content"]}


def test_a_redaction_interrupted_before_its_rewrite_is_refused_on_resume(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """Spans are never recorded, so a crash before the rewrite cannot be finished: the
    resumed request says so (refused, nothing changed) instead of staying pending."""
    said = alice.remember(turn(MET)).item_id
    dry = alice.redact(said, spans=["14:35"], dry_run=True)
    service.ledger.append_many(dry.request_id, [("status", {"status": "pending"})])
    resumed = service.requests.resume(dry.request_id)
    assert resumed.status == "refused"
    assert alice.get(said).text == MET


@pytest.mark.slow
def test_the_cli_redacts_a_span(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    base = [sys.executable, "-m", "memory_ledger.cli", "--help"]
    assert subprocess.run(base, capture_output=True).returncode == 0
    with MemoryService(Settings.resolve(data)) as svc:
        from memory_ledger.principal import Principal

        said = svc.for_principal(Principal("acme", "alice")).remember(turn(MET)).item_id
    run = [sys.executable, "-m", "memory_ledger.cli", "redact", "-n", "acme/alice", said]
    done = subprocess.run(
        [*run, "--span", "14:35", "--data-dir", str(data), "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert '"status": "completed"' in done.stdout
    assert "Traceback" not in done.stderr
    with sqlite3.connect(data / "events.sqlite") as conn:
        assert conn.execute("select count(*) from memory_keys").fetchone()[0] >= 2


def test_the_consistency_check_knows_a_redaction_keeps_its_items(
    alice: MemoryLedger, service: MemoryService
) -> None:
    from memory_ledger import consistency

    said = alice.remember(turn(MET)).item_id
    assert alice.redact(said, spans=["14:35"]).completed
    report = consistency.check(service.log, service.ledger, service.settings)
    assert report.ok, report.findings
