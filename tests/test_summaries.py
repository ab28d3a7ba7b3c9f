"""Summaries: derived text that records its inputs and forgets as well as it remembers."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from factories import fact, file_bytes_contain, later, preference, provenance, sqlite_files, turn
from sqlalchemy import Connection
from typer.testing import CliRunner

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.cli import app
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError
from memory_ledger.principal import Principal
from memory_ledger.projections.cells import Cells
from memory_ledger.projections.events import ProjectedEvent
from memory_ledger.projections.runner import ProjectionRunner
from memory_ledger.projections.summaries import SummariesProjection, summary_inputs
from memory_ledger.projections.summarizers import SUMMARIZER_ENV, ProfileSummarizer, load_summarizer

ADDRESS = "18 Haisong Road, Hangzhou"
EMPLOYER = "Globex Corporation"
PROFILE = (
    "contact:\n"
    f"- home address: {ADDRESS}\n"
    "travel:\n"
    "- prefers seat: window (scope global)\n"
    "work:\n"
    f"- employer: {EMPLOYER}"
)


@pytest.fixture
def profile(alice: MemoryLedger, bob: MemoryLedger) -> dict[str, str]:
    """Alice's address, employer and seat, a turn (never an input), and Bob's employer."""
    stored = alice.remember_many(
        [
            fact("home_address", ADDRESS, category="contact"),
            fact("employer", EMPLOYER, category="work"),
            preference("seat", "window"),
            turn(f"I live at {ADDRESS} and work at {EMPLOYER}"),
        ]
    )
    bob.remember(fact("employer", "Initech Systems", category="work"))
    names = ("address", "employer", "seat", "turn")
    return dict(zip(names, (s.item_id for s in stored), strict=True))


def _versions(ledger: MemoryLedger, *item_ids: str) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((i, ledger.get(i).version) for i in item_ids))


def _projection(runner: ProjectionRunner) -> SummariesProjection:
    [found] = [p for p in runner.projections if isinstance(p, SummariesProjection)]
    return found


def test_a_summary_is_composed_from_live_facts_and_preferences_with_its_inputs(
    alice: MemoryLedger, bob: MemoryLedger, profile: dict[str, str]
) -> None:
    summary = alice.summary()
    assert summary is not None
    assert summary.text == PROFILE
    assert summary.summarizer == ProfileSummarizer.name
    ids = (profile["address"], profile["employer"], profile["seat"])
    assert summary.inputs == _versions(alice, *ids)  # the transcript turn is no input
    other = bob.summary()
    assert other is not None and other.text == "work:\n- employer: Initech Systems"
    assert profile["address"] not in {i for i, _ in other.inputs}


def test_conflicts_inferences_and_other_subjects_are_labelled(alice: MemoryLedger) -> None:
    alice.remember_many(
        [
            fact("employer", "Acme"),
            fact("employer", "Globex"),
            fact("team", "Rockets", subject="brother", origin="inferred"),
            preference("tone", "brief", scope="task:email", origin="observed"),
        ]
    )
    summary = alice.summary()
    assert summary is not None
    assert summary.text == (
        "general:\n"
        "- brother's team: Rockets (inferred)\n"
        "- employer: Acme (conflicting statements)\n"
        "- employer: Globex (conflicting statements)\n"
        "travel:\n"
        "- prefers tone: brief (scope task:email, observed)"
    )


def test_an_update_rebuilds_the_summary_with_the_new_value_only(
    alice: MemoryLedger, profile: dict[str, str]
) -> None:
    new = "7 Binjiang Avenue, Hangzhou"
    alice.update(profile["address"], {"value": new, "provenance": provenance(at=later(3))})
    summary = alice.summary()
    assert summary is not None
    assert summary.text == PROFILE.replace(ADDRESS, new)
    assert (profile["address"], 2) in summary.inputs


def test_suppress_drops_an_input_and_unsuppress_brings_it_back(
    alice: MemoryLedger, profile: dict[str, str]
) -> None:
    alice.suppress(profile["employer"])
    summary = alice.summary()
    assert summary is not None
    assert EMPLOYER not in summary.text and "work:" not in summary.text
    assert profile["employer"] not in {i for i, _ in summary.inputs}
    alice.unsuppress(profile["employer"])
    summary = alice.summary()
    assert summary is not None and summary.text == PROFILE
    assert (profile["employer"], 3) in summary.inputs  # recorded, suppressed, unsuppressed


def test_redaction_rebuilds_the_summary(alice: MemoryLedger, profile: dict[str, str]) -> None:
    alice.redact(profile["address"], ["value"])
    summary = alice.summary()
    assert summary is not None
    assert summary.text == PROFILE.replace(ADDRESS, "[redacted]")
    assert (profile["address"], 2) in summary.inputs


def test_forgetting_one_input_keeps_the_others_and_leaves_no_trace(
    alice: MemoryLedger, service: MemoryService, settings: Settings, profile: dict[str, str]
) -> None:
    report = alice.forget(profile["address"])
    assert report.completed, report.to_dict()
    [receipt] = [r for r in report.receipts if r.store == "summaries"]
    assert (receipt.status, receipt.evidence) == ("ok", {"rows_left": 0})

    summary = alice.summary()
    assert summary is not None
    assert summary.text == "travel:\n- prefers seat: window (scope global)\nwork:\n" + (
        f"- employer: {EMPLOYER}"
    )
    assert summary.inputs == _versions(alice, profile["employer"], profile["seat"])
    assert "Haisong" not in json.dumps(service.runner.snapshot())
    if settings.postgres is None:
        assert file_bytes_contain(sqlite_files(settings), "Haisong") == []
        # Sealed everywhere: the live value is in no file either, yet the summary shows it.
        assert file_bytes_contain(sqlite_files(settings), EMPLOYER) == []


def test_a_tombstone_alone_recomposes_the_summary_at_catch_up(
    alice: MemoryLedger, service: MemoryService, profile: dict[str, str]
) -> None:
    """As when a retention job or a restore appends tombstones without a fan-out: the
    erased fact's row is already purged when summaries run, so its namespace is found
    through the summary's recorded inputs."""
    alice.summary()  # caught up: the address is an input
    service.stores.get("event_log").erase([profile["address"]])
    summary = alice.summary()
    assert summary is not None
    assert "Haisong" not in summary.text and EMPLOYER in summary.text
    with service.engine.connect() as conn:
        assert _projection(service.runner).count_rows(conn, [profile["address"]]) == 0


