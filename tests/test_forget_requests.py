"""Forget requests by scope: resolution, clarification, cascade, receipts, recovery."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from datetime import datetime
from pathlib import Path

import pytest
from factories import (
    T0,
    fact,
    file_bytes_contain,
    later,
    preference,
    provenance,
    sqlite_files,
    turn,
)

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite, NotFound
from memory_ledger.principal import Principal

ALICE = Principal("acme", "alice")


def test_dry_run_resolves_without_erasing(alice: MemoryLedger, service: MemoryService) -> None:
    stored = alice.remember(fact("home_address", "18 Haisong Road"))
    events = service.log.max_position()
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "home_address"}, dry_run=True
    )
    assert report.status == "dry_run" and report.targets == [stored.item_id]
    assert service.log.max_position() == events
    assert [m.text for m in alice.recall()] == ["18 Haisong Road"]
    assert service.ledger.latest_status(report.request_id) == "dry_run"


def test_predicate_scope_erases_every_version_and_the_carrying_turn(
    alice: MemoryLedger, settings: Settings
) -> None:
    said = alice.remember(turn("I live at 18 Haisong Road", turn_id="t1"))
    old = alice.remember(fact("home_address", "18 Haisong Road", turn="t1"))
    alice.update(old.item_id, {"value": "18 Haisong Rd.", "provenance": provenance(at=later(1))})
    moved = alice.remember(fact("home_address", "7 Binjiang Avenue", at=later(30), turn="t9"))
    seat = alice.remember(preference("seat", "window"))
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "home_address"}
    )
    assert report.completed
    assert sorted(report.targets) == sorted([old.item_id, moved.item_id])
    assert report.cascaded == [said.item_id]
    assert [m.item_id for m in alice.recall()] == [seat.item_id]
    assert "Haisong" not in report.message and "Binjiang" not in report.message
    if settings.postgres is None:
        files = sqlite_files(settings)
        assert file_bytes_contain(files, "Haisong") == [] == file_bytes_contain(files, "Binjiang")


def test_previous_value_with_two_candidates_needs_clarification(alice: MemoryLedger) -> None:
    alice.remember(fact("home_address", "1 First Street", at=T0))
    alice.remember(fact("home_address", "2 Second Street", at=later(10)))
    current = alice.remember(fact("home_address", "3 Third Street", at=later(20)))
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "home_address", "which": "previous"}
    )
    assert report.status == "needs_clarification"
    assert len(report.candidates) == 2 and report.targets == []
    assert current.item_id not in [c.item_id for c in report.candidates]
    assert len(alice.history(subject="user", predicate="home_address")) == 3  # nothing erased


def test_previous_value_with_one_candidate_is_erased(alice: MemoryLedger) -> None:
    old = alice.remember(fact("home_address", "1 First Street", at=T0))
    alice.remember(fact("home_address", "2 Second Street", at=later(10)))
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "home_address", "which": "previous"}
    )
    assert report.completed and report.targets == [old.item_id]
    assert [m.text for m in alice.recall()] == ["2 Second Street"]


def test_source_scope_takes_everything_from_one_turn(alice: MemoryLedger) -> None:
    alice.remember_many(
        [
            turn("I'm vegetarian and I live in Hangzhou", turn_id="t7"),
            fact("diet", "vegetarian", turn="t7"),
            fact("city", "Hangzhou", turn="t7"),
            fact("employer", "Acme Corp", turn="t8"),
        ]
    )
    report = alice.forget_scope({"kind": "source", "turn_id": "t7"})
    assert report.completed and len(report.targets) == 3
    assert [m.text for m in alice.recall()] == ["Acme Corp"]


def test_category_sensitivity_time_range_and_whole_namespace(
    alice: MemoryLedger, bob: MemoryLedger
) -> None:
    alice.remember_many(
        [
            fact("blood_type", "AB negative", category="health", sensitivity="restricted"),
            fact("allergy", "peanuts allergy", category="health", at=later(2)),
            fact("city", "Hangzhou", category="contact", at=later(5)),
            fact("team", "Rockets fan", category="leisure", sensitivity="public", at=later(9)),
        ]
    )
    bob.remember(fact("city", "Ningbo"))
    assert alice.forget_scope({"kind": "sensitivity", "sensitivity": "restricted"}).completed
    assert alice.forget_scope({"kind": "category", "category": "health"}).completed
    assert {m.text for m in alice.recall()} == {"Hangzhou", "Rockets fan"}
    window = {"kind": "time_range", "since": later(4).isoformat(), "until": later(6).isoformat()}
    assert alice.forget_scope(window).targets and alice.recall()[0].text == "Rockets fan"
    assert alice.forget_scope({"kind": "namespace"}).completed
    assert alice.recall() == []
    assert [m.text for m in bob.recall()] == ["Ningbo"]


def test_erasing_an_input_cascades_to_what_was_derived_from_it(alice: MemoryLedger) -> None:
    city = alice.remember(fact("city", "Hangzhou"))
    tz = alice.remember(
        {
            **fact("timezone", "Asia/Shanghai", origin="inferred"),
            "derived_from": [{"item_id": city.item_id, "version": 1}],
        }
    )
    kept = alice.remember(fact("employer", "Acme Corp"))
    report = alice.forget(city.item_id)
    assert report.completed and report.cascaded == [tz.item_id]
    assert [m.item_id for m in alice.recall()] == [kept.item_id]


def test_a_scope_that_matches_nothing_says_so(alice: MemoryLedger) -> None:
    report = alice.forget_scope({"kind": "category", "category": "nonexistent"})
    assert report.status == "nothing_matched" and "Nothing stored" in report.message


@pytest.mark.parametrize(
    "scope",
    [
        {"kind": "predicate", "subject": "user"},
        {"kind": "time_range", "since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"},
        {"kind": "time_range", "since": "not a time"},
        {"kind": "source"},
        {"kind": "galaxy"},
        {"kind": "namespace", "namespace": "acme/bob"},
        {"kind": "category", "category": "lives at 18 Haisong Road"},
    ],
)
def test_malformed_scopes_are_refused(
    scope: dict, alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(fact("city", "Hangzhou"))
    before = service.ledger.request_ids()
    with pytest.raises(InvalidWrite):
        alice.forget_scope(scope)
    assert service.ledger.request_ids() == before
    assert alice.recall()


def test_another_namespaces_item_is_refused_and_logged_without_content(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    theirs = bob.remember(fact("city", "Ningbo"))
    with pytest.raises(NotFound):
        alice.forget_scope({"kind": "item", "item_ids": [theirs.item_id]})
    assert [m.text for m in bob.recall()] == ["Ningbo"]
    [request_id] = service.ledger.request_ids()
    assert service.ledger.latest_status(request_id) == "refused"
    kinds = [e.entry_type for e in service.ledger.entries(request_id)]
    assert kinds == ["request", "refusal", "status"]
    assert "Ningbo" not in json.dumps([e.payload for e in service.ledger.entries()])


def test_tombstone_positions_are_recorded_for_restore(
    alice: MemoryLedger, service: MemoryService
) -> None:
    stored = alice.remember_many([fact("city", "Hangzhou"), fact("employer", "Acme Corp")])
    report = alice.forget_scope({"kind": "namespace"})
    tombstones = [
        e.payload for e in service.ledger.entries(report.request_id) if e.entry_type == "tombstone"
    ]
    assert sorted(t["item_id"] for t in tombstones) == sorted(s.item_id for s in stored)
    assert all(t["position"] > stored[-1].position for t in tombstones)


def test_writes_racing_a_whole_user_forget_are_cut_at_its_resolution_position(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """Memories written while a whole-user forget runs: those at or before the position
    its scope was resolved at are erased, later ones are kept, and the request's record
    (the report, and the receipts rebuilt from the ledger) names that time and position.
    A writer thread races the request; which writes fall on which side is up to the
    scheduler, the cut must be exact either way."""
    writer = service.for_principal(ALICE)
    written: list[tuple[str, int]] = []  # (item id, log position)
    started, done = threading.Event(), threading.Event()

    def write() -> None:
        n = 0
        while not done.is_set() or n < 24:  # some before, during and after the request
            w = writer.remember(fact(f"note_{n}", f"note number {n}"))
            written.append((w.item_id, w.position))
            n += 1
            if n == 8:
                started.set()

    thread = threading.Thread(target=write)
    thread.start()
    started.wait()
    before = service.clock()
    report = alice.forget_scope({"kind": "namespace"})
    done.set()
    thread.join()
    assert report.completed and report.resolved_position is not None
    cut = report.resolved_position
    erased = {i for i, p in written if p <= cut}
    kept = {i for i, p in written if p > cut}
    assert len(erased) >= 8 and kept  # the eight before the request; those after it
    assert set(report.targets) == erased
    assert {i for i in erased | kept if alice.get(i).erased} == erased
    assert {m.item_id for m in alice.recall(limit=len(written))} == kept
    assert before <= datetime.fromisoformat(report.resolved_at or "") <= service.clock()
    receipt = service.requests.report(report.request_id)  # from the ledger alone
    assert (receipt.resolved_at, receipt.resolved_position) == (report.resolved_at, cut)


def test_a_failing_store_leaves_the_request_partial_and_a_retry_completes_it(
    settings: Settings, plugin_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_EXTRA_STORES", "ml_test_plugins:factory")
    settings = Settings(settings.data_dir, settings.postgres)  # read with the variable set
    with MemoryService(settings) as service:
        ledger = service.for_principal(ALICE)
        stored = ledger.remember(fact("city", "Hangzhou"))
        first = ledger.forget(stored.item_id)
        assert first.status == "partial" and first.failed_stores == ["flaky_subscriber"]
        assert "Not finished" in first.message
        assert ledger.recall() == []  # every other store has already erased it
        second = service.requests.resume(first.request_id)
        assert second.completed and second.request_id == first.request_id
        statuses = [
            e.payload["status"]
            for e in service.ledger.entries(first.request_id)
            if e.entry_type == "status"
        ]
        assert statuses == ["pending", "partial", "completed"]
        attempts = [
            (e.payload["store"], e.payload["attempt"])
            for e in service.ledger.entries(first.request_id)
            if e.entry_type == "receipt" and e.payload["store"] in ("flaky_subscriber", "facts")
        ]
        assert attempts == [
            ("facts", 1),
            ("flaky_subscriber", 1),
            ("facts", 2),
            ("flaky_subscriber", 2),
        ]
        receipts = service.requests.report(first.request_id).receipts
        assert [r.attempt for r in receipts if r.store == "flaky_subscriber"] == [1, 2]


def test_a_killed_fan_out_resumes_on_the_next_start(settings: Settings, plugin_path: Path) -> None:
    with MemoryService(settings) as service:
        stored = service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}" if pg else ""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(plugin_path)!r})
        from memory_ledger.api import MemoryService
        from memory_ledger.principal import Principal
        with MemoryService.open({str(settings.data_dir)!r}, {url!r} or None) as service:
            service.for_principal(Principal("acme", "alice")).forget({stored.item_id!r})
    """)
    env = {**__import__("os").environ, "MEMORY_LEDGER_EXTRA_STORES": "ml_test_plugins:slow"}
    worker = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    entered = plugin_path / "slow-store-entered"
    for _ in range(600):
        if entered.exists() or worker.poll() is not None:
            break
        __import__("time").sleep(0.05)
    assert entered.exists(), worker.communicate()[1].decode()
    worker.kill()  # SIGKILL mid fan-out: no cleanup runs
    worker.wait()
    with MemoryService(settings) as service:  # resumes unfinished requests on open
        [request_id] = service.ledger.request_ids()
        assert service.ledger.latest_status(request_id) == "completed"
        assert service.for_principal(ALICE).recall() == []
        report = service.requests.report(request_id)
        assert report.targets == [stored.item_id]
        assert {"event_log", "key_store", "facts"} <= {r.store for r in report.receipts}


