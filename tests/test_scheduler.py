"""The scheduler of the named jobs: the registry, run records, leases between two
schedulers, the persistent job store, run-once and the foreground `jobs run`.

Jobs are given their time (`now`), so nothing here sleeps for a schedule: a test waits
only for work it started to be recorded.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from factories import T0, cli, expiring, fact, jobs_reread, reread

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError, InvalidWrite
from memory_ledger.jobs.registry import JOBS, JobSpec
from memory_ledger.jobs.runs import (
    DEFAULT_LEASE_SECONDS,
    FAILED,
    INTERRUPTED,
    OK,
    RUNNING,
    SKIPPED,
    RunStore,
    open_engine,
    this_holder,
)
from memory_ledger.jobs.scheduler import (
    JOB_TABLE,
    MIN_EVERY_MINUTES,
    execute,
    scheduled_jobs,
    start_scheduler,
)
from memory_ledger.principal import Principal

WAIT = 60.0  # seconds a test waits for work it started before it fails


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    done = threading.Event()
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    while datetime.now(UTC) < deadline:
        if condition():
            return
        done.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _ended(runs: RunStore, name: str, outcome: str = OK, count: int = 1) -> bool:
    found = [r for r in runs.recent(name, 100) if r.outcome == outcome and r.ended_at]
    return len(found) >= count


def _erasures(service: MemoryService, item_id: str) -> int:
    return sum(1 for e in service.log.events_of(UUID(item_id)) if type(e).__name__ == "Erased")


def _retention_requests(service: MemoryService) -> list[str]:
    return [
        e.request_id
        for e in service.ledger.entries()
        if e.entry_type == "request" and e.payload.get("requested_by") == "retention_job"
    ]


@pytest.fixture
def runs(service: MemoryService) -> Iterator[RunStore]:
    with RunStore(service.settings) as store:
        yield store


# -- the registry and `jobs list` ------------------------------------------------------


def test_jobs_list_names_every_registry_job(service: MemoryService, where: list[str]) -> None:
    code, output = cli("jobs", "list", *where, "--json")
    assert code == 0, output
    rows = json.loads(output)["jobs"]
    assert [r["name"] for r in rows] == list(JOBS)
    assert "retention" in JOBS and "projection-catchup" in JOBS
    by_name = {r["name"]: r for r in rows}
    assert by_name["retention"]["every_minutes"] == 60.0
    assert by_name["verification-scan"]["every_minutes"] == 10.0
    assert all(r["description"] and r["last_run"] is None for r in rows)
    assert not any(r["scheduled"] for r in rows)  # no scheduler has run on this store
    code, output = cli("jobs", "list", *where)
    assert code == 0 and "retention" in output and "never run" in output


def test_run_once_records_a_run_that_jobs_list_shows(
    alice: MemoryLedger, service: MemoryService, where: list[str]
) -> None:
    due = alice.remember(expiring("locker code 4471")).item_id
    kept = alice.remember(expiring("gym membership", hours=24 * 365)).item_id
    now = (T0 + timedelta(hours=2)).isoformat()
    code, output = cli("jobs", "run-once", "retention", "--now", now, *where, "--json")
    assert code == 0, output
    result = json.loads(output)
    assert result["outcome"] == "ok" and result["held_by"] is None
    assert result["counts"] == {"requests": 1, "items": 1, "completed": 1, "blocked": 0}
    assert alice.get(due).erased and not alice.get(kept).erased

    code, output = cli("jobs", "list", *where, "--json")
    assert code == 0, output
    [row] = [r for r in json.loads(output)["jobs"] if r["name"] == "retention"]
    last = row["last_run"]
    assert last["run_id"] == result["run_id"] and last["outcome"] == "ok"
    assert last["counts"] == result["counts"] and last["error"] is None
    assert last["started_at"] <= last["ended_at"]
    assert last["holder"] == this_holder() and row["lease"] is None  # released

    # Again as of the same time: nothing is due twice, and the run says so.
    code, output = cli("jobs", "run-once", "retention", "--now", now, *where, "--json")
    assert code == 0 and json.loads(output)["counts"]["items"] == 0
    code, output = cli("jobs", "list", *where, "--runs", "5", "--json")
    [row] = [r for r in json.loads(output)["jobs"] if r["name"] == "retention"]
    assert len(row["runs"]) == 2 and row["runs"][1]["run_id"] == result["run_id"]


def test_unknown_job_and_bad_time_are_clear_errors(
    service: MemoryService, where: list[str]
) -> None:
    code, output = cli("jobs", "run-once", "rentention", *where)
    assert code == 2 and "Traceback" not in output
    assert "unknown job 'rentention'" in output and "retention" in output
    code, output = cli("jobs", "run-once", "rentention", *where, "--json")
    assert code == 2 and json.loads(output)["type"] == "InvalidWrite"
    for bad in ("2026-13-01", "2026-11-01T10:00:00"):  # no such month; no zone
        code, output = cli("jobs", "run-once", "retention", "--now", bad, *where)
        assert code == 2 and "--now" in output and "Traceback" not in output
    code, output = cli("jobs", "run", "--job", "nope", *where)
    assert code == 2 and "unknown job" in output
    code, output = cli("jobs", "list", "--runs", "0", *where)
    assert code == 2 and "Traceback" not in output


def test_a_job_cannot_record_content_in_its_counts(
    service: MemoryService, runs: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def leaky(*_: object) -> dict[str, int]:
        return {"erased": 1, "value": "18 Haisong Road"}  # type: ignore[dict-item]

    monkeypatch.setitem(JOBS, "leaky", JobSpec("leaky", "returns content", lambda _: 60.0, leaky))
    result = execute(service.job_context, "leaky", T0, runs=runs)
    assert result.outcome == FAILED and result.error is not None
    assert result.error.startswith("InvalidWrite") and "Haisong" not in result.error
    [record] = runs.recent("leaky")
    assert record.outcome == FAILED and record.counts == {}


def test_a_bug_is_recorded_by_class_name_only_and_raised(
    service: MemoryService, runs: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def buggy(*_: object) -> dict[str, int]:
        raise ValueError("18 Haisong Road")  # not ours: its message may carry content

    monkeypatch.setitem(JOBS, "buggy", JobSpec("buggy", "has a bug", lambda _: 60.0, buggy))
    with pytest.raises(ValueError):
        execute(service.job_context, "buggy", T0, runs=runs)
    [record] = runs.recent("buggy")
    assert (record.outcome, record.error) == (FAILED, "ValueError")
    assert runs.lease("buggy") is None


# -- leases: two schedulers on one store -----------------------------------------------


def test_a_held_lease_keeps_another_service_from_running_the_job(
    alice: MemoryLedger, service: MemoryService, settings: Settings, runs: RunStore
) -> None:
    due = [alice.remember(expiring(f"ticket {i}")).item_id for i in range(3)]
    now = T0 + timedelta(hours=2)
    holding = runs.begin("retention")  # the first scheduler is running the sweep
    assert isinstance(holding, str)
    with MemoryService(settings) as other, RunStore(settings) as other_runs:
        result = execute(other.job_context, "retention", now, runs=other_runs)
        assert result.outcome == SKIPPED and result.run_id is None
        assert result.held_by is not None and result.held_by.run_id == holding
        assert not any(alice.get(i).erased for i in due) and _retention_requests(service) == []
        [record] = runs.recent("retention")  # the skip recorded nothing
        assert (record.run_id, record.outcome) == (holding, RUNNING)

        runs.finish("retention", holding, OK, {})
        done = execute(other.job_context, "retention", now, runs=other_runs)
        assert done.outcome == OK and done.counts["items"] == 3
        again = execute(service.job_context, "retention", now, runs=runs)
        assert again.outcome == OK and again.counts["items"] == 0
    assert all(_erasures(service, i) == 1 for i in due)
    assert len(_retention_requests(service)) == 1


def test_a_dead_runs_lease_expires_and_its_run_reads_interrupted(runs: RunStore) -> None:
    then = datetime.now(UTC) - timedelta(hours=1)
    dead = runs.begin("file-vacuum", at=then)  # a process killed mid-run, an hour ago
    assert isinstance(dead, str)
    [record] = runs.recent("file-vacuum", at=then + timedelta(seconds=1))
    assert record.outcome == RUNNING and record.ended_at is None  # while its lease lived
    [record] = runs.recent("file-vacuum")
    assert record.outcome == INTERRUPTED and record.ended_at is None
    assert runs.lease("file-vacuum") is None

    taken = runs.begin("file-vacuum")  # the next run takes the expired lease
    assert isinstance(taken, str) and taken != dead
    assert not runs.renew("file-vacuum", dead)  # the dead run's lease is gone
    assert runs.lease("file-vacuum") is not None
    runs.finish("file-vacuum", taken, OK, {"files_rebuilt": 0})
    first, second = runs.recent("file-vacuum", 2)
    assert (first.run_id, first.outcome) == (taken, OK)
    assert (second.run_id, second.outcome) == (dead, INTERRUPTED)
    assert runs.lease("file-vacuum") is None
    assert DEFAULT_LEASE_SECONDS <= 3600  # bounded, and so is what a kill blocks


def test_the_lease_setting_is_bounded(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    for raw in ("0", "5", "99999", "nan", "soon"):
        monkeypatch.setenv("MEMORY_LEDGER_JOB_LEASE_SECONDS", raw)
        with pytest.raises(ConfigurationError, match="MEMORY_LEDGER_JOB_LEASE_SECONDS"):
            RunStore(reread(settings))
    with pytest.raises(InvalidWrite):
        RunStore(settings, lease_seconds=1)


RUN_ONCE = [sys.executable, "-m", "memory_ledger.cli", "jobs", "run-once"]


@pytest.mark.slow
def test_two_run_once_processes_race_and_every_item_is_erased_once(
    service: MemoryService, where: list[str], runs: RunStore
) -> None:
    alice = service.for_principal(Principal("acme", "alice"))
    bob = service.for_principal(Principal("acme", "bob"))
    due = {
        "acme/alice": {alice.remember(expiring(f"alice {i}")).item_id for i in range(15)},
        "acme/bob": {bob.remember(expiring(f"bob {i}")).item_id for i in range(15)},
    }
    now = (T0 + timedelta(hours=2)).isoformat()
    command = [*RUN_ONCE, "retention", "--now", now, *where, "--json"]
    racers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = []
    for racer in racers:
        stdout, stderr = racer.communicate(timeout=300)
        assert racer.returncode == 0, stderr
        results.append(json.loads(stdout))
    # One swept; the other found the lease taken, or (if it came second) nothing due.
    assert sorted(r["outcome"] for r in results) in (["ok", "ok"], ["ok", "skipped"])
    assert sum(r["counts"].get("items", 0) for r in results) == 30
    for items in due.values():
        assert all(_erasures(service, i) == 1 for i in items)
    reports = [service.requests.report(r) for r in _retention_requests(service)]
    assert {(r.namespace, frozenset(r.targets)) for r in reports} == {
        (ns, frozenset(items)) for ns, items in due.items()
    }
    assert all(r.completed for r in reports)
    recorded = runs.recent("retention", 10)
    assert recorded and all(r.outcome == OK for r in recorded)


# -- the scheduler and its persistent store -------------------------------------------


def test_the_job_store_survives_a_restart_and_missed_runs_coalesce(
    service: MemoryService, settings: Settings, runs: RunStore
) -> None:
    name = "verification-window"
    first = start_scheduler(service.job_context, [name])
    try:
        _wait_for(lambda: _ended(runs, name), "the first run at start")
    finally:
        first.shutdown(wait=True)
    stored = scheduled_jobs(settings)[name]
    assert stored.every_minutes == 60.0
    assert stored.next_run_time is not None
    assert stored.next_run_time > datetime.now(UTC) + timedelta(minutes=55)

    # A restart reads the next run time back instead of running the job again. (The
    # new job runs at once, so by its record the scheduler has looked at both.)
    second = start_scheduler(service.job_context, [name, "file-vacuum"])
    try:
        _wait_for(lambda: _ended(runs, "file-vacuum"), "file-vacuum's first run")
        assert scheduled_jobs(settings)[name].next_run_time == stored.next_run_time
    finally:
        second.shutdown(wait=True)
    assert len(runs.recent(name, 10)) == 1

    # Ten hours without a scheduler: ten hourly runs missed.
    store = SQLAlchemyJobStore(engine=open_engine(settings), tablename=JOB_TABLE)
    job = store.lookup_job(name)
    job.next_run_time = datetime.now(UTC) - timedelta(hours=10)
    store.update_job(job)
    store.shutdown()
    assert set(scheduled_jobs(settings)) == {name, "file-vacuum"}

    third = start_scheduler(service.job_context, [name])  # `file-vacuum` is not scheduled any more
    try:
        _wait_for(lambda: _ended(runs, name, count=2), "the coalesced run")
    finally:
        third.shutdown(wait=True)
    assert len(runs.recent(name, 10)) == 2, "ten missed runs coalesce into one"
    after = scheduled_jobs(settings)
    assert set(after) == {name}
    assert after[name].next_run_time is not None
    assert after[name].next_run_time > datetime.now(UTC)


def test_a_failing_job_is_recorded_failed_and_the_scheduler_keeps_going(
    service: MemoryService,
    runs: RunStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def boom(*_: object) -> dict[str, int]:
        raise ConfigurationError("MEMORY_LEDGER_BOOM must be a number")

    spec = JobSpec("boom", "always fails", lambda _: MIN_EVERY_MINUTES, boom)
    monkeypatch.setitem(JOBS, "boom", spec)
    scheduler = start_scheduler(service.job_context, ["boom", "verification-window"])
    try:
        _wait_for(lambda: _ended(runs, "boom", FAILED, count=3), "three failed runs")
        _wait_for(lambda: _ended(runs, "verification-window"), "the other job's run")
    finally:
        scheduler.shutdown(wait=True)
    failed = runs.recent("boom", 3)
    assert {r.error for r in failed} == {"ConfigurationError: MEMORY_LEDGER_BOOM must be a number"}
    assert runs.lease("boom") is None
    lines = [r for r in caplog.records if r.getMessage().startswith("boom failed")]
    assert lines and all(r.exc_info is None for r in lines)  # one line each, no traceback


def test_one_scheduler_per_process_and_bad_settings_stop_the_start(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = threading.active_count()
    monkeypatch.setenv("MEMORY_LEDGER_RETENTION_MINUTES", "0")
    with pytest.raises(ConfigurationError, match="MEMORY_LEDGER_RETENTION_MINUTES"):
        start_scheduler(jobs_reread(service))
    monkeypatch.delenv("MEMORY_LEDGER_RETENTION_MINUTES")
    with pytest.raises(InvalidWrite, match="nothing was started"):
        start_scheduler(service.job_context, ["retention"], {"retention": 0.0})
    assert threading.active_count() == threads
    scheduler = start_scheduler(service.job_context, ["verification-window"])
    try:
        with pytest.raises(ConfigurationError, match="already running"):
            start_scheduler(service.job_context, ["file-vacuum"])
    finally:
        scheduler.shutdown(wait=True)


# -- the foreground scheduler and run-once, as processes -------------------------------


@pytest.mark.slow
def test_jobs_run_stops_gracefully_on_sigterm(
    service: MemoryService, where: list[str], runs: RunStore
) -> None:
    env = {**os.environ, "MEMORY_LEDGER_CATCHUP_SECONDS": "0.1"}
    command = [sys.executable, "-m", "memory_ledger.cli", "jobs", "run", *where]
    command += ["--job", "projection-catchup", "--job", "retention"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as child:
        try:
            _wait_for(
                lambda: _ended(runs, "projection-catchup", count=2) and _ended(runs, "retention"),
                "the scheduled runs",
            )
        finally:
            child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr
    assert "SIGTERM: stopping" in stderr and "Traceback" not in stderr
    for name in ("projection-catchup", "retention"):
        assert runs.lease(name) is None
        assert all(r.outcome == OK and r.ended_at for r in runs.recent(name, 100))
    assert scheduled_jobs(service.settings)["retention"].next_run_time is not None


def _run_once_catchup(where: list[str], terminal: bool) -> tuple[int, str, str]:
    command = [*RUN_ONCE, "projection-catchup", *where]
    env = {**os.environ, "COLUMNS": "120"}
    if not terminal:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()  # stderr is a terminal; stdout stays a pipe
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=follower, env=env, text=True
    ) as child:
        os.close(follower)
        stdout = child.stdout.read() if child.stdout else ""
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        return child.wait(), stdout, b"".join(chunks).decode("utf-8", "replace")


def _behind_by_50(service: MemoryService) -> None:
    ledger = service.for_principal(Principal("acme", "alice"))
    ledger.remember_many([fact("note", f"note {i}", turn=f"t{i}") for i in range(50)])
    assert all(s.behind == 50 for s in service.runner.status())


@pytest.mark.slow
def test_run_once_is_quiet_when_stderr_is_not_a_terminal(
    service: MemoryService, where: list[str]
) -> None:
    _behind_by_50(service)
    code, stdout, stderr = _run_once_catchup(where, terminal=False)
    assert code == 0, stderr
    assert "projection-catchup ok" in stdout and "events=50" in stdout
    assert stderr == ""
    assert all(s.behind == 0 for s in service.runner.status())


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])
def test_run_once_shows_a_progress_bar_in_a_terminal(
    service: MemoryService, where: list[str]
) -> None:
    _behind_by_50(service)
    code, stdout, stderr = _run_once_catchup(where, terminal=True)
    assert code == 0, stderr
    assert "replaying the log" in stderr and "50/50" in stderr
    assert "events=50" in stdout
