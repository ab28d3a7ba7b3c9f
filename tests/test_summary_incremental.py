"""Summaries update by what changed (issue 27), and the result is the rebuilt one.

A profile keeps its inputs (values included) as a state sealed under its own key, so a
batch re-reads only the items it names. These tests hold that to three promises: for
any history of writes, updates, suppressions, redactions and erasures, with batch
boundaries anywhere and a profile small enough to fill and refill, the incremental
summaries equal the rebuilt ones; one write opens one value, not the profile's; and a
recomposition still rotates the summary's key, so nothing it replaced can be opened.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from factories import fact, file_bytes_contain, later, preference, provenance, sqlite_files, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

import memory_ledger.projections.summaries as summaries_module
from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidTransition, InvalidWrite
from memory_ledger.principal import Principal
from memory_ledger.projections.cells import Cells
from memory_ledger.projections.runner import ProjectionRunner
from memory_ledger.projections.summaries import SummariesProjection, summaries, summary_key_ident
from memory_ledger.projections.summarizers import SummaryInput

#: Few enough that a profile fills, loses inputs and is refilled from below its floor.
SMALL_PROFILE = 3
PREDICATES = ["city", "team", "visited", "pet"]
ORIGINS = ["explicit", "observed", "inferred"]
WORDS = ["alpha one", "beta two", "gamma three"]

remember_op = st.tuples(
    st.just("remember"),
    st.sampled_from(["fact", "fact", "fact", "preference", "turn"]),
    st.sampled_from(PREDICATES),
    st.sampled_from(ORIGINS),
    st.integers(0, 1),  # few days: equal starts, hence conflicts, are common
    st.sampled_from(WORDS),
    st.sampled_from(["alice", "alice", "bob"]),
)
item_op = st.tuples(
    st.sampled_from(["update", "suppress", "unsuppress", "redact", "forget", "forget_two"]),
    st.integers(0, 30),
    st.integers(0, 6),
    st.sampled_from(WORDS),
)
operations = st.lists(
    st.one_of(
        remember_op,
        remember_op,
        remember_op,
        item_op,
        st.just(("catch_up",)),
        st.just(("catch_up",)),
    ),
    min_size=1,
    max_size=35,
)


def _apply(ledgers: dict[str, MemoryLedger], ops: list[tuple[Any, ...]], catch_up: Any) -> None:
    ids: list[tuple[str, str]] = []
    for op in ops:
        name = op[0]
        if name == "catch_up":
            catch_up()
        elif name == "remember":
            _, kind, predicate, origin, day, word, who = op
            if kind == "fact":
                write = fact(predicate, word, origin=origin, at=later(day))
                if predicate == "visited":
                    write["cardinality"] = "many"
            elif kind == "preference":
                write = preference(predicate, word, origin=origin, at=later(day))
            else:
                write = turn(word, at=later(day))
            with contextlib.suppress(InvalidWrite):
                ids.append((who, ledgers[who].remember(write).item_id))
        elif ids:
            _, index, day, word = op
            who, target = ids[index % len(ids)]
            ledger = ledgers[who]
            try:
                if name == "update":
                    ledger.update(target, {"value": word, "provenance": provenance(at=later(day))})
                elif name == "redact":
                    kind = ledger.get(target).kind
                    ledger.redact(target, ["content" if kind == "turn" else "value"])
                elif name == "forget":
                    ledger.forget(target)
                elif name == "forget_two":
                    mine = [i for w, i in ids if w == who]
                    ledger.forget(target, mine[(index + 1) % len(mine)])
                else:
                    getattr(ledger, name)(target)
            except (InvalidTransition, InvalidWrite):
                pass  # e.g. updating an erased item: refused, no event


def _summaries_of(runner: ProjectionRunner) -> list[dict[str, Any]]:
    return runner.snapshot()["summaries"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, batch=st.integers(1, 6))
def test_incremental_summaries_equal_rebuilt_ones(ops: list[tuple[Any, ...]], batch: int) -> None:
    """Any history, applied with batch boundaries anywhere, into profiles of a few inputs:
    the state, text and inputs kept incrementally are those a rebuild composes."""
    with (
        mock.patch.object(summaries_module, "MAX_INPUTS", SMALL_PROFILE),
        tempfile.TemporaryDirectory() as directory,
        MemoryService(Settings.resolve(Path(directory))) as service,
    ):
        incremental = ProjectionRunner(service.log, service.engine, batch_size=batch)
        service.runner = incremental
        ledgers = {
            "alice": service.for_principal(Principal("acme", "alice")),
            "bob": service.for_principal(Principal("acme", "bob")),
        }
        _apply(ledgers, ops, incremental.catch_up)
        incremental.catch_up()
        expected = _summaries_of(incremental)
        for row in expected:
            assert "state" not in row or row["input_count"] == len(row["state"])
        service.rebuild(["summaries"])
        assert _summaries_of(service.runner) == expected
        service.rebuild()
        assert _summaries_of(service.runner) == expected


def test_a_state_entry_is_an_inputs_fields_in_order() -> None:
    """The sealed state stores each input as a list in SummaryInput's field order."""
    fields = tuple(f.name for f in dataclasses.fields(SummaryInput))
    assert fields == summaries_module._FIELDS


