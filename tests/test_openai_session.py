"""MemoryLedgerSession: the OpenAI Agents SDK's Session protocol over a principal's ledger.

Real ledgers (SQLite, and PostgreSQL when reachable), real SDK item dicts, and the SDK's
own Runner: `agents.Runner.run` reads the session before the model call and saves the
run's items after it. The model is `_OfflineModel`, an implementation of the SDK's
`Model` interface that answers without a network (it reports what it was given).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from datetime import timedelta
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from agents.memory import Session, SessionSettings
from conftest import ALICE, BOB
from factories import fact, store_bytes_contain
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from memory_ledger.agents.openai_session import (
    SUMMARY_HEADER,
    SUMMARY_SPEAKER,
    MemoryLedgerSession,
    decode_item,
    encode_item,
)
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, Any]:
    """An assistant output item as the SDK stores it after a run."""
    return {
        "id": f"msg_{secrets.token_hex(4)}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _turns(ledger: MemoryLedger, session_id: str) -> list:
    """The session's turns as the ledger holds them (oldest first)."""
    found = [
        m
        for m in ledger.recall(kind="turn", limit=1000, include_archived=True)
        if m.provenance["session_id"] == session_id
    ]
    return sorted(found, key=lambda m: m.provenance["turn_id"])


def test_it_is_a_session_and_keeps_the_sdk_items(alice: MemoryLedger) -> None:
    session = MemoryLedgerSession("chat-1", alice, agent_name="travel-agent")
    assert isinstance(session, Session)
    items = [
        _user("Book me a window seat to Kyoto."),
        _assistant("Which day?"),
        {"type": "function_call", "call_id": "call_1", "name": "search", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "3 flights"},
    ]

    async def run() -> None:
        assert await session.get_items() == []
        await session.add_items(items[:2])
        await session.add_items(items[2:])
        assert await session.get_items() == items
        assert await session.get_items(limit=2) == items[2:]
        assert await session.get_items(limit=10) == items
        assert await session.get_items(limit=0) == []

    asyncio.run(run())
    turns = _turns(alice, "chat-1")
    assert [t.subject for t in turns] == [
        "user",
        "assistant",
        "function_call",
        "function_call_output",
    ]
    assert all(t.provenance["writer"] == "travel-agent" for t in turns)
    ids = [t.provenance["turn_id"] for t in turns]
    assert ids == sorted(ids) and len(set(ids)) == 4 and all(i.startswith("turn-") for i in ids)
    assert [t.origin for t in turns] == ["explicit", "observed", "observed", "observed"]


def test_pop_item_erases_the_newest_item_with_a_forget_request(alice: MemoryLedger) -> None:
    session = MemoryLedgerSession("chat-1", alice)

    async def run() -> tuple[Any, Any, list[Any]]:
        await session.add_items([_user("first"), _user("second")])
        popped = await session.pop_item()
        report = session.last_report
        return popped, report, await session.get_items()

    popped, report, left = asyncio.run(run())
    assert popped == _user("second") and left == [_user("first")]
    assert report is not None and report.completed and len(report.targets) == 1
    assert alice.get(report.targets[0]).erased
    assert alice._service.requests.verify(report.request_id).failed_stores == []
    assert asyncio.run(session.pop_item()) == _user("first")
    assert asyncio.run(session.pop_item()) is None


