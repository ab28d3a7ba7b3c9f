"""The forget-request evaluation set: its data is well formed and means what it says, every
history is accepted by a real ledger, and the scorer scores plans as documented.

A planner is measured against this set without anyone re-reading it, so the expectations
are checked against the product itself wherever they can be: every described scope is
resolved by the ledger's own forget scope (a dry run, which erases nothing) and must give
exactly the expected targets, candidates or status; no kept item may be erased by the
cascade of the expected targets; every redaction span must be one the product can cut.
"""

from __future__ import annotations

import copy
import json
import textwrap
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from benchmarks import forget_requests as fr
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.embedders import EMBEDDER_ENV
from memory_ledger.forgetting.redaction import span_pattern
from memory_ledger.policy import load_policy
from memory_ledger.principal import Principal

Data = dict[str, Any]
#: Scopes that select turns and inferences themselves: their targets are the whole scope.
SCOPE_SHAPED = ("source", "time_range", "category", "namespace")
YESTERDAY = ("yesterday", "昨天", "昨晚")
LAST_TIME = ("last time", "last conversation", "上次")


@pytest.fixture(scope="module")
def histories() -> dict[str, Data]:
    return fr.load_histories()


@pytest.fixture(scope="module")
def cases(histories: dict[str, Data]) -> list[Data]:
    return fr.load_cases(histories=histories)


@pytest.fixture(scope="module")
def stored(
    histories: dict[str, Data], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, MemoryLedger], dict[str, dict[str, str]]]]:
    """Every history written into its own namespace of one real store (SQLite in a tmp
    dir, the hashing embedder): the ledgers and each history's key -> item id."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(EMBEDDER_ENV, "hashing")
        service = MemoryService.open(tmp_path_factory.mktemp("forget-requests"))
        try:
            ledgers = {n: service.for_principal(Principal("bench", n)) for n in histories}
            ids = {n: fr.write_history(ledgers[n], h) for n, h in histories.items()}
            yield ledgers, ids
        finally:
            service.close()


def items_of(history: Data) -> dict[str, Data]:
    return {item["key"]: item for item in history["items"]}


def local(history: Data, value: str) -> datetime:
    return datetime.fromisoformat(value).astimezone(ZoneInfo(history["timezone"]))


def product_scope(expect: Data) -> dict[str, Any]:
    """The case's described scope as a `forget_scope` argument."""
    scope = {"kind": expect["kind"]}
    for name in ("subject", "predicate", "which", "value", "session", "since", "until", "category"):
        if name in expect:
            scope["session_id" if name == "session" else name] = expect[name]
    return scope


def cascade(history: Data, keys: set[str]) -> set[str]:
    """What the product adds to `keys` on its own (docs/user-guide.md, Cascade): items
    derived from them, transitively, and the turns they were taken from."""
    items = items_of(history)
    derived = set(keys)
    for item in history["items"]:  # list order: an input always comes first
        if set(item.get("derived_from", [])) & derived:
            derived.add(item["key"])
    carried = {items[k]["turn"] for k in keys if "turn" in items[k]}
    turns = {i["key"] for i in history["items"] if i["kind"] == "turn" and i["turn"] in carried}
    return (derived | turns) - keys


# -- the data as committed --------------------------------------------------------------


def test_files_are_in_canonical_form(histories: dict[str, Data], cases: list[Data]) -> None:
    """One item or case per line, so a diff shows one change per line."""
    for path, rows in ((fr.HISTORIES_PATH, None), (fr.CASES_PATH, cases)):
        text = path.read_text(encoding="utf-8")
        assert text.endswith("\n") and "\t" not in text
        if rows is not None:
            assert [json.loads(line.rstrip(",")) for line in text.splitlines()[1:-1]] == rows
    n_items = sum(len(h["items"]) for h in histories.values())
    assert len(fr.HISTORIES_PATH.read_text(encoding="utf-8").splitlines()) == 3 + n_items + 2 * len(
        histories
    )


