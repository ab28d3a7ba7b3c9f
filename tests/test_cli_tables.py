"""Ids are never cut in a table, at any width: each id the `--json` output gives appears
whole, on one line, in the human output at 40, 60, 80 and 120 columns (rich reads
`COLUMNS`), so it can be copied into the next command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.cli import app
from memory_ledger.cli.common import out
from memory_ledger.config import DATA_DIR_ENV

NS = "acme/alice"
WIDTHS = (40, 60, 80, 120)


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setattr(out, "_width", None)  # read COLUMNS at each print

    def invoke(*args: str, columns: int = 200) -> tuple[int, str]:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})
        return result.exit_code, result.stdout

    return invoke


def as_json(run, *args: str) -> object:
    code, output = run(*args, "--json")
    assert code in (0, 8), output
    return json.loads(output)


def assert_whole(run, ids: list[str], *args: str) -> None:
    assert ids
    for columns in WIDTHS:
        code, output = run(*args, columns=columns)
        assert code in (0, 8), output
        lines = output.splitlines()
        for item in ids:
            assert any(item in line for line in lines), (columns, item, output)


@pytest.fixture
def filled(run) -> dict[str, list[str]]:
    ids = []
    for turn, (predicate, value) in enumerate(
        [
            ("home_address", "18 Haisong Road, a long address that has to wrap somewhere"),
            ("phone", "138 0000 1111"),
            ("note", "a note with rather a lot of words in it, to make the text column wide"),
        ]
    ):
        written = as_json(
            run, "remember", "-n", NS, "--kind", "fact", "--subject", "user",
            "--predicate", predicate, "--value", value, "--turn-id", f"t{turn}",
        )  # fmt: skip
        ids.append(written[0]["item_id"])  # type: ignore[index]
    return {"items": ids}


def test_recall_history_and_show_keep_ids_whole(run, filled: dict[str, list[str]]) -> None:
    recalled = [m["item_id"] for m in as_json(run, "recall", "-n", NS)]  # type: ignore[union-attr]
    assert sorted(recalled) == sorted(filled["items"])
    assert_whole(run, recalled, "recall", "-n", NS)
    first = filled["items"][0]
    assert_whole(run, [first], "history", "-n", NS, first)
    assert_whole(run, [first], "show", "-n", NS, first)


def test_plans_requests_and_receipts_keep_ids_whole(run, filled: dict[str, list[str]]) -> None:
    plan = as_json(run, "forget", "plan", "-n", NS, "delete my phone number")
    assert_whole(run, plan["targets"], "forget", "status", "-n", NS, plan["plan_id"])  # type: ignore[index]
    done = as_json(run, "forget", "execute", "-n", NS, plan["plan_id"])  # type: ignore[index]
    request = done["request_id"]  # type: ignore[index]
    requests = [r["request_id"] for r in as_json(run, "requests")]  # type: ignore[union-attr]
    assert request in requests
    assert_whole(run, requests, "requests")
    assert_whole(run, [request, *plan["targets"]], "forget", "status", request)  # type: ignore[index]


def test_tokens_and_jobs_keep_ids_whole(run, filled: dict[str, list[str]]) -> None:
    for role in ("agent", "compliance"):
        as_json(run, "tokens", "create", "--role", role, "--namespace", NS)
    tokens = [t["token_id"] for t in as_json(run, "tokens", "list")["tokens"]]  # type: ignore[index]
    assert len(tokens) == 2
    assert_whole(run, tokens, "tokens", "list")
    jobs = [j["name"] for j in as_json(run, "jobs", "list")["jobs"]]  # type: ignore[index]
    assert_whole(run, jobs, "jobs", "list")


def assert_no_cell_wraps(run, values: list[str], *args: str) -> None:
    """Each short value (a status, a time, a count) is on one line at 80 and 120 columns:
    a value broken over two lines of a cell reads as two values."""
    for columns in (80, 120):
        code, output = run(*args, columns=columns)
        assert code == 0, output
        for value in values:
            assert any(value in line for line in output.splitlines()), (columns, value, output)


def test_requests_and_jobs_list_never_wrap_a_cell(run, filled: dict[str, list[str]]) -> None:
    plan = as_json(run, "forget", "plan", "-n", NS, "delete my phone number")
    as_json(run, "forget", "execute", "-n", NS, plan["plan_id"])  # type: ignore[index]
    request = as_json(run, "requests")[0]  # type: ignore[index]
    values = [request["namespace"], request["scope"]["kind"], request["status"]]
    assert_no_cell_wraps(run, values, "requests")
    as_json(run, "jobs", "run-once", "retention")
    job = next(j for j in as_json(run, "jobs", "list")["jobs"] if j["name"] == "retention")  # type: ignore[index]
    counts = " ".join(f"{k}={v}" for k, v in job["last_run"]["counts"].items())
    started = job["last_run"]["started_at"][:19].replace("T", " ")
    assert_no_cell_wraps(run, [counts, started], "jobs", "list")