@contextlib.contextmanager
def _opened_cells() -> Iterator[list[int]]:
    """Count the item values the summaries projection decrypts (rows per fill)."""
    counts: list[int] = []

    class Counting(Cells):
        def fill(self, rows: Any, field: str, into: str) -> None:
            counts.append(len(rows))
            super().fill(rows, field, into)

    with mock.patch.object(summaries_module, "Cells", Counting):
        yield counts


def _projection(service: MemoryService) -> SummariesProjection:
    [found] = [p for p in service.runner.projections if isinstance(p, SummariesProjection)]
    return found


def test_one_write_opens_one_value_not_the_whole_profile(
    alice: MemoryLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summaries_module, "MAX_INPUTS", 10)
    alice.remember_many([fact(f"note_{i}", f"value {i}") for i in range(40)])
    assert alice.summary() is not None  # composed once, from the newest 10
    with _opened_cells() as opened:
        alice.remember(fact("note_new", "value new"))
        summary = alice.summary()
    assert summary is not None and "value new" in summary.text
    assert "value 30" not in summary.text and "value 31" in summary.text  # the oldest left
    assert len(summary.inputs) == 10
    assert sum(opened) == 1


def test_losing_inputs_reads_only_the_next_newest(
    alice: MemoryLedger, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erased input of a full profile is replaced by the newest live item below the
    profile's oldest input: one value opened per input lost."""
    monkeypatch.setattr(summaries_module, "MAX_INPUTS", 10)
    stored = alice.remember_many([fact(f"note_{i}", f"value {i}") for i in range(40)])
    alice.summary()
    with _opened_cells() as opened:
        assert alice.forget(stored[39].item_id, stored[35].item_id).completed
        summary = alice.summary()
    assert summary is not None
    assert {i for i, _ in summary.inputs} == {s.item_id for s in stored[28:39]} - {
        stored[35].item_id
    }
    assert sum(opened) == 2
    before = _summaries_of(service.runner)
    service.rebuild(["summaries"])
    assert _summaries_of(service.runner) == before


def _generation(service: MemoryService, namespace: str) -> int:
    with service.engine.connect() as conn:
        query = select(summaries.c.key_generation).where(summaries.c.namespace == namespace)
        return int(conn.execute(query).scalar_one())


def test_every_change_rotates_the_key_and_no_change_keeps_it(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """A recomposition seals text and state under a new key and destroys the old one,
    so neither the text nor the state it replaced opens anywhere; a batch that changes
    no input (an erased turn) rewrites nothing."""
    kept = alice.remember(fact("city", "Hangzhou"))
    gone = alice.remember(fact("employer", "Globex Corporation"))
    said = alice.remember(turn("hello there"))
    alice.summary()
    first = _generation(service, "acme/alice")
    assert alice.forget(said.item_id).completed
    alice.summary()
    assert _generation(service, "acme/alice") == first
    assert alice.forget(gone.item_id).completed
    summary = alice.summary()
    assert summary is not None and "Globex" not in summary.text
    assert summary.inputs == ((kept.item_id, alice.get(kept.item_id).version),)
    second = _generation(service, "acme/alice")
    assert second > first
    ident = summary_key_ident("acme/alice", "profile")
    ring = service.log.keys_for([ident])
    assert ring.data_key(ident, first) is None and ring.data_key(ident, second) is not None
    [row] = _summaries_of(service.runner)
    assert [entry[5] for entry in row["state"]] == ["Hangzhou"]  # the value, in the state


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_state_is_sealed_at_rest(alice: MemoryLedger, settings: Settings) -> None:
    """The state holds every input's value, sealed: no file shows one in clear, and an
    erased input's value is in no file at all."""
    alice.remember(fact("city", "Hangzhou Xihu District"))
    gone = alice.remember(fact("employer", "Globex Corporation"))
    assert alice.summary() is not None
    assert alice.forget(gone.item_id).completed
    summary = alice.summary()
    assert summary is not None and "Hangzhou Xihu District" in summary.text
    files = sqlite_files(settings)
    assert file_bytes_contain(files, "Hangzhou Xihu District") == []
    assert file_bytes_contain(files, "Globex Corporation") == []


def test_a_summary_whose_key_is_lost_is_composed_from_scratch(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """Without a readable state (its key destroyed outside a recomposition), the next
    change composes the profile from the tables, as a rebuild would."""
    alice.remember(fact("city", "Hangzhou"))
    alice.summary()
    service.log.destroy_derived_keys([summary_key_ident("acme/alice", "profile")])
    alice.remember(fact("team", "Rockets"))
    summary = alice.summary()
    assert summary is not None and "Hangzhou" in summary.text and "Rockets" in summary.text
    before = _summaries_of(service.runner)
    service.rebuild(["summaries"])
    assert _summaries_of(service.runner) == before
