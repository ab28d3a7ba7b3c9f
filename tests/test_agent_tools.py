"""The agent tools: their definitions in the OpenAI and Anthropic shapes, generated from
the argument models, and the dispatcher, against a real ledger.

What must hold: every tool is defined in every shape, and its schema is the argument
model's (so what the model is shown is what is validated); no schema offers a namespace
and no call can pass one; a bad call answers a structured error and stores nothing; a
good one returns the same items, labels and provenance as the Python API.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import Field, TypeAdapter

from memory_ledger.agents.tools import (
    TOOLS,
    AgentTools,
    RememberArgs,
    anthropic_tools,
    error_result,
    input_schema,
    openai_response_tools,
    openai_tools,
)
from memory_ledger.api import MemoryLedger
from memory_ledger.errors import InvalidWrite, NotFound
from memory_ledger.write_policy import (
    MAX_TURN_BYTES,
    MAX_VALUE_BYTES,
    NAMESPACE_KEYS,
    NAMESPACE_NOT_ALLOWED,
)

NAMES = [spec.name for spec in TOOLS]
WRITER = "test-agent"


@pytest.fixture
def tools(alice: MemoryLedger) -> AgentTools:
    return AgentTools(alice, writer=WRITER)


def fact_args(predicate: str = "home_city", value: str = "Hangzhou", **extra: Any) -> dict:
    return {
        "kind": "fact",
        "predicate": predicate,
        "value": value,
        "category": "contact",
        "origin": "explicit",
        "session_id": "s1",
        "turn_id": "t1",
        **extra,
    }


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in result, result
    json.dumps(result)  # JSON-able as it is
    return result


def refused(result: dict[str, Any], code: str = "invalid_input") -> dict[str, Any]:
    assert set(result) == {"error"}, result
    error = result["error"]
    assert set(error) == {"code", "message", "problems"}
    assert error["code"] == code, error
    assert "Traceback" not in error["message"]
    json.dumps(result)
    return error


def stored_events(ledger: MemoryLedger) -> int:
    return ledger._service.log.max_position()


def schemas(value: Any) -> list[dict[str, Any]]:
    """Every dict in a schema, depth first."""
    if isinstance(value, dict):
        return [value] + [s for v in value.values() for s in schemas(v)]
    if isinstance(value, list):
        return [s for v in value for s in schemas(v)]
    return []


# -- the definitions ----------------------------------------------------------------


def test_every_tool_is_defined_in_all_three_shapes() -> None:
    assert NAMES == [
        "remember",
        "context",
        "plan_forget",
        "find_information",
        "forget_information",
        "execute_forget",
        "choose_forget_candidates",
        "forget",
        "stop_using",
        "update",
        "list_memories",
        "export",
        "memory",
        "run_state",
    ]
    chat, responses, anthropic = openai_tools(), openai_response_tools(), anthropic_tools()
    assert [t["function"]["name"] for t in chat] == NAMES
    assert [t["name"] for t in responses] == NAMES
    assert [t["name"] for t in anthropic] == NAMES
    chat_shape = TypeAdapter(ChatCompletionFunctionToolParam)
    responses_shape = TypeAdapter(FunctionToolParam)
    for spec, c, r, a in zip(TOOLS, chat, responses, anthropic, strict=True):
        schema = input_schema(spec.model)
        assert set(c) == {"type", "function"} and c["type"] == "function"
        assert set(c["function"]) == {"name", "description", "parameters"}
        assert c["function"]["parameters"] == schema
        assert chat_shape.validate_python(c) == c  # the OpenAI SDK's own types accept it
        assert set(r) == {"type", "name", "description", "parameters", "strict"}
        assert r["parameters"] == schema and r["strict"] is False
        assert responses_shape.validate_python(r) == r
        assert set(a) == {"name", "description", "input_schema"} and a["input_schema"] == schema
        assert len(spec.description) > 40 and c["function"]["description"] == spec.description


def test_the_schemas_are_valid_json_schema_objects() -> None:
    for spec in TOOLS:
        schema = input_schema(spec.model)
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        text = json.dumps(schema)
        assert "$ref" not in text and "$defs" not in text  # inlined for every API
        json.loads(text)


def test_no_schema_offers_a_namespace_and_every_object_is_closed() -> None:
    for spec in TOOLS:
        for node in schemas(input_schema(spec.model)):
            properties = node.get("properties")
            if isinstance(properties, dict):
                assert not set(properties) & set(NAMESPACE_KEYS), spec.name
                assert node.get("additionalProperties") is False, (spec.name, node)
        # and the schema itself refuses one: a client that validates never sends it
        validator = Draft202012Validator(input_schema(spec.model))
        for key in NAMESPACE_KEYS:
            assert not validator.is_valid({key: "acme/bob"}), spec.name


def test_the_schemas_are_generated_from_the_argument_models() -> None:
    for spec in TOOLS:
        schema = input_schema(spec.model)
        fields = spec.model.model_fields
        assert set(schema["properties"]) == set(fields), spec.name
        required = {name for name, field in fields.items() if field.is_required()}
        assert set(schema.get("required", [])) == required, spec.name

    class Changed(RememberArgs):
        mood: str = Field("calm", description="A field added to the model.")

    changed = input_schema(Changed)
    assert changed["properties"]["mood"] == {
        "default": "calm",
        "description": "A field added to the model.",
        "type": "string",
    }
    assert set(changed["properties"]) == set(input_schema(RememberArgs)["properties"]) | {"mood"}


def test_the_schema_and_the_model_agree_on_what_they_accept() -> None:
    remember = Draft202012Validator(input_schema(RememberArgs))
    good = fact_args(
        derived_from=[{"item_id": "6f1c0e4e-0b7a-4d43-9d51-8d0c1b1f0a11", "version": 1}]
    )
    assert remember.is_valid(good)
    RememberArgs.model_validate(good)
    for bad in (
        {**good, "writer": "someone-else"},
        {**good, "kind": "memo"},
        {**good, "confidence": 2},
        {**good, "subject": "the user"},
        {**good, "derived_from": [{"item_id": good["derived_from"][0]["item_id"], "x": 1}]},
        {k: v for k, v in good.items() if k != "origin"},
    ):
        assert not remember.is_valid(bad), bad
        with pytest.raises(ValueError):
            RememberArgs.model_validate(bad)


# -- the dispatcher -----------------------------------------------------------------


def test_remember_then_context_returns_what_the_api_returns(
    tools: AgentTools, alice: MemoryLedger
) -> None:
    before = datetime.now(UTC)
    done = ok(tools.call("remember", fact_args()))
    assert done["kind"] == "fact" and done["version"] == 1
    provenance = done["provenance"]
    assert provenance == alice.get(done["item_id"]).provenance
    assert provenance["writer"] == WRITER  # the layer's name, not the model's
    assert (provenance["session_id"], provenance["turn_id"]) == ("s1", "t1")
    written = datetime.fromisoformat(provenance["written_at"])
    assert before - timedelta(seconds=1) <= written <= datetime.now(UTC)

    context = ok(tools.call("context", {"query": "which city does the user live in"}))
    direct = alice.context("which city does the user live in")
    expected = json.loads(json.dumps(direct.to_dict()))
    for item, api_item in zip(expected["items"], direct.items, strict=True):
        item["label"] = api_item.label()
    assert context == expected
    [item] = context["items"]
    assert item["item_id"] == done["item_id"] and item["text"] == "Hangzhou"
    assert item["label"] == "[fact · explicit]" and item["provenance"] == provenance
    assert context["rendered"] == "[fact · explicit] home city: Hangzhou"

    listed = ok(tools.call("list_memories", {"kind": "fact"}))
    assert listed["memories"] == [m.to_dict() for m in alice.recall(kind="fact", limit=20)]
    assert listed["count"] == 1


def test_context_options_and_the_turn_it_is_recorded_on(tools: AgentTools) -> None:
    ok(tools.call("remember", fact_args()))
    pref = fact_args("seat", "window", kind="preference", category="travel")
    ok(tools.call("remember", pref))
    turn = ok(
        tools.call(
            "remember",
            {
                "kind": "turn",
                "content": "Book me a window seat to Kyoto.",
                "origin": "explicit",
                "session_id": "s1",
                "turn_id": "t2",
            },
        )
    )
    only = ok(tools.call("context", {"query": "window seat", "kinds": ["preference"]}))
    assert [i["kind"] for i in only["items"]] == ["preference"]
    assert only["items"][0]["label"] == "[preference · explicit]"
    recorded = ok(tools.call("context", {"query": "seat", "for_turn": turn["item_id"]}))
    assert recorded["recorded_on"] == turn["item_id"] and recorded["context_mac"]
    refused(tools.call("context", {"query": "seat", "rank": "random"}), "invalid_input")


def test_a_namespace_argument_is_refused_and_nothing_is_stored(
    tools: AgentTools, alice: MemoryLedger, bob: MemoryLedger
) -> None:
    before = stored_events(alice)
    for key in NAMESPACE_KEYS:
        error = refused(tools.call("remember", fact_args(**{key: "acme/bob"})))
        assert "namespace" in error["message"] and "principal" in error["message"]
        assert error["problems"] == [NAMESPACE_NOT_ALLOWED]
    for name in NAMES:  # every tool, whatever its other arguments
        error = refused(tools.call(name, {"namespace": "acme/bob"}))
        assert "must not name a namespace" in error["message"]
        assert error["problems"] == [NAMESPACE_NOT_ALLOWED]
        said = error["message"] + " ".join(error["problems"])
        assert not re.search(r"\ba [aeiou]", said), said  # "in a export call"
    nested = fact_args(
        derived_from=[
            {"item_id": "6f1c0e4e-0b7a-4d43-9d51-8d0c1b1f0a11", "version": 1, "namespace": "x"}
        ]
    )
    error = refused(tools.call("remember", nested))
    assert error["problems"] == ["derived_from.0.namespace: Extra inputs are not permitted"]
    assert stored_events(alice) == before
    assert alice.recall() == [] and bob.recall() == []


def test_bad_types_and_unknown_arguments_are_refused(
    tools: AgentTools, alice: MemoryLedger
) -> None:
    before = stored_events(alice)
    cases = [
        ("remember", fact_args(value=5), "value: Input should be a valid string"),
        ("remember", fact_args(confidence=True), "confidence: Input should be a valid number"),
        ("remember", fact_args(kind="memo"), "kind: Input should be 'fact', 'preference'"),
        ("remember", fact_args(subject="the user"), "subject: not an identifier"),
        ("remember", fact_args(writer="root"), "writer: Extra inputs are not permitted"),
        ("remember", fact_args(provenance={}), "provenance: Extra inputs are not permitted"),
        ("remember", fact_args(expires_at=1700000000), "expires_at:"),
        ("remember", {**fact_args(), "session_id": None, "turn_id": None}, "needs a source"),
        ("list_memories", {"limit": "5"}, "limit: Input should be a valid integer"),
        ("list_memories", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
        ("list_memories", {"limit": 201}, "limit: Input should be less than or equal to 200"),
        ("context", {"query": 7}, "query: Input should be a valid string"),
        ("context", {"query": "x", "token_budget": 1.5}, "token_budget:"),
        ("stop_using", {"item_id": 123}, "item_id: not an item id"),
        ("forget", {"item_ids": []}, "item_ids: Tuple should have at least 1 item"),
        ("update", {"item_id": "6f1c0e4e-0b7a-4d43-9d51-8d0c1b1f0a11"}, "value: Field required"),
        ("export", {"everything": True}, "everything: Extra inputs are not permitted"),
    ]
    for name, arguments, problem in cases:
        error = refused(tools.call(name, arguments))
        assert any(p.startswith(problem) or problem in p for p in error["problems"]), (
            name,
            problem,
            error,
        )
    echoed = refused(tools.call("remember", fact_args(subject="lives at 18 Haisong Road")))
    assert "Haisong" not in json.dumps(echoed)  # a refused value is never echoed
    refused(tools.call("remember", ["not", "an", "object"]))  # type: ignore[arg-type]
    refused(tools.call("remember", None))  # no arguments: the required ones are missing
    assert stored_events(alice) == before and alice.recall() == []


def test_oversize_values_are_refused_in_characters_and_in_bytes(
    tools: AgentTools, alice: MemoryLedger
) -> None:
    before = stored_events(alice)
    too_long = refused(tools.call("remember", fact_args(value="x" * (MAX_VALUE_BYTES + 1))))
    assert too_long["problems"] == [
        f"value: String should have at most {MAX_VALUE_BYTES} characters"
    ]
    wide = "é" * (MAX_VALUE_BYTES // 2 + 1)  # within the characters, over the bytes
    too_big = refused(tools.call("remember", fact_args(value=wide)))
    assert f"the limit is {MAX_VALUE_BYTES} bytes" in too_big["message"]
    turn = {
        "kind": "turn",
        "content": "y" * (MAX_TURN_BYTES + 1),
        "origin": "explicit",
        "session_id": "s1",
        "turn_id": "t1",
    }
    refused(tools.call("remember", turn))
    refused(tools.call("context", {"query": "q" * 2001}))
    refused(tools.call("plan_forget", {"text": "f" * 2001}))
    assert stored_events(alice) == before
    # at the limit it is stored
    ok(tools.call("remember", fact_args(value="x" * MAX_VALUE_BYTES)))


def test_an_unknown_tool_is_a_structured_error(tools: AgentTools) -> None:
    error = refused(tools.call("drop_table", {}), "unknown_tool")
    assert "remember" in error["message"] and "export" in error["message"]
    refused(tools.call(None, {}), "unknown_tool")  # type: ignore[arg-type]
    assert "x" * 81 not in refused(tools.call("x" * 500, {}), "unknown_tool")["message"]


def test_the_writer_must_be_an_identifier(alice: MemoryLedger) -> None:
    with pytest.raises(InvalidWrite):
        AgentTools(alice, writer="an agent\n")


def test_update_stop_using_and_forget(tools: AgentTools, alice: MemoryLedger) -> None:
    done = ok(tools.call("remember", fact_args()))
    item_id = done["item_id"]
    changed = ok(tools.call("update", {"item_id": item_id, "value": "Shanghai", "turn_id": "t3"}))
    assert changed["version"] == 2 and changed["provenance"]["writer"] == WRITER
    assert changed["provenance"]["turn_id"] == "t3"
    assert [(m.text, m.status) for m in alice.history(item_id)] == [
        ("Hangzhou", "superseded"),
        ("Shanghai", "current"),
    ]

    pref = ok(tools.call("remember", fact_args("seat", "aisle", kind="preference")))
    stopped = ok(tools.call("stop_using", {"item_id": pref["item_id"]}))
    assert stopped["suppressed"] is True
    assert alice.get(pref["item_id"]).suppressed and alice.get(pref["item_id"]).text == "aisle"
    assert [m.item_id for m in alice.recall()] == [item_id]

    report = ok(tools.call("forget", {"item_ids": [item_id]}))
    rebuilt = alice._service.requests.report(report["request_id"])  # as the ledger has it
    assert (rebuilt.status, rebuilt.targets) == (report["status"], report["targets"])
    assert report["status"] == "completed" and report["targets"] == [item_id]
    assert report["message"].startswith("Done:")
    assert alice.get(item_id).erased and alice.get(item_id).text is None
    again = refused(
        tools.call("update", {"item_id": item_id, "value": "x", "turn_id": "t4"}),
        "invalid_transition",
    )
    assert item_id in again["message"]


def test_another_namespaces_item_is_not_found_like_a_missing_one(
    tools: AgentTools, bob: MemoryLedger
) -> None:
    theirs = AgentTools(bob, writer=WRITER).call("remember", fact_args())["item_id"]
    missing = "6f1c0e4e-0b7a-4d43-9d51-8d0c1b1f0a11"
    for item_id in (theirs, missing):
        for name, arguments in (
            ("stop_using", {"item_id": item_id}),
            ("update", {"item_id": item_id, "value": "x", "turn_id": "t9"}),
            ("forget", {"item_ids": [item_id]}),
        ):
            error = refused(tools.call(name, arguments), "not_found")
            assert error["message"] == f"no memory item {item_id}"
    assert bob.get(theirs).text == "Hangzhou" and not bob.get(theirs).suppressed


def test_export_holds_everything_live_with_versions_and_erased_items_by_id_only(
    tools: AgentTools, alice: MemoryLedger, bob: MemoryLedger
) -> None:
    city = ok(tools.call("remember", fact_args()))["item_id"]
    ok(tools.call("update", {"item_id": city, "value": "Shanghai", "turn_id": "t2"}))
    seat = ok(tools.call("remember", fact_args("seat", "window", kind="preference")))["item_id"]
    turn = ok(
        tools.call(
            "remember",
            {
                "kind": "turn",
                "content": "I moved to Shanghai.",
                "origin": "explicit",
                "session_id": "s1",
                "turn_id": "t2",
            },
        )
    )["item_id"]
    phone = ok(tools.call("remember", fact_args("phone", "+86 139 0000 1234")))["item_id"]
    ok(tools.call("forget", {"item_ids": [phone]}))
    bobs = AgentTools(bob, writer=WRITER)
    bob_fact = bobs.call("remember", fact_args("phone", "+1 555 0100"))["item_id"]
    bobs.call("forget", {"item_ids": [bob_fact]})

    export = ok(tools.call("export", {}))
    [fact] = export["facts"]
    assert fact["item_id"] == city and fact["text"] == "Shanghai"
    assert [v["text"] for v in fact["versions"]] == ["Hangzhou", "Shanghai"]
    assert [v["version"] for v in fact["versions"]] == [m.version for m in alice.history(city)]
    assert all(v["provenance"]["writer"] == WRITER for v in fact["versions"])
    assert export["format"] == "memory-ledger-export/1" and export["namespace"] == "acme/alice"
    assert [p["item_id"] for p in export["preferences"]] == [seat]
    assert [t["item_id"] for t in export["transcripts"]] == [turn]
    assert export["transcripts"][0]["text"] == "I moved to Shanghai."
    summary = alice.summary()
    assert summary is not None and export["summary"] == json.loads(json.dumps(summary.to_dict()))
    [erased] = export["erased"]  # bob's is not alice's
    assert erased["item_id"] == phone and erased["request_id"].startswith("req-")
    assert "139 0000" not in json.dumps(export)  # an erased item by its id only


# -- forget planning (memory_ledger's planning API, built in main) --------------------


def test_plan_then_execute_forget(tools: AgentTools, alice: MemoryLedger) -> None:
    address = ok(tools.call("remember", fact_args("home_address", "18 Haisong Road")))["item_id"]
    plan = ok(tools.call("plan_forget", {"text": "Forget my home address", "turn_id": "t5"}))
    assert plan["plan_id"].startswith("plan-") and plan["status"] == "planned"
    assert plan["intent"] == "delete" and plan["targets"] == [address]
    assert plan["message"] and plan["expires_at"]
    assert not alice.get(address).erased  # a plan destroys nothing
    done = ok(tools.call("execute_forget", {"plan_id": plan["plan_id"]}))
    assert done["plan_id"] == plan["plan_id"] and done["status"] == "completed"
    assert done["request_id"] and address in done["targets"]
    assert alice.get(address).erased
    refused(tools.call("execute_forget", {"plan_id": plan["plan_id"]}), "invalid_transition")


def test_a_clarification_is_answered_with_candidates(
    tools: AgentTools, alice: MemoryLedger
) -> None:
    home = ok(tools.call("remember", fact_args("home_address", "18 Haisong Road")))["item_id"]
    work = ok(tools.call("remember", fact_args("home_address", "7 Binjiang Avenue")))["item_id"]
    ok(tools.call("remember", fact_args("home_address", "2 Jiefang Road")))
    plan = ok(tools.call("plan_forget", {"text": "forget my old address"}))
    assert plan["status"] == "needs_clarification" and plan["question"]
    assert {c["item_id"] for c in plan["candidates"]} >= {home, work}
    refused(tools.call("execute_forget", {"plan_id": plan["plan_id"]}), "invalid_transition")
    narrower = ok(
        tools.call("choose_forget_candidates", {"plan_id": plan["plan_id"], "item_ids": [work]})
    )
    assert narrower["status"] == "planned" and narrower["targets"] == [work]
    ok(tools.call("execute_forget", {"plan_id": narrower["plan_id"]}))
    assert alice.get(work).erased and not alice.get(home).erased


def test_another_namespaces_plan_is_not_found(tools: AgentTools, bob: MemoryLedger) -> None:
    bobs = AgentTools(bob, writer=WRITER)
    bobs.call("remember", fact_args("home_address", "1 Main Street"))
    plan = ok(bobs.call("plan_forget", {"text": "forget my home address"}))
    refused(tools.call("execute_forget", {"plan_id": plan["plan_id"]}), "not_found")
    refused(tools.call("execute_forget", {"plan_id": "plan-0123456789abcdef"}), "not_found")
    refused(tools.call("execute_forget", {"plan_id": "plan-0123abcd"}), "invalid_input")


def test_error_codes_follow_the_exception() -> None:
    assert error_result(NotFound("no memory item x"))["error"]["code"] == "not_found"
    invalid = error_result(InvalidWrite("bad", ["a: b"]))
    assert invalid == {"error": {"code": "invalid_input", "message": "bad", "problems": ["a: b"]}}
    from memory_ledger.errors import BackendUnavailable, StaleDerivation

    assert error_result(BackendUnavailable("down"))["error"]["code"] == "backend_unavailable"
    assert error_result(StaleDerivation("stale"))["error"]["code"] == "stale_derivation"
