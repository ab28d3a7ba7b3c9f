"""The deletion acceptance harness: every case passes all four results, on SQLite and
PostgreSQL; the harness can fail (it is not a rubber stamp); `check` reports per case."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from memory_ledger.acceptance import (
    CASES,
    COULD_NOT_CHECK,
    EXIT_CODES,
    MIXED_TURN,
    RESULT_NAMES,
    SINGLE_FACT,
    Case,
    CaseResult,
    Result,
    case_named,
    harness,
    overall,
    render_table,
    run_case,
    scratch_databases,
)
from memory_ledger.cli import app

PG_CASES = [
    "single_fact",
    "mixed_turn",
    "whole_user",
    "background_write_back",
    "target_mixed_in_summary",
]


def _explain(result: CaseResult | dict[str, Any]) -> str:
    data = result.to_dict() if isinstance(result, CaseResult) else result
    return json.dumps(data, indent=2)


def _leaks(text: str, case: Case) -> list[int]:
    return [i for i, t in enumerate(case.targets, 1) if t.casefold() in text.casefold()]


# -- every case, on SQLite, through `memory-ledger check --json` -----------------------


@pytest.fixture(scope="module")
def check_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """One `check --json --keep DIR` run shared by the per-case tests and the CLI test:
    the cases cost a new-process recall each, so they run once per module."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("MEMORY_LEDGER_") and name != "MEMORY_LEDGER_TEST_PG":
                mp.delenv(name)
        keep = tmp_path_factory.mktemp("check")
        result = CliRunner().invoke(app, ["check", "--json", "--keep", str(keep)])
    return result.exit_code, result.stdout


@pytest.fixture(scope="module")
def checked(check_run: tuple[int, str]) -> dict[str, dict[str, Any]]:
    return {r["case"]: r for r in json.loads(check_run[1])}


@pytest.mark.slow
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_case_passes_all_four_results_on_sqlite(
    name: str, checked: dict[str, dict[str, Any]]
) -> None:
    result = checked[name]
    assert list(result["results"]) == list(RESULT_NAMES)
    statuses = {k: v["status"] for k, v in result["results"].items()}
    expected = dict.fromkeys(RESULT_NAMES, "pass")
    if case_named(name).new_value is None:  # a case with no new value to write
        expected["new_writes"] = "n/a"
    assert statuses == expected, _explain(result)
    assert result["request"]["status"] == "completed", _explain(result)
    assert not _leaks(json.dumps(result), case_named(name)), "the report repeats a target"


@pytest.mark.slow
def test_check_json_reports_four_results_per_case_and_exits_zero(
    check_run: tuple[int, str],
) -> None:
    code, stdout = check_run
    results = json.loads(stdout)
    assert code == 0, stdout
    assert len(results) >= 10 and len(results) == len(CASES)
    assert {r["case"] for r in results} == {c.name for c in CASES}
    for r in results:
        assert set(r["results"]) == set(RESULT_NAMES)  # four results, no total score
        assert all(v["status"] in ("pass", "n/a") for v in r["results"].values())
        assert r["passed"] is True and r["outcome"] == "passed"
    for case in CASES:  # the harness's own output is no place for deleted data
        assert not _leaks(stdout, case), case.name


def test_check_refuses_a_keep_directory_holding_an_earlier_run(tmp_path: Path) -> None:
    (tmp_path / CASES[0].name / "control").mkdir(parents=True)
    (tmp_path / CASES[0].name / "control" / "events.sqlite").write_bytes(b"old")
    result = CliRunner().invoke(app, ["check", "--keep", str(tmp_path)])
    assert result.exit_code != 0
    assert "not empty" in result.output


def test_the_table_has_one_row_per_case_and_one_column_per_result() -> None:
    rows = [
        CaseResult(
            "a_case",
            "",
            [
                Result("target_residue", "fail", "bytes of target #1 remain in x.sqlite"),
                Result("collateral", "pass", "ok"),
                Result("new_writes", "n/a", "no new value in this case"),
                Result("reappearance", "invalid", "precondition failed"),
            ],
        )
    ]
    table = render_table(rows)
    assert [c.header for c in table.columns] == ["case", *RESULT_NAMES]
    assert table.row_count == 1
    assert not rows[0].passed


# -- a probe that gives no answer: could not check, neither a pass nor a failure --------


def _results(**statuses: str) -> CaseResult:
    return CaseResult(
        "a_case",
        "",
        [Result(name, statuses.get(name, "pass"), "reason") for name in RESULT_NAMES],
    )


def test_a_result_that_could_not_be_checked_is_its_own_outcome_and_exit_code() -> None:
    unchecked = _results(target_residue=COULD_NOT_CHECK)
    assert unchecked.outcome == "could_not_check" and not unchecked.passed
    assert unchecked.to_dict()["outcome"] == "could_not_check"
    assert overall([_results(), unchecked]) == "could_not_check"
    assert EXIT_CODES[overall([unchecked])] not in (0, 1)  # neither a pass nor a failure
    failed = _results(collateral="fail", target_residue=COULD_NOT_CHECK)
    assert failed.outcome == "failed" and overall([unchecked, failed]) == "failed"
    assert EXIT_CODES[overall([failed])] == 1
    assert overall([_results()]) == "passed" and EXIT_CODES["passed"] == 0
    table = render_table([unchecked])
    assert "COULD NOT CHECK" in table.columns[1]._cells[0].plain