def test_an_erasure_reaches_summaries_in_its_own_batch_and_additions_at_the_end(
    alice: MemoryLedger, service: MemoryService, profile: dict[str, str]
) -> None:
    """A long catch-up commits batch by batch: no committed batch may leave an erased
    value in a summary, while additions are composed once, in the last batch."""
    alice.summary()
    runner = ProjectionRunner(service.log, service.engine, batch_size=1)
    projection = _projection(runner)
    seen: list[tuple[str, str]] = []
    apply = projection.apply

    def watched(conn: Connection, events: Sequence[ProjectedEvent]) -> None:
        apply(conn, events)
        stored = projection.read(conn, "acme/alice", datetime.now(UTC), service.retention)
        seen.append((events[-1].name, stored.text if stored else None))

    projection.apply = watched  # type: ignore[method-assign]
    service.stores.get("event_log").erase([profile["address"]])  # a tombstone, no fan-out
    alice.remember_many([fact("city", "Hangzhou"), fact("team", "Rockets")])
    assert runner.catch_up() == 3

    (erased, after_erasure), (_, after_first_addition), _ = seen
    assert erased == "Erased"
    assert "Haisong" not in after_erasure and EMPLOYER in after_erasure
    assert after_first_addition == after_erasure  # not composed batch by batch
    summary = alice.summary()
    assert summary is not None and "city: Hangzhou" in summary.text
    assert "team: Rockets" in summary.text
    assert "pending" not in json.dumps(runner.snapshot()["summaries"])


