"""The change feed and the subscribers that keep copies, on SQLite and PostgreSQL.

A consumer reads the feed in log order from a cursor it stores; killed and restarted
it resumes where it left off (at least once, idempotent by event id). Erasure notices
carry ids only. A registered subscriber sees content for its namespaces only, and a
forget in them stays `partial`, naming it, until it acknowledges.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from factories import cli, cli_location, fact, preference, provenance, reread

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import CursorGone, InvalidWrite, NotFound, StaleDerivation
from memory_ledger.feed.feed import Notice
from memory_ledger.principal import Principal

ALICE = Principal("acme", "alice")
BOB = Principal("acme", "bob")


def _all(
    service: MemoryService, after: str | None = None, subscriber: str | None = None
) -> list[Notice]:
    """Every notice after `after`, read in pages of 3 (so paging is exercised)."""
    out: list[Notice] = []
    cursor = after
    while True:
        page = service.feed.read(cursor, subscriber=subscriber, limit=3)
        out += page.notices
        cursor = page.cursor
        if page.caught_up:
            return out


def test_notices_come_in_log_order_and_resume_from_any_cursor(service: MemoryService) -> None:
    alice = service.for_principal(ALICE)
    city = alice.remember(fact("city", "Hangzhou")).item_id
    alice.remember(preference("seat", "window"))
    alice.update(city, {"value": "Ningbo", "provenance": provenance(turn="t2")})
    alice.suppress(city)
    alice.unsuppress(city)
    forgotten = alice.forget(city)
    notices = _all(service)
    kinds = [n.type for n in notices if n.item_id == city]
    assert kinds[0] == "memory_recorded" and "fact_changed" in kinds
    assert "item_suppressed" in kinds and "item_unsuppressed" in kinds
    assert kinds[-1] == "item_erased"
    assert "summary_rebuilt" in {n.type for n in notices}
    erased = next(n for n in notices if n.type == "item_erased")
    assert erased.request_id == forgotten.request_id and erased.reason == "user_request"
    cursors = [n.cursor for n in notices]
    assert len(set(cursors)) == len(cursors)
    for i, notice in enumerate(notices):  # resuming after any notice gives exactly the rest
        assert [n.cursor for n in _all(service, notice.cursor)] == cursors[i + 1 :]
    assert all(n.content is None for n in notices)  # not read as a subscriber: ids only


def test_content_only_for_the_subscribers_namespaces_and_never_in_erasures(
    service: MemoryService,
) -> None:
    token = f"zq{secrets.token_hex(6)}"
    service.subscribers.add("crm", ["acme/alice"], added_by="ops")
    alice, bob = service.for_principal(ALICE), service.for_principal(BOB)
    kept = alice.remember(fact("city", f"Hangzhou {token}")).item_id
    bob.remember(fact("city", f"Ningbo {token}"))
    gone = alice.remember(fact("locker", f"code {token}")).item_id
    seen = _all(service, subscriber="crm")
    opened = {n.item_id: n.content for n in seen if n.content}
    assert opened == {kept: {"value": f"Hangzhou {token}"}, gone: {"value": f"code {token}"}}
    report = alice.forget(gone)
    assert report.status == "partial" and report.failed_stores == ["subscriber:crm"]
    delivered = json.dumps([n.to_dict() for n in _all(service, seen[-1].cursor, "crm")])
    assert "item_erased" in delivered and token not in delivered
    again = json.dumps([n.to_dict() for n in _all(service, subscriber="crm")])
    assert again.count(token) == 1  # the erased item's content is gone from the feed too


def test_a_subscriber_that_never_acks_keeps_the_request_partial_and_named(
    service: MemoryService, where: list[str]
) -> None:
    service.subscribers.add("crm", ["acme"], added_by="ops", deadline_hours=1)
    alice = service.for_principal(ALICE)
    report = alice.forget(alice.remember(fact("city", "Hangzhou")).item_id)
    assert report.status == "partial" and report.failed_stores == ["subscriber:crm"]
    [receipt] = [r for r in report.receipts if r.store == "subscriber:crm"]
    assert receipt.action == "awaiting_ack" and receipt.evidence["overdue"] is False
    again = service.requests.resume(report.request_id)  # a retry does not complete it
    assert again.status == "partial" and again.failed_stores == ["subscriber:crm"]
    [waiting] = service.subscribers.waiting(again, datetime.now(UTC) + timedelta(hours=2))
    assert waiting["subscriber"] == "crm" and waiting["overdue"] is True
    code, output = cli("requests", *where, "--json")
    assert code == 0
    [row] = [r for r in json.loads(output) if r["request_id"] == report.request_id]
    assert row["status"] == "partial" and row["waiting_for"][0]["subscriber"] == "crm"
    # A late ack completes it; a second ack records nothing.
    done = service.subscribers.ack(service.requests, "crm", report.request_id)
    assert done == {**done, "recorded": True, "status": "completed"}
    assert service.subscribers.ack(service.requests, "crm", report.request_id)["recorded"] is False
    kinds = [e.entry_type for e in service.ledger.entries(report.request_id)]
    assert kinds.count("ack") == 1 and kinds[-1] == "status"
    assert service.ledger.latest_status(report.request_id) == "completed"


def test_retiring_a_subscriber_ends_its_pending_acks_with_an_operator_receipt(
    service: MemoryService,
) -> None:
    service.subscribers.add("crm", ["acme/alice"], added_by="ops")
    alice, bob = service.for_principal(ALICE), service.for_principal(BOB)
    waiting = alice.forget(alice.remember(fact("city", "Hangzhou")).item_id)
    elsewhere = bob.forget(bob.remember(fact("city", "Ningbo")).item_id)
    assert waiting.status == "partial" and elsewhere.completed  # bob's is not its namespace
    assert service.subscribers.retire(service.requests, "crm", retired_by="ops") == [
        waiting.request_id
    ]
    assert service.ledger.latest_status(waiting.request_id) == "completed"
    [ack] = [e for e in service.ledger.entries(waiting.request_id) if e.entry_type == "ack"]
    assert ack.payload == {"subscriber": "crm", "targets": 1, "by": "ops", "retired": True}
    assert "subscriber:crm" not in service.stores.names()
    with pytest.raises(NotFound):
        service.subscribers.ack(service.requests, "crm", waiting.request_id)


def test_bad_registrations_and_acks_are_refused(service: MemoryService) -> None:
    for name, spaces, hours in (
        ("Bad Name", ["acme"], 24),
        ("crm", [], 24),
        ("crm", ["not a namespace!"], 24),
        ("crm", ["acme"], 0),
        ("crm", ["acme"], 10**6),
    ):
        with pytest.raises(InvalidWrite):
            service.subscribers.add(name, spaces, added_by="ops", deadline_hours=hours)
    service.subscribers.add("crm", ["acme/alice"], added_by="ops")
    with pytest.raises(InvalidWrite, match="registered"):
        service.subscribers.add("crm", ["acme"], added_by="ops")
    bob = service.for_principal(BOB)
    other = bob.forget(bob.remember(fact("city", "Ningbo")).item_id)
    with pytest.raises(InvalidWrite, match="does not hold"):
        service.subscribers.ack(service.requests, "crm", other.request_id)
    with pytest.raises(NotFound):
        service.subscribers.ack(service.requests, "crm", "req-0000000000000000")
    for cursor in ("nonsense", "a.b.c", "x.1"):
        with pytest.raises(InvalidWrite):
            service.feed.read(cursor)
    with pytest.raises(InvalidWrite):
        service.feed.read(None, limit=0)


def test_a_subscribers_write_back_of_erased_content_is_refused_and_logged_without_it(
    service: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    service.subscribers.add("crm", ["acme/alice"], added_by="ops")
    alice = service.for_principal(ALICE)
    secret = alice.remember(fact("locker", "code 4471")).item_id
    [read] = [n for n in _all(service, subscriber="crm") if n.type == "memory_recorded"]
    item_id, version = read.event_id.split(":")
    alice.forget(secret)  # erased after the subscriber read it
    write_back = fact(
        "locker_note",
        f"remember: {read.content['value']}",  # type: ignore[index]
        origin="inferred",
        derived_from=[{"item_id": item_id, "version": int(version)}],
    )
    write_back["provenance"]["writer"] = "crm"
    with caplog.at_level(logging.WARNING, logger="memory_ledger"), pytest.raises(StaleDerivation):
        alice.remember(write_back)
    assert "refused a derived write" in caplog.text and "4471" not in caplog.text
    assert [m.item_id for m in alice.recall()] == []
    mine = [n for n in _all(service) if n.writer == "crm"]
    assert mine == []  # nothing of it was written


def test_a_cursor_from_before_a_restore_is_refused_with_how_to_resynchronise(
    settings: Settings, tmp_path: Path
) -> None:
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.restore.backup import create
    from memory_ledger.restore.restore import restore

    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        kept = alice.remember(fact("city", "Hangzhou")).item_id
        made = create(settings, service.log.master, service.ledger, datetime.now(UTC), tmp_path)
        alice.remember(fact("pet", "cat"))
        before = service.feed.head()
        master = service.log.master
    with LifecycleLedger(settings) as ledger:
        restore(
            made.path,
            settings,
            master,
            ledger,
            datetime.now(UTC),
            force=True,
            open_store=MemoryService,
        )
    with MemoryService(settings) as service:
        with pytest.raises(CursorGone, match="snapshot"):
            service.feed.read(before)
        notices = _all(service)
        assert notices[-1].type == "restore_completed"
        taken = service.feed.snapshot("acme/alice")
        assert [i["item_id"] for i in taken["items"]] == [kept]
        assert service.feed.read(taken["cursor"]).notices == []


def test_a_consumer_killed_mid_feed_resumes_from_its_committed_cursor(
    settings: Settings, where: list[str]
) -> None:
    with MemoryService(settings) as service:
        service.subscribers.add("crm", ["acme"], added_by="ops")
        alice = service.for_principal(ALICE)
        alice.remember_many([fact(f"note_{i}", f"value {i}") for i in range(30)])
        expected = {n.event_id for n in _all(service)}
    consumer = textwrap.dedent(f"""
        import json, os, signal, sys
        from memory_ledger.api import MemoryService
        from memory_ledger.config import Settings
        settings = Settings.resolve(*{_location(settings)!r})
        with MemoryService(settings) as service:
            feed = service.feed
            seen = 0
            for notice in feed.subscribe(feed.committed("crm"), subscriber="crm", timeout=1):
                print(notice.event_id, flush=True)   # processed ...
                seen += 1
                if seen == int(sys.argv[1]):
                    os.kill(os.getpid(), signal.SIGKILL)   # ... killed before committing
                feed.commit("crm", notice.cursor)
    """)
    first = subprocess.run([sys.executable, "-c", consumer, "25"], capture_output=True, text=True)
    assert first.returncode == -9, first.stderr
    second = subprocess.run([sys.executable, "-c", consumer, "0"], capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    got = first.stdout.split() + second.stdout.split()
    assert set(got) == expected  # every notice, at least once
    assert len(got) == len(expected) + 1  # the one in flight at the kill, twice


def test_the_feed_and_subscriber_commands(service: MemoryService, where: list[str]) -> None:
    code, output = cli("subscribers", "add", "crm", "-n", "acme/alice", *where, "--json")
    assert code == 0 and json.loads(output)["store"] == "subscriber:crm"
    code, output = cli("stores", *where, "--json")
    assert "subscriber:crm" in output
    alice = service.for_principal(ALICE)
    report = alice.forget(alice.remember(fact("city", "Hangzhou")).item_id)
    code, output = cli("feed", *where, "--json")
    lines = [json.loads(line) for line in output.splitlines()]
    assert code == 0 and [n["type"] for n in lines][-2:] == ["item_erased", "summary_rebuilt"]
    assert all("cursor" in n for n in lines) and "Hangzhou" not in output
    code, output = cli("feed", "--after", lines[-1]["cursor"], *where, "--json")
    assert code == 0 and output.strip() == ""
    code, output = cli("feed", "--after", "ep0.1.0", *where)
    assert code == 11 and "Resynchronise" in output and "Traceback" not in output
    code, output = cli("subscribers", "list", *where, "--json")
    assert json.loads(output)["subscribers"][0]["pending"] == [report.request_id]
    code, output = cli("ack", "crm", report.request_id, *where, "--json")
    assert code == 0 and json.loads(output)["status"] == "completed"
    code, output = cli("subscribers", "retire", "crm", *where, "--json")
    assert code == 0 and json.loads(output)["acks_ended"] == []
    code, output = cli("ack", "crm", report.request_id, *where)
    assert code == 5 and "no subscriber" in output


@pytest.mark.parametrize("backend", ["postgresql"])
def test_postgresql_wakes_a_waiting_consumer_with_notify(service: MemoryService) -> None:
    """LISTEN/NOTIFY: the trigger notifies on every append, and a waiting consumer is
    woken by it (a writer in another process)."""
    import psycopg

    cursor = service.feed.head()
    woke: list[str] = []

    def consume() -> None:
        for notice in service.feed.subscribe(cursor, timeout=60):
            woke.append(notice.type)
            return

    waiting = threading.Thread(target=consume)
    waiting.start()
    pg = service.settings.postgres
    assert pg is not None
    with psycopg.connect(
        f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}", autocommit=True
    ) as listener:
        listener.execute(f'LISTEN "memory_ledger_feed_{pg.schema}"')
        writer = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from factories import fact
            from memory_ledger.api import MemoryService
            from memory_ledger.config import Settings
            from memory_ledger.principal import Principal
            with MemoryService(Settings.resolve(*{_location(service.settings)!r})) as s:
                s.for_principal(Principal("acme", "alice")).remember(fact("city", "Hangzhou"))
        """)
        done = subprocess.run([sys.executable, "-c", writer], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        notified = list(listener.notifies(timeout=30, stop_after=1))
    waiting.join(60)
    assert notified and notified[0].channel == f"memory_ledger_feed_{pg.schema}"
    assert woke == ["memory_recorded"]


def _location(settings: Settings) -> list[str | None]:
    where = cli_location(settings)
    url = where[where.index("--url") + 1] if "--url" in where else None
    return [str(settings.data_dir), url]


@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_forget_completes_only_when_every_hosts_vector_index_dropped_the_vectors(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two hosts (two data directories, so two vector indexes) on one database: the
    forget waits for the other host, named, until its catch-up dropped the vectors."""
    from memory_ledger.crypto import MASTER_KEY_ENV, MasterKey
    from memory_ledger.jobs.projection_catchup import catch_up_all

    master = MasterKey.generate()  # every host of a deployment has the master key
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(master.material).decode())
    other = Settings(tmp_path / "host-b", settings.postgres)

    def other_host_catches_up() -> None:  # another process, with its own data directory
        where = cli_location(other)
        code, output = cli("jobs", "run-once", "projection-catchup", *where, "--json")
        assert code == 0, output

    with MemoryService(reread(settings)) as here:
        alice = here.for_principal(ALICE)
        secret = alice.remember(fact("locker", "code 4471")).item_id
        alice.remember(fact("city", "Hangzhou"))
        catch_up_all(here.job_context)  # this host's index holds vectors: it registers
        other_host_catches_up()  # the other's too
        hosts = sorted(s.name for s in here.subscribers.active() if s.every_namespace)
        [theirs] = [h for h in hosts if h != here.subscribers.local]
        assert len(hosts) == 2
        report = alice.forget(secret)
        assert report.status == "partial" and report.failed_stores == [f"subscriber:{theirs}"]
        own = f"subscriber:{here.subscribers.local}"
        assert [r.action for r in report.receipts if r.store == own] == ["dropped_here"]
        code, output = cli("requests", *cli_location(settings), "--json")
        [row] = [r for r in json.loads(output) if r["request_id"] == report.request_id]
        waiting = [w["subscriber"] for w in row["waiting_for"]]
        assert code == 0 and waiting == [theirs]  # named, while it has not caught up
        other_host_catches_up()  # it drops the vectors, and acknowledges
        assert here.ledger.latest_status(report.request_id) == "completed"
    with MemoryService(other) as there:
        assert there.stores.get("vector_index").verify_absent([secret]).absent


def test_projection_runners_in_their_own_processes_acknowledge_like_subscribers(
    settings: Settings, where: list[str]
) -> None:
    """`run --projection NAME`, one process per projection, side by side: each tracks
    its own position, registers, and a forget waits for each to pass its tombstones."""
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        secret = alice.remember(fact("locker", "code 4471")).item_id
    runners = [
        subprocess.Popen(
            [sys.executable, "-m", "memory_ledger.cli", "run", "--projection", name,
             "--interval", "0.2", "--duration", "8", *where],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        for name in ("facts", "catalog")
    ]  # fmt: skip
    try:
        with MemoryService(settings) as service:
            deadline = time.monotonic() + 30
            names: set[str] = set()
            while names != {"runner-facts", "runner-catalog"} and time.monotonic() < deadline:
                names = {s.name for s in service.subscribers.active()} & {
                    "runner-facts",
                    "runner-catalog",
                }
                time.sleep(0.1)
            assert names == {"runner-facts", "runner-catalog"}
            report = service.for_principal(ALICE).forget(secret)
            # Partial until both runners' next ticks passed the tombstone (here the forget
            # itself caught the tables up, so both acknowledge at their next tick).
            while service.ledger.latest_status(report.request_id) != "completed":
                assert time.monotonic() < deadline, service.requests.report(report.request_id)
                time.sleep(0.1)
            acks = [e for e in service.ledger.entries(report.request_id) if e.entry_type == "ack"]
            assert {a.payload["subscriber"] for a in acks} >= {"runner-facts", "runner-catalog"}
    finally:
        for runner in runners:
            runner.wait(30)
    assert [r.returncode for r in runners] == [0, 0], [r.stderr.read() for r in runners]


def test_three_subscribers_acknowledging_at_once_complete_the_request(
    service: MemoryService, where: list[str]
) -> None:
    """Concurrent acks: each retry reads the acks written so far, and the one writing
    last may have read before the others were in; the request still ends completed."""
    names = ["crm", "search", "cache"]
    for name in names:
        service.subscribers.add(name, ["acme/alice"], added_by="ops")
    alice = service.for_principal(ALICE)
    report = alice.forget(alice.remember(fact("city", "Hangzhou")).item_id)
    assert sorted(report.failed_stores) == sorted(f"subscriber:{n}" for n in names)
    acks = [
        subprocess.Popen(
            [sys.executable, "-m", "memory_ledger.cli", "ack", name, report.request_id, *where],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name in names
    ]
    assert [a.wait(60) for a in acks] == [0, 0, 0], [a.stderr.read() for a in acks]
    assert service.ledger.latest_status(report.request_id) == "completed"
    kinds = [e.entry_type for e in service.ledger.entries(report.request_id)]
    assert kinds.count("ack") == 3