@pytest.mark.slow
def test_a_new_process_that_hangs_is_reported_as_could_not_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its deadline (minutes: it only catches a hang) is made to pass at once: a new
    interpreter never answers within a microsecond."""
    monkeypatch.setattr(harness, "NEW_PROCESS_SECONDS", 1e-6)
    result = run_case(SINGLE_FACT, tmp_path)
    residue = result["target_residue"]
    assert residue.status == COULD_NOT_CHECK, _explain(result)
    assert residue.reason.startswith("could not check: the new-process recall gave no answer")
    assert result["collateral"].status == COULD_NOT_CHECK  # its new-process part is unknown
    assert result["new_writes"].status == "pass" and result["reappearance"].status == "pass"
    assert result.outcome == "could_not_check" and not result.passed


def test_check_exits_15_and_says_could_not_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's report of a run (the run itself is the test above): exit 15, never 0
    or 1, and the case named as could not check."""
    import memory_ledger.acceptance as acceptance

    monkeypatch.setattr(
        acceptance, "run_all", lambda workdir: [_results(collateral=COULD_NOT_CHECK)]
    )
    human = CliRunner().invoke(app, ["check"], env={"COLUMNS": "200"})
    assert human.exit_code == 15, human.output
    assert "could not check (run again): a_case" in human.output
    assert "failing" not in human.output
    as_json = CliRunner().invoke(app, ["check", "--json"])
    assert as_json.exit_code == 15
    [case] = json.loads(as_json.stdout)
    assert case["outcome"] == "could_not_check"
    assert case["results"]["collateral"]["status"] == "could_not_check"


# -- PostgreSQL: A and B in two scratch databases ------------------------------------


@pytest.fixture
def pg_control_url(pg_admin_url: str) -> Iterator[str]:
    """A second scratch database, for the control store (pg_url holds the request's)."""
    name = f"ml_acc_ctl_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{pg_admin_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("name", PG_CASES)
def test_case_passes_all_four_results_on_postgres(
    name: str, tmp_path: Path, pg_url: str, pg_control_url: str
) -> None:
    urls = {"control": pg_control_url, "request": pg_url}
    result = run_case(case_named(name), tmp_path, url=urls.__getitem__)
    assert result.passed, _explain(result)
    assert "rows of every table" in result["target_residue"].reason


@pytest.mark.postgres
def test_scratch_databases_gives_each_store_its_own_database_and_drops_them(
    pg_admin_url: str,
) -> None:
    with scratch_databases(pg_admin_url) as url_for:
        control, request = url_for("control"), url_for("request")
        assert control != request
        for url in (control, request):
            with psycopg.connect(url) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
    names = [u.rsplit("/", 1)[1] for u in (control, request)]
    with psycopg.connect(pg_admin_url) as conn:
        left = conn.execute(
            "SELECT datname FROM pg_database WHERE datname = ANY(%s)", (names,)
        ).fetchall()
    assert left == []


# -- the harness can fail --------------------------------------------------------------


def _suppress_only(store: Any, ledger: Any, ids: dict[str, str], notes: dict[str, Any]) -> None:
    ledger.suppress(ids["employer"])  # "stop using" is not "delete": the data stays


SUPPRESS_ONLY = replace(SINGLE_FACT, name="suppress_only", forget=_suppress_only)
TOO_BROAD = replace(MIXED_TURN, name="too_broad", forget={"kind": "namespace"})
NEVER_REMEMBERED = replace(SINGLE_FACT, name="never_remembered", targets=("Umbrella Pharma",))


@pytest.mark.slow
def test_a_request_that_only_suppresses_fails_target_residue(tmp_path: Path) -> None:
    result = run_case(SUPPRESS_ONLY, tmp_path)
    residue = result["target_residue"]
    assert residue.status == "fail", _explain(result)
    assert "get/history of item" in residue.reason  # the log still opens it
    # Its bytes are sealed on disk like every live item's: the log and recall tell.
    assert "returns target #1" in residue.reason
    assert "Globex" not in residue.reason and "Globex" not in _explain(result)
    assert result["collateral"].status == "pass"
    assert result["reappearance"].status == "fail"
    assert not result.passed


@pytest.mark.slow
def test_a_request_broader_than_its_target_fails_collateral(tmp_path: Path) -> None:
    result = run_case(TOO_BROAD, tmp_path)
    assert result["target_residue"].status == "pass", _explain(result)
    collateral = result["collateral"]
    assert collateral.status == "fail"
    assert "'window'" in collateral.reason and "no longer recalled" in collateral.reason
    assert not result.passed


@pytest.mark.slow
def test_a_target_the_control_never_recalled_is_invalid_not_passed(tmp_path: Path) -> None:
    result = run_case(NEVER_REMEMBERED, tmp_path)
    assert result["target_residue"].status == "invalid", _explain(result)
    assert "control store never recalled target #1" in result["target_residue"].reason
    assert not result.passed


def test_cases_refuse_short_targets_and_targets_inside_kept_texts() -> None:
    with pytest.raises(ValueError, match="6\\+ characters"):
        replace(SINGLE_FACT, targets=("Acme",))
    with pytest.raises(ValueError, match="target #1 occurs in a kept"):
        replace(SINGLE_FACT, targets=("Kyoto, 12",))


def test_there_are_enough_hand_checked_cases_with_distinct_names() -> None:
    names = [c.name for c in CASES]
    assert len(names) >= 10 and len(set(names)) == len(names)
    scopes = {c.forget["kind"] for c in CASES if isinstance(c.forget, dict)}
    assert {"predicate", "category", "time_range", "source", "namespace"} <= scopes
