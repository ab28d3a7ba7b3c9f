"""The HTTP service against its own OpenAPI document: generated requests (valid and
not) for every operation, with a real token; none may get a 5xx."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
import schemathesis

# Imported at collection, not inside the fixture (schemathesis loads it lazily): pytest
# rewrites a plugin's modules with `ast.parse`, and CPython 3.11.7's parser once failed
# there in CI ("AST constructor recursion depth mismatch", a CPython bug that depends on
# the interpreter's recursion bookkeeping deep in a test run); at collection it is shallow.
import schemathesis.specs.openapi.schemas
from hypothesis import HealthCheck, given, settings

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryService
from memory_ledger.http.app import create_app
from memory_ledger.http.idempotency import IdempotencyKeys
from memory_ledger.times import now

pytestmark = pytest.mark.slow
STATE: dict[str, str] = {}


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    data_dir = tmp_path_factory.mktemp("fuzz") / "data"
    service = MemoryService.open(data_dir)
    tokens = TokenStore(service.settings, now)
    keys = IdempotencyKeys(service.settings, now)
    STATE["agent"] = tokens.create("acme/alice", "agent", ["forget"])[1]
    STATE["ops"] = tokens.create("acme", "ops")[1]
    STATE["holds"] = tokens.create("acme", "compliance")[1]
    ledger = service.for_principal(_alice())
    ledger.remember({
        "kind": "fact", "subject": "user", "predicate": "home_address", "value": "18 Haisong Road",
        "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "fuzz", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1", "turn_id": "t1"},
    })  # fmt: skip
    app = create_app(service, tokens, keys)
    yield schemathesis.openapi.from_asgi("/openapi.json", app).exclude(path="/v1/feed")
    keys.close()
    tokens.close()
    service.close()


def _alice():  # type: ignore[no-untyped-def]
    from memory_ledger.principal import Principal

    return Principal("acme", "alice")


def test_no_request_gets_a_server_error(api_schema: schemathesis.BaseSchema) -> None:
    """Each operation's generated cases (schemathesis's strategies, run by hypothesis
    here: its pytest plugin does not load under this pytest), with a token of the role
    the operation is for (ops routes an ops token, holds a compliance one)."""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 15
    calls: list[int] = []
    served: set[str] = set()  # the tags of operations that answered 2xx
    for operation in operations:
        tags = operation.definition.raw.get("tags", [])
        token = STATE.get(tags[0] if tags else "", STATE["agent"])
        _fuzz(operation, token, lambda status, tags=tags: _count(status, tags, calls, served))
    assert len(calls) >= 3 * len(operations)  # every operation was really exercised
    assert any(200 <= c < 300 for c in calls) and any(c == 422 for c in calls)
    assert {"memories", "ops", "holds"} <= served  # each role's token was let in


def _count(status: int, tags: list[str], calls: list[int], served: set[str]) -> None:
    calls.append(status)
    if 200 <= status < 300:
        served.update(tags)


def _fuzz(operation: object, token: str, seen: Callable[[int], None]) -> None:
    """One operation's generated cases with `token`: no 5xx, errors as problem+json."""

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())  # type: ignore[attr-defined]
    def check(case: schemathesis.Case) -> None:
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        seen(response.status_code)
        where = (case.method, case.path)
        assert response.status_code < 500, (where, response.text[:500])
        if response.status_code >= 400:
            kind = response.headers.get("content-type", [""])
            kind = kind[0] if isinstance(kind, list) else kind
            assert kind.startswith("application/problem+json"), (where, kind)

    check()
