"""Cardinality: a set-valued predicate keeps every member; a one-valued one keeps one.

Issue 10, item 7: three `user/visited` facts each silently superseded the previous one,
so the agent "forgot" two of three places without any forget request.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from factories import cli, fact, later, preference, sqlite_files

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError, InvalidWrite, NotFound
from memory_ledger.policy import POLICY_FILE, load_policy
from memory_ledger.policy.cardinality import SetChange
from memory_ledger.principal import Principal
from memory_ledger.write_policy import parse_write

PLACES = ("Reykjavik", "Bergen", "Oslo")


def visit(place: str, day: int, **extra: object) -> dict:
    return fact("visited", place, at=later(day), turn=f"t{day}", **extra)


def current(ledger: MemoryLedger, predicate: str) -> set[str | None]:
    return {m.text for m in ledger.recall(predicate=predicate) if m.status == "current"}


def ledger_text(service: MemoryService) -> str:
    """Everything the lifecycle ledger holds: its rows, and on SQLite its file's bytes."""
    rows = json.dumps([e.payload for e in service.ledger.entries()], ensure_ascii=False)
    path = service.settings.data_dir / "ledger.sqlite"
    raw = path.read_bytes().decode("utf-8", "replace") if path.exists() else ""
    return rows + raw


# -- writing -------------------------------------------------------------------------


def test_three_visited_places_all_stay_current(alice: MemoryLedger) -> None:
    stored = [alice.remember(visit(place, day)) for day, place in enumerate(PLACES)]
    assert {s.cardinality for s in stored} == {"many"}
    assert all(s.replaces == () for s in stored)
    assert current(alice, "visited") == set(PLACES)
    history = alice.history(subject="user", predicate="visited")
    assert sorted((m.text, m.status) for m in history) == sorted((p, "current") for p in PLACES)


def test_two_allergies_are_both_recalled_in_context_and_summary(alice: MemoryLedger) -> None:
    alice.remember(fact("allergy", "peanuts", category="health", at=later(1)))
    alice.remember(fact("allergy", "shellfish", category="health", at=later(2)))
    assert current(alice, "allergy") == {"peanuts", "shellfish"}
    context = alice.context("peanuts shellfish", rank="keyword")
    assert {i.text for i in context.items} == {"peanuts", "shellfish"}
    summary = alice.summary()
    assert summary is not None
    assert "allergy: peanuts" in summary.text and "allergy: shellfish" in summary.text


def test_a_one_valued_predicate_still_supersedes_and_keeps_conflicts(
    alice: MemoryLedger,
) -> None:
    first = alice.remember(fact("home_address", "18 Haisong Road", at=later(1)))
    assert first.cardinality == "one"
    alice.remember(fact("home_address", "7 Binjiang Avenue", at=later(5)))
    assert [m.text for m in alice.recall(predicate="home_address")] == ["7 Binjiang Avenue"]
    alice.remember(fact("employer", "Acme"))
    alice.remember(fact("employer", "Globex"))
    assert {(m.text, m.status) for m in alice.recall(predicate="employer")} == {
        ("Acme", "conflict"),
        ("Globex", "conflict"),
    }


def test_replacing_one_named_member_keeps_the_others(alice: MemoryLedger) -> None:
    ids = {p: alice.remember(visit(p, day)).item_id for day, p in enumerate(PLACES)}
    new = alice.remember(visit("Bergen, Norway", 9, replaces=[ids["Bergen"]]))
    assert new.replaces == (ids["Bergen"],)
    assert current(alice, "visited") == {"Reykjavik", "Oslo", "Bergen, Norway"}
    [old] = alice.history(ids["Bergen"])
    [replacement] = alice.history(new.item_id)
    assert (old.status, old.valid_to) == ("superseded", replacement.valid_from)


def test_replace_mode_without_ids_replaces_the_whole_set(alice: MemoryLedger) -> None:
    ids = [alice.remember(visit(p, day)).item_id for day, p in enumerate(PLACES)]
    new = alice.remember(visit("Kyoto", 9, mode="replace"))
    assert sorted(new.replaces) == sorted(ids)
    assert current(alice, "visited") == {"Kyoto"}
    # in one batch, a replacement of the set replaces what the batch wrote before it too
    batch = alice.remember_many([visit("Nara", 10), visit("Osaka", 11, mode="replace")])
    assert batch[0].item_id in batch[1].replaces
    assert current(alice, "visited") == {"Osaka"}