def test_a_namespace_with_no_inputs_left_has_no_summary(
    alice: MemoryLedger, service: MemoryService, profile: dict[str, str]
) -> None:
    assert alice.forget_scope({"kind": "namespace"}).completed
    assert alice.summary() is None
    assert [r["namespace"] for r in service.runner.snapshot()["summaries"]] == ["acme/bob"]


def test_purge_recomposes_without_the_items_even_while_their_rows_remain(
    alice: MemoryLedger, service: MemoryService, profile: dict[str, str]
) -> None:
    """The store protocol's direct purge (a retried fan-out) must not wait for a
    tombstone: it drops the items from every summary that used them."""
    alice.summary()  # caught up
    projection = _projection(service.runner)
    ids = [profile["address"]]
    with service.engine.begin() as conn:
        assert projection.count_rows(conn, ids) == 1
        assert projection.texts_of(conn, Cells(service.log), ids) == []  # never mixed text
        projection.purge(conn, ids)
        assert projection.count_rows(conn, ids) == 0
    with service.engine.connect() as conn:
        stored = projection.read(conn, "acme/alice", datetime.now(UTC), service.retention)
    assert stored is not None and "Haisong" not in stored.text and EMPLOYER in stored.text


def test_an_expired_input_is_left_out_when_read(
    alice: MemoryLedger, service: MemoryService
) -> None:
    written = datetime.now(UTC) - timedelta(days=2)
    expired = fact("mood", "tired and grumpy", at=written)
    expired["retention"] = {
        "basis": "session",
        "expires_at": (written + timedelta(days=1)).isoformat(),
    }
    stored = alice.remember_many([expired, fact("city", "Hangzhou", at=written)])
    summary = alice.summary()
    assert summary is not None
    assert summary.text == "general:\n- city: Hangzhou"
    assert summary.inputs == _versions(alice, stored[1].item_id)
    with service.engine.connect() as conn:  # expiry is a read-time predicate only
        held = conn.execute(summary_inputs.select()).all()
    assert len(held) == 2


def test_rebuild_equals_the_incremental_view(alice: MemoryLedger, service: MemoryService) -> None:
    a = alice.remember(fact("city", "Sydney", category="contact"))
    alice.summary()
    alice.update(a.item_id, {"value": "Perth", "provenance": provenance(at=later(1))})
    b = alice.remember(preference("seat", "window"))
    alice.summary()
    alice.suppress(b.item_id)
    c = alice.remember(fact("employer", EMPLOYER, category="work"))
    alice.redact(c.item_id, ["value"])
    d = alice.remember(fact("team", "Rockets", at=later(9)))
    alice.summary()
    alice.forget(d.item_id)
    alice.remember(preference("meal", "vegetarian"))
    service.runner.catch_up()
    incremental = service.runner.snapshot()
    assert [r["input_count"] for r in incremental["summaries"]] == [3]
    service.rebuild()
    assert service.runner.snapshot() == incremental
    service.rebuild(["summaries"])
    assert service.runner.snapshot() == incremental


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_store_missing_a_summaries_table_replays_them_when_opened(settings: Settings) -> None:
    """A store written before summaries existed, or with one of their tables lost:
    all three are dropped and replayed from the log, not served half-built."""
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        ledger.remember_many([fact("employer", EMPLOYER), preference("seat", "window")])
        expected = ledger.summary()
    raw = sqlite3.connect(settings.projections_path)
    raw.execute("DROP TABLE summary_inputs")
    raw.commit()
    raw.close()
    with MemoryService(settings) as service:
        assert service.for_principal(Principal("acme", "alice")).summary() == expected
        [row] = service.runner.snapshot()["summaries"]
        assert len(row["inputs"]) == 2


