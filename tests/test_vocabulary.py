"""docs/vocabulary.md is true: every name its table gives exists on its surface (the
CLI's commands and options, `MemoryLedger`'s methods, the HTTP routes and their body
fields, the agent tools and their arguments), aliases included, and an alias does what
the name it stands for does."""

from __future__ import annotations

import importlib
import re
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from memory_ledger.agents.tools import TOOL_ALIASES, TOOLS, AgentTools, anthropic_tools
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.cli import app
from memory_ledger.principal import Principal

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    [cell.strip() for cell in line.strip().strip("|").split("|")]
    for line in (ROOT / "docs" / "vocabulary.md").read_text(encoding="utf-8").splitlines()
    if line.startswith("| ") and not line.startswith("| concept")
]
CODE = re.compile(r"`([^`]+)`")
SURFACES = {"CLI": 1, "Python": 2, "HTTP": 3, "tool": 4}


def _names(surface: str) -> list[tuple[str, str]]:
    """(concept, cell) for every cell of one surface: its column, then its aliases."""
    found = [(row[0], row[SURFACES[surface]]) for row in ROWS]
    for row in ROWS:
        for part in filter(None, (p.strip() for p in row[5].split(";"))):
            where, _, names = part.partition(":")
            assert where in SURFACES, f"{row[0]}: alias of an unknown surface {part!r}"
            if where == surface:
                found.append((row[0], names))
    return found


def _routes() -> dict[tuple[str, str], set[str]]:
    """(method, path) -> the fields of its JSON body (empty without one)."""
    found: dict[tuple[str, str], set[str]] = {}
    for module in (ROOT / "memory_ledger" / "http" / "routes").glob("*.py"):
        if module.stem == "__init__":
            continue
        router = importlib.import_module(f"memory_ledger.http.routes.{module.stem}").router
        for route in router.routes:
            body = getattr(route, "body_field", None)
            model = body.field_info.annotation if body is not None else None
            fields = set(getattr(model, "model_fields", ()))
            path = route.path.removeprefix("/v1")
            for method in route.methods:
                found[(method, path)] = fields
    return found


def test_the_table_has_every_concept() -> None:
    assert len(ROWS) >= 20 and all(len(row) == 6 for row in ROWS)
    assert any(row[5] for row in ROWS)


def test_every_cli_name_exists() -> None:
    root = typer.main.get_command(app)
    checked = 0
    for concept, cell in _names("CLI"):
        for command in CODE.findall(cell):
            if not command.startswith("memory-ledger "):
                continue
            words = command.split()[1:]
            node = root
            while hasattr(node, "commands") and words and words[0] in node.commands:
                node = node.commands[words.pop(0)]
            assert all(w.startswith("-") for w in words), f"{concept}: {command}"
            options = {n for p in node.params for n in (*p.opts, *p.secondary_opts)}
            assert all(w in options for w in words if w.startswith("-")), f"{concept}: {command}"
            checked += 1
    assert checked >= 25


def test_every_python_name_exists() -> None:
    checked = 0
    for concept, cell in _names("Python"):
        for name in CODE.findall(cell):
            attribute = name.split("(")[0]
            if "." in attribute:
                owner, attribute = attribute.split(".")
                assert owner == "MemoryService" and hasattr(MemoryService, attribute), name
            else:
                assert hasattr(MemoryLedger, attribute), f"{concept}: {name}"
            checked += 1
    assert checked >= 20


def test_every_http_route_and_body_field_exists() -> None:
    routes = _routes()
    for concept, cell in _names("HTTP"):
        spans = CODE.findall(cell)
        if spans and " /" in spans[0]:
            route, *fields = spans  # `POST /context` (`token_budget`): a route, its fields
            method, path = route.split(" ", 1)
            assert (method, path) in routes, f"{concept}: {route}"
            assert set(fields) <= routes[(method, path)], f"{concept}: {cell}"


def test_every_tool_name_and_argument_exists() -> None:
    schemas = {t["name"]: t["input_schema"]["properties"] for t in anthropic_tools()}
    assert set(schemas) == {spec.name for spec in TOOLS}
    for concept, cell in _names("tool"):
        spans = CODE.findall(cell)
        if spans:
            name, *arguments = spans  # `context` (`token_budget`): a tool and its argument
            name = TOOL_ALIASES.get(name, name)
            assert name in schemas, f"{concept}: {name}"
            assert all(a in schemas[name] for a in arguments), f"{concept}: {cell}"