def test_add_to_a_one_valued_predicate_is_refused(
    alice: MemoryLedger, service: MemoryService
) -> None:
    alice.remember(fact("home_address", "18 Haisong Road"))
    before = service.log.max_position()
    with pytest.raises(InvalidWrite, match="mode 'add' refused: user/home_address holds one"):
        alice.remember(fact("home_address", "7 Binjiang Avenue", at=later(1), mode="add"))
    with pytest.raises(InvalidWrite, match="replaces refused"):
        alice.remember_many(
            [
                visit("Oslo", 1),  # valid, but the batch is refused as a whole
                fact("home_address", "x 1", replaces=[alice.recall()[0].item_id]),
            ]
        )
    assert service.log.max_position() == before


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"mode": "add", "replaces": ["00000000-0000-4000-8000-000000000000"]}, "mode 'add'"),
        ({"mode": "sometimes"}, "mode"),
    ],
)
def test_contradictory_or_unknown_modes_are_refused_at_the_boundary(
    alice: MemoryLedger, extra: dict, message: str
) -> None:
    with pytest.raises(InvalidWrite, match=message):
        alice.remember(visit("Oslo", 1, **extra))


def test_mode_and_replaces_apply_to_facts_only(alice: MemoryLedger) -> None:
    with pytest.raises(InvalidWrite, match="apply to facts only"):
        alice.remember(preference("seat", "window", mode="add"))
    assert alice.remember(preference("seat", "aisle")).cardinality is None


def test_replaces_must_name_live_members_of_the_same_set(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService
) -> None:
    bergen = alice.remember(visit("Bergen", 1)).item_id
    city = alice.remember(fact("city", "Hangzhou")).item_id
    bobs = bob.remember(visit("Lima", 1)).item_id
    before = service.log.max_position()
    with pytest.raises(NotFound):
        alice.remember(visit("Oslo", 2, replaces=["00000000-0000-4000-8000-000000000000"]))
    with pytest.raises(NotFound):  # another namespace's member: the same answer
        alice.remember(visit("Oslo", 2, replaces=[bobs]))
    with pytest.raises(InvalidWrite, match="is not a fact about user/visited"):
        alice.remember(visit("Oslo", 2, replaces=[city]))
    alice.remember(visit("Bergen, Norway", 3, replaces=[bergen]))
    after_replace = service.log.max_position()
    with pytest.raises(InvalidWrite, match="no longer current"):
        alice.remember(visit("Oslo", 4, replaces=[bergen]))
    alice.forget(city)
    oslo = alice.remember(visit("Oslo", 5)).item_id
    alice.forget(oslo)
    with pytest.raises(InvalidWrite, match="was erased"):
        alice.remember(visit("Molde", 6, replaces=[oslo]))
    assert after_replace == before + 1
    assert bob.recall(predicate="visited")[0].text == "Lima"


# -- forgetting one member -------------------------------------------------------------


def test_forget_one_member_by_value_leaves_the_others(
    alice: MemoryLedger, service: MemoryService
) -> None:
    for day, place in enumerate(PLACES):
        alice.remember(visit(place, day))
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "visited", "value": " bergen "}
    )
    assert report.completed, report.failed_stores
    assert len(report.targets) == 1
    assert current(alice, "visited") == {"Reykjavik", "Oslo"}
    assert report.scope["value_filter"] is True
    assert "bergen" not in json.dumps(report.to_dict()).casefold()
    assert "bergen" not in ledger_text(service).casefold()
    [request] = [e for e in service.ledger.entries() if e.entry_type == "request"]
    assert request.payload["scope"] == {
        "kind": "predicate",
        "subject": "user",
        "predicate": "visited",
        "which": "all",
        "value_filter": True,
    }
    assert service.ledger.verify().ok
    if service.settings.postgres is None:  # the scheduled byte scan reads every file
        _, scan = service.requests.scan_files(report.request_id)
        assert scan is not None and scan.status == "ok"
        assert not [p for p in sqlite_files(service.settings) if b"Bergen" in p.read_bytes()]


def test_an_ambiguous_value_needs_clarification(
    alice: MemoryLedger, service: MemoryService
) -> None:
    first = alice.remember(visit("Bergen", 1)).item_id
    second = alice.remember(visit("BERGEN", 7)).item_id
    alice.remember(visit("Oslo", 8))
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "visited", "value": "Bergen"}
    )
    assert report.status == "needs_clarification"
    assert [c.item_id for c in report.candidates] == [first, second]
    assert current(alice, "visited") == {"Bergen", "BERGEN", "Oslo"}
    assert "bergen" not in ledger_text(service).casefold()
    missing = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "visited", "value": "Paris"}
    )
    assert missing.status == "nothing_matched"


