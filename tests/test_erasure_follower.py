"""A process on PostgreSQL drops its own copies of what another process erased, told by
the log, before it reads anything (memory_ledger/feed/follower.py).

Two services with data directories of their own on one database stand for two hosts.
B builds a context (its built contexts, recall state file and vector index then hold the
items), starts following, and does nothing else: A's forget must still leave nothing of
the item in B's memory or files, and complete with B's acknowledgement. Without the
follower B would hold them until its next read, and the request would wait for B."""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ALICE
from factories import fact
from waits import until

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.feed.hosts import host_name, registered
from memory_ledger.retrieval.context_cache import ContextCache


@pytest.mark.postgres
def test_a_host_drops_what_another_host_erased_without_reading(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "MEMORY_LEDGER_MASTER_KEY", base64.b64encode(secrets.token_bytes(32)).decode()
    )
    with (
        MemoryService(Settings.resolve(tmp_path / "a", pg_url)) as a,
        MemoryService(Settings.resolve(tmp_path / "b", pg_url)) as b,
    ):
        alice_a, alice_b = a.for_principal(ALICE), b.for_principal(ALICE)
        ids = [
            alice_a.remember(fact(f"pet_{n}", f"my pet is called Rex{n}")).item_id for n in range(3)
        ]
        gone = ids[0]
        alice_b.context("what is my pet called")
        states = b.context_cache.states.files
        assert states is not None and states.files()  # B keeps a recall state file
        assert b.context_cache.holding([gone]) == 1  # and the context it built
        assert b.vectors.verify_absent([gone]).rows_in_manifest == 1  # and its vector
        assert a.follow_erasures() is not None and b.follow_erasures() is not None
        until(lambda: registered(b.subscribers, host_name(tmp_path / "b")), "B to register")

        report = alice_a.forget(gone)

        def completed() -> bool:
            return a.operations.requests.report(report.request_id).status == "completed"

        until(completed, "the request to complete with B's acknowledgement")
        done = a.operations.requests.report(report.request_id)
        stores = {r.store for r in done.receipts}
        assert f"subscriber:{host_name(tmp_path / 'b')}" in stores
        # nothing of it left on B, which has read nothing since
        assert b.context_cache.holding([gone]) == 0
        assert b.context_cache.states.holding([gone]) == 0
        assert states.files() == []
        assert b.vectors.verify_absent([gone]).rows_in_manifest == 0
        # the others are still B's to serve
        served = {i.item_id for i in alice_b.context("what is my pet called").items}
        assert served == set(ids[1:])


def test_on_sqlite_nothing_follows(tmp_path: Path) -> None:
    """One host, whose copies the forget itself drops: no thread, no LISTEN."""
    with MemoryService(Settings.resolve(tmp_path / "data")) as service:
        assert service.follow_erasures() is None


@dataclass(frozen=True)
class Served:
    item_id: str


@dataclass(frozen=True)
class Built:
    """A built context as the cache reads it: what it served, when it expires."""

    items: tuple[Served, ...]
    valid_until: str | None = None


def test_a_context_built_at_a_position_the_cache_moved_past_is_not_kept() -> None:
    """A request that read the log position before a forget can finish building after
    the forget's eviction and a newer lookup: what it built may hold the erased item, so
    the cache does not keep it (nor serve anything at the older position)."""
    cache: ContextCache[Built] = ContextCache()
    old = Built((Served("erased"),))
    assert cache.get(7, "q", "2026-01-01") is None  # a newer lookup: the forget's position
    cache.put(5, "q", old)  # the slow request, built at 5, finishes
    assert len(cache) == 0 and cache.holding(["erased"]) == 0
    assert cache.get(5, "q", "2026-01-01") is None
    new = Built((Served("kept"),))
    cache.put(7, "q", new)
    assert cache.get(7, "q", "2026-01-01") is new
