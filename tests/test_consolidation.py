"""Consolidation (issue 12, item 4): structured candidates, the phrase patterns in two
languages, the third-party gate, promotion on repeated evidence, idempotent merges, the
resurrection guard against a racing deletion, and the pluggable extractor."""

from __future__ import annotations

import json
import textwrap
import threading
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from factories import T0, fact, file_bytes_contain, jobs_reread, later, sqlite_files, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError, InvalidWrite
from memory_ledger.jobs.consolidation import (
    EXTRACTOR_ENV,
    PROMOTION_ENV,
    THIRD_PARTY_ENV,
    Consolidator,
    consolidate_all,
    consolidated,
    pending,
)
from memory_ledger.jobs.consolidation.canonical import normalise_value
from memory_ledger.jobs.consolidation.extractors import PhrasePatterns, Turn, load_extractor
from memory_ledger.write_policy import MAX_CANDIDATES, MAX_VALUE_BYTES, canonical_time

ADDRESS = "18 Haisong Road, Hangzhou"


def said(text: str, turn_id: str, *candidates: dict[str, Any], **extra: Any) -> dict[str, Any]:
    write = turn(text, turn_id=turn_id, **extra)
    if candidates:
        write["candidates"] = list(candidates)
    return write


def candidate(predicate: str, value: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "fact", "predicate": predicate, "value": value, **extra}


def derived(ledger: MemoryLedger) -> list[Any]:
    """The live facts and preferences, newest first."""
    return ledger.recall(kind="fact") + ledger.recall(kind="preference")


def inputs(service: MemoryService, item_id: str) -> list[tuple[str, int]]:
    item = service.log.get(UUID(item_id))
    return [(r["item_id"], r["version"]) for r in item.derived_from]


# -- structured candidates ---------------------------------------------------------------


def test_structured_candidates_are_consolidated_and_never_in_clear(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    t = alice.remember(
        said(
            "Please note where I am now.",
            "t1",
            candidate("home_address", ADDRESS, category="contact"),
            candidate("employer", "Globex Quantumworks", category="work"),
        )
    )
    assert alice.get(t.item_id).text == "Please note where I am now.", "get names its field"
    events = json.dumps([vars(e) for e in service.log.events_of(UUID(t.item_id))], default=str)
    assert "Haisong" not in events and "Quantumworks" not in events
    service.runner.catch_up()
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "Quantumworks") == []

    counts = Consolidator(service.job_context).consolidate(alice)
    assert counts["written"] == 2 and counts["turns_read"] == 1
    by_predicate = {m.predicate: m for m in derived(alice)}
    assert by_predicate["home_address"].text == ADDRESS
    assert by_predicate["home_address"].category == "contact"
    assert by_predicate["employer"].origin == "inferred"
    assert inputs(service, by_predicate["employer"].item_id) == [(t.item_id, 1)]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"candidates": [candidate("city", "Oslo")], "as_fact": True},
            "candidates apply to turns only",
        ),
        (
            {"candidates": [candidate("city", f"c{n}") for n in range(MAX_CANDIDATES + 1)]},
            "at most 16",
        ),
        ({"candidates": [candidate("city", "Oslo\nBergen")]}, "control characters"),
        ({"candidates": [candidate("city", "x" * (MAX_VALUE_BYTES + 1))]}, "the limit is"),
        ({"candidates": [candidate("city", "Oslo", subject="sister")]}, "about 'user'"),
        ({"candidates": [candidate("city", "Oslo", about="third_party")]}, "about 'user'"),
        ({"candidates": [candidate("city", "Oslo", kind="turn")]}, "candidates.0.kind"),
        ({"candidates": [candidate("home city", "Oslo")]}, "candidates.0.predicate"),
        (
            {"candidates": [{**candidate("city", "Oslo"), "confidence": 1}]},
            "candidates.0.confidence",
        ),
        ({"candidates": [candidate("city", "  ")]}, "must not be empty"),
    ],
)
def test_candidates_are_validated_at_the_boundary(
    alice: MemoryLedger, change: dict[str, Any], problem: str
) -> None:
    write = {**said("Noted.", "t1"), **change}
    if write.pop("as_fact", False):
        write = {**fact("city", "Oslo"), "candidates": write["candidates"]}
    with pytest.raises(InvalidWrite, match=problem) as raised:
        alice.remember(write)
    assert "Bergen" not in str(raised.value), "the value is never echoed"
    assert alice.recall() == []


