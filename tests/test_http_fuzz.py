"""The HTTP service against its own OpenAPI document: generated requests (valid and
not) for every operation, with a real token; none may get a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import schemathesis
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
    STATE["token"] = tokens.create("acme/alice", "agent", ["forget"])[1]
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
    here: its pytest plugin does not load under this pytest)."""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 15
    calls: list[int] = []
    for operation in operations:

        @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            response = case.call(headers={"Authorization": f"Bearer {STATE['token']}"})
            calls.append(response.status_code)
            where = (case.method, case.path)
            assert response.status_code < 500, (where, response.text[:500])
            if response.status_code >= 400:
                kind = response.headers.get("content-type", [""])
                kind = kind[0] if isinstance(kind, list) else kind
                assert kind.startswith("application/problem+json"), (where, kind)

        check()
    assert len(calls) >= 3 * len(operations)  # every operation was really exercised
    assert any(200 <= c < 300 for c in calls) and any(c == 422 for c in calls)