def test_the_rolling_summary_folds_the_oldest_turns_and_cites_them(alice: MemoryLedger) -> None:
    session = MemoryLedgerSession("chat-1", alice, max_turns=4, keep_turns=2)
    said = [
        _user("I live at 18 Haisong Road"),
        _assistant("Noted."),
        _user("My office is at 221 Baker Street"),
        _assistant("Noted too."),
        _user("Book a taxi for 7am"),
    ]
    asyncio.run(session.add_items(said[:4]))
    assert session.summary() is None, "4 items: at the limit, nothing folded"
    asyncio.run(session.add_items(said[4:]))

    shown = asyncio.run(session.get_items())
    summary = session.summary()
    assert summary is not None
    assert shown[0] == {"role": "assistant", "content": summary.text}
    assert shown[1:] == said[3:], "the two most recent stay verbatim"
    assert summary.text.split("\n") == [
        SUMMARY_HEADER,
        "user: I live at ## Haisong Road",
        "assistant: Noted.",
        "user: My office is at ### Baker Street",
    ]
    turns = _turns(alice, "chat-1")
    folded = [t for t in turns if t.subject != SUMMARY_SPEAKER][:3]
    assert summary.cites == tuple((t.item_id, t.version) for t in folded)
    assert set(summary.covered_turns) == {t.item_id for t in folded}
    assert alice.get(summary.item_id).provenance["session_id"] == "chat-1"

    # A second fold extends the first summary, and cites it.
    later = [_user("Thanks"), _assistant("You're welcome"), _user("Bye")]
    asyncio.run(session.add_items(later[:1]))
    assert session.summary() == summary, "3 items shown: under the limit"
    asyncio.run(session.add_items(later[1:]))
    second = session.summary()
    assert second is not None and second.item_id != summary.item_id
    assert second.cites[0] == (summary.item_id, summary.version)
    assert len(second.cites) == 4, "the previous summary and the three turns it folds"
    assert second.text == "\n".join(
        [summary.text, "assistant: Noted too.", "user: Book a taxi for #am", "user: Thanks"]
    )
    assert len(second.covered_turns) == 6
    assert asyncio.run(session.get_items())[1:] == later[1:]


def test_forgetting_a_folded_turn_erases_the_summary_and_damages_no_other_turn(
    alice: MemoryLedger,
) -> None:
    session = MemoryLedgerSession("chat-1", alice, max_turns=2, keep_turns=1)
    said = [
        _user("I live at 18 Haisong Road"),
        _user("My office is at 221 Baker Street"),
        _assistant("Booking a taxi for 7am"),
        _user("Thanks"),
    ]
    asyncio.run(session.add_items(said))
    summary = session.summary()
    assert summary is not None and len(summary.covered_turns) == 3
    first = summary.covered_turns[0]

    report = alice.forget(first)
    assert report.completed
    assert summary.item_id in report.cascaded, "derived from the turn: erased with it"
    assert report.mentions == [], "no other turn repeats it, and the summary holds no number"
    assert alice.get(summary.item_id).erased
    # The scan finds none of the summary's words left: its labels and header are no
    # vocabulary kept in clear (an `assistant` subject is an identifier, shared).
    assert alice._service.requests.verify(report.request_id).failed_stores == []
    # The other folded turns are intact; a new summary folds them again, without the first.
    shown = asyncio.run(session.get_items())
    assert shown[1:] == said[3:]
    refolded = session.summary()
    assert refolded is not None and refolded.item_id != summary.item_id
    assert refolded.text.split("\n")[1:] == [
        "user: My office is at ### Baker Street",
        "assistant: Booking a taxi for #am",
    ]
    assert first not in refolded.covered_turns
    kept = [decode_item(t.text) for t in _turns(alice, "chat-1") if t.subject != SUMMARY_SPEAKER]
    assert kept == said[1:]


def test_a_repeated_value_is_redacted_inside_a_turn_and_the_item_still_reads(
    alice: MemoryLedger,
) -> None:
    """The ledger's mention rule reaches into the session's turns (their text is text),
    and an identical short turn is not a repeat of the popped one."""
    session = MemoryLedgerSession("chat-1", alice)
    asyncio.run(
        session.add_items([_user("yes"), _user("send it to 18 Haisong Road, flat 3"), _user("yes")])
    )
    address = alice.remember(fact("home_address", "18 Haisong Road"))
    report = alice.forget(address.item_id)
    assert report.completed and len(report.mentions) == 1
    assert asyncio.run(session.pop_item()) == _user("yes")
    assert session.last_report is not None and session.last_report.mentions == []
    assert asyncio.run(session.get_items()) == [
        _user("yes"),
        _user("send it to [forgotten], flat 3"),
    ]


