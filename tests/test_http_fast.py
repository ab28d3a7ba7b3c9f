"""What the HTTP service no longer pays for per request must not cost a guarantee: a
token verified once is remembered, yet a revocation (from this process or another)
stops it at the next call; an expired token stops at its time; the context answer,
encoded without `asdict`, is the same JSON as `Context.to_dict`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from factories import T0, fact
from fastapi.testclient import TestClient
from http_server import server_on_scratch_store

from memory_ledger.access import TokenStore
from memory_ledger.access.tokens import TokenCache
from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import Unauthenticated
from memory_ledger.http.app import create_app
from memory_ledger.principal import Principal
from memory_ledger.times import now


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self):  # type: ignore[no-untyped-def]
        return self.at


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    return Settings.resolve(tmp_path / "data")


def test_a_cached_token_stops_at_a_revocation_made_through_another_store(
    sqlite_settings: Settings,
) -> None:
    """Two stores over one file stand for the server and `memory-ledger tokens revoke`."""
    server, other = TokenStore(sqlite_settings, now), TokenStore(sqlite_settings, now)
    try:
        info, token = server.create("acme/alice", "agent")
        assert server.authenticate(token).namespace == "acme/alice"
        assert server.cache is not None and server.cache.get(info.token_id) is not None
        other.revoke(info.token_id)
        with pytest.raises(Unauthenticated):
            server.authenticate(token)
        with pytest.raises(Unauthenticated):  # and it stays refused
            server.authenticate(token)
    finally:
        server.close()
        other.close()


def test_a_cached_token_is_checked_for_its_secret_and_its_expiry(
    sqlite_settings: Settings,
) -> None:
    clock = Clock()
    tokens = TokenStore(sqlite_settings, clock)
    try:
        _, token = tokens.create("acme/alice", "agent", expires_in=timedelta(hours=1))
        tokens.authenticate(token)  # now cached
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        with pytest.raises(Unauthenticated):
            tokens.authenticate(forged)
        assert tokens.authenticate(token).namespace == "acme/alice"
        clock.at = T0 + timedelta(hours=2)
        with pytest.raises(Unauthenticated):
            tokens.authenticate(token)
    finally:
        tokens.close()


def test_the_cache_is_bounded_and_its_entries_age_out(tmp_path: Path) -> None:
    from memory_ledger.access.tokens import Access, _Verified

    path = tmp_path / "probe.sqlite"
    cache = TokenCache(str(path), max_entries=2, max_age=3600)
    version = cache.version()
    for n in range(3):
        access = Access(f"{n:016x}", "acme/alice", "agent", frozenset())
        cache.put(access.token_id, _Verified("digest", access, None, 0.0 + 1e12), version)
    assert cache.get(f"{0:016x}") is None  # the least recently used went first
    assert cache.get(f"{2:016x}") is not None
    stale = TokenCache(str(path), max_entries=2, max_age=0)
    access = Access("0" * 16, "acme/alice", "agent", frozenset())
    stale.put(access.token_id, _Verified("digest", access, None, 0.0), stale.version())
    assert stale.get(access.token_id) is None  # older than max_age: read again
    cache.close()
    stale.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Settings]]:
    with server_on_scratch_store(tmp_path_factory, "http-fast") as served:
        yield served


@pytest.mark.slow
def test_revoked_while_the_server_holds_it_then_the_next_call_is_401(
    server: tuple[str, Settings],
) -> None:
    """The server process caches the token; this process revokes it, as the CLI would."""
    base, settings = server
    store = TokenStore(settings, now)
    try:
        info, token = store.create("acme/dana", "agent")
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers) as client:
            for _ in range(3):  # verified once, then served from the server's cache
                assert client.get("/v1/summary").status_code == 200
            written = client.post("/v1/memories", json=fact("desk", "by the window"))
            assert written.status_code == 201
            store.revoke(info.token_id)
            for method, path, body in (
                ("GET", "/v1/summary", None),
                ("POST", "/v1/memories", fact("desk", "after revocation")),
                ("POST", "/v1/context", {"query": "desk"}),
            ):
                r = client.request(method, path, json=body)
                assert r.status_code == 401, (path, r.text)
                assert r.headers["content-type"] == "application/problem+json"
    finally:
        store.close()


def test_the_context_answer_is_context_to_dict(sqlite_settings: Settings) -> None:
    with MemoryService(sqlite_settings) as service:
        tokens = TokenStore(service.settings, now)
        try:
            ledger = service.for_principal(Principal("acme", "erin"))
            ledger.remember(fact("home_address", "18 Haisong Road"))
            ledger.remember(fact("employer", "Acme"))
            _, token = tokens.create("acme/erin", "agent")
            client = TestClient(create_app(service, tokens))
            headers = {"Authorization": f"Bearer {token}"}
            query = {"query": "home address", "limit": 5}
            answered = client.post("/v1/context", json=query, headers=headers)
            assert answered.status_code == 200
            assert answered.headers["content-type"] == "application/json"
            expected = ledger.context("home address", limit=5).to_dict()
            assert answered.json() == json.loads(json.dumps(expected))
            remembered = client.post("/v1/memories", json=fact("city", "Hangzhou"), headers=headers)
            assert remembered.status_code == 201
            [stored] = remembered.json()["memories"]
            assert set(stored) == {
                "item_id", "version", "kind", "position", "cardinality", "replaces"
            }  # fmt: skip
            assert isinstance(stored["replaces"], list)
        finally:
            tokens.close()


def test_field_problems_carry_the_validators_words_without_pydantics_prefix(
    sqlite_settings: Settings,
) -> None:
    """pydantic writes "Value error, " before a validator's message: noise in every
    problem of a problem+json (`subject: Value error, not an identifier`)."""
    with MemoryService(sqlite_settings) as service:
        tokens = TokenStore(service.settings, now)
        try:
            _, token = tokens.create("acme/erin", "agent")
            client = TestClient(create_app(service, tokens))
            headers = {"Authorization": f"Bearer {token}"}
            naive = fact("city", "Hangzhou")
            naive["provenance"]["written_at"] = "2026-12-01T09:00:00"
            bad_subject = {**fact("city", "Hangzhou"), "subject": ""}
            for body, expected in (
                (naive, "provenance.written_at: timestamps must carry a timezone"),
                (bad_subject, "subject: not an identifier"),
            ):
                refused = client.post("/v1/memories", json=body, headers=headers)
                assert refused.status_code == 422, refused.text
                problems = refused.json()["problems"]
                assert any(p.startswith(expected) for p in problems), problems
                assert not any("Value error" in p for p in problems), problems
        finally:
            tokens.close()