# -- phrase patterns ---------------------------------------------------------------------


def test_chinese_patterns(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember(said("我住在杭州市西湖区。我对花生过敏，我在阿里巴巴工作。", "t1"))
    counts = Consolidator(service.job_context).consolidate(alice)
    assert counts["written"] == 3
    found = {m.predicate: m.text for m in derived(alice)}
    assert found == {"home_address": "杭州市西湖区", "allergy": "花生", "employer": "阿里巴巴"}


def test_english_patterns_are_kept(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember(said("I'm allergic to shellfish. I work for Initech Systems.", "t1"))
    Consolidator(service.job_context).consolidate(alice)
    found = {m.predicate: m.text for m in derived(alice)}
    assert found == {"allergy": "shellfish", "employer": "Initech Systems"}


def test_patterns_read_only_what_the_user_said(alice: MemoryLedger, service: MemoryService) -> None:
    assistant = said("I live in the cloud.", "t1")
    assistant["subject"] = "assistant"
    alice.remember(assistant)
    assert Consolidator(service.job_context).consolidate(alice)["written"] == 0


def test_a_bad_patterns_file_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "patterns.toml"
    path.write_text(
        '[[pattern]]\nname = "x"\nregex = "no group"\nkind = "fact"\n'
        'predicate = "p"\ncategory = "c"\n'
    )
    with pytest.raises(ConfigurationError, match="named group `value`"):
        PhrasePatterns.load(path)
    path.write_text(
        '[[pattern]]\nname = "x"\nregex = "(?P<value>a"\nkind = "fact"\n'
        'predicate = "p"\ncategory = "c"\n'
    )
    with pytest.raises(ConfigurationError, match="does not compile"):
        PhrasePatterns.load(path)
    path.write_text("[oops]\n")
    with pytest.raises(ConfigurationError, match="unknown table"):
        PhrasePatterns.load(path)
    assert len(PhrasePatterns.load().patterns) >= 10, "the packaged file loads"


def test_values_compare_without_case_space_or_punctuation() -> None:
    assert normalise_value("18 Haisong Road, Hangzhou") == normalise_value(
        "18 haisong road hangzhou."
    )
    assert normalise_value("靠窗。") == normalise_value("靠窗")
    assert normalise_value("ＷＩＮＤＯＷ") == normalise_value("window")  # NFKC
    assert normalise_value("5 kg") != normalise_value("5 lb")


# -- third parties -----------------------------------------------------------------------


def test_third_party_information_is_not_written_by_default(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(
        said(
            "My sister lives in Oslo. 我妈妈对青霉素过敏。",
            "t1",
            candidate("employer", "Hooli", subject="brother", about="third_party"),
        )
    )
    counts = Consolidator(service.job_context).consolidate(alice)
    assert counts["skipped_third_party"] == 3 and counts["written"] == 0
    assert derived(alice) == []


def test_third_party_information_is_opt_in(
    alice: MemoryLedger, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice.remember(said("My sister lives in Oslo.", "t1"))
    monkeypatch.setenv(THIRD_PARTY_ENV, "1")
    Consolidator(jobs_reread(service)).consolidate(alice)
    [fact] = derived(alice)
    assert (fact.subject, fact.predicate, fact.text) == ("sister", "home_address", "Oslo")
    monkeypatch.setenv(THIRD_PARTY_ENV, "perhaps")
    with pytest.raises(ConfigurationError, match=THIRD_PARTY_ENV):
        Consolidator(jobs_reread(service))


# -- promotion ---------------------------------------------------------------------------


def test_an_observed_preference_needs_two_turns(
    alice: MemoryLedger, service: MemoryService
) -> None:
    first = alice.remember(said("Book me a window seat, please.", "t1"))
    counts = Consolidator(service.job_context).consolidate(alice)
    assert (counts["written"], counts["pending"]) == (0, 1)
    assert alice.recall(kind="preference") == []
    other = alice.remember(said("Book me an aisle seat this time.", "t2"))
    assert Consolidator(service.job_context).consolidate(alice)["written"] == 0, "another value"
    second = alice.remember(said("给我订靠窗的座位。", "t3"))  # the same preference, in Chinese
    counts = Consolidator(service.job_context).consolidate(alice)
    assert counts["written"] == 1
    [seat] = alice.recall(kind="preference")
    assert (seat.predicate, seat.text, seat.origin) == ("seat", "window", "observed")
    assert inputs(service, seat.item_id) == [(first.item_id, 1), (second.item_id, 1)]
    assert seat.provenance["turn_id"] == "t3", "the newest evidence"
    # Forgetting either turn of evidence cascades to the preference.
    report = alice.forget(first.item_id)
    assert report.completed and seat.item_id in report.cascaded
    assert alice.recall(kind="preference") == []
    assert other.item_id in {m.item_id for m in alice.recall(kind="turn")}


def test_promotion_threshold_from_the_environment(
    alice: MemoryLedger, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROMOTION_ENV, "3")
    for n in range(1, 4):
        alice.remember(said("Give me a window seat.", f"t{n}"))
        written = Consolidator(jobs_reread(service)).consolidate(alice)["written"]
        assert written == (1 if n == 3 else 0)
    [seat] = alice.recall(kind="preference")
    assert len(inputs(service, seat.item_id)) == 3, "the evidence count"
    for bad in ("0", "33", "two", "-1"):
        monkeypatch.setenv(PROMOTION_ENV, bad)
        with pytest.raises(ConfigurationError, match=PROMOTION_ENV):
            Consolidator(jobs_reread(service))
    with pytest.raises(ConfigurationError):
        Consolidator(service.job_context, promote_after=True)  # type: ignore[arg-type]


def test_structured_preference_candidates_are_promoted_too(
    alice: MemoryLedger, service: MemoryService
) -> None:
    pref = {"kind": "preference", "predicate": "drink", "value": "Green tea", "category": "food"}
    alice.remember(said("Tea, please.", "t1", pref))
    alice.remember(said("Tea again.", "t2", {**pref, "value": "green tea."}))
    assert Consolidator(service.job_context).consolidate(alice)["written"] == 1
    [drink] = alice.recall(kind="preference")
    assert drink.text == "green tea." and len(inputs(service, drink.item_id)) == 2


# -- idempotent merge --------------------------------------------------------------------


def test_consolidation_run_twice_writes_nothing_new(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(said(f"My address is {ADDRESS}. Book me a window seat.", "t1"))
    alice.remember(said("Give me a window seat.", "t2"))
    first = consolidate_all(service.job_context)
    assert first["written"] == 2
    events = service.log.max_position()
    second = consolidate_all(service.job_context)
    assert second["written"] == 0 and second["turns_read"] == 0
    assert service.log.max_position() == events
    # Even when the job's record of what it read is lost, nothing is duplicated: the
    # same canonical key from the same turn versions is already held.
    with service.engine.begin() as conn:
        conn.execute(consolidated.delete())
        conn.execute(pending.delete())
    third = consolidate_all(service.job_context)
    assert third["turns_read"] == 2 and third["written"] == 0 and third["duplicates"] == 2
    assert service.log.max_position() == events
    assert len(derived(alice)) == 2


def test_new_evidence_for_a_held_conclusion_merges_into_one_item(
    alice: MemoryLedger, service: MemoryService
) -> None:
    t1 = alice.remember(said(f"My address is {ADDRESS}.", "t1"))
    Consolidator(service.job_context).consolidate(alice)
    [before] = derived(alice)
    t2 = alice.remember(said("I live in 18 haisong road hangzhou", "t2"))
    counts = Consolidator(service.job_context).consolidate(alice)
    assert (counts["written"], counts["reinforced"]) == (1, 1)
    [after] = derived(alice)
    assert after.item_id != before.item_id and after.text == ADDRESS, "the held wording"
    assert inputs(service, after.item_id) == [(t1.item_id, 1), (t2.item_id, 1)]
    old = alice.get(before.item_id)
    assert old.suppressed and not old.erased
    events = service.log.events_of(UUID(before.item_id))
    assert [type(e).__name__ for e in events][-1] == "Suppressed"
    assert events[-1].reason == "merged"
    # Forgetting the new turn cascades to the merged item (and only to it).
    report = alice.forget(t2.item_id)
    assert report.completed and after.item_id in report.cascaded
    assert derived(alice) == []


def test_a_conclusion_the_user_stated_is_not_written_again(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(fact("employer", "Globex Corporation", category="work"))
    alice.remember(said("I work at Globex Corporation", "t1"))
    counts = Consolidator(service.job_context).consolidate(alice)
    assert (counts["written"], counts["known"]) == (0, 1)
    assert [m.origin for m in derived(alice)] == ["explicit"]


def test_a_suppressed_conclusion_blocks_new_evidence(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(said("Book me a window seat.", "t1"))
    alice.remember(said("Book me a window seat.", "t2"))
    Consolidator(service.job_context).consolidate(alice)
    [seat] = alice.recall(kind="preference")
    alice.forget_conclusion(seat.item_id)
    alice.remember(said("Book me a window seat.", "t3"))
    alice.remember(said("Book me a window seat.", "t4"))
    counts = Consolidator(service.job_context).consolidate(alice)
    assert (counts["written"], counts["skipped_suppressed"]) == (0, 1)
    assert alice.recall(kind="preference") == []


def test_redacted_spans_are_not_values(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember(said("My address is [redacted].", "t1"))
    counts = Consolidator(service.job_context).consolidate(alice)
    assert (counts["written"], counts["skipped_redacted"]) == (0, 1)


def test_a_conclusion_is_no_more_restricted_or_lasting_than_its_turns(
    alice: MemoryLedger, service: MemoryService
) -> None:
    write = said("I am allergic to penicillin", "t1")
    write["sensitivity"] = "restricted"
    write["retention"] = {"basis": "consent", "expires_at": later(3650).isoformat()}
    alice.remember(write)
    Consolidator(service.job_context, now=T0).consolidate(alice)
    [allergy] = derived(alice)
    assert allergy.sensitivity == "restricted"
    assert allergy.expires_at == canonical_time(later(3650))


# -- the resurrection guard --------------------------------------------------------------


def test_consolidation_racing_a_deletion_is_refused(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    t1 = alice.remember(said("Book me a window seat.", "t1"))
    Consolidator(service.job_context).consolidate(alice)  # t1 waits as evidence
    t2 = alice.remember(
        said(
            f"My address is {ADDRESS}. Book me a window seat.",
            "t2",
            candidate("employer", "Globex Quantumworks"),
        )
    )
    job = Consolidator(service.job_context)
    reading = job.read(alice)  # 1. the job reads t2 (and t1, pending)
    assert len([p for p in reading if p.write]) == 3
    assert alice.forget(t2.item_id).completed  # 2. the deletion lands
    written, refused = job.commit(alice, reading)  # 3. the job commits
    assert (written, refused) == (0, 3)
    assert derived(alice) == []
    assert Consolidator(service.job_context).consolidate(alice)["written"] == 0
    with service.engine.connect() as conn:
        waiting = set(conn.execute(pending.select().with_only_columns(pending.c.item_id)).scalars())
    assert waiting == {t1.item_id}, "t1's evidence still waits; t2 is gone"
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "Quantumworks") == []


def test_consolidation_racing_a_deletion_in_threads(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """The job and a forget of its turn run at once: whichever lands first, no
    conclusion from the forgotten turn is left."""
    for n in range(8):
        t = alice.remember(said(f"I work at Initech Branch {n}.", f"t{n}"))
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_consolidate, args=(service, alice, barrier, errors)),
            threading.Thread(target=_forget, args=(alice, t.item_id, barrier, errors)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert alice.get(t.item_id).erased
        # A conclusion committed before the tombstones is in the cascade (resolved again
        # once they are in); one committed after is refused by its pinned version.
        assert derived(alice) == []


def _consolidate(
    service: MemoryService,
    ledger: MemoryLedger,
    barrier: threading.Barrier,
    errors: list[BaseException],
) -> None:
    try:
        job = Consolidator(service.job_context)
        reading = job.read(ledger)
        barrier.wait()
        job.commit(ledger, reading)
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def _forget(
    ledger: MemoryLedger, item_id: str, barrier: threading.Barrier, errors: list[BaseException]
) -> None:
    try:
        barrier.wait()
        assert ledger.forget(item_id).completed
    except BaseException as exc:  # reported by the test
        errors.append(exc)


# -- the pluggable extractor -------------------------------------------------------------

PLUGIN = """
from memory_ledger.jobs.consolidation.extractors import TurnCandidate

class Shouting:
    name = "shouting"

    def extract(self, turn):
        if "explode" in turn.text:
            raise RuntimeError("the model is down: " + turn.text)
        return [
            {"kind": "fact", "predicate": "motto", "value": turn.text.upper()},
            {"kind": "fact", "predicate": "not an identifier", "value": "x"},
            TurnCandidate(kind="fact", predicate="length", value=str(len(turn.text))),
        ]

def make():
    return Shouting()

def broken():
    raise ValueError("no model configured")

def not_one():
    return object()
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "shouting_extractor.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "shouting_extractor"


def test_an_extractor_plugs_in_through_the_environment(
    alice: MemoryLedger, service: MemoryService, plugin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EXTRACTOR_ENV, f"{plugin}:make")
    alice.remember(said("carpe diem", "t1"))
    exploding = alice.remember(said("explode", "t2"))
    job = Consolidator(jobs_reread(service))
    assert job.extractor.name == "shouting"
    counts = job.consolidate(alice)
    assert (counts["written"], counts["invalid"], counts["failed"]) == (2, 1, 1)
    assert {m.predicate: m.text for m in derived(alice)} == {"motto": "CARPE DIEM", "length": "10"}
    # The failed turn is not marked read: it is read again next time.
    with service.engine.connect() as conn:
        read = set(conn.execute(consolidated.select()).scalars())
    assert exploding.item_id not in read
    assert Consolidator(jobs_reread(service)).consolidate(alice)["failed"] == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:make", "cannot load"),
        ("shouting_extractor", "expected `module:factory`"),
        ("shouting_extractor:missing", "cannot load"),
        ("shouting_extractor:broken", "failed: ValueError"),
        ("shouting_extractor:not_one", "did not return an extractor"),
    ],
)
def test_a_bad_extractor_setting_is_a_clear_error(
    plugin: str, monkeypatch: pytest.MonkeyPatch, spec: str, message: str
) -> None:
    monkeypatch.setenv(EXTRACTOR_ENV, spec)
    with pytest.raises(ConfigurationError, match=message) as raised:
        load_extractor()
    assert EXTRACTOR_ENV in str(raised.value)


def test_the_default_extractor_reads_attached_candidates_and_patterns() -> None:
    from memory_ledger.write_policy import TurnCandidate

    extractor = load_extractor("default")
    attached = TurnCandidate(kind="fact", predicate="city", value="Oslo")
    found = extractor.extract(Turn("i", 1, "user", "I live in Bergen.", (attached,)))
    assert [(c.predicate, c.value) for c in found] == [("city", "Oslo"), ("home_address", "Bergen")]


def test_no_merge_into_a_conclusion_whose_turn_was_suppressed(
    alice: MemoryLedger, service: MemoryService
) -> None:
    t1 = alice.remember(said(f"My address is {ADDRESS}.", "t1"))
    Consolidator(service.job_context).consolidate(alice)
    alice.suppress(t1.item_id)  # stop using the turn; its conclusion stays
    alice.remember(said(f"My address is {ADDRESS}.", "t2"))
    counts = Consolidator(service.job_context).consolidate(alice)
    assert (counts["written"], counts["refused"], counts["known"]) == (0, 0, 1)
    assert len(derived(alice)) == 1


def test_committing_picked_proposals_marks_their_turns_read(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(said("I work at Globex Corporation", "t1"))
    job = Consolidator(service.job_context)
    picked = [p for p in job.read(alice) if p.write]
    assert job.commit(alice, picked) == (1, 0)
    assert Consolidator(service.job_context).consolidate(alice)["turns_read"] == 0


def test_a_redaction_reaches_the_candidates_sealed_with_a_turn(
    alice: MemoryLedger, service: MemoryService
) -> None:
    t = alice.remember(said("Noted.", "t1", candidate("home_address", ADDRESS)))
    report = alice.redact(t.item_id, spans=["18 Haisong Road"])
    assert report.completed, report.to_dict()
    fields = service.log.read(service.log.get(UUID(t.item_id)))
    assert "Haisong" not in json.dumps(fields, ensure_ascii=False)
    counts = Consolidator(service.job_context).consolidate(alice)
    assert (counts["written"], counts["skipped_redacted"]) == (0, 1)
