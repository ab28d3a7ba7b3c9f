"""Integrity problems are reported, never silent, never a traceback.

Each test damages a store by hand, as someone with database access could (a key row
deleted, the master-key check row deleted, the ledger deleted, a fingerprint row
deleted), then runs the real CLI in a subprocess and checks that the damage is named,
with its repair, and that the repair works. The consistency check itself is tested on
both backends too.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from uuid import UUID

import pytest
from conftest import ALICE
from damage import cli, delete_ledger, events_table, sql
from factories import fact

from memory_ledger import consistency
from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import KeyCheckMissing, LedgerMissing, MissingKey
from memory_ledger.event_log import ERASED_TOPIC
from memory_ledger.stores import EventLogStore

NS = ["--namespace", "acme/alice"]


@dataclass
class Store:
    live: str  # a live fact, "Hangzhou"
    erased: str  # a fact forgotten by `request`
    request: str


def populate(settings: Settings) -> Store:
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        live = alice.remember(fact("city", "Hangzhou")).item_id
        erased = alice.remember(fact("home_address", "18 Haisong Road")).item_id
        report = alice.forget(erased)
        assert report.status == "completed"
        return Store(live, erased, report.request_id)


def codes(settings: Settings) -> dict[str, consistency.Finding]:
    with MemoryService(settings) as service:
        report = consistency.check(service.log, service.ledger, service.settings, chain=True)
    return {f.code: f for f in report.findings}


def test_a_clean_store_is_consistent(settings: Settings) -> None:
    populate(settings)
    assert codes(settings) == {}
    run = cli(settings, "doctor", "--json")
    assert run.code == 0 and run.json["ok"] is True and run.json["findings"] == []
    assert run.json["checked"]["items"] == 2 and run.json["checked"]["erased"] == 1
    status = cli(settings, "status", "--json")
    assert status.code == 0 and status.json["consistency"]["ok"] is True


# -- a live item's key row deleted ---------------------------------------------------------


def test_a_deleted_key_row_is_an_integrity_error_not_an_erasure(settings: Settings) -> None:
    store = populate(settings)
    sql(settings, "DELETE FROM memory_keys WHERE item_id = ?", (store.live,))

    shown = cli(settings, "show", *NS, store.live, "--json", fresh=True)
    assert shown.code == 4 and shown.json["type"] == "MissingKey"
    assert "missing from the key store" in shown.json["error"]
    assert "not an erasure" in shown.json["error"]
    human = cli(settings, "show", *NS, store.live)
    assert human.code == 4 and "Run `memory-ledger doctor`" in " ".join(human.stderr.split())

    # A rebuild still works (the item replays as unreadable) but says what it found.
    rebuilt = cli(settings, "rebuild", fresh=True)
    assert rebuilt.code == 0 and "key_missing (1)" in " ".join(rebuilt.stderr.split())
    as_json = cli(settings, "rebuild", "--json")
    assert as_json.code == 0 and not as_json.json["consistency"]["ok"]

    status = cli(settings, "status", "--json")
    assert status.code == 0
    (finding,) = status.json["consistency"]["findings"]
    assert finding["code"] == "key_missing" and finding["item_ids"] == [store.live]

    doctor = cli(settings, "doctor", "--json")
    assert doctor.code == 10 and [f["code"] for f in doctor.json["findings"]] == ["key_missing"]
    repair = doctor.json["findings"][0]["repair"]
    assert f"memory-ledger forget scope -n acme/alice {store.live}" in repair

    # The repair: the content is lost; record that as an erasure, by id.
    forget = cli(settings, "forget", *NS, "--memory", store.live, "--json")
    assert forget.code == 0 and forget.json["status"] == "completed"
    assert cli(settings, "doctor").code == 0
    assert cli(settings, "show", *NS, store.live, "--json").json["erased"] is True


def test_a_key_destroyed_without_a_tombstone_is_reported(settings: Settings) -> None:
    store = populate(settings)
    sql(settings, "UPDATE memory_keys SET wrapped = NULL WHERE item_id = ?", (store.live,))
    with MemoryService(settings) as service:
        item = service.log.get(UUID(store.live))
        with pytest.raises(MissingKey, match="destroyed although the item has no tombstone"):
            service.log.read(item)
    assert set(codes(settings)) == {"key_destroyed_without_tombstone"}


def test_an_erased_items_live_key_and_a_lost_tombstone_are_reported(settings: Settings) -> None:
    store = populate(settings)
    # The key store restored from a copy older than the erasure: the key is live again.
    sql(settings, "UPDATE memory_keys SET wrapped = ? WHERE item_id = ?", (b"x" * 60, store.erased))
    assert set(codes(settings)) == {"erased_item_has_live_key"}
    sql(settings, "UPDATE memory_keys SET wrapped = NULL WHERE item_id = ?", (store.erased,))
    # The event store restored from a copy older than the erasure: the tombstone is gone.
    sql(settings, f"DELETE FROM {events_table(settings)} WHERE topic = ?", (ERASED_TOPIC,))
    found = codes(settings)
    assert set(found) == {"erased_item_not_erased", "key_destroyed_without_tombstone"}
    assert found["erased_item_not_erased"].item_ids == (store.erased,)
    assert found["erased_item_not_erased"].request_ids == (store.request,)
    # verify names it as a failure of this request.
    run = cli(settings, "verify", store.request, "--json")
    assert run.code == 7 and run.json["status"] == "verification_failed"
    receipt = next(r for r in run.json["receipts"] if r["store"] == "consistency")
    assert receipt["status"] == "failed" and receipt["evidence"]["erased_item_not_erased"] == 1


def test_a_tombstone_the_ledger_does_not_explain_is_reported(settings: Settings) -> None:
    store = populate(settings)
    with MemoryService(settings) as service:  # erased outside any forget request
        EventLogStore(service.log).erase([store.live])
    found = codes(settings)
    assert set(found) == {"tombstone_unexplained"}
    assert found["tombstone_unexplained"].item_ids == (store.live,)
    doctor = cli(settings, "doctor", "--acknowledge-ledger-loss", "--by", "ops", "--json")
    assert doctor.code == 0 and "1 tombstone(s)" in doctor.json["repaired"][0]
    assert codes(settings) == {}


def test_the_check_reads_each_store_once(settings: Settings) -> None:
    """Its cost must not grow with per-item queries: count the statements it sends."""
    populate(settings)
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        alice.remember_many([fact(f"p{i}", f"value {i}") for i in range(50)])
        calls: list[str] = []
        for name in ("item_tombstones", "key_states"):
            original = getattr(service.log, name)

            def counted(*a: object, _original=original, _name=name) -> object:
                calls.append(_name)
                return _original(*a)

            setattr(service.log, name, counted)
        entries = service.ledger.entries

        def counted_entries(*a: object) -> object:
            calls.append("entries")
            return entries(*a)

        service.ledger.entries = counted_entries  # type: ignore[method-assign]
        report = consistency.check(service.log, service.ledger, service.settings)
    assert report.ok and report.items == 52
    assert sorted(calls) == ["entries", "item_tombstones", "key_states"]


# -- the master-key check row deleted ------------------------------------------------------


def test_a_deleted_key_check_row_is_refused_until_repaired(settings: Settings) -> None:
    populate(settings)
    sql(settings, "DELETE FROM memory_ledger_meta WHERE name = 'key_check'")
    with pytest.raises(KeyCheckMissing):
        MemoryService(settings)

    status = cli(settings, "status", fresh=True)
    assert status.code == 10 and "key_check" in status.stderr
    assert "--repair-key-check" in " ".join(status.stderr.split())

    # Another key is not accepted unchecked: not by an ordinary command, nor by the repair.
    other = {"MEMORY_LEDGER_MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode()}
    assert cli(settings, "status", env=other).code == 10
    wrong = cli(settings, "doctor", "--repair-key-check", "--json", env=other)
    assert wrong.code == 3 and wrong.json["type"] == "WrongMasterKey"
    assert sql(settings, "SELECT value FROM memory_ledger_meta WHERE name = 'key_check'") == []

    doctor = cli(settings, "doctor", "--json")
    assert doctor.code == 10 and doctor.json["findings"][0]["code"] == "key_check_missing"

    repaired = cli(settings, "doctor", "--repair-key-check", "--json")
    assert repaired.code == 0 and "the master key opened" in repaired.json["repaired"][0]
    assert cli(settings, "status").code == 0
    assert cli(settings, "status", env=other).code == 3  # the check is back: wrong key refused


def test_a_new_store_still_gets_its_key_check(settings: Settings) -> None:
    with MemoryService(settings):
        pass
    rows = sql(settings, "SELECT name FROM memory_ledger_meta ORDER BY name")
    assert [r[0] for r in rows] == ["format_version", "key_check"]


# -- the ledger deleted --------------------------------------------------------------------


def test_a_deleted_ledger_beside_tombstones_refuses_to_serve(settings: Settings) -> None:
    store = populate(settings)
    delete_ledger(settings)
    with pytest.raises(LedgerMissing):
        MemoryService(settings)

    audit = cli(settings, "audit", "verify", "--json", fresh=True)
    assert audit.code == 10 and audit.json["type"] == "LedgerMissing"
    assert "--acknowledge-ledger-loss" in audit.json["error"]
    assert cli(settings, "status").code == 10
    doctor = cli(settings, "doctor", "--json")
    assert doctor.code == 10 and doctor.json["findings"][0]["code"] == "ledger_missing"

    acknowledged = cli(settings, "doctor", "--acknowledge-ledger-loss", "--by", "ops", "--json")
    assert acknowledged.code == 0, acknowledged.stdout
    assert "(the ledger was empty)" in acknowledged.json["repaired"][0]
    audit = cli(settings, "audit", "verify", "--json")
    assert audit.code == 0 and audit.json["entries_checked"] == 1
    assert cli(settings, "requests", "--json").json == []  # a recovery is not a request
    status = cli(settings, "status", "--json").json["consistency"]
    assert status["ok"] and status["checked"]["acknowledged_tombstones"] == 1
    with MemoryService(settings) as service:
        (entry,) = service.ledger.entries()
        assert entry.entry_type == "recovery"
        assert entry.payload["tombstones_unexplained"] == 1
        assert entry.payload["acknowledged_by"] == "ops"
        # Later erasures are checked as before.
        service.for_principal(ALICE).forget(store.live)
    assert codes(settings) == {}


def test_a_deleted_ledger_without_tombstones_is_just_new(settings: Settings) -> None:
    with MemoryService(settings) as service:
        service.for_principal(ALICE).remember(fact("city", "Hangzhou"))
    delete_ledger(settings)
    assert cli(settings, "audit", "verify").code == 0


# -- a residue fingerprint row deleted (SQLite: PostgreSQL keeps none) ----------------------


def test_a_deleted_fingerprint_row_is_not_a_closed_window(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings.resolve(tmp_path / "data")
    closed, deleted = populate(settings), None
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        other = alice.remember(fact("phone", "555 0100 2200")).item_id
        deleted = alice.forget(other).request_id
        service.requests.close_verification(closed.request)  # a normally closed window
    sql(settings, "DELETE FROM memory_keys WHERE item_id = ?", (f"residue:{deleted}",))

    normal = cli(settings, "verify", closed.request, "--json")
    assert normal.code == 0 and "verification window has closed" in normal.json["residue_scan"]
    damaged = cli(settings, "verify", deleted, "--json", fresh=True)
    assert damaged.code == 7 and "INTEGRITY PROBLEM" in damaged.json["residue_scan"]
    receipt = next(r for r in damaged.json["receipts"] if r["store"] == "consistency")
    assert receipt["status"] == "failed" and receipt["evidence"]["fingerprints_missing"] == 1

    doctor = cli(settings, "doctor", "--json")
    assert doctor.code == 10
    (finding,) = doctor.json["findings"]
    assert finding["code"] == "fingerprints_missing" and finding["request_ids"] == [deleted]
    refused = cli(settings, "doctor", "--close-verification", closed.request, "--json")
    assert refused.code == 2  # that window has no lost fingerprints
    done = cli(settings, "doctor", "--close-verification", deleted, "--json")
    assert done.code == 0 and done.json["findings"] == []
    after = cli(settings, "verify", deleted, "--json")
    assert after.code == 0 and "recorded as closed" in after.json["residue_scan"]


def test_a_chain_tampered_around_the_triggers_is_reported_by_doctor(tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = Settings.resolve(tmp_path / "data")
    populate(settings)
    import sqlite3

    with sqlite3.connect(settings.data_dir / "ledger.sqlite") as conn:
        conn.execute("DROP TRIGGER ledger_entries_no_update")
        conn.execute("UPDATE ledger_entries SET recorded_at = '2020-01-01T00:00:00.000000Z'")
    conn.close()
    doctor = cli(settings, "doctor", "--json", fresh=True)
    assert doctor.code == 10
    assert [f["code"] for f in doctor.json["findings"]] == ["ledger_chain_broken"]