def test_value_matching_ignores_normal_form_case_and_spacing(alice: MemoryLedger) -> None:
    composed = unicodedata.normalize("NFC", "Tromsø  Island")
    alice.remember(visit(composed, 1))
    alice.remember(visit("Oslo", 2))
    decomposed = unicodedata.normalize("NFD", "tromsØ island")
    assert decomposed != composed.casefold()
    report = alice.forget_scope(
        {"kind": "predicate", "subject": "user", "predicate": "visited", "value": decomposed}
    )
    assert report.completed and current(alice, "visited") == {"Oslo"}


def test_a_value_filter_is_bounded_and_for_predicate_scopes_only(alice: MemoryLedger) -> None:
    base = {"kind": "predicate", "subject": "user", "predicate": "visited"}
    with pytest.raises(InvalidWrite, match="the limit is 16384 bytes"):
        alice.forget_scope({**base, "value": "x" * 20_000})
    with pytest.raises(InvalidWrite, match="must not be empty"):
        alice.forget_scope({**base, "value": "   "})
    with pytest.raises(InvalidWrite, match="predicate scopes only"):
        alice.forget_scope({"kind": "category", "category": "general", "value": "Oslo"})
    with pytest.raises(InvalidWrite, match="cannot be combined") as refused:
        alice.forget_scope({**base, "which": "current", "value": "Secret Street 9"})
    assert "Secret" not in str(refused.value)


# -- the policy --------------------------------------------------------------------------


def open_with_policy(settings: Settings, text: str) -> MemoryService:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / POLICY_FILE).write_text(text, encoding="utf-8")
    return MemoryService(settings)


def test_policy_toml_overrides_the_defaults(settings: Settings) -> None:
    policy = """
[cardinality]
default = "many"
one = ["allergy"]
many = ["employer"]
"""
    with open_with_policy(settings, policy) as service:
        alice = service.for_principal(Principal("acme", "alice"))
        alice.remember_many([fact("employer", "Acme"), fact("employer", "Globex")])
        assert current(alice, "employer") == {"Acme", "Globex"}
        alice.remember(fact("allergy", "peanuts", at=later(1)))
        alice.remember(fact("allergy", "shellfish", at=later(2)))
        assert current(alice, "allergy") == {"shellfish"}
        alice.remember_many([fact("sport", "tennis"), fact("sport", "chess")])
        assert current(alice, "sport") == {"tennis", "chess"}
        assert service.policy.cardinality("home_address") == "one"  # packaged, kept