def test_every_alias_in_the_code_is_in_the_table() -> None:
    named = {CODE.findall(cell)[0] for _, cell in _names("tool") if CODE.findall(cell)}
    tool_aliases = named - {spec.name for spec in TOOLS}
    assert tool_aliases == set(TOOL_ALIASES)
    for alias, name in TOOL_ALIASES.items():  # a tool alias is the Python name, and back
        assert getattr(MemoryLedger, alias) is getattr(MemoryLedger, name)


# -- an alias does what its name does ---------------------------------------------------

PYTHON_ALIASES = {
    "stop_using": "suppress",
    "list_memories": "recall",
    "choose_forget_candidates": "choose_candidates",
    "execute_forget": "execute_plan",
}


def test_the_python_aliases_are_the_same_methods() -> None:
    for alias, name in PYTHON_ALIASES.items():
        assert getattr(MemoryLedger, alias) is getattr(MemoryLedger, name), alias
    listed = {n for _, cell in _names("Python") for n in CODE.findall(cell)}
    assert set(PYTHON_ALIASES) <= listed


@pytest.fixture
def alice() -> Iterator[MemoryLedger]:
    with MemoryService.open(tempfile.mkdtemp()) as service:
        yield service.for_principal(Principal("acme", "alice"))


def _fact(predicate: str, value: str, turn: str) -> dict[str, object]:
    return {
        "kind": "fact", "subject": "user", "predicate": predicate, "value": value,
        "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "t", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1", "turn_id": turn},
    }  # fmt: skip


def test_the_aliases_behave_the_same(alice: MemoryLedger) -> None:
    seat = alice.remember(_fact("seat", "window", "t1")).item_id
    meal = alice.remember(_fact("meal", "vegetarian", "t2")).item_id
    assert alice.list_memories() == alice.recall()
    assert alice.stop_using(seat) == alice.suppress(meal) == 2
    assert alice.recall() == alice.list_memories() == []

    tools = AgentTools(alice, writer="t")
    alice.unsuppress(seat)
    alice.unsuppress(meal)
    assert tools.call("recall", {}) == tools.call("list_memories", {})
    by_alias, by_name = (
        tools.call("suppress", {"item_id": seat}),
        tools.call("stop_using", {"item_id": meal}),
    )
    assert {**by_alias, "item_id": None} == {**by_name, "item_id": None}
    assert by_alias["suppressed"] is True and tools.call("recall", {})["count"] == 0
    assert tools.call("suppress", {"item_id": seat, "x": 1})["error"]["code"] == "invalid_input"


def test_the_forget_plan_aliases_behave_the_same(alice: MemoryLedger) -> None:
    alice.remember(_fact("home_address", "18 Haisong Road", "t1"))
    alice.remember(_fact("home_address", "4 Elm Street", "t2"))
    alice.remember(_fact("home_address", "9 Oak Lane", "t3"))
    tools = AgentTools(alice, writer="t")
    plan = tools.call("plan_forget", {"text": "forget my old address"})
    assert plan["status"] == "needs_clarification", plan
    first = plan["candidates"][0]["item_id"]
    chosen = tools.call("choose_candidates", {"plan_id": plan["plan_id"], "item_ids": [first]})
    assert chosen["status"] == "planned" and chosen["targets"] == [first]
    done = tools.call("execute_plan", {"plan_id": chosen["plan_id"]})
    assert done["status"] == "completed" and done["targets"] == [first]
    assert first not in [m["item_id"] for m in tools.call("recall", {})["memories"]]


def test_the_cli_token_budget_and_its_alias_are_the_same(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path / "d"), "-n", "acme/alice"]
    write = ["--kind", "preference", "--subject", "user", "--predicate", "seat", "--value", "w"]
    write += ["--session-id", "s1", "--turn-id", "t1"]
    done = runner.invoke(app, ["remember", *base, *write])
    assert done.exit_code == 0, done.output
    answers = [
        runner.invoke(app, ["context", *base, option, "50", "--json", "window seat"])
        for option in ("--token-budget", "--budget")
    ]
    assert [a.exit_code for a in answers] == [0, 0], [a.output for a in answers]
    assert '"token_budget": 50' in answers[0].output
    assert answers[0].output == answers[1].output
