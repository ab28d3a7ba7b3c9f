"""`memory-ledger files ...` and `memory-ledger runs ...` as an operator types them:
every memory-tool command, a refused path with its exit code, a turn's diff, and a run
driven step by step with a stale --version refused (exit 6)."""

from __future__ import annotations

import json

from factories import cli

from memory_ledger.config import Settings


def test_the_files_commands(settings: Settings, where: list[str]) -> None:
    ns = ["-n", "acme/alice", *where]
    code, out = cli("files", "create", "/memories/cli.md", "--content", "one\ntwo", *ns,
                    "--turn-id", "t1")  # fmt: skip
    assert code == 0 and "File created" in out
    assert (
        cli("files", "str-replace", "/memories/cli.md", "two", "2", *ns, "--turn-id", "t2")[0] == 0
    )
    assert cli("files", "insert", "/memories/cli.md", "0", "zero", *ns)[0] == 0
    code, out = cli("files", "view", "/memories/cli.md", *ns, "--json")
    assert json.loads(out)["result"].split("\n")[1:] == ["     1\tzero", "     2\tone", "     3\t2"]
    code, out = cli("files", "view", "/memories/cli.md", *ns, "--view-range", "2,2")
    assert code == 0 and "one" in out and "zero" not in out
    assert cli("files", "rename", "/memories/cli.md", "/memories/d/cli.md", *ns)[0] == 0
    code, out = cli("files", "changes", *ns, "--turn-id", "t2", "--json")
    [change] = json.loads(out)["changes"]
    assert change["change"] == "edited" and "+2" in change["diff"]
    code, out = cli("files", "view", "/memories/../../etc/passwd", *ns)
    assert code == 2 and "confined to /memories" in out
    assert cli("files", "delete", "/memories/d", *ns)[0] == 0
    code, out = cli("files", "history", "/memories/d/cli.md", *ns, "--json")
    assert [v["deleted"] for v in json.loads(out)["versions"]][-1] is True
    code, out = cli("files", "forget", "/memories/d/cli.md", *ns, "--json")
    assert code == 0 and json.loads(out)["status"] == "completed"
    code, out = cli("files", "view", "/memories", *ns, "--json")
    assert "cli.md" not in json.loads(out)["result"]


def test_the_runs_commands(settings: Settings, where: list[str]) -> None:
    ns = ["-n", "acme/alice", *where]
    code, out = cli("runs", "start", "plan a trip", *ns, "--state", '{"stage": "new"}', "--json")
    run = json.loads(out)
    assert code == 0 and run["status"] == "running" and run["state"] == {"stage": "new"}
    rid, version = run["run_id"], run["version"]
    code, out = cli("runs", "step", rid, "search", "begin", *ns, "--version", str(version),
                    "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["steps"]["search"]["status"] == "running"
    code, out = cli("runs", "state", rid, '{"stage": "late"}', *ns, "--version", str(version))
    assert code == 6 and "read it again" in out  # a stale version: nothing changed
    code, out = cli("runs", "step", rid, "search", "succeeded", *ns, "--version",
                    str(version + 1), "--json")  # fmt: skip
    assert code == 0
    fact = '{"kind": "fact", "subject": "user", "predicate": "trip", "value": "Oslo", ' \
           '"origin": "observed", "sensitivity": "personal"}'  # fmt: skip
    code, out = cli("runs", "promote", rid, "search", fact, *ns, "--confirmed-by", "user",
                    "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["item_id"]
    code, out = cli("runs", "show", rid, *ns, "--json")
    shown = json.loads(out)
    code, out = cli("runs", "finish", rid, "succeeded", *ns, "--version", str(shown["version"]))
    assert code == 0 and "succeeded" in out
    code, out = cli("runs", "list", *ns, "--json")
    assert [r["status"] for r in json.loads(out)["runs"]] == ["succeeded"]
    code, out = cli("runs", "forget", rid, *ns, "--json")
    assert code == 0 and json.loads(out)["status"] == "completed"
    code, out = cli("recall", *ns, "--json")
    assert json.loads(out) == [] or json.loads(out).get("memories") == []