def test_packaged_defaults() -> None:
    policy = load_policy(None)
    assert policy.default_cardinality == "one"
    for predicate in ("home_address", "seat", "name", "email", "phone"):
        assert policy.cardinality(predicate) == "one"
    for predicate in ("allergy", "visited", "child", "language", "dietary_restriction"):
        assert policy.cardinality(predicate) == "many"
    assert policy.cardinality("never_heard_of") == "one"
    assert [Path(s).name for s in policy.sources] == ["cardinality.toml", "retention.toml"]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[cardinality\n", "is not valid TOML"),
        ("[cardinalty]\nmany = ['visited']\n", "cardinalty: Extra inputs are not permitted"),
        ("[cardinality]\ndefault = 'several'\n", "cardinality.default: Input should be"),
        ("[cardinality]\nmany = ['lives in']\n", "cardinality.many.0: not an identifier"),
        ("[cardinality]\none = ['pet']\nmany = ['pet']\n", "listed as both one and many: pet"),
        ("[cardinality]\nmany = 'visited'\n", "cardinality.many: Input should be a valid"),
    ],
)
def test_a_bad_policy_file_stops_the_open_with_a_clear_error(
    settings: Settings, text: str, problem: str
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        open_with_policy(settings, text)
    message = str(refused.value)
    assert str(settings.data_dir / POLICY_FILE) in message and problem in message
    assert refused.value.exit_code == 3


# -- rebuilding from the log ---------------------------------------------------------------


def test_rebuild_after_a_policy_change_equals_the_view_before_it(settings: Settings) -> None:
    with MemoryService(settings) as service:
        alice = service.for_principal(Principal("acme", "alice"))
        ids = [alice.remember(visit(p, day)).item_id for day, p in enumerate(PLACES)]
        alice.remember(visit("Bergen, Norway", 5, replaces=[ids[1]]))
        # an event from before cardinality existed: no attribute, so it behaves as `one`
        item, key = alice._new_item(parse_write(fact("pet", "Rex", at=later(1))), SetChange(None))
        service.log.save([item], [key])
        alice.remember(fact("pet", "Tom", at=later(2)))  # a set member now: Rex stays
        assert current(alice, "pet") == {"Rex", "Tom"}
        service.runner.catch_up()
        before = service.runner.snapshot()
    with open_with_policy(settings, "[cardinality]\none = ['visited', 'pet']\n") as service:
        service.rebuild()
        assert service.runner.snapshot() == before
        alice = service.for_principal(Principal("acme", "alice"))
        alice.remember(visit("Rome", 9))  # one-valued now: replaces the whole set
        assert current(alice, "visited") == {"Rome"}
        service.runner.catch_up()
        incremental = service.runner.snapshot()
        service.rebuild()
        assert service.runner.snapshot() == incremental


def test_an_old_event_without_cardinality_supersedes_as_before(
    alice: MemoryLedger, service: MemoryService
) -> None:
    for day, place in enumerate(PLACES):
        item, key = alice._new_item(parse_write(visit(place, day)), SetChange(None))
        service.log.save([item], [key])
    assert current(alice, "visited") == {"Oslo"}


# -- the CLI -------------------------------------------------------------------------------

NS = ["--namespace", "acme/alice"]


def remember_visit(where: list[str], place: str, *extra: str) -> dict:
    args = ["--kind", "fact", "--subject", "user", "--predicate", "visited", "--value", place]
    code, output = cli("remember", *NS, *where, "--json", "--turn-id", "t1", *args, *extra)
    assert code == 0, output
    return dict(json.loads(output)[0])


def test_cli_remember_mode_replaces_and_forget_value(where: list[str]) -> None:
    ids = {p: remember_visit(where, p)["item_id"] for p in PLACES}
    replaced = remember_visit(where, "Bergen, Norway", "--replaces", ids["Bergen"])
    assert (replaced["cardinality"], replaced["replaces"]) == ("many", [ids["Bergen"]])
    fact_of = ["--kind", "fact", "--subject", "user", "--turn-id", "t2", "--predicate"]
    code, output = cli("remember", *NS, *where, *fact_of, "visited", "--value", "Kyoto")
    assert code == 0 and "(added to set)" in output
    code, output = cli(
        "remember", *NS, *where, *fact_of, "home_address", "--value", "1 Road", "--mode", "add"
    )
    assert code == 2 and "mode 'add' refused" in output
    members = ["--subject", "user", "--predicate", "visited"]
    code, output = cli("forget", *NS, *where, *members, "--value", "oslo", "--json")
    assert code == 0, output
    report = json.loads(output)
    assert report["status"] == "completed" and report["targets"] == [ids["Oslo"]]
    assert report["scope"]["value_filter"] is True and "oslo" not in output.casefold()
    code, output = cli("forget", *NS, *where, *members, "--value", "Lima")
    assert code == 0 and "nothing_matched" in output and "Lima" not in output
    code, output = cli("forget", *NS, *where, "--category", "general", "--value", "Kyoto")
    assert code == 2 and "--value applies to --subject/--predicate scopes only" in output
    code, output = cli("recall", *NS, *where, "--json", "--predicate", "visited")
    assert {m["text"] for m in json.loads(output)} == {"Reykjavik", "Bergen, Norway", "Kyoto"}


def test_the_ledger_admits_a_value_filter_flag_and_never_a_value() -> None:
    from memory_ledger.ledger import canonical_payload

    def request(scope: dict) -> dict:
        return {"namespace": "acme/alice", "scope": scope, "requested_by": "alice"}

    members = {"kind": "predicate", "subject": "user", "predicate": "visited"}
    body = canonical_payload("request", request({**members, "value_filter": True}))
    assert json.loads(body)["scope"]["value_filter"] is True
    with pytest.raises(InvalidWrite) as refused:
        canonical_payload("request", request({**members, "value": "Bergen"}))
    assert "Bergen" not in str(refused.value)
    with pytest.raises(InvalidWrite, match="a scope of kind category takes only"):
        canonical_payload(
            "request", request({"kind": "category", "category": "x", "value_filter": True})
        )