def test_brief_minimums_hold(histories: dict[str, Data], cases: list[Data]) -> None:
    assert 8 <= len(histories) <= 12
    assert len(cases) >= 170
    langs = Counter(c["lang"] for c in cases)
    assert set(langs) == {"en", "zh"}
    assert all(langs[lang] >= 0.4 * len(cases) for lang in ("en", "zh")), langs
    statuses = Counter(c["expect"]["status"] for c in cases)
    assert set(statuses) == set(fr.STATUSES)
    intents = Counter(c["expect"]["intent"] for c in cases if "intent" in c["expect"])
    assert set(intents) == set(fr.INTENTS)
    shapes = Counter(fr.shape(c) for c in cases)
    n = len(cases)
    # The mix asked for, roughly: deletions most, then non-requests and clarifications.
    assert 0.40 * n <= shapes["delete"] <= 0.60 * n
    assert 0.12 * n <= shapes["not_a_request"] <= 0.20 * n
    assert shapes["needs_clarification"] >= 0.09 * n
    assert shapes["stop_using (conclusion)"] >= 0.06 * n
    assert shapes["redact"] >= 0.06 * n
    assert shapes["stop_using"] >= 0.04 * n
    assert shapes["update"] >= 0.03 * n
    assert shapes["nothing_matched"] >= 5
    third_party = [  # about someone else in the user's own memory: "my friend Bob's address"
        c
        for c in cases
        if any(
            items_of(histories[c["history"]])[k].get("subject", "user") != "user"
            for k in c["expect"].get("targets", [])
        )
    ]
    assert len(third_party) >= 0.08 * n
    for lang in ("en", "zh"):  # every answer shape in both languages
        assert {fr.shape(c) for c in cases if c["lang"] == lang} == set(shapes)


def test_case_ids_are_unique_and_name_existing_histories_and_keys(
    histories: dict[str, Data], cases: list[Data]
) -> None:
    assert len({c["id"] for c in cases}) == len(cases)
    for c in cases:
        assert c["id"].startswith(c["lang"] + "-")
        keys = set(items_of(histories[c["history"]]))
        named = [k for f in ("targets", "keeps", "candidates") for k in c["expect"].get(f, [])]
        assert set(named) <= keys, c["id"]
        assert not set(c["expect"].get("keeps", [])) & set(c["expect"].get("targets", []))
    requests = Counter((c["history"], c["request"].casefold()) for c in cases)
    assert max(requests.values()) == 1, "a request is asked twice of the same history"


def test_ambiguous_requests_also_appear_unambiguous(cases: list[Data]) -> None:
    """'forget my old address' is a clarification in one history and a plan in another."""
    for request in ("forget my old address", "forget my allergy", "forget my old job"):
        answers = {c["expect"]["status"] for c in cases if c["request"].casefold() == request}
        assert {"needs_clarification", "planned"} <= answers, request


def test_histories_have_the_shapes_the_cases_need(histories: dict[str, Data]) -> None:
    cardinality = load_policy().cardinality
    for predicate in ("home_address", "phone", "employer"):
        previous = set()
        for history in histories.values():
            facts = [
                i
                for i in history["items"]
                if i["kind"] == "fact" and i["subject"] == "user" and i["predicate"] == predicate
            ]
            if facts:
                previous.add(min(len(facts) - 1, 2))
        assert previous == {0, 1, 2}, predicate
    everything = [i for h in histories.values() for i in h["items"]]
    sets = Counter(
        (h, i["subject"], i["predicate"])
        for h, history in histories.items()
        for i in history["items"]
        if i["kind"] == "fact" and cardinality(i["predicate"]) == "many"
    )
    assert any(p == "allergy" and n >= 2 for (_, _, p), n in sets.items())
    assert {i["category"] for i in everything} >= {"health", "finance", "contact", "work"}
    assert sum(i["origin"] == "inferred" for i in everything) >= len(histories)
    assert len({i["subject"] for i in everything if i["kind"] != "turn"} - {"user"}) >= 10
    assert {i["speaker"] for i in everything if i["kind"] == "turn"} == {"user", "assistant"}
    for name, history in histories.items():
        now = datetime.fromisoformat(history["now"])
        days = {local(history, i["written_at"]).date() for i in history["items"]}
        sessions = {i.get("session") for i in history["items"]} - {None}
        assert len(sessions) >= 3 and len(days) >= 3, name
        assert all(d <= now.date() for d in days)


