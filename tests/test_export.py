"""Data subject access: the export holds everything the store holds about a person,
whatever its standing, and an erased item only by its id and the request that erased it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import cli, fact, preference, provenance, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.principal import Principal


def test_the_export_holds_everything_held(
    service: MemoryService, alice: MemoryLedger, bob: MemoryLedger
) -> None:
    address = alice.remember(fact("home_address", "18 Haisong Road")).item_id
    alice.update(address, {"value": "7 Binjiang Avenue", "provenance": provenance(turn="t2")})
    seat = alice.remember(preference("seat", "window")).item_id
    said = alice.remember(turn("I moved to Binjiang", turn_id="t2")).item_id
    hidden = alice.remember(fact("diet", "vegetarian", turn="t3")).item_id
    alice.suppress(hidden)  # stopped using: still held, so still exported
    phone = alice.remember(fact("phone", "+86 139 0000 1234", turn="t4")).item_id
    report = alice.forget(phone)
    project = service.for_principal(Principal("acme", "alice", "trip"))
    trip = project.remember(fact("hotel", "Hotel Kyoto", turn="t5")).item_id
    bob.remember(fact("home_address", "1 Secret Way"))

    export = alice.export()
    assert export["format"] == "memory-ledger-export/1" and export["namespace"] == "acme/alice"
    facts = {f["item_id"]: f for f in export["facts"]}
    assert set(facts) == {address, hidden, trip}
    assert [v["text"] for v in facts[address]["versions"]] == [
        "18 Haisong Road",
        "7 Binjiang Avenue",
    ]
    assert facts[address]["text"] == "7 Binjiang Avenue"
    assert facts[address]["provenance"]["writer"] == "test-agent"
    assert facts[hidden]["suppressed"] is True and facts[trip]["namespace"] == "acme/alice/trip"
    assert [p["item_id"] for p in export["preferences"]] == [seat]
    assert [t["item_id"] for t in export["transcripts"]] == [said]
    assert export["summary"] is not None
    assert export["erased"] == [
        {
            "item_id": phone,
            "request_id": report.request_id,
            "basis": "user_request",
            "recorded_at": export["erased"][0]["recorded_at"],
        }
    ]
    dumped = json.dumps(export)
    assert "139 0000" not in dumped and "Secret Way" not in dumped


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_cli_exports_to_a_file(where: list[str], tmp_path: Path) -> None:
    write = ["--kind", "fact", "--subject", "user", "--predicate", "city", "--value", "Hangzhou"]
    code, output = cli("remember", "-n", "acme/alice", *where, *write, "--turn-id", "t1")
    assert code == 0, output
    target = tmp_path / "alice.json"
    code, output = cli("export", "-n", "acme/alice", *where, "--out", str(target))
    assert code == 0, output
    data = json.loads(target.read_text())
    assert [f["text"] for f in data["facts"]] == ["Hangzhou"]
    code, output = cli("export", "-n", "acme/bob", *where)
    assert code == 0 and json.loads(output)["facts"] == []
