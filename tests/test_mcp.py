"""The MCP server: the tools of `memory_ledger.agents.tools`, listed with their exact
schemas and called through `AgentTools.call`, tested with the SDK's own client over
stdio against `memory-ledger mcp` in a subprocess (no mocks: a real server process, a
real store in a temporary directory).

The principal rule is checked end to end: the namespace is the server's configuration
(`--namespace`, or MEMORY_LEDGER_MCP_NAMESPACE), what a client writes lands there and
nowhere else, and a `namespace` argument is refused with nothing stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult
from waits import HUNG

from memory_ledger.agents.mcp_server import SERVER_NAME, tool_definitions
from memory_ledger.agents.tools import TOOLS, input_schema
from memory_ledger.api import MemoryService
from memory_ledger.errors import NotFound
from memory_ledger.principal import Principal

ROOT = Path(__file__).resolve().parent.parent
NAMES = [spec.name for spec in TOOLS]
TIMEOUT = HUNG


def test_the_server_lists_every_tool_with_its_generated_schema() -> None:
    definitions = tool_definitions()
    assert [d.name for d in definitions] == NAMES
    for spec, tool in zip(TOOLS, definitions, strict=True):
        assert tool.input_schema == input_schema(spec.model)
        assert tool.description == spec.description
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is spec.read_only
        assert tool.annotations.destructive_hint is spec.destructive
        assert tool.annotations.idempotent_hint is spec.idempotent
        assert tool.annotations.open_world_hint is False


#: (readOnlyHint, destructiveHint, idempotentHint) of each tool, as it behaves: the
#: memory tool deletes and renames files, run_state's finish erases the run's scratch;
#: execute_forget refuses a plan already executed, stop_using of a stopped item changes
#: nothing, a second forget of the same ids files another request.
HINTS = {
    "remember": (False, False, False),
    "context": (True, False, True),
    "plan_forget": (False, False, False),
    "find_information": (True, False, True),
    "forget_information": (False, False, False),
    "execute_forget": (False, True, True),
    "choose_forget_candidates": (False, False, False),
    "forget": (False, True, False),
    "stop_using": (False, False, True),
    "update": (False, False, False),
    "list_memories": (True, False, True),
    "export": (True, False, True),
    "memory": (False, True, False),
    "run_state": (False, True, False),
}


def test_every_tool_carries_the_hints_it_truly_has() -> None:
    hints = {
        t.name: (
            t.annotations.read_only_hint,
            t.annotations.destructive_hint,
            t.annotations.idempotent_hint,
        )
        for t in tool_definitions()
        if t.annotations is not None
    }
    assert hints == HINTS


# -- over stdio, with the SDK's client -------------------------------------------------


def _server(
    data_dir: Path, *options: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memory_ledger.cli", "mcp", *options, "--data-dir", str(data_dir)],
        env={"MEMORY_LEDGER_EMBEDDER": "hashing", "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=data_dir.parent,
    )


def _run(
    params: StdioServerParameters,
    log: Path,
    body: Callable[[ClientSession], Awaitable[None]],
) -> None:
    """Start the server, initialise a session, run `body`, and stop the server. Its
    stderr goes to `log`, shown when something fails."""

    async def main() -> None:
        with log.open("w") as errlog, anyio.fail_after(TIMEOUT):
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await body(session)

    try:
        anyio.run(main)
    except BaseException:
        print(log.read_text(errors="replace"), file=sys.stderr)
        raise


def _result(result: CallToolResult) -> dict[str, Any]:
    """The structured result, checked against the text content a host shows a model."""
    assert isinstance(result.structured_content, dict)
    [block] = result.content
    assert block.type == "text" and json.loads(block.text) == result.structured_content
    assert result.is_error is ("error" in result.structured_content)
    return result.structured_content


async def _call(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return _result(await session.call_tool(name, arguments))


def _fact(predicate: str, value: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "fact",
        "predicate": predicate,
        "value": value,
        "origin": "explicit",
        "session_id": "s1",
        "turn_id": "t1",
        **extra,
    }


@pytest.mark.slow
def test_list_remember_context_and_forget_over_stdio(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    params = _server(data_dir, "--namespace", "acme/alice", "--writer", "desktop-agent")
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        init = await session.initialize()
        assert init.server_info.name == SERVER_NAME
        assert init.instructions and "plan_forget" in init.instructions

        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == NAMES
        for spec, tool in zip(TOOLS, listed, strict=True):
            assert tool.input_schema == input_schema(spec.model)  # exactly, over the wire
            assert tool.description == spec.description
            assert tool.annotations is not None  # the hints too, over the wire
            assert tool.annotations.destructive_hint is spec.destructive
            assert tool.annotations.idempotent_hint is spec.idempotent
            assert "namespace" not in json.dumps(tool.input_schema)

        city = await _call(session, "remember", _fact("home_city", "Hangzhou"))
        assert "error" not in city and city["kind"] == "fact"
        assert city["provenance"]["writer"] == "desktop-agent"
        assert (city["provenance"]["session_id"], city["provenance"]["turn_id"]) == ("s1", "t1")
        seat = await _call(session, "remember", _fact("seat", "window", kind="preference"))
        seen.update(city=city["item_id"], seat=seat["item_id"])

        # a namespace argument: refused, nothing stored
        other = await _call(session, "remember", _fact("phone", "555-0100", namespace="acme/bob"))
        assert other["error"]["code"] == "invalid_input"
        assert "must not name a namespace" in other["error"]["message"]
        listed_now = await _call(session, "list_memories", {})
        assert listed_now["count"] == 2

        context = await _call(session, "context", {"query": "which city does the user live in"})
        item = next(i for i in context["items"] if i["item_id"] == city["item_id"])
        assert item["text"] == "Hangzhou" and item["label"] == "[fact · explicit]"
        assert item["provenance"] == city["provenance"]
        assert "home city: Hangzhou" in context["rendered"]

        bad = await _call(session, "context", {"query": "x", "limit": "five"})
        assert bad["error"]["code"] == "invalid_input"
        assert bad["error"]["problems"] == ["limit: Input should be a valid integer"]
        unknown = await _call(session, "drop_everything", {})
        assert unknown["error"]["code"] == "unknown_tool"

        # the memory tool's commands, as Claude sends them (no session: the server's)
        made = await _call(session, "memory", {"command": "create", "path": "/memories/n.md",
                                               "file_text": "prefers trains"})  # fmt: skip
        assert made["result"].startswith("File created"), made
        shown = await _call(session, "memory", {"command": "view", "path": "/memories/n.md"})
        assert shown["result"].endswith("\tprefers trains")
        escape = await _call(session, "memory", {"command": "view", "path": "/etc/passwd"})
        assert escape["error"]["problems"] == ["path: outside the root"]
        run = await _call(session, "run_state", {"action": "start", "task": "plan a trip"})
        assert run["status"] == "running" and run["version"] == 1

        # forget by id, for ids the user named
        report = await _call(session, "forget", {"item_ids": [city["item_id"]]})
        assert report["status"] == "completed" and report["targets"] == [city["item_id"]]
        assert report["message"].startswith("Done:")
        after = await _call(session, "context", {"query": "which city does the user live in"})
        assert city["item_id"] not in [i["item_id"] for i in after["items"]]
        assert "Hangzhou" not in json.dumps(after)
        remaining = await _call(session, "list_memories", {})
        assert [m["item_id"] for m in remaining["memories"]] == [seat["item_id"]]

        # a forget in words: plan (nothing erased), confirm, execute, answered from the request
        phone = await _call(session, "remember", _fact("phone", "138 0000 1111"))
        plan = await _call(session, "plan_forget", {"text": "please delete my phone number"})
        assert (plan["status"], plan["intent"], plan["targets"]) == (
            "planned",
            "delete",
            [phone["item_id"]],
        )
        assert "138 0000 1111" in plan["labels"][phone["item_id"]]  # the user sees what
        still = await _call(session, "list_memories", {})
        assert phone["item_id"] in [m["item_id"] for m in still["memories"]]
        done = await _call(session, "execute_forget", {"plan_id": plan["plan_id"]})
        assert done["status"] == "completed" and done["request_id"].startswith("req-")
        assert "138 0000 1111" not in json.dumps(done)
        again = await _call(session, "execute_forget", {"plan_id": plan["plan_id"]})
        assert again["error"]["code"] == "invalid_transition"
        asked = await _call(session, "plan_forget", {"text": "where do I live?"})
        assert asked["status"] == "not_a_request" and not asked["targets"]
        seen["phone"] = phone["item_id"]

    _run(params, tmp_path / "server.log", body)

    # What the server did, read back through the Python API: in acme/alice only.
    with MemoryService.open(data_dir) as service:
        alice = service.for_principal(Principal("acme", "alice"))
        assert alice.get(seen["city"]).erased
        assert alice.get(seen["phone"]).erased
        [kept] = alice.recall()
        assert kept.item_id == seen["seat"] and kept.provenance["writer"] == "desktop-agent"
        bob = service.for_principal(Principal("acme", "bob"))
        assert bob.recall() == []
        with pytest.raises(NotFound):
            bob.get(seen["seat"])


def _turn(content: str, turn_id: str) -> dict[str, Any]:
    return {"kind": "turn", "content": content, "origin": "explicit", "session_id": "s1",
            "turn_id": turn_id}  # fmt: skip


@pytest.mark.slow
def test_the_model_protocol_over_stdio(tmp_path: Path) -> None:
    """What a model does when it understands the request: find every place of the
    values (in every wording), show the user, forget them with the keep it confirmed,
    execute once the user says yes, and report the receipt. Afterwards no tool returns
    the values, and the keep is intact."""
    data_dir = tmp_path / "data"
    params = _server(data_dir, "--namespace", "acme/alice")

    async def body(session: ClientSession) -> None:
        init = await session.initialize()
        assert init.instructions and "find_information" in init.instructions
        said = [
            "My sister's lawyer is Harriet Vell, call her at 503-555-0118.",
            "Staff note: Ms. Vell phoned back from (503) 555-0118.",
            "The water bill is due Friday.",
        ]
        ids = [(await _call(session, "remember", _turn(t, f"t{n}")))["item_id"]
               for n, t in enumerate(said)]  # fmt: skip
        found = await _call(
            session, "find_information", {"values": ["Harriet Vell", "Ms. Vell", "503-555-0118"]}
        )
        counts = [(g["value"], g["count"]) for g in found["values"]]
        assert counts == [("Harriet Vell", 1), ("Ms. Vell", 1), ("503-555-0118", 2)]
        assert "call her at 503-555-0118" in found["values"][2]["places"][0]["snippet"]
        plan = await _call(session, "forget_information", {
            "values": ["Harriet Vell", "Ms. Vell", "503-555-0118"],
            "keeps": ["Staff note"], "reason": "the user asked to forget the lawyer",
        })  # fmt: skip
        assert plan["status"] == "planned" and plan["kept"][0]["item_ids"] == [ids[1]]
        assert "Harriet Vell" in plan["message"]  # what the user is shown to confirm
        done = await _call(session, "execute_forget", {"plan_id": plan["plan_id"]})
        assert done["status"] == "completed" and done["request_ids"]
        assert done["request_id"].startswith("req-")  # the receipt, for the user
        listed = json.dumps(await _call(session, "list_memories", {}))
        assert "Vell" not in listed and "0118" not in listed
        assert "Staff note:" in listed and "The water bill is due Friday." in listed
        again = await _call(session, "find_information", {"values": ["Harriet Vell"]})
        assert again["values"][0]["count"] == 0
        bad = await _call(session, "forget_information", {"values": ["x" * 201]})
        assert bad["error"]["code"] == "invalid_input"

    _run(params, tmp_path / "server.log", body)


@pytest.mark.slow
def test_the_namespace_can_come_from_the_environment(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    params = _server(data_dir, env={"MEMORY_LEDGER_MCP_NAMESPACE": "acme/carol/trips"})
    written: list[str] = []

    async def body(session: ClientSession) -> None:
        await session.initialize()
        done = await _call(session, "remember", _fact("passport_country", "NZ"))
        assert done["provenance"]["writer"] == "mcp-agent"  # the default writer
        written.append(done["item_id"])

    _run(params, tmp_path / "server.log", body)
    with MemoryService.open(data_dir) as service:
        carol = service.for_principal(Principal("acme", "carol", "trips"))
        assert [m.item_id for m in carol.recall()] == written
        assert service.for_principal(Principal("acme", "carol")).recall() == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "env", "expected"),
    [
        (["--namespace", "acme"], {}, "invalid namespace"),
        (["--namespace", "acme/al ice"], {}, "invalid principal user"),
        (["--writer", "two words", "--namespace", "acme/alice"], {}, "invalid writer name"),
        ([], {}, "Missing option '--namespace'"),
    ],
)
def test_a_bad_configuration_is_a_clear_error_before_serving(
    tmp_path: Path, options: list[str], env: dict[str, str], expected: str
) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    done = subprocess.run(
        [sys.executable, "-m", "memory_ledger.cli", "mcp", *options, "--data-dir", str(tmp_path)],
        env={**environment, "MEMORY_LEDGER_EMBEDDER": "hashing", "PYTHONPATH": str(ROOT), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # stdout is the protocol's: nothing else is written there
