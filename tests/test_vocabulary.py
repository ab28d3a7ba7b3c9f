"""docs/vocabulary.md is true: every name its table gives exists on its surface (the
CLI's commands and options, `MemoryLedger`'s methods, the HTTP routes, the agent tools)."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from memory_ledger.agents.tools import TOOLS, anthropic_tools
from memory_ledger.api import MemoryLedger
from memory_ledger.cli import app

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    [cell.strip() for cell in line.strip().strip("|").split("|")]
    for line in (ROOT / "docs" / "vocabulary.md").read_text(encoding="utf-8").splitlines()
    if line.startswith("| ") and not line.startswith("| concept")
]
CODE = re.compile(r"`([^`]+)`")


def _routes() -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / "memory_ledger" / "http" / "routes").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for method, route in re.findall(r'@router\.(get|post|put|patch|delete)\("([^"]+)"', text):
            found.add((method.upper(), route))
    return found


def test_the_table_has_every_concept() -> None:
    assert len(ROWS) >= 20 and all(len(row) == 5 for row in ROWS)


def test_every_cli_name_exists() -> None:
    root = typer.main.get_command(app)
    for row in ROWS:
        for command in CODE.findall(row[1]):
            if not command.startswith("memory-ledger "):
                continue
            words = command.split()[1:]
            node = root
            while hasattr(node, "commands") and words and words[0] in node.commands:
                node = node.commands[words.pop(0)]
            assert not words or not hasattr(node, "commands"), command
            options = {n for p in node.params for n in (*p.opts, *p.secondary_opts)}
            assert all(w in options for w in words if w.startswith("-")), command


def test_every_python_name_exists() -> None:
    for row in ROWS:
        for name in CODE.findall(row[2]):
            attribute = name.split("(")[0]
            if "." in attribute:
                continue  # MemoryService's, checked by its own tests
            assert hasattr(MemoryLedger, attribute), name


def test_every_http_route_exists() -> None:
    routes = _routes()
    for row in ROWS:
        for route in CODE.findall(row[3]):
            if " /" in route:
                method, path = route.split(" ", 1)
                assert (method, path) in routes, route


def test_every_tool_name_and_argument_exists() -> None:
    schemas = {t["name"]: t["input_schema"]["properties"] for t in anthropic_tools()}
    assert set(schemas) == {spec.name for spec in TOOLS}
    for row in ROWS:
        spans = CODE.findall(row[4])
        if spans:
            name, *arguments = spans  # `context` (`token_budget`): a tool and its argument
            assert name in schemas, name
            assert all(a in schemas[name] for a in arguments), row[4]
