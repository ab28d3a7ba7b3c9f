"""Access tokens: shown once, stored hashed, refused alike whatever is wrong with them,
revoked for good; a role and grants that say what each may do."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from factories import T0, cli, store_bytes_contain

from memory_ledger.access import TokenStore
from memory_ledger.access.tokens import ACCESS_FILE
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite, NotFound, Unauthenticated


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self):  # type: ignore[no-untyped-def]
        return self.at


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tokens(settings: Settings, clock: Clock) -> TokenStore:
    store = TokenStore(settings, clock)
    yield store  # type: ignore[misc]
    store.close()


def test_a_token_authenticates_as_its_namespace_role_and_grants(tokens: TokenStore) -> None:
    info, token = tokens.create("acme/alice", "agent", ["forget"], label="travel assistant")
    access = tokens.authenticate(token)
    assert (access.token_id, access.namespace, access.role) == (
        info.token_id,
        "acme/alice",
        "agent",
    )
    assert access.may_forget("acme/alice") and access.may_forget("acme/alice/trip")
    assert not access.may_forget("acme/bob") and not access.covers("acme/alice2")
    assert access.principal().namespace == "acme/alice"
    _, plain = tokens.create("acme/alice", "agent")
    assert not tokens.authenticate(plain).may_forget("acme/alice")  # forget is its own grant
    _, auditor = tokens.create("acme", "compliance")
    assert tokens.authenticate(auditor).covers("acme/bob")
    assert not tokens.authenticate(auditor).may_forget("acme/bob")


def test_every_bad_token_gets_the_same_answer(tokens: TokenStore, clock: Clock) -> None:
    info, token = tokens.create("acme/alice", "agent", expires_in=timedelta(days=1))
    _, other = tokens.create("acme/alice", "agent")
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    wrong_id = "mlt_" + "0" * 16 + token[20:]
    bad = [None, "", "Bearer x", token + " ", forged, wrong_id, token.upper(), 42]
    answers = set()
    for candidate in bad:
        with pytest.raises(Unauthenticated) as refused:
            tokens.authenticate(candidate)
        answers.add(str(refused.value))
    tokens.revoke(info.token_id)
    tokens.revoke(info.token_id)  # twice is harmless
    with pytest.raises(Unauthenticated) as revoked:
        tokens.authenticate(token)
    answers.add(str(revoked.value))
    clock.at = T0 + timedelta(days=2)
    _, later = tokens.create("acme/alice", "agent", expires_in=timedelta(hours=1))
    clock.at = T0 + timedelta(days=2, hours=2)
    with pytest.raises(Unauthenticated) as expired:
        tokens.authenticate(later)
    answers.add(str(expired.value))
    assert len(answers) == 1  # nothing to tell a guess from a revoked or expired token
    assert tokens.authenticate(other).namespace == "acme/alice"


def test_bad_requests_for_a_token_are_refused(tokens: TokenStore) -> None:
    for args, kwargs in [
        (("acme", "agent"), {}),  # an agent acts as a user
        (("acme/alice", "root"), {}),
        (("acme/alice", "agent", ["everything"]), {}),
        (("acme", "compliance", ["forget"]), {}),  # forget is for agents
        (("acme/../bob", "agent"), {}),
        (("acme/alice", "agent"), {"label": "x\n" * 3}),
        (("acme/alice", "agent"), {"expires_in": timedelta(0)}),
    ]:
        with pytest.raises(InvalidWrite):
            tokens.create(*args, **kwargs)
    with pytest.raises(InvalidWrite):
        tokens.revoke("not-an-id")
    with pytest.raises(NotFound):
        tokens.revoke("0123456789abcdef")
    assert tokens.list() == []


def test_only_a_hash_of_the_secret_is_stored(tokens: TokenStore, settings: Settings) -> None:
    info, token = tokens.create("acme/alice", "agent", ["forget"])
    secret = token.removeprefix(f"mlt_{info.token_id}_")  # base64url: it may hold "_" too
    assert len(secret) == 43
    listed = json.dumps([t.to_dict() for t in tokens.list()])
    assert info.token_id in listed and secret not in listed and token not in listed
    tokens.close()
    assert not store_bytes_contain(settings, secret)
    assert settings.postgres is not None or (settings.data_dir / ACCESS_FILE).exists()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_cli_creates_lists_and_revokes(where: list[str]) -> None:
    code, output = cli("tokens", "create", "-n", "acme/alice", "--role", "agent", "--grant",
                       "forget", "--json", *where)  # fmt: skip
    assert code == 0, output
    made = json.loads(output)
    assert made["token"].startswith("mlt_") and made["grants"] == ["forget"]
    code, output = cli("tokens", "list", "--json", *where)
    listed = json.loads(output)["tokens"]
    assert [t["token_id"] for t in listed] == [made["token_id"]] and made["token"] not in output
    code, output = cli("tokens", "revoke", made["token_id"], "--json", *where)
    assert code == 0 and json.loads(output)["revoked_at"]
    code, output = cli("tokens", "create", "-n", "acme", "--role", "agent", *where)
    assert code == 2 and "tenant/user" in output and "Traceback" not in output