def test_the_cli_prints_the_summary(alice: MemoryLedger, settings: Settings) -> None:
    alice.remember(fact("employer", EMPLOYER, category="work"))
    where = ["--namespace", "acme/alice", "--data-dir", str(settings.data_dir)]
    if settings.postgres:
        pg = settings.postgres
        where += ["--url", f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}"]
    result = CliRunner().invoke(app, ["summary", *where, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["text"] == f"work:\n- employer: {EMPLOYER}"
    assert [i["version"] for i in data["inputs"]] == [1]
    assert data["summarizer"] == ProfileSummarizer.name
    result = CliRunner().invoke(app, ["summary", *where], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and f"employer: {EMPLOYER}" in result.output
    empty = ["--namespace", "acme/carol", *where[2:]]
    result = CliRunner().invoke(app, ["summary", *empty, "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) is None


# -- plugging in another summarizer ----------------------------------------------------

PLUGIN = """
class Upper:
    name = "upper-test"

    def summarize(self, inputs):
        return " | ".join(f"{i.predicate}={i.value.upper()}@{i.version}" for i in inputs)


def factory():
    return Upper()


def not_a_summarizer():
    return object()


def broken():
    raise RuntimeError("no model endpoint configured")
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    module = f"summarizer_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield module
    sys.modules.pop(module, None)


def test_a_summarizer_named_in_the_environment_is_used_and_replaces_stored_summaries(
    settings: Settings, plugin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        ledger.remember_many([fact("employer", EMPLOYER), preference("seat", "window")])
        before = ledger.summary()
        assert before is not None and before.summarizer == ProfileSummarizer.name

    monkeypatch.setenv(SUMMARIZER_ENV, f"{plugin}:factory")
    with MemoryService(settings) as service:  # summaries by another summarizer: replayed
        ledger = service.for_principal(Principal("acme", "alice"))
        summary = ledger.summary()
        assert summary is not None
        assert summary.summarizer == "upper-test"
        assert summary.text == f"employer={EMPLOYER.upper()}@1 | seat=WINDOW@1"
        assert summary.inputs == before.inputs
        [row] = service.runner.snapshot()["summaries"]
        assert (row["summarizer"], row["text"]) == ("upper-test", summary.text)


@pytest.mark.parametrize(
    "spec",
    [
        "no_such_module_for_summaries:factory",
        "json:no_such_factory",
        "json",  # no factory named
        "{plugin}:not_a_summarizer",
        "{plugin}:broken",
    ],
)
def test_a_bad_summarizer_spec_is_a_configuration_error(
    spec: str, plugin: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SUMMARIZER_ENV, spec.format(plugin=plugin))
    with pytest.raises(ConfigurationError, match=SUMMARIZER_ENV):
        load_summarizer()


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_store_does_not_open_with_a_bad_summarizer(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SUMMARIZER_ENV, "no_such_module_for_summaries:factory")
    with pytest.raises(ConfigurationError, match="cannot load"):
        MemoryService(settings)


def test_a_heavy_users_profile_summarises_the_newest_inputs_only(
    alice: MemoryLedger, service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profile stays readable and its recomposition cheap for a user with thousands
    of facts: the newest MAX_INPUTS by log position, the same ones after a rebuild."""
    import memory_ledger.projections.summaries as summaries_module

    monkeypatch.setattr(summaries_module, "MAX_INPUTS", 3)
    stored = alice.remember_many([fact(f"note_{i}", f"value {i}") for i in range(6)])
    summary = alice.summary()
    assert summary is not None
    assert {i for i, _ in summary.inputs} == {s.item_id for s in stored[3:]}
    assert "value 5" in summary.text and "value 2" not in summary.text
    alice.forget(stored[5].item_id)
    after = alice.summary()
    assert after is not None and {i for i, _ in after.inputs} == {s.item_id for s in stored[2:5]}
    before = service.runner.snapshot()["summaries"]
    service.rebuild()
    assert service.runner.snapshot()["summaries"] == before