def test_verify_rechecks_every_store(alice: MemoryLedger, service: MemoryService) -> None:
    stored = alice.remember(fact("city", "Hangzhou"))
    report = alice.forget(stored.item_id)
    again = service.requests.verify(report.request_id)
    assert again.failed_stores == []
    assert {r.store for r in again.receipts} >= {"event_log", "key_store", "facts", "catalog"}
    assert all(r.action == "verified" for r in again.receipts if r.store != "files")


def test_the_ledger_and_receipts_hold_no_content(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    alice.remember(fact("home_address", "18 Haisong Road"))
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "home_address"}
    )
    dumped = json.dumps([e.payload for e in service.ledger.entries()])
    assert "Haisong" not in dumped and "Haisong" not in json.dumps(report.to_dict())
    if settings.postgres is None:
        ledger_files = [p for p in sqlite_files(settings) if p.name.startswith("ledger")]
        assert ledger_files and file_bytes_contain(ledger_files, "Haisong") == []


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL's files live on the server
def test_verify_rescans_files_with_keyed_fingerprints(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    stored = alice.remember(fact("home_address", "18 Haisong Road, Hangzhou"))
    report = alice.forget(stored.item_id)
    clean = service.requests.verify(report.request_id)
    assert clean.residue_checked and clean.residue_files == [] and clean.failed_stores == []
    # A copy someone left in the data directory after the erasure: verify must find it.
    stray = settings.data_dir / "export-2026-11-29.json"
    stray.write_text('{"home": "18 Haisong Road, Hangzhou"}')
    dirty = service.requests.verify(report.request_id)
    assert dirty.residue_files == [str(stray)] and dirty.failed_stores == ["files"]
    assert "Haisong" not in json.dumps(dirty.to_dict())
    stray.unlink()
    service.requests.close_verification(report.request_id)
    closed = service.requests.verify(report.request_id)
    assert not closed.residue_checked and "window has closed" in closed.residue_scan
    everything = sqlite_files(settings)
    assert file_bytes_contain(everything, "Haisong") == []


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL's files live on the server
def test_the_same_words_held_by_another_user_are_in_no_file_and_not_residue(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    alices = alice.remember(preference("seat", "window seat, aisle side"))
    bobs = bob.remember(preference("seat", "window seat, aisle side"))

    report = alice.forget(alices.item_id)

    assert report.completed, report.to_dict()
    # Sealed everywhere: Bob's copy is ciphertext too, so the scan has nothing to excuse.
    assert file_bytes_contain(sqlite_files(settings), "window seat") == []
    _, scan = service.requests.scan_files(report.request_id)
    assert scan is not None and scan.status == "ok", scan
    assert scan.evidence["found_in_clear_identifiers"] == 0
    assert bob.get(bobs.item_id).text == "window seat, aisle side"
    stray = settings.data_dir / "export.json"  # a real leftover is still caught later
    stray.write_text("window seat, aisle side")
    assert service.requests.verify(report.request_id).failed_stores == ["files"]
    assert "window" not in json.dumps(report.to_dict())


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL's files live on the server
def test_a_value_inside_a_clear_identifier_is_counted_not_residue(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    """Identifiers stay in clear by design: a fragment of an erased text that is also a
    kept item's predicate is found by the scan, and reported as such, not as residue."""
    alice.remember(fact("kyoto_trip_budget", "2,000 USD"))
    erased = alice.remember(fact("note", "kyoto_trip_budget"))

    report = alice.forget(erased.item_id)

    _, scan = service.requests.scan_files(report.request_id)
    assert scan is not None and scan.status == "ok", scan
    assert scan.evidence["found_in_clear_identifiers"] >= 1
    assert service.ledger.latest_status(report.request_id) == "completed"


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL's files live on the server
def test_the_scheduled_scan_finds_fragments_and_reopens_the_request(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    from memory_ledger.jobs.verification_scan import due_requests, scan_due

    home = alice.remember(fact("home_address", "18 Zqxwvbt Road, Hangzhou"))
    office = alice.remember(fact("office", "Room 4417, Tower B"))

    report = alice.forget(home.item_id, office.item_id)

    assert report.completed and "scheduled" in report.residue_scan
    assert due_requests(service.job_context) == [report.request_id]
    assert scan_due(service.job_context) == {report.request_id: "ok"}
    assert due_requests(service.job_context) == []  # recorded: not scanned twice
    # Not the whole text: one word of it, as a term list or a torn page would hold it.
    (settings.data_dir / "export.json").write_text('{"street": "Zqxwvbt"}')
    _, scan = service.requests.scan_files(report.request_id)
    assert scan is not None and scan.status == "failed" and scan.attempt == 2
    assert service.ledger.latest_status(report.request_id) == "partial"
    assert "Zqxwvbt" not in json.dumps([e.payload for e in service.ledger.entries()])
    # A retry scans at once: while the copy is there the request stays partial.
    retried = service.requests.resume(report.request_id)
    assert retried.status == "partial" and "files" in retried.failed_stores
    (settings.data_dir / "export.json").unlink()
    assert service.requests.resume(report.request_id).completed


@pytest.mark.parametrize("backend", ["sqlite"])  # a property of SQLite's file format
def test_residue_left_in_page_gaps_is_removed_by_rebuilding_the_file(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    import sqlite3

    stored = alice.remember(fact("passport", "E12345678 Passport"))
    alice.recall()
    # Bytes of the text in free space of a page, as a connection without secure_delete
    # would leave them (an older version's table, a tool that copied a row).
    raw = sqlite3.connect(settings.projections_path)
    raw.execute("PRAGMA secure_delete = OFF")
    raw.execute("CREATE TABLE scratch (t TEXT)")
    raw.execute("INSERT INTO scratch VALUES ('E12345678 Passport')")
    raw.commit()
    raw.execute("DELETE FROM scratch")
    raw.commit()
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.close()
    assert file_bytes_contain([settings.projections_path], "E12345678 Passport")
    report = alice.forget(stored.item_id)
    assert report.completed, report.to_dict()
    outcome, scan = service.requests.scan_files(report.request_id)
    assert scan is not None and scan.status == "ok", outcome
    assert "rebuilt with VACUUM" in outcome.how and scan.evidence["files_rebuilt"] == 1
    assert file_bytes_contain(sqlite_files(settings), "E12345678") == []


def test_a_retry_without_the_failed_store_stays_partial(
    settings: Settings, plugin_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_EXTRA_STORES", "ml_test_plugins:factory")
    with MemoryService(Settings(settings.data_dir, settings.postgres)) as service:
        stored = service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
        first = service.for_principal(ALICE).forget(stored.item_id)
        assert first.failed_stores == ["flaky_subscriber"]
    monkeypatch.delenv("MEMORY_LEDGER_EXTRA_STORES")
    settings = Settings(settings.data_dir, settings.postgres)  # read without it
    with MemoryService(settings) as service:  # the subscriber is not registered here
        assert service.ledger.latest_status(first.request_id) == "partial"
        again = service.requests.resume(first.request_id)
        assert again.status == "partial" and again.failed_stores == ["flaky_subscriber"]


def test_a_failure_of_the_erasure_run_beside_the_scan_is_reported_and_retried(
    alice: MemoryLedger, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vector index erases on a worker thread while the files are scanned: its
    failure must still make the request partial, in registry order, and a retry must
    finish it."""
    home = alice.remember(fact("home_address", "18 Haisong Road, Hangzhou"))
    service.vectors.catch_up()
    erase = service.vectors.erase
    ran_on: list[str] = []

    def failing(item_ids: object) -> object:
        ran_on.append(threading.current_thread().name)
        raise OSError("disk full")

    monkeypatch.setattr(service.vectors, "erase", failing)
    first = alice.forget(home.item_id)

    assert ran_on
    assert first.status == "partial" and first.failed_stores == ["vector_index"]
    assert [r.store for r in first.receipts] == [*service.stores.names(), "key_store", "files"]
    assert alice.recall() == []  # every other store has erased it already
    monkeypatch.setattr(service.vectors, "erase", erase)
    second = service.requests.resume(first.request_id)
    assert second.completed, second.to_dict()
    assert service.stores.get("vector_index").verify_absent([home.item_id]).absent


def test_previous_value_changed_in_place_is_shredded_and_the_current_kept(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    stored = alice.remember(fact("home_address", "1 Old Lane, Suzhou"))
    alice.update(
        stored.item_id, {"value": "9 New Street, Suzhou", "provenance": provenance(at=later(40))}
    )
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "home_address", "which": "previous"}
    )
    assert report.completed, report.to_dict()
    assert report.targets == [] and report.history == [stored.item_id]
    assert [m.text for m in alice.recall()] == ["9 New Street, Suzhou"]
    assert [v.text for v in alice.history(stored.item_id)] == [None, "9 New Street, Suzhou"]
    assert "history_shredded" in {r.action for r in report.receipts}
    if settings.postgres is None:
        files = sqlite_files(settings)
        assert file_bytes_contain(files, "1 Old Lane") == []
        assert file_bytes_contain(files, "9 New Street") == []  # sealed, yet recalled


def test_source_and_time_scopes_match_versions_not_just_items(
    alice: MemoryLedger, settings: Settings
) -> None:
    moved = alice.remember(fact("home_address", "1 Old Lane, Suzhou", turn="t1", at=T0))
    alice.update(
        moved.item_id,
        {"value": "9 New Street, Suzhou", "provenance": provenance(turn="t9", at=later(40))},
    )
    # The old value came from turn t1: the item stays, its history goes.
    report = alice.forget_scope({"kind": "source", "turn_id": "t1"})
    assert report.completed and report.history == [moved.item_id] and report.targets == []
    assert [m.text for m in alice.recall()] == ["9 New Street, Suzhou"]
    # The current value was written in this window: the item goes.
    window = {"kind": "time_range", "since": later(39).isoformat(), "until": later(41).isoformat()}
    report = alice.forget_scope(window)
    assert report.completed and report.targets == [moved.item_id]
    assert alice.recall() == []
    if settings.postgres is None:
        files = sqlite_files(settings)
        assert (
            file_bytes_contain(files, "Old Lane") == [] == file_bytes_contain(files, "New Street")
        )


@pytest.mark.parametrize("backend", ["sqlite"])  # PostgreSQL's files live on the server
def test_words_the_ledger_holds_in_clear_are_not_residue_of_an_erased_text(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """The ledger says "completed", "pending", "resolved" in clear for every request: an
    erased turn that used those words must still verify clean (it did not: the scan
    reopened such requests as partial)."""
    said = alice.remember(turn("completed pending resolved", turn_id="t8"))
    report = alice.forget(said.item_id)
    assert report.completed, report.to_dict()
    _, scan = service.requests.scan_files(report.request_id)
    assert scan is not None and scan.status == "ok", scan
    assert service.requests.verify(report.request_id).status == "completed"
