"""Whatever the write boundary accepts, the forget path can erase, and times order as
time does on both backends.

The property test draws writes over the whole write model, including identifiers at
the edges of their syntax (a trailing newline, padding, 128 characters, non-ASCII) and
principals built the same way. A write that is refused must leave nothing behind; a
write that is accepted must be erasable by item, predicate, source and namespace, each
request ending `completed`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from factories import fact, provenance
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite
from memory_ledger.identifiers import IDENTIFIER_PATTERN, NAMESPACE_PART_PATTERN, is_identifier
from memory_ledger.principal import Principal

EDGES = ["alice\n", " alice", "alice ", "a" * 128, "a" * 129, "älice", "a\x00b", "", "a/b"]


def identifiers(pattern: str) -> st.SearchStrategy[str]:
    return st.from_regex(pattern, fullmatch=True)


def spoiled(pattern: str) -> st.SearchStrategy[str]:
    """Edge cases, and valid identifiers with one character added at an end."""
    tail = st.sampled_from(["\n", " ", "\t", "\r\n", "\x00", "/"])
    added = st.tuples(identifiers(pattern), tail).map(lambda p: p[0] + p[1])
    return (
        st.sampled_from(EDGES)
        | added
        | tail.flatmap(lambda t: identifiers(pattern).map(lambda v: t + v))
    )


times = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
IDENTIFIER_FIELDS = ("writer", "turn_id", "session_id", "subject", "category", "predicate")


@st.composite
def writes(draw: st.DrawFn, spoil: str | None = None) -> dict[str, Any]:
    # The pattern's syntax, and the one definition's further rule: no run of 40 hex
    # digits (which Hypothesis, fond of repeated characters, draws often).
    ident = identifiers(IDENTIFIER_PATTERN).filter(is_identifier)
    value = {
        f: draw(spoiled(IDENTIFIER_PATTERN) if f == spoil else ident) for f in IDENTIFIER_FIELDS
    }
    kind = draw(st.sampled_from(["fact", "preference", "turn"]))
    prov = {
        "writer": value["writer"],
        "written_at": draw(times).isoformat(),
        "turn_id": value["turn_id"],
        "session_id": value["session_id"],
        "tool_call_id": draw(st.none() | ident),
    }
    text = draw(st.text(min_size=1, max_size=60).filter(lambda t: t.strip()))
    write: dict[str, Any] = {
        "kind": kind,
        "subject": value["subject"],
        "category": value["category"],
        "origin": draw(st.sampled_from(["explicit", "observed", "inferred"])),
        "sensitivity": draw(st.sampled_from(["public", "internal", "personal", "restricted"])),
        "provenance": prov,
    }
    if kind == "turn":
        write["content"] = text
    else:
        write["predicate"] = value["predicate"]
        write["value"] = text
    return write


ACCEPTED: list[str] = []
SCOPE_KINDS = ("item", "predicate", "source", "namespace")


@pytest.fixture(scope="module")
def shared_service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with MemoryService(Settings.resolve(tmp_path_factory.mktemp("erasable"))) as svc:
        yield svc


def _scope(kind: str, item_id: str, write: dict[str, Any]) -> dict[str, Any]:
    p = write["provenance"]
    if kind == "item":
        return {"kind": "item", "item_ids": [item_id]}
    if kind == "predicate":
        return {
            "kind": "predicate",
            "subject": write["subject"],
            "predicate": write.get("predicate", "turn"),
        }
    if kind == "source":
        return {"kind": "source", "session_id": p["session_id"], "turn_id": p["turn_id"]}
    return {"kind": "namespace"}


PROPERTY = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(data=st.data())
def test_any_accepted_write_can_be_forgotten(
    shared_service: MemoryService, data: st.DataObject
) -> None:
    _write_then_forget(shared_service, data, None)


@PROPERTY
@given(data=st.data())
def test_a_spoiled_write_is_refused_or_forgotten(
    shared_service: MemoryService, data: st.DataObject
) -> None:
    """The same, with one place spoiled (a write field or a principal part). Apart from
    the property above, so that Hypothesis's clustering on spoiled draws cannot starve
    it of accepted writes."""
    spoil = data.draw(st.sampled_from([*IDENTIFIER_FIELDS, "user", "project"]))
    _write_then_forget(shared_service, data, spoil)


def _write_then_forget(
    shared_service: MemoryService, data: st.DataObject, spoil: str | None
) -> None:
    write = data.draw(writes(spoil))
    part = identifiers(NAMESPACE_PART_PATTERN)
    user = data.draw(spoiled(NAMESPACE_PART_PATTERN) if spoil == "user" else part)
    project = data.draw(spoiled(NAMESPACE_PART_PATTERN) if spoil == "project" else st.none() | part)
    for scope_kind in SCOPE_KINDS:  # the same write, forgotten by each kind of scope
        # A fresh tenant each time: a namespace forget must reach this write only.
        tenant = f"t{uuid.uuid4().hex[:12]}"
        before = shared_service.log.max_position()
        try:
            mem = shared_service.for_principal(Principal(tenant, user, project))
            item = mem.remember(write)
        except InvalidWrite:
            assert shared_service.log.max_position() == before  # refused: nothing stored
            return
        report = mem.forget_scope(_scope(scope_kind, item.item_id, write))
        assert report.status == "completed", (scope_kind, report.failed_stores)
        assert item.item_id in report.all_targets
        state = mem.get(item.item_id)
        assert state.erased and state.text is None
    ACCEPTED.append(write["kind"])


def test_the_property_saw_accepted_writes_of_every_scope() -> None:
    """Runs after the property: it must not have passed by refusing everything."""
    assert len(ACCEPTED) >= 8


@pytest.mark.parametrize(
    "namespace", ["acme/alice\n", "acme/alice\n/proj", " acme/alice", "acme/alice/", "acme"]
)
def test_a_namespace_that_could_not_be_erased_is_refused_at_the_boundary(namespace: str) -> None:
    with pytest.raises(InvalidWrite) as refused:
        Principal.from_namespace(namespace)
    assert "\n" not in str(refused.value)  # a refusal does not echo what it refused
    parts = namespace.split("/")
    if len(parts) in (2, 3):
        with pytest.raises(InvalidWrite):
            Principal(*parts)


def test_time_ranges_order_as_time_across_years(alice: MemoryLedger) -> None:
    """Year 999 sorts before 2025 in the stored form, on SQLite and PostgreSQL."""
    ancient = alice.remember(
        fact("seen", "a ship", at=datetime(999, 6, 1, tzinfo=UTC), turn="t999")
    ).item_id
    recent = alice.remember(
        fact("seen", "a plane", at=datetime(2025, 6, 1, tzinfo=UTC), turn="t2025")
    ).item_id
    far = alice.remember(
        fact("seen", "a comet", at=datetime(9999, 6, 1, tzinfo=UTC), turn="t9999")
    ).item_id

    dry = alice.forget_scope(
        {"kind": "time_range", "since": "2025-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"},
        dry_run=True,
    )
    assert dry.targets == [recent]
    since_2025 = alice.forget_scope(
        {"kind": "time_range", "since": "2025-01-01T00:00:00Z"}, dry_run=True
    )
    assert sorted(since_2025.targets) == sorted([recent, far])
    until_2000 = alice.forget_scope({"kind": "time_range", "until": "2000-01-01T00:00:00Z"})
    assert until_2000.status == "completed"
    assert until_2000.targets == [ancient]
    assert alice.get(recent).text == "a plane"
    assert alice.get(far).text == "a comet"


@pytest.mark.parametrize(
    "moment",
    ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00", "10000-01-01T00:00:00Z", 1764000000],
)
def test_times_outside_the_range_are_refused_clearly(alice: MemoryLedger, moment: Any) -> None:
    with pytest.raises(InvalidWrite) as refused:
        alice.forget_scope({"kind": "time_range", "since": moment})
    assert "nothing was erased" in str(refused.value)
    with pytest.raises(InvalidWrite):
        alice.remember(
            {
                **fact("city", "Hangzhou"),
                "provenance": provenance(at=datetime.now(UTC)) | {"written_at": moment},
            }
        )


def test_the_stored_form_is_fixed_width(tmp_path: Path) -> None:
    from memory_ledger.times import canonical_time

    forms = [
        canonical_time(datetime(y, 1, 1, tzinfo=UTC) + timedelta(microseconds=1))
        for y in (1, 999, 1000, 2025, 9999)
    ]
    assert len({len(f) for f in forms}) == 1
    assert forms == sorted(forms)