def test_docstring_composition_matches_the_data(
    histories: dict[str, Data], cases: list[Data]
) -> None:
    table = textwrap.indent(fr.composition(cases, histories), "    ")
    assert table in (fr.__doc__ or ""), "paste `python -m benchmarks.forget_requests`"


def test_time_words_match_the_history(histories: dict[str, Data], cases: list[Data]) -> None:
    """'yesterday' is the day before `now`, 'last time' the latest session, 'March' this
    year's March, all in the history's time zone."""
    for c in cases:
        history = histories[c["history"]]
        items = items_of(history)
        now = local(history, history["now"])
        text = c["request"].casefold()
        expect = c["expect"]
        named = expect.get("targets", []) + expect.get("candidates", [])
        if expect.get("kind") == "source":
            named = [k for k, i in items.items() if i.get("session") == expect["session"]]
        if any(w in text for w in YESTERDAY):
            if expect.get("kind") == "time_range":
                start = local(history, expect["since"])
                assert start.date() == (now - timedelta(days=1)).date(), c["id"]
                assert local(history, expect["until"]) - start == timedelta(days=1)
            for key in named:
                day = local(history, items[key]["written_at"]).date()
                assert day == (now - timedelta(days=1)).date(), (c["id"], key)
        if any(w in text for w in LAST_TIME):
            last = max(
                (i for i in history["items"] if "session" in i), key=lambda i: i["written_at"]
            )["session"]
            assert named and all(items[k].get("session") == last for k in named), c["id"]
        if ("march" in text or "三月" in text) and expect.get("kind") == "time_range":
            since, until = local(history, expect["since"]), local(history, expect["until"])
            assert (since.year, since.month, since.day, since.hour) == (now.year, 3, 1, 0)
            assert (until.year, until.month, until.day, until.hour) == (now.year, 4, 1, 0)


# -- against a real ledger --------------------------------------------------------------


def test_every_history_is_written_and_every_key_mapped(
    histories: dict[str, Data],
    stored: tuple[dict[str, MemoryLedger], dict[str, dict[str, str]]],
) -> None:
    ledgers, ids = stored
    all_ids = [i for m in ids.values() for i in m.values()]
    assert len(set(all_ids)) == len(all_ids) == sum(len(h["items"]) for h in histories.values())
    for name, history in histories.items():
        assert list(ids[name]) == [i["key"] for i in history["items"]]
        shown = {m.item_id: m for m in ledgers[name].recall(limit=200, include_archived=True)}
        for item in history["items"]:
            if item["kind"] != "fact" or item["origin"] == "inferred":
                continue
            # What the product holds is what the set says: the value, and for the facts of
            # a one-valued predicate, only the last written is current.
            versions = ledgers[name].history(subject=item["subject"], predicate=item["predicate"])
            status = {m.item_id: m.status for m in versions}[ids[name][item["key"]]]
            later = [
                i
                for i in history["items"]
                if i["kind"] == "fact"
                and (i["subject"], i["predicate"]) == (item["subject"], item["predicate"])
                and i["written_at"] > item["written_at"]
            ]
            many = load_policy().cardinality(item["predicate"]) == "many"
            assert status == ("superseded" if later and not many else "current"), item["key"]
            if status == "current":
                assert shown[ids[name][item["key"]]].text == item["value"]


