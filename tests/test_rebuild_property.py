"""Property: for any history, the rebuilt view equals the incrementally built one.

Incremental application uses random batch sizes and random catch-up points, so batch
boundaries fall everywhere; erasures and redactions make some content unreadable during
the rebuild, which is exactly when a rebuild could diverge. `visited` is many-valued
(a set: members are added, replaced by id, or the whole set replaced), `city` is
one-valued.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from factories import fact, later, preference, provenance, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidTransition, InvalidWrite
from memory_ledger.principal import Principal
from memory_ledger.projections.runner import ProjectionRunner

PREDICATES = ["city", "seat", "visited"]
ORIGINS = ["explicit", "observed", "inferred"]
WORDS = ["alpha one", "beta two"]

remember_op = st.tuples(
    st.just("remember"),
    st.sampled_from(["fact", "fact", "preference", "turn"]),
    st.sampled_from(PREDICATES),
    st.sampled_from(ORIGINS),
    st.integers(0, 3),
    st.sampled_from(WORDS),
)
item_op = st.tuples(
    st.sampled_from(["update", "suppress", "unsuppress", "redact", "forget"]),
    st.integers(0, 20),
    st.integers(0, 6),
    st.sampled_from(WORDS),
)
member_op = st.tuples(  # a set member that replaces another member, or the whole set
    st.just("member"),
    st.sampled_from(["replace_one", "replace_all"]),
    st.integers(0, 20),
    st.sampled_from(ORIGINS),
    st.integers(0, 6),
    st.sampled_from(WORDS),
)
operations = st.lists(
    st.one_of(
        remember_op,
        remember_op,
        item_op,
        member_op,
        st.just(("catch_up",)),
        st.just(("catch_up",)),
    ),
    min_size=1,
    max_size=30,
)


def _apply(
    ledger: MemoryLedger, ops: list[tuple[Any, ...]], on_catch_up: Callable[[], Any]
) -> None:
    ids: list[str] = []
    for op in ops:
        name = op[0]
        if name == "catch_up":
            on_catch_up()
        elif name == "remember":
            _, kind, predicate, origin, day, word = op
            if kind == "fact":
                write = fact(predicate, word, origin=origin, at=later(day))
            elif kind == "preference":
                write = preference(predicate, word, origin=origin, at=later(day))
            else:
                write = turn(word, at=later(day))
            ids.append(ledger.remember(write).item_id)
        elif name == "member":
            _, how, index, origin, day, word = op
            write = fact("visited", word, origin=origin, at=later(day))
            members = [i for i in ids if ledger.get(i).predicate == "visited"] or ids
            if how == "replace_all":
                write["mode"] = "replace"
            elif members:
                write["replaces"] = [members[index % len(members)]]
            # refused when the named item is no live member (replaced, erased, a turn)
            with contextlib.suppress(InvalidWrite):
                ids.append(ledger.remember(write).item_id)
        elif ids:
            _, index, day, word = op
            target = ids[index % len(ids)]
            try:
                if name == "update":
                    ledger.update(target, {"value": word, "provenance": provenance(at=later(day))})
                elif name == "redact":
                    ledger.redact(
                        target, ["content" if ledger.get(target).kind == "turn" else "value"]
                    )
                elif name == "forget":
                    ledger.forget(target)
                else:
                    getattr(ledger, name)(target)
            except (InvalidTransition, InvalidWrite):
                pass  # e.g. updating an erased item or a transcript turn: refused, no event


def _check(location: Settings, ops: list[tuple[Any, ...]], batch: int) -> None:
    with MemoryService(location) as service:
        incremental = ProjectionRunner(service.log, service.engine, batch_size=batch)
        service.runner = incremental
        _apply(service.for_principal(Principal("acme", "alice")), ops, incremental.catch_up)
        incremental.catch_up()
        expected = incremental.snapshot()
        service.rebuild()
        assert service.runner.snapshot() == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, batch=st.integers(1, 7))
def test_rebuild_equals_incremental_on_sqlite(ops: list[tuple[Any, ...]], batch: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        _check(Settings.resolve(Path(directory)), ops, batch)


@pytest.mark.postgres
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=operations, batch=st.integers(1, 7))
def test_rebuild_equals_incremental_on_postgresql(
    ops: list[tuple[Any, ...]], batch: int, pg_admin_url: str
) -> None:
    import uuid

    import psycopg

    name = f"ml_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        with tempfile.TemporaryDirectory() as directory:
            url = pg_admin_url.rsplit("/", 1)[0] + "/" + name
            _check(Settings.resolve(Path(directory), url), ops, batch)
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
