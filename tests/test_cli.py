"""The CLI as an operator uses it: tables for people, JSON for machines, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from factories import cli
from typer.testing import CliRunner

from memory_ledger.cli import app

runner = CliRunner()  # for the calls that need stderr or stdin apart
NS = ["--namespace", "acme/alice"]


def remember(where: list[str], *args: str) -> str:
    code, output = cli("remember", *NS, *where, "--json", "--turn-id", "t1", *args)
    assert code == 0, output
    return str(json.loads(output)[0]["item_id"])


def test_remember_recall_update_history(where: list[str]) -> None:
    item = remember(
        where,
        "--kind",
        "fact",
        "--subject",
        "user",
        "--predicate",
        "home_address",
        "--value",
        "18 Haisong Road",
        "--category",
        "contact",
    )
    code, output = cli("recall", *NS, *where)
    assert code == 0 and "memories of acme/alice" in output and "Haisong" in output
    code, output = cli("recall", *NS, *where, "--json", "--predicate", "home_address")
    assert [m["text"] for m in json.loads(output)] == ["18 Haisong Road"]
    code, output = cli(
        "update", *NS, *where, item, "--value", "7 Binjiang Avenue", "--turn-id", "t9"
    )
    assert code == 0, output
    code, output = cli("history", *NS, *where, item, "--json")
    versions = json.loads(output)
    assert [(v["text"], v["status"]) for v in versions] == [
        ("18 Haisong Road", "superseded"),
        ("7 Binjiang Avenue", "current"),
    ]


def test_suppress_unsuppress_and_forget(where: list[str]) -> None:
    item = remember(
        where,
        "--kind",
        "preference",
        "--subject",
        "user",
        "--predicate",
        "seat",
        "--value",
        "window seat please",
        "--sensitivity",
        "internal",
    )
    assert cli("suppress", *NS, *where, item)[0] == 0
    assert json.loads(cli("recall", *NS, *where, "--json")[1]) == []
    assert cli("unsuppress", *NS, *where, item)[0] == 0
    assert len(json.loads(cli("recall", *NS, *where, "--json")[1])) == 1
    code, output = cli("forget", *NS, *where, "--memory", item, "--json")
    assert code == 0, output
    report = json.loads(output)
    assert report["status"] == "completed"
    assert "window seat please" not in output
    code, output = cli("show", *NS, *where, item, "--json")
    assert json.loads(output)["erased"] is True and json.loads(output)["text"] is None


def test_redact_turn(where: list[str]) -> None:
    item = remember(
        where,
        "--kind",
        "turn",
        "--subject",
        "user",
        "--session-id",
        "s1",
        "--content",
        "my card is 4111 1111 1111 1111",
    )
    code, output = cli("redact", *NS, *where, item, "--field", "content")
    assert code == 0, output
    recalled = json.loads(cli("recall", *NS, *where, "--json", "--kind", "turn")[1])
    assert [m["text"] for m in recalled] == ["[redacted]"]


def test_from_json_and_status_and_rebuild(where: list[str], tmp_path: Path) -> None:
    writes = [
        {
            "kind": "fact",
            "subject": "user",
            "predicate": "city",
            "value": "Hangzhou",
            "origin": "explicit",
            "sensitivity": "personal",
            "provenance": {
                "writer": "agent",
                "written_at": "2026-11-01T09:00:00Z",
                "turn_id": "t1",
            },
        },
    ]
    source = tmp_path / "writes.json"
    source.write_text(json.dumps(writes))
    code, output = cli("remember", *NS, *where, "--from-json", str(source))
    assert code == 0, output
    code, output = cli("status", *where, "--json")
    status = json.loads(output)
    assert status["events"] == 1 and status["keys"] == {"live": 1, "destroyed": 0}
    assert (status["vector_index"]["rows"], status["vector_index"]["behind"]) == (0, 1)
    code, output = cli("rebuild", *where, "--json")
    assert code == 0 and json.loads(output)["replayed"] == 1
    code, output = cli("status", *where)
    assert code == 0 and "vector_index (hashing" in output
    vectors = json.loads(cli("status", *where, "--json")[1])["vector_index"]
    assert (vectors["rows"], vectors["behind"]) == (1, 0)
    code, output = cli("rebuild", *where, "--projection", "nope")
    assert code == 2 and "unknown projection" in output


def test_invalid_write_exits_non_zero_with_the_problems(where: list[str]) -> None:
    code, output = cli(
        "remember",
        *NS,
        *where,
        "--kind",
        "rumour",
        "--subject",
        "user",
        "--predicate",
        "x",
        "--value",
        "y",
        "--turn-id",
        "t1",
        "--json",
    )
    assert code == 2
    error = json.loads(output)
    assert error["type"] == "InvalidWrite" and any("kind" in p for p in error["problems"])
    code, output = cli("status", *where, "--json")
    assert json.loads(output)["events"] == 0


def test_missing_provenance_source_is_refused(where: list[str]) -> None:
    code, output = cli(
        "remember",
        *NS,
        *where,
        "--kind",
        "fact",
        "--subject",
        "user",
        "--predicate",
        "city",
        "--value",
        "Hangzhou",
    )
    assert code == 2 and "provenance needs a source" in output


def test_bad_namespace_and_unknown_item(where: list[str]) -> None:
    code, output = cli("recall", "--namespace", "no-slash", *where)
    assert code == 2 and "tenant/user" in output
    code, output = cli("forget", *NS, *where, "--memory", "00000000-0000-4000-8000-000000000000")
    assert code == 5 and "no memory item" in output


def test_unreachable_url_is_a_clear_error(tmp_path: Path) -> None:
    code, output = cli(
        "status", "--data-dir", str(tmp_path), "--url", "postgresql://u:hunter2@127.0.0.1:1/db"
    )
    assert code == 3
    assert "cannot connect to postgresql://u:***@127.0.0.1:1/db" in output
    assert "hunter2" not in output


def test_environment_configures_the_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_DATA_DIR", str(tmp_path / "env-dir"))
    code, output = cli("status", "--json")  # a read: where there is no store yet, it says so
    error = json.loads(output)
    assert code == 3 and error["type"] == "StoreNotFound"
    assert str((tmp_path / "env-dir").resolve()) in error["error"]
    assert cli("remember", *NS, "--kind", "turn", "--subject", "user", "--content", "hi",
               "--session-id", "s1", "--turn-id", "t1")[0] == 0  # fmt: skip
    code, output = cli("status", "--json")
    assert code == 0 and json.loads(output)["location"] == str((tmp_path / "env-dir").resolve())


def test_help_works_for_every_command() -> None:
    for command in (
        "remember",
        "recall",
        "history",
        "show",
        "update",
        "suppress",
        "unsuppress",
        "redact",
        "forget",
        "status",
        "rebuild",
        "run",
        "demo",
    ):
        code, output = cli(command, "--help")
        assert code == 0 and "Usage" in output, (command, output)


def test_text_that_looks_like_markup_is_shown_verbatim(where: list[str]) -> None:
    remember(
        where,
        "--kind",
        "fact",
        "--subject",
        "user",
        "--predicate",
        "note",
        "--value",
        "[bold]not bold[/bold] and [/x]",
    )
    code, output = cli("recall", *NS, *where)
    assert code == 0 and "[bold]not" in output
    code, output = cli("recall", *NS, *where, "--subject", "[/x]")
    assert code == 2 and "invalid subject" in output and "[/x]" not in output


def test_another_namespaces_id_looks_like_a_missing_one(where: list[str]) -> None:
    item = remember(
        where, "--kind", "fact", "--subject", "user", "--predicate", "city", "--value", "Hangzhou"
    )
    theirs = runner.invoke(app, ["show", "--namespace", "acme/bob", *where, item])
    missing = runner.invoke(
        app, ["show", "--namespace", "acme/bob", *where, "00000000-0000-4000-8000-000000000000"]
    )
    assert theirs.exit_code == missing.exit_code == 5
    assert theirs.output.replace(item, "ID") == missing.output.replace(
        "00000000-0000-4000-8000-000000000000", "ID"
    )


def test_forget_by_scope_requests_receipts_verify_audit_and_stores(where: list[str]) -> None:
    remember(
        where,
        "--kind",
        "fact",
        "--subject",
        "user",
        "--predicate",
        "home_address",
        "--value",
        "18 Haisong Road",
    )
    remember(
        where, "--kind", "fact", "--subject", "user", "--predicate", "city", "--value", "Hangzhou"
    )
    code, output = cli(
        "forget",
        *NS,
        *where,
        "--subject",
        "user",
        "--predicate",
        "home_address",
        "--dry-run",
        "--json",
    )
    assert code == 0 and json.loads(output)["status"] == "dry_run"
    code, output = cli(
        "forget", *NS, *where, "--subject", "user", "--predicate", "home_address", "--json"
    )
    report = json.loads(output)
    assert code == 0 and report["status"] == "completed" and "Haisong" not in output
    request_id = report["request_id"]
    code, output = cli("requests", *where, "--json")
    assert [r["status"] for r in json.loads(output)] == ["dry_run", "completed"]
    code, output = cli("receipts", request_id, *where, "--json")
    assert {r["store"] for r in json.loads(output)["receipts"]} >= {"event_log", "key_store"}
    code, output = cli("verify", request_id, *where)
    assert code == 0 and "verified" in output
    code, output = cli("audit", "verify", *where, "--json")
    assert code == 0 and json.loads(output)["ok"] is True
    code, output = cli("stores", *where, "--json")
    assert [s["store"] for s in json.loads(output)][:2] == ["event_log", "key_store"]
    code, output = cli("recall", *NS, *where, "--json")
    assert [m["text"] for m in json.loads(output)] == ["Hangzhou"]


def test_forget_needs_exactly_one_scope(where: list[str]) -> None:
    code, output = cli("forget", *NS, *where)
    assert code == 2 and "exactly one scope" in output
    code, output = cli("forget", *NS, *where, "--category", "health", "--everything")
    assert code == 2
    code, output = cli("forget", *NS, *where, "--category", "health")
    assert code == 0 and "Nothing stored matches" in output


def test_consolidate_command(where: list[str]) -> None:
    remember(
        where,
        "--kind",
        "turn",
        "--subject",
        "user",
        "--session-id",
        "s1",
        "--content",
        "I work at Globex Corporation",
    )
    code, output = cli("consolidate", *where, "--json")
    assert code == 0 and json.loads(output) == {"written": 1, "refused": 0}
    code, output = cli("recall", *NS, *where, "--json", "--predicate", "employer")
    assert [m["text"] for m in json.loads(output)] == ["Globex Corporation"]


def test_audit_verify_with_an_anchor(where: list[str]) -> None:
    item = remember(
        where, "--kind", "fact", "--subject", "user", "--predicate", "city", "--value", "Hangzhou"
    )
    cli("forget", *NS, *where, "--memory", item)
    code, output = cli("audit", "verify", *where)
    assert code == 0 and "intact" in output and "anchor for the next audit" in output
    code, output = cli("audit", "verify", *where, "--json")
    head = json.loads(output)
    anchor = f"{head['head_seq']}:{head['head_hash']}"
    code, output = cli("audit", "verify", *where, "--anchor", anchor)
    assert code == 0, output
    code, output = cli("audit", "verify", *where, "--anchor", f"{head['head_seq'] + 5}:{'0' * 64}")
    assert code == 9 and "BROKEN" in output
    code, output = cli("audit", "verify", *where, "--anchor", "nonsense")
    assert code == 2


@pytest.mark.parametrize(
    ("command", "option", "value", "bound"),
    [
        ("recall", "--limit", "0", "1 to 10000"),
        ("recall", "--limit", "10001", "1 to 10000"),
        ("recall", "--limit", "99999999999999999999", "1 to 10000"),
        ("recall", "--limit", "1.5", "whole number"),
        ("recall", "--limit", "1e3", "whole number"),
        ("context", "--limit", "201", "1 to 200"),
        ("context", "--budget", "8", "9 to 200000"),
        ("context", "--budget", "800.0", "whole number"),
    ],
)
def test_number_options_are_bounded_whole_numbers(
    where: list[str], command: str, option: str, value: str, bound: str
) -> None:
    query = ["city"] if command == "context" else []
    code, output = cli(command, *NS, *where, option, value, *query)
    assert code == 2 and option in output and bound in " ".join(output.split())
    assert "Traceback" not in output


def test_number_options_accept_their_bounds(where: list[str]) -> None:
    remember(where, "--kind", "fact", "--subject", "user", "--predicate", "city", "--value", "X")
    assert cli("recall", *NS, *where, "--limit", "10000", "--json")[0] == 0
    assert cli("context", *NS, *where, "--limit", "200", "--budget", "200000", "city")[0] == 0


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"[" * 5000 + b"]" * 5000, "nested deeper than 32 levels"),
        (b'{"value": "\xff"}', "not UTF-8 (byte 0xff at offset 11)"),
        (b'{"kind": "fact", "kind": "turn"}', 'key "kind" appears twice'),
        (b'{"confidence": NaN}', "NaN is not a JSON number"),
        (b'{"confidence": 1e999}', "out of range"),
        (b'{"version": ' + b"9" * 40 + b"}", "more than 30 digits"),
        (b'{"kind": ', "Expecting value"),
    ],
)
def test_unreadable_json_writes_are_refused(
    where: list[str], tmp_path: Path, raw: bytes, reason: str
) -> None:
    source = tmp_path / "write.json"
    source.write_bytes(raw)
    for args in (["--from-json", str(source)], ["--from-json", "-"]):
        result = runner.invoke(
            app, ["remember", *NS, *where, *args], input=raw, env={"COLUMNS": "240"}
        )
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())  # the console may wrap at its own width
        assert reason in said and "nothing was stored" in said
    code, output = cli("status", *where, "--json")  # nothing stored: not even a store made
    assert code == 3 and json.loads(output)["type"] == "StoreNotFound"


def test_json_writes_larger_than_the_limit_are_refused(
    where: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memory_ledger.cli.common.MAX_JSON_BYTES", 64)
    source = tmp_path / "big.json"
    source.write_text(json.dumps({"value": "x" * 100}))
    code, output = cli("remember", *NS, *where, "--from-json", str(source))
    assert code == 2 and "larger than 64 bytes" in output


def test_terminal_escapes_in_memories_are_shown_not_obeyed(where: list[str]) -> None:
    # (No NUL here: on PostgreSQL it cannot reach a projection; see test_boundary_fuzz.)
    evil = "Hang\x1b[2J\x1b]0;owned\x07zhou\u202etxt.exe\x9b31m\nfake row\x08"
    item = remember(
        where, "--kind", "fact", "--subject", "user", "--predicate", "city", "--value", evil
    )
    shown = "Hang\\x1b[2J\\x1b]0;owned\\x07zhou\\u202etxt.exe\\x9b31m\\nfake row\\x08"
    for args in (
        ["recall", *NS, *where],
        ["history", *NS, *where, item],
        ["show", *NS, *where, item],
        ["context", *NS, *where, "Hangzhou city"],
        ["summary", *NS, *where],
    ):
        code, output = cli(*args)
        assert code == 0, output
        for raw in ("\x1b", "\x07", "\x08", "\u202e", "\x9b"):
            assert raw not in output, (args[0], raw)
    code, output = cli("show", *NS, *where, item)
    assert shown in output
    code, output = cli("recall", *NS, *where, "--json")
    assert json.loads(output)[0]["text"] == evil  # exact in JSON
    assert "\u202e" not in output and "\x9b" not in output  # as \u escapes


def test_run_refuses_an_unbounded_schedule(where: list[str]) -> None:
    for schedule in (
        ["--interval", "-1", "--duration", "1"],
        ["--interval", "0", "--duration", "1"],
        ["--interval", "nan"],
        ["--duration", "0"],
        ["--consolidate-every", "0", "--duration", "1"],
    ):
        code, output = cli("run", *where, *schedule)
        assert code == 2 and "Traceback" not in output, (schedule, output)


def test_audit_anchor_with_odd_digits_is_refused(where: list[str]) -> None:
    for anchor in ("²:" + "0" * 64, "1" * 40 + ":" + "0" * 64, "1:" + "g" * 64):
        code, output = cli("audit", "verify", *where, "--anchor", anchor)
        assert code == 2 and "--anchor must be SEQ:HASH" in output


def test_forget_in_words_plans_then_executes(where: list[str]) -> None:
    """`--request` plans and erases nothing; `--choose` answers its question; `--plan`
    executes once; bad input is a clear error."""
    facts = [("home_address", "18 Haisong Road", "t1"), ("home_address", "4 Elm Street", "t2")]
    facts.append(("home_address", "9 Oak Lane", "t3"))
    ids = [
        remember(
            where,
            "--kind",
            "fact",
            "--subject",
            "user",
            "--predicate",
            p,
            "--value",
            v,
            "--turn-id",
            t,
        )
        for p, v, t in facts
    ]
    code, output = cli("forget", *NS, *where, "--request", "forget my old address", "--json")
    asked = json.loads(output)
    assert code == 8 and asked["status"] == "needs_clarification", output
    assert {c["item_id"] for c in asked["candidates"]} == set(ids[:2]) and asked["question"]
    code, output = cli("forget", *NS, *where, "--plan", asked["plan_id"], "--choose", ids[0])
    assert code == 0 and "planned (delete)" in output and "18 Haisong Road" in output, output
    plan_id = output.split("plan ")[1].split(":")[0].strip()
    code, output = cli("recall", *NS, *where, "--json", "--predicate", "home_address")
    assert len(json.loads(output)) == 1  # the plan erased nothing: the old ones are history
    code, output = cli("forget", *NS, *where, "--plan", plan_id, "--json")
    outcome = json.loads(output)
    assert code == 0 and outcome["status"] == "completed" and ids[0] in outcome["targets"]
    assert "Haisong" not in output
    code, output = cli("show", *NS, *where, ids[0], "--json")
    assert json.loads(output)["erased"] is True
    code, output = cli("forget", *NS, *where, "--plan", plan_id)
    assert code != 0 and "already executed" in output
    for bad in (["--request", ""], ["--plan", "plan-x"], ["--request", "x", "--memory", ids[1]]):
        code, output = cli("forget", *NS, *where, *bad)
        assert code == 2 and "Traceback" not in output, output
    code, output = cli("forget", *NS, *where, "--request", "where do I live?", "--json")
    assert code == 0 and json.loads(output)["status"] == "not_a_request"
