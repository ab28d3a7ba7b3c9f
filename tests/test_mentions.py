"""A value repeated in an unlinked turn is redacted there; the rest of the turn stays."""

from __future__ import annotations

from uuid import UUID

import pytest
from factories import fact, file_bytes_contain, later, sqlite_files, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.forget_requests import plaintext_copies
from memory_ledger.mentions import REPLACEMENT, mention_pattern, without_mentions

ADDRESS = "18 Haisong Road, Xihu District, Hangzhou"
ADDRESS_SCOPE = {"kind": "predicate", "subject": "user", "predicate": "home_address"}


def _redact(values: list[str], text: str) -> str:
    pattern = mention_pattern(values)
    assert pattern is not None
    return without_mentions({"content": text}, pattern)[0]["content"]


def test_the_whole_value_and_its_parts_with_a_digit_are_found() -> None:
    said = "Taxi to 18 HAISONG ROAD please; I love Hangzhou in spring."
    assert _redact([ADDRESS], said) == f"Taxi to {REPLACEMENT} please; I love Hangzhou in spring."
    assert _redact([ADDRESS], f"It is {ADDRESS}.") == f"It is {REPLACEMENT}."


def test_a_value_never_matches_inside_a_longer_word() -> None:
    assert _redact(["Anna"], "Annabel and Anna, and Anna's cat") == (
        f"Annabel and {REPLACEMENT}, and {REPLACEMENT}'s cat"
    )
    assert _redact(["Room 12"], "Room 123 is not Room 12.") == f"Room 123 is not {REPLACEMENT}."


def test_text_without_spaces_matches_anywhere() -> None:
    assert _redact(["海松路18号"], "请把车开到海松路18号门口") == f"请把车开到{REPLACEMENT}门口"


def test_values_too_short_to_identify_anything_are_not_searched() -> None:
    assert mention_pattern(["tea", "", "  "]) is None


def _history_with_a_repeat(alice: MemoryLedger) -> tuple[str, str, str]:
    address = alice.remember(fact("home_address", ADDRESS, category="contact")).item_id
    taxi = alice.remember(
        turn("Send the taxi to 18 Haisong Road at 7am tomorrow.", turn_id="t9", at=later(3))
    ).item_id
    other = alice.remember(turn("Annabel lives on Haisong Street.", turn_id="t10")).item_id
    return address, taxi, other


def test_a_repeat_is_listed_by_the_dry_run_and_redacted_by_the_request(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    address, taxi, other = _history_with_a_repeat(alice)
    bobs = bob.remember(turn("My taxi goes to 18 Haisong Road too.")).item_id

    dry = alice.forget_scope(ADDRESS_SCOPE, dry_run=True)
    assert dry.targets == [address] and dry.mentions == [taxi]
    assert "1 other item(s) that repeated it redacted" in dry.message
    assert "Haisong" in (alice.get(taxi).text or "")  # a dry run changes nothing

    report = alice.forget_scope(ADDRESS_SCOPE)

    assert report.status == "completed", report.failed_stores
    assert report.mentions == [taxi] and taxi not in report.all_targets
    assert alice.get(taxi).text == f"Send the taxi to {REPLACEMENT} at 7am tomorrow."
    readable = plaintext_copies(service, [service.log.get(UUID(taxi))])  # every version
    assert readable and not [t for t in readable if "Haisong" in t]
    assert alice.get(other).text == "Annabel lives on Haisong Street."  # no digit part
    assert bob.get(bobs).text == "My taxi goes to 18 Haisong Road too."  # not Alice's
    redactions = [r for r in report.receipts if r.action == "mentions_redacted"]
    assert [(r.status, r.evidence["rewritten"]) for r in redactions] == [("ok", 1)]
    resolved = [e for e in service.ledger.entries(report.request_id) if e.entry_type == "resolved"]
    assert resolved[0].payload["mentions"] == [taxi]
    assert "Haisong" not in report.message


@pytest.mark.parametrize("backend", ["sqlite"])
def test_after_the_redaction_no_file_holds_the_repeat(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    _history_with_a_repeat(alice)

    report = alice.forget_scope(ADDRESS_SCOPE)

    assert report.status == "completed" and report.residue_checked
    assert file_bytes_contain(sqlite_files(settings), "18 Haisong Road") == []
    assert file_bytes_contain(sqlite_files(settings), "7am tomorrow") != []


def test_a_retry_after_the_redaction_changes_nothing(
    alice: MemoryLedger, service: MemoryService
) -> None:
    _, taxi, _ = _history_with_a_repeat(alice)
    report = alice.forget_scope(ADDRESS_SCOPE)
    version = service.log.get(UUID(taxi)).version

    again = service.requests._execute(service.requests.report(report.request_id))

    assert again.status == "completed"
    assert service.log.get(UUID(taxi)).version == version