def test_described_scopes_resolve_to_exactly_the_expected_answer(
    cases: list[Data], stored: tuple[dict[str, MemoryLedger], dict[str, dict[str, str]]]
) -> None:
    ledgers, ids = stored
    checked = Counter()
    for c in cases:
        expect = c["expect"]
        if "kind" not in expect:
            continue
        key_of = {v: k for k, v in ids[c["history"]].items()}
        report = ledgers[c["history"]].forget_scope(product_scope(expect), dry_run=True)
        if expect["status"] == "planned":
            assert report.status == "dry_run", c["id"]
            assert sorted(key_of[i] for i in report.targets) == sorted(expect["targets"]), c["id"]
        elif expect["status"] == "needs_clarification":
            assert report.status == "needs_clarification", c["id"]
            got = sorted(key_of[x.item_id] for x in report.candidates)
            assert got == sorted(expect["candidates"]), c["id"]
        else:
            assert report.status == expect["status"], c["id"]
        checked[expect["status"]] += 1
    assert checked["planned"] >= 100 and checked["needs_clarification"] >= 8
    assert checked["nothing_matched"] >= 5


def test_kept_items_survive_and_targets_are_not_cascades(
    histories: dict[str, Data],
    cases: list[Data],
    stored: tuple[dict[str, MemoryLedger], dict[str, dict[str, str]]],
) -> None:
    """The product's cascade of the expected targets spares every kept item, and a
    request that names items (not a whole session, range, category or namespace) does
    not list what the cascade adds by itself."""
    ledgers, ids = stored
    for c in cases:
        expect = c["expect"]
        if expect["status"] != "planned":
            continue
        history = histories[c["history"]]
        key_of = {v: k for k, v in ids[c["history"]].items()}
        targets = set(expect["targets"])
        scope = {"kind": "item", "item_ids": [ids[c["history"]][k] for k in sorted(targets)]}
        report = ledgers[c["history"]].forget_scope(scope, dry_run=True)
        erased = {key_of[i] for i in report.all_targets}
        assert erased == targets | cascade(history, targets), c["id"]  # our model of it
        assert not erased & set(expect.get("keeps", [])), c["id"]
        if expect.get("kind") not in SCOPE_SHAPED:
            for key in targets:
                assert key not in cascade(history, targets - {key}), (c["id"], key)


def test_redaction_spans_are_cuttable_and_updates_change_something(
    histories: dict[str, Data], cases: list[Data]
) -> None:
    for c in cases:
        expect = c["expect"]
        items = items_of(histories[c["history"]])
        texts = [fr.item_text(items[k]) for k in expect.get("targets", [])]
        for span in expect.get("spans", []):
            pattern = span_pattern([span])
            assert pattern is not None and any(pattern.spans(t) for t in texts), (c["id"], span)
        if expect.get("intent") == "update":
            assert all(fr._norm(t) != fr._norm(expect["new_value"]) for t in texts), c["id"]
            assert all(items[k]["kind"] != "turn" for k in expect["targets"])
        if expect.get("intent") == "stop_using":
            inferred = {items[k]["origin"] == "inferred" for k in expect["targets"]}
            assert inferred == {bool(expect.get("conclusion"))}, c["id"]


# -- the scorer -------------------------------------------------------------------------

IDS = {"addr_old": "id-1", "addr_new": "id-2", "t1": "id-3", "t2": "id-4", "phone": "id-5"}


def case(expect: Data, lang: str = "en") -> Data:
    return {"id": f"{lang}-900", "history": "h", "lang": lang, "request": "…", "expect": expect}