def test_an_item_reads_back_exactly_as_it_was_added() -> None:
    items = [
        _user("two\nlines, and ünïcödé 中文"),
        _assistant("one\n\nthree"),
        {"role": "user", "content": [{"type": "input_text", "text": "part"}, {"type": "x"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": "b\\n"}'},
        {"type": "function_call_output", "call_id": "c", "output": ""},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}]},
        {"role": "user", "content": "x", "nested": {"n": 1, "b": True, "z": None, "l": [1.5]}},
    ]
    for item in items:
        content = encode_item(item, "turn-000000001-abcdef")
        assert decode_item(content) == item
        assert "completed" not in content, "the SDK's vocabulary is in the hex skeleton"
    assert encode_item(items[0], "turn-000000001-abcdef").startswith("two\nlines")
    assert encode_item(items[0], "turn-a") != encode_item(items[0], "turn-b")


def test_a_tool_call_and_its_output_are_folded_together(alice: MemoryLedger) -> None:
    session = MemoryLedgerSession("chat-1", alice, max_turns=3, keep_turns=2)
    call = {"type": "function_call", "call_id": "call_9", "name": "weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "call_9", "output": "sunny"}
    answer = _assistant("Sunny.")
    asyncio.run(session.add_items([_user("weather?"), call, output, answer]))
    shown = asyncio.run(session.get_items())
    assert shown[1:] == [answer], "the output went with its call"
    summary = session.summary()
    assert summary is not None
    assert summary.text.split("\n")[1:] == [
        "user: weather?",
        "tool call weather: {}",
        "tool output: sunny",
    ]


def test_the_summary_stays_within_its_size(alice: MemoryLedger) -> None:
    session = MemoryLedgerSession(
        "chat-1", alice, max_turns=2, keep_turns=1, line_chars=40, summary_bytes=300
    )
    asyncio.run(session.add_items([_user(f"message {'x' * 100} {i}") for i in range(12)]))
    summary = session.summary()
    assert summary is not None
    assert len(summary.text.encode("utf-8")) <= 300
    lines = summary.text.split("\n")
    assert lines[:2] == [SUMMARY_HEADER, "[earlier lines omitted]"]
    assert all(len(line) <= len("user: ") + 40 for line in lines[2:])
    assert lines[-1].endswith("…")
    assert len(summary.covered_turns) == 11


def test_clear_session_erases_every_turn_and_summary(settings: Settings) -> None:
    token = f"zq{secrets.token_hex(8)}"
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        session = MemoryLedgerSession("chat-1", alice, max_turns=2)
        asyncio.run(
            session.add_items(
                [_user(f"my locker code is {token}"), _assistant("Saved."), _user("thanks")]
            )
        )
        other = MemoryLedgerSession("chat-2", alice)
        asyncio.run(other.add_items([_user("another conversation")]))
        assert session.summary() is not None
        held = {t.item_id for t in _turns(alice, "chat-1")}
        assert len(held) == 4, "three items and a summary"
        service.runner.catch_up()
        assert store_bytes_contain(settings, token) == [], "sealed, even before"

        asyncio.run(session.clear_session())
        report = session.last_report
        assert report is not None and report.completed, report.to_dict()
        assert report.scope == {"kind": "source", "session_id": "chat-1"}
        assert set(report.all_targets) == held
        assert all(alice.get(i).erased for i in held)
        assert asyncio.run(session.get_items()) == [] and session.summary() is None
        assert asyncio.run(other.get_items()) == [_user("another conversation")]
        assert service.requests.verify(report.request_id).failed_stores == []
        assert session.clear().status == "nothing_matched"
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        assert asyncio.run(MemoryLedgerSession("chat-1", alice).get_items()) == []
    assert store_bytes_contain(settings, token) == []


def test_session_basis_turns_expire_and_end_with_the_session(alice: MemoryLedger) -> None:
    """The retention policy applies: session-basis turns are hidden once expired (30
    days by default), whether or not the sweep has erased them, and nothing is folded
    from them; `end_session` erases them through the ordinary forget path."""
    session = MemoryLedgerSession("chat-1", alice, max_turns=2, retention_basis="session")
    asyncio.run(session.add_items([_user("one"), _user("two"), _user("three")]))
    assert session.summary() is not None
    started = alice._service.clock()
    alice._service.clock = lambda: started + timedelta(days=31)
    assert asyncio.run(session.get_items()) == [] and session.summary() is None
    alice._service.clock = lambda: started
    assert len(asyncio.run(session.get_items())) == 2, "the summary and the newest item"
    [ended] = alice.end_session("chat-1")
    assert ended.completed and ended.basis == "session_end" and len(ended.targets) == 4
    assert asyncio.run(session.get_items()) == []


def test_a_session_is_the_principals_own(service: MemoryService) -> None:
    alice = MemoryLedgerSession("chat-1", service.for_principal(ALICE))
    bob = MemoryLedgerSession("chat-1", service.for_principal(BOB))
    asyncio.run(alice.add_items([_user("alice's words")]))
    assert asyncio.run(bob.get_items()) == []
    assert asyncio.run(bob.pop_item()) is None
    assert bob.clear().status == "nothing_matched"
    assert asyncio.run(alice.get_items()) == [_user("alice's words")]


def test_bad_settings_and_items_are_refused(alice: MemoryLedger) -> None:
    with pytest.raises(InvalidWrite):
        MemoryLedgerSession("not an id!", alice)
    with pytest.raises(InvalidWrite):
        MemoryLedgerSession("chat-1", alice, max_turns=0)
    with pytest.raises(InvalidWrite):
        MemoryLedgerSession("chat-1", alice, max_turns=2, keep_turns=3)
    session = MemoryLedgerSession("chat-1", alice)
    with pytest.raises(InvalidWrite):  # the ledger's turn limit, 64 KiB; nothing stored
        asyncio.run(session.add_items([_user("ok"), _user("x" * 70_000)]))
    assert asyncio.run(session.get_items()) == []


def test_session_settings_limit_is_the_default_of_get_items(alice: MemoryLedger) -> None:
    """As the SDK's own sessions: `session_settings.limit` when get_items names none,
    an explicit limit over it, a dict accepted, 0 nothing and a negative limit all."""
    session = MemoryLedgerSession("chat-1", alice, session_settings=SessionSettings(limit=3))
    asyncio.run(session.add_items([_user(f"message {i}") for i in range(5)]))
    texts = [item["content"] for item in asyncio.run(session.get_items())]
    assert texts == ["message 2", "message 3", "message 4"]
    assert len(asyncio.run(session.get_items(limit=4))) == 4
    assert session.items(0) == [] and len(session.items(-1)) == 5
    as_dict = MemoryLedgerSession("chat-1", alice, session_settings={"limit": 2})
    assert as_dict.session_settings == SessionSettings(limit=2)
    assert [i["content"] for i in as_dict.items()] == ["message 3", "message 4"]


class _OfflineModel(Model):
    """A model of the SDK's Model interface that needs no network: it answers with how
    many input items it was given, and records each input."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []
        self._ids = itertools.count(1)

    async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
        given = [input] if isinstance(input, str) else list(input)
        self.inputs.append(given)
        message = ResponseOutputMessage(
            id=f"msg_{next(self._ids)}",
            type="message",
            role="assistant",
            status="completed",
            content=[
                ResponseOutputText(type="output_text", text=f"seen {len(given)}", annotations=[])
            ],
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError("the tests run without streaming")


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_sdk_runner_reads_and_saves_the_session(alice: MemoryLedger) -> None:
    session = MemoryLedgerSession("chat-1", alice, max_turns=3, keep_turns=2)
    model = _OfflineModel()
    agent = Agent(name="helper", model=model)
    config = RunConfig(tracing_disabled=True)

    async def run() -> list[str]:
        out = []
        for question in ["hi", "I live at 18 Haisong Road", "where do I live?"]:
            result = await Runner.run(agent, question, session=session, run_config=config)
            out.append(str(result.final_output))
        return out

    assert asyncio.run(run()) == ["seen 1", "seen 3", "seen 4"]
    # The third run's input: the summary of the first exchange, the recent items, the question.
    last = model.inputs[-1]
    assert last[0]["role"] == "assistant" and last[0]["content"].startswith(SUMMARY_HEADER)
    assert "user: hi" in last[0]["content"]
    assert last[-1] == {"content": "where do I live?", "role": "user"}
    turns = [t for t in _turns(alice, "chat-1") if t.subject != SUMMARY_SPEAKER]
    assert len(turns) == 6, "each run saved its question and its answer"
    saved = asyncio.run(session.get_items())
    assert saved[-1]["content"][0]["text"] == "seen 4"
