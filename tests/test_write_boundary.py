"""Invalid writes are refused with a clear error before anything is stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from damage import cli
from factories import fact, later, provenance, turn

from memory_ledger.agents.tools import AgentTools
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite
from memory_ledger.write_policy import MAX_TURN_BYTES, MAX_VALUE_BYTES


def _without(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != key}


BAD_WRITES = {
    "unknown kind": ({**fact("city", "Hangzhou"), "kind": "rumour"}, "kind"),
    "missing provenance": (_without(fact("city", "Hangzhou"), "provenance"), "provenance"),
    "provenance without a source": (
        {
            **fact("city", "Hangzhou"),
            "provenance": {"writer": "a", "written_at": "2026-11-01T00:00:00Z"},
        },
        "source",
    ),
    "provenance without writer": (
        {**fact("city", "Hangzhou"), "provenance": _without(provenance(), "writer")},
        "writer",
    ),
    "naive timestamp": (
        {
            **fact("city", "Hangzhou"),
            "provenance": {**provenance(), "written_at": "2026-11-01T09:00:00"},
        },
        "timezone",
    ),
    "invalid sensitivity": ({**fact("city", "Hangzhou"), "sensitivity": "secret"}, "sensitivity"),
    "oversize value": (fact("bio", "x" * (MAX_VALUE_BYTES + 1)), "limit"),
    "oversize turn": (turn("y" * (MAX_TURN_BYTES + 1)), "limit"),
    "empty value": (fact("city", "   "), "empty"),
    "namespace in payload": ({**fact("city", "Hangzhou"), "namespace": "acme/bob"}, "namespace"),
    "unknown field": ({**fact("city", "Hangzhou"), "colour": "red"}, "colour"),
    "free text in predicate": (fact("lives at 18 Haisong Road", "x"), "predicate"),
    "fact without predicate": ({**fact("city", "Hangzhou"), "predicate": None}, "predicate"),
    "turn without session": (
        {**turn("hello"), "provenance": {**provenance(), "session_id": None}},
        "session_id",
    ),
    "fact with content": ({**fact("city", "Hangzhou"), "content": "also"}, "value"),
    "confidence above 1": ({**fact("city", "Hangzhou"), "confidence": 1.5}, "confidence"),
    "expiry before write": (
        {
            **fact("city", "Hangzhou"),
            "retention": {"basis": "consent", "expires_at": "2020-01-01T00:00:00Z"},
        },
        "expires_at",
    ),
    "invalid retention basis": (
        {**fact("city", "Hangzhou"), "retention": {"basis": "forever"}},
        "basis",
    ),
    # No lax coercion: a value of the wrong type is refused, never converted.
    "bool as confidence": ({**fact("city", "Hangzhou"), "confidence": True}, "confidence"),
    "NaN confidence": ({**fact("city", "Hangzhou"), "confidence": float("nan")}, "confidence"),
    "epoch as written_at": (
        {**fact("city", "Hangzhou"), "provenance": {**provenance(), "written_at": 1764000000}},
        "written_at",
    ),
    "bytes value": ({**fact("city", "Hangzhou"), "value": b"Hangzhou"}, "value"),
    "padded subject": (fact("city", "Hangzhou", subject=" user"), "subject"),
    "newline-ended predicate": (fact("city\n", "Hangzhou"), "predicate"),
    "valid_to before the defaulted valid_from": (
        {**fact("city", "Hangzhou"), "valid_to": "2026-10-01T00:00:00Z"},
        "valid_to",
    ),
    "year 1 with an offset": (
        {
            **fact("city", "Hangzhou"),
            "provenance": {**provenance(), "written_at": "0001-01-01T00:00:00+01:00"},
        },
        "range",
    ),
    "year 9999 with an offset": (
        {**fact("city", "Hangzhou"), "valid_to": "9999-12-31T23:30:00-01:00"},
        "range",
    ),
    "duplicate derived_from": (
        {
            **fact("city", "Hangzhou"),
            "derived_from": [{"item_id": "6f1c0e4e-0b7a-4d43-9d51-8d0c1b1f0a11", "version": 1}] * 2,
        },
        "more than once",
    ),
    "too many derived_from": (
        {
            **fact("city", "Hangzhou"),
            "derived_from": [
                {"item_id": f"6f1c0e4e-0b7a-4d43-9d51-{i:012x}", "version": 1}
                for i in range(100_000)
            ],
        },
        "derived_from",
    ),
    "scope on a fact": ({**fact("city", "Hangzhou"), "scope": "session:s1"}, "scope"),
    "malformed preference scope": (
        {
            "kind": "preference",
            "subject": "user",
            "predicate": "seat",
            "value": "window",
            "origin": "explicit",
            "sensitivity": "internal",
            "scope": "galaxy",
            "provenance": provenance(),
        },
        "scope",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_invalid_write_is_refused_and_changes_nothing(
    case: str, alice: MemoryLedger, service: MemoryService
) -> None:
    data, mentioned = BAD_WRITES[case]
    before = service.log.max_position()
    with pytest.raises(InvalidWrite) as refused:
        alice.remember(data)
    assert mentioned in str(refused.value)
    assert "nothing was stored" in str(refused.value)
    assert service.log.max_position() == before
    assert alice.recall() == []


def test_one_bad_write_in_a_batch_refuses_the_whole_batch(
    alice: MemoryLedger, service: MemoryService
) -> None:
    with pytest.raises(InvalidWrite):
        alice.remember_many([fact("city", "Hangzhou"), {**fact("seat", "aisle"), "kind": "x"}])
    assert service.log.max_position() == 0
    assert service.log.key_counts() == (0, 0), "a refused batch must not leave keys behind"


def test_valid_write_is_stored_with_its_provenance(alice: MemoryLedger) -> None:
    stored = alice.remember(fact("city", "Hangzhou"))
    [memory] = alice.recall(predicate="city")
    assert memory.item_id == stored.item_id
    assert memory.text == "Hangzhou"
    assert memory.provenance["turn_id"] == "t1"
    assert memory.provenance["writer"] == "test-agent"


def test_namespace_comes_from_the_principal_only(alice: MemoryLedger, bob: MemoryLedger) -> None:
    alice.remember(fact("city", "Hangzhou"))
    assert bob.recall() == []
    assert [m.text for m in alice.recall()] == ["Hangzhou"]


def test_update_validates_too(alice: MemoryLedger, service: MemoryService) -> None:
    stored = alice.remember(fact("city", "Hangzhou"))
    before = service.log.max_position()
    with pytest.raises(InvalidWrite):
        alice.update(stored.item_id, {"value": "", "provenance": provenance(at=later(1))})
    with pytest.raises(InvalidWrite):
        alice.update(
            stored.item_id, {"value": "Ningbo", "provenance": provenance(), "namespace": "x"}
        )
    with pytest.raises(InvalidWrite):
        alice.update("not-a-uuid", {"value": "Ningbo", "provenance": provenance()})
    assert service.log.max_position() == before


def test_derived_write_must_cite_live_inputs_at_their_current_version(
    alice: MemoryLedger, service: MemoryService
) -> None:
    from memory_ledger.errors import StaleDerivation

    source = alice.remember(fact("city", "Hangzhou"))
    inferred = {
        **fact("timezone", "Asia/Shanghai", origin="inferred"),
        "derived_from": [{"item_id": source.item_id, "version": 1}],
    }
    alice.remember(inferred)  # cites the input as it is: accepted
    alice.update(source.item_id, {"value": "Ningbo", "provenance": provenance(at=later(1))})
    before = service.log.max_position()
    with pytest.raises(StaleDerivation, match="version 2"):
        alice.remember(inferred)
    alice.forget(source.item_id)
    with pytest.raises(StaleDerivation, match="erased"):
        alice.remember({**inferred, "derived_from": [{"item_id": source.item_id, "version": 3}]})
    assert service.log.max_position() == before + 2  # tombstones: the input, its derivation


def test_expired_inputs_cannot_feed_a_derivation(alice: MemoryLedger) -> None:
    from datetime import UTC, datetime, timedelta

    from memory_ledger.errors import StaleDerivation

    written = datetime.now(UTC) - timedelta(days=2)
    source = fact("mood", "tired", at=written)
    source["retention"] = {
        "basis": "session",
        "expires_at": (written + timedelta(days=1)).isoformat(),
    }
    stored = alice.remember(source)
    with pytest.raises(StaleDerivation, match="expired"):
        alice.remember(
            {
                **fact("energy", "low", origin="inferred"),
                "derived_from": [{"item_id": stored.item_id, "version": 1}],
            }
        )


def test_rejected_identifiers_are_not_echoed(alice: MemoryLedger) -> None:
    with pytest.raises(InvalidWrite) as refused:
        alice.recall(subject="my address is 18 Haisong Road")
    assert "Haisong" not in str(refused.value)


def test_an_identifier_that_looks_like_a_hash_is_refused_as_the_ledger_would(
    alice: MemoryLedger,
) -> None:
    """Found by the erasability property: a turn id of 128 `a`s was written, and then
    a forget by that source could not be recorded. One rule now refuses it at the door."""
    digest = "a" * 40
    with pytest.raises(InvalidWrite, match=r"turn_id: .*hex digits"):
        alice.remember({**fact("city", "Hangzhou"), "provenance": provenance(turn=digest)})
    with pytest.raises(InvalidWrite, match="predicate"):
        alice.remember(fact(f"note_{'0' * 64}", "x"))
    assert alice.recall() == []
    alice.remember({**fact("city", "Hangzhou"), "provenance": provenance(turn="a" * 39)})
    assert alice.forget_scope({"kind": "source", "turn_id": "a" * 39}).completed


# -- how much a refusal says ------------------------------------------------------------


def _citing(refs: int) -> dict[str, Any]:
    """An inference citing `refs` malformed inputs (three problems each)."""
    refs_ = [{"bad": i} for i in range(refs)]
    return {**fact("employer", "Acme", origin="inferred"), "derived_from": refs_}


def test_too_many_derived_from_refs_are_refused_before_they_are_read(
    alice: MemoryLedger, service: MemoryService
) -> None:
    with pytest.raises(InvalidWrite) as refused:
        alice.remember(_citing(100_000))
    assert refused.value.problems == ["derived_from: at most 256 derived_from inputs, not 100000"]
    assert len(str(refused.value)) < 300 and service.log.max_position() == 0


def test_the_problems_of_a_refusal_are_capped(alice: MemoryLedger) -> None:
    with pytest.raises(InvalidWrite) as refused:
        alice.remember(_citing(256))  # within the bound: 768 problems
    problems = refused.value.problems
    assert len(problems) == 21  # errors.MAX_PROBLEMS, then a count of the rest
    assert problems[0] == "derived_from.0.item_id: Field required"
    assert problems[-1] == "... and 748 more problems"
    assert str(refused.value).endswith(problems[-1]) and len(str(refused.value)) < 2000
    again = InvalidWrite(str(refused.value), problems)  # re-raised: capped once, not twice
    assert again.problems == problems


def test_the_cli_and_the_agent_tools_show_the_capped_list(
    alice: MemoryLedger, settings: Settings, tmp_path: Path
) -> None:
    write = tmp_path / "write.json"
    write.write_text(json.dumps(_citing(100)))
    run = cli(settings, "remember", "-n", "acme/alice", "--from-json", str(write), "--json")
    assert run.code == 2, run.stdout
    assert len(run.json["problems"]) == 21 and run.json["problems"][-1] == (
        "... and 280 more problems"
    )
    assert len(run.stdout) < 4000
    write.write_text(json.dumps(_citing(100_000)))
    run = cli(settings, "remember", "-n", "acme/alice", "--from-json", str(write), "--json")
    assert run.code == 2 and len(run.json["problems"]) == 1 and len(run.stdout) < 1000

    args = {k: v for k, v in _citing(100).items() if k not in ("provenance", "valid_from")}
    answer = AgentTools(alice).call("remember", {**args, "session_id": "s1"})
    assert len(answer["error"]["problems"]) == 21, answer
    assert answer["error"]["problems"][-1].endswith("more problems")