DELETE_OLD = case(
    {
        "status": "planned",
        "intent": "delete",
        "targets": ["addr_old"],
        "kind": "predicate",
        "subject": "user",
        "predicate": "home_address",
        "which": "previous",
        "keeps": ["addr_new"],
    }
)
REDACT = case(
    {"status": "planned", "intent": "redact", "targets": ["t1"], "spans": ["下午3点"]}, "zh"
)
UPDATE = case(
    {"status": "planned", "intent": "update", "targets": ["phone"], "new_value": "138 0000 1111"}
)
CONCLUSION = case(
    {"status": "planned", "intent": "stop_using", "targets": ["t2"], "conclusion": True}
)
AMBIGUOUS = case({"status": "needs_clarification", "candidates": ["addr_old", "addr_new"]})
NOT_A_REQUEST = case({"status": "not_a_request"})
NOTHING = case({"status": "nothing_matched"})


def plan(status: str = "planned", **fields: Any) -> Data:
    return {"status": status, **fields}


def test_an_exact_plan_scores_exact() -> None:
    got = fr.score(
        DELETE_OLD,
        plan(intent="delete", targets=["id-1"], scope={"kind": "predicate", "which": "previous"}),
        IDS,
    )
    assert got["exact"] and got["why"] == "exact" and got["scope_ok"] is True
    assert not (got["wider"] or got["false_trigger"] or got["clarified"])
    assert fr.score(REDACT, plan(intent="redact", targets=["id-3"], spans=[" 下午3点"]), IDS)[
        "exact"
    ]
    assert fr.score(
        UPDATE, plan(intent="update", targets=["id-5"], new_value="138  0000 1111"), IDS
    )["exact"]
    assert fr.score(CONCLUSION, plan(intent="stop_using", targets=["id-4"], conclusion=True), IDS)[
        "exact"
    ]
    asked = plan("needs_clarification", candidates=[{"item_id": "id-2"}, {"item_id": "id-1"}])
    got = fr.score(AMBIGUOUS, asked, IDS)
    assert got["exact"] and got["clarified"] and not got["wider"]
    assert fr.score(NOT_A_REQUEST, plan("not_a_request"), IDS)["exact"]


def test_one_extra_target_is_wider_and_not_exact() -> None:
    got = fr.score(DELETE_OLD, plan(intent="delete", targets=["id-1", "id-2"]), IDS)
    assert got["wider"] and not got["exact"]
    assert "extra targets ['addr_new']" in got["why"]
    assert got["scope_ok"] is False  # no scope given


def test_a_missing_target_or_another_intent_is_not_exact_but_not_wider() -> None:
    got = fr.score(DELETE_OLD, plan(intent="delete", targets=[]), IDS)
    assert not got["exact"] and not got["wider"] and "missing targets ['addr_old']" in got["why"]
    got = fr.score(DELETE_OLD, plan(intent="stop_using", targets=["id-1"]), IDS)
    assert not got["exact"] and "intent 'stop_using'" in got["why"]
    got = fr.score(CONCLUSION, plan(intent="stop_using", targets=["id-4"]), IDS)
    assert not got["exact"] and "conclusion False" in got["why"]
    got = fr.score(REDACT, plan(intent="redact", targets=["id-3"], spans=["3点"]), IDS)
    assert not got["exact"] and "spans" in got["why"]
    got = fr.score(UPDATE, plan(intent="update", targets=["id-5"], new_value="138 0000 1112"), IDS)
    assert not got["exact"] and "new value" in got["why"]


def test_a_plan_for_a_non_request_is_a_false_trigger() -> None:
    got = fr.score(NOT_A_REQUEST, plan(intent="delete", targets=["id-1"]), IDS)
    assert got["false_trigger"] and got["wider"] and not got["exact"]
    got = fr.score(NOT_A_REQUEST, plan("needs_clarification", candidates=["id-1", "id-2"]), IDS)
    assert got["false_trigger"] and got["clarified"] and not got["wider"]
    got = fr.score(NOTHING, plan("not_a_request"), IDS)
    assert not got["false_trigger"] and not got["exact"]


def test_guessing_instead_of_asking_is_wider() -> None:
    got = fr.score(AMBIGUOUS, plan(intent="delete", targets=["id-1"]), IDS)
    assert got["wider"] and not got["exact"] and not got["clarified"]
    got = fr.score(AMBIGUOUS, plan("needs_clarification", candidates=["id-1"]), IDS)
    assert not got["exact"] and got["clarified"] and "candidates" in got["why"]
    assert fr.score(NOTHING, plan(intent="delete", targets=["id-5"]), IDS)["wider"]


def test_summarise_counts_overall_and_per_language() -> None:
    scores = [
        fr.score(DELETE_OLD, plan(intent="delete", targets=["id-1"]), IDS),
        fr.score(DELETE_OLD, plan(intent="delete", targets=["id-1", "id-2"]), IDS),
        fr.score(REDACT, plan("needs_clarification", candidates=["id-3", "id-4"]), IDS),
        fr.score(NOT_A_REQUEST, plan(intent="delete", targets=["id-5"]), IDS),
    ]
    got = fr.summarise(scores)
    assert (got["cases"], got["exact"], got["exact_rate"]) == (4, 1, 0.25)
    assert (got["wider_count"], got["false_trigger_count"]) == (2, 1)
    assert got["clarification_rate"] == 0.25
    assert got["per_language"]["en"]["cases"] == 3 and got["per_language"]["zh"]["exact"] == 0
    assert got["per_language"]["zh"]["clarification_rate"] == 1.0
    assert got["per_status"]["not_a_request"]["false_trigger_count"] == 1


# -- the validators refuse broken data --------------------------------------------------


def broken(tmp_path: Path, name: str, data: Data) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c[0].update(history="nobody"), "history 'nobody' does not exist"),
        (lambda c: c[0]["expect"].update(targets=["no_such_key"]), "'no_such_key' is not an item"),
        (lambda c: c[1].update(id=c[0]["id"]), "id used 2 times"),
        (lambda c: c[0]["expect"].update(status="done"), "expect.status must be one of"),
        (lambda c: c[0]["expect"].update(intent="redact"), "expect.spans is required for redact"),
        (lambda c: c[0]["expect"].update(keeps=c[0]["expect"]["targets"]), "is also a target"),
        (lambda c: c[0].update(lang="fr"), "lang must be one of"),
        (lambda c: c[0]["expect"].update(which="old"), "expect.which must be one of"),
    ],
)
def test_load_cases_refuses_and_names_the_case(
    tmp_path: Path, histories: dict[str, Data], edit: Any, message: str
) -> None:
    raw = json.loads(fr.CASES_PATH.read_text(encoding="utf-8"))
    raw["cases"] = copy.deepcopy(raw["cases"][:2])
    edit(raw["cases"])
    with pytest.raises(fr.FormatError, match=message) as caught:
        fr.load_cases(broken(tmp_path, "cases.json", raw), histories)
    assert f"case {raw['cases'][0]['id']}" in str(caught.value)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda i: i[2].update(derived_from=["later_key"]), "is not an earlier item"),
        (lambda i: i[1].update(predicate="home address"), "predicate is not an identifier"),
        (lambda i: i[1].update(written_at="2019-05-01T09:00:00+02:00"), "offset is not"),
        (lambda i: i[1].pop("sensitivity"), "sensitivity is required"),
        (lambda i: i[0].pop("session"), "a turn needs session and turn"),
        (lambda i: i[1].update(colour="red"), "unknown field 'colour'"),
        (lambda i: i[1].update(written_at="2030-01-01T09:00:00+08:00"), "after the history's now"),
    ],
)
def test_load_histories_refuses_and_names_the_item(tmp_path: Path, edit: Any, message: str) -> None:
    raw = json.loads(fr.HISTORIES_PATH.read_text(encoding="utf-8"))
    raw["histories"] = {"mei": copy.deepcopy(raw["histories"]["mei"])}
    edit(raw["histories"]["mei"]["items"])
    with pytest.raises(fr.FormatError, match=message) as caught:
        fr.load_histories(broken(tmp_path, "histories.json", raw))
    assert "history mei: item " in str(caught.value)
