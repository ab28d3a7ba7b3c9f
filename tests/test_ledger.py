"""The lifecycle ledger: append-only, hash-chained, and structurally free of memory content.

Every test taking `settings` runs on SQLite and on PostgreSQL. Tampering tests go around
the ledger's API with a direct connection and switch the append-only triggers off first,
as a privileged attacker would; `verify` must still name the first bad entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from waits import HUNG

from memory_ledger.config import Settings
from memory_ledger.errors import BackendUnavailable, InvalidWrite
from memory_ledger.ledger import (
    GENESIS_HASH,
    LEDGER_FILE,
    EntryType,
    LifecycleLedger,
    entry_hash,
)

ADDRESS = "18 Haisong Road"
MEMORY_TEXT = f"Alice moved to {ADDRESS}, Hangzhou, in March"
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"])  # server files cannot be scanned


@pytest.fixture
def ledger(settings: Settings) -> Iterator[LifecycleLedger]:
    with LifecycleLedger(settings) as opened:
        yield opened


def request(item_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "namespace": "acme/alice",
        "scope": {"kind": "item", "item_ids": [item_id]},
        "requested_by": "alice",
        **extra,
    }


def receipt(store: str = "facts", **extra: Any) -> dict[str, Any]:
    return {"store": store, "action": "purged", "targets": 1, "status": "ok", **extra}


def record_erasure(ledger: LifecycleLedger, request_id: str, item_id: str) -> None:
    """A whole request about one item: six entries, ids and codes only."""
    ledger.append(request_id, "request", request(item_id))
    ledger.append(request_id, "resolved", {"targets": [item_id], "counts": {"facts": 1}})
    ledger.append(request_id, "tombstone", {"item_id": item_id, "position": 7})
    ledger.append(request_id, "receipt", receipt("event_log", evidence={"new_tombstones": 1}))
    ledger.append(request_id, "receipt", receipt(evidence=["rows_absent", "vacuumed"]))
    ledger.append(request_id, "status", {"status": "completed"})


@contextmanager
def direct(settings: Settings) -> Iterator[tuple[Any, str]]:
    """A plain connection to the ledger's table, past the ledger's API."""
    if settings.postgres is None:
        conn = sqlite3.connect(settings.data_dir / LEDGER_FILE, isolation_level=None)
        try:
            yield conn, "ledger_entries"
        finally:
            conn.close()
    else:
        with settings._pg_connect() as conn:
            yield conn, f'"{settings.postgres.schema}_ledger".ledger_entries'


def run(conn: Any, sql: str, params: tuple[Any, ...] = ()) -> Any:
    if isinstance(conn, psycopg.Connection):
        sql = sql.replace("?", "%s")
    return conn.execute(sql, params)


def switch_off_append_only(conn: Any, table: str) -> None:
    if isinstance(conn, psycopg.Connection):
        conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        return
    query = "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?"
    for (name,) in conn.execute(query, (table,)).fetchall():
        conn.execute(f'DROP TRIGGER "{name}"')


# -- appending and reading ----------------------------------------------------------------


def test_append_and_read_back_per_request(ledger: LifecycleLedger) -> None:
    first, second = str(uuid.uuid4()), uuid.uuid4()
    returned = ledger.append("req-1", EntryType.REQUEST, request(first))
    ledger.append("req-2", "request", request(second.hex, dry_run=True))  # hex form accepted
    ledger.append("req-1", "resolved", {"targets": [first], "cascaded": []})
    ledger.append("req-2", "status", {"status": "dry_run"})
    ledger.append("req-1", "status", {"status": "pending"})
    ledger.append("req-1", "status", {"status": "partial", "failed_stores": ["vector_index"]})

    mine = ledger.entries("req-1")
    assert [e.entry_type for e in mine] == ["request", "resolved", "status", "status"]
    assert [e.seq for e in mine] == [1, 3, 5, 6]
    assert mine[0] == returned
    assert mine[1].payload == {"targets": [first], "cascaded": []}
    assert [e.seq for e in ledger.entries()] == [1, 2, 3, 4, 5, 6]
    assert ledger.request_ids() == ["req-1", "req-2"]
    assert ledger.latest_status("req-1") == "partial"
    assert ledger.latest_status("req-2") == "dry_run"
    assert ledger.latest_status("req-unknown") is None
    assert ledger.entries("req-unknown") == []

    stored = ledger.entries("req-2")[0]
    assert stored.payload["scope"]["item_ids"] == [str(second)]  # one canonical UUID form
    assert stored.payload["dry_run"] is True
    assert stored.recorded_at.endswith("Z") and len(stored.recorded_at) == 27
    with pytest.raises(dataclasses.FrozenInstanceError):
        stored.seq = 99  # type: ignore[misc]
    stored.payload["dry_run"] = False  # a copy: the entry itself cannot change
    assert stored.payload["dry_run"] is True


def test_payloads_are_stored_in_one_canonical_form(ledger: LifecycleLedger) -> None:
    scope = {"kind": "time_range", "since": "2026-11-01T10:00:00+01:00"}
    entry = ledger.append("req-1", "request", request("x", scope=scope))
    assert entry.payload_json == (
        '{"basis":"user_request","dry_run":false,"namespace":"acme/alice",'
        '"requested_by":"alice","scope":{"kind":"time_range",'
        '"since":"2026-11-01T09:00:00.000000Z"}}'
    )


def test_scope_parameters_must_fit_the_kind(ledger: LifecycleLedger) -> None:
    for scope in (
        {"kind": "predicate", "subject": "user"},  # predicate missing
        {"kind": "item", "item_ids": [str(uuid.uuid4())], "subject": "user"},  # widened
        {"kind": "category"},
        {"kind": "namespace", "category": "health"},
        {"kind": "time_range", "since": "2026-11-01T10:00:00"},  # no timezone
    ):
        with pytest.raises(InvalidWrite):
            ledger.append("req-1", "request", request("x", scope=scope))
    ledger.append("req-1", "request", request("x", scope={"kind": "namespace"}))
    with pytest.raises(InvalidWrite, match="failed stores"):
        ledger.append("req-1", "status", {"status": "partial"})
    assert len(ledger.entries()) == 1


def test_a_request_is_filed_before_anything_about_it(ledger: LifecycleLedger) -> None:
    item = str(uuid.uuid4())
    with pytest.raises(InvalidWrite, match="request entry comes first"):
        ledger.append("req-1", "receipt", receipt())
    ledger.append("req-1", "request", request(item, request_id="req-1"))
    with pytest.raises(InvalidWrite, match="already recorded"):
        ledger.append("req-1", "request", request(item))
    with pytest.raises(InvalidWrite, match="differs"):
        ledger.append("req-2", "request", request(item, request_id="req-1"))
    assert len(ledger.entries()) == 1


# -- the chain -----------------------------------------------------------------------------


def test_chain_links_every_entry_and_verifies(ledger: LifecycleLedger) -> None:
    record_erasure(ledger, "req-1", str(uuid.uuid4()))
    record_erasure(ledger, "req-2", str(uuid.uuid4()))
    entries = ledger.entries()
    prev = "0" * 64
    for seq, entry in enumerate(entries, start=1):
        text = "\n".join(
            [
                prev,
                str(seq),
                entry.request_id,
                entry.entry_type,
                entry.recorded_at,
                entry.payload_json,
            ]
        )
        assert entry.seq == seq and entry.prev_hash == prev
        assert entry.entry_hash == hashlib.sha256(text.encode()).hexdigest()
        prev = entry.entry_hash
    result = ledger.verify()
    assert result.ok and result.entries_checked == 12 and result.reason is None
    assert (result.head_seq, result.head_hash) == (12, entries[-1].entry_hash)
    assert ledger.verify(anchor=(5, entries[4].entry_hash)).ok


def test_an_empty_ledger_verifies(ledger: LifecycleLedger) -> None:
    result = ledger.verify()
    assert result.ok and result.entries_checked == 0 and result.head_hash == GENESIS_HASH
    assert ledger.verify(anchor=(result.head_seq, result.head_hash)).ok


def _rehashed_free_text_row(conn: Any, table: str) -> None:
    # A forger who knows the hash rule appends a well-linked row holding content.
    seq, prev = run(conn, f"SELECT seq, entry_hash FROM {table} ORDER BY seq DESC").fetchone()
    payload = f'{{"status":"{ADDRESS}"}}'
    at = "2026-11-01T09:00:00.000000Z"
    digest = entry_hash(prev, seq + 1, "req-1", "status", at, payload)
    run(
        conn,
        f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?)",
        (seq + 1, "req-1", "status", payload, at, prev, digest),
    )


TAMPERING = {
    "payload": (
        lambda c, t: run(c, f"UPDATE {t} SET payload = replace(payload, '7', '8') WHERE seq = 3"),
        3,
        "entry_hash_mismatch",
    ),
    "entry_hash": (
        lambda c, t: run(c, f"UPDATE {t} SET entry_hash = ? WHERE seq = 3", ("f" * 64,)),
        3,
        "entry_hash_mismatch",
    ),
    "delete_middle_row": (
        lambda c, t: run(c, f"DELETE FROM {t} WHERE seq = 3"),
        3,
        "seq_gap",
    ),
    "swap_two_rows": (
        lambda c, t: [
            run(c, f"UPDATE {t} SET seq = -1 WHERE seq = 2"),
            run(c, f"UPDATE {t} SET seq = 2 WHERE seq = 4"),
            run(c, f"UPDATE {t} SET seq = 4 WHERE seq = -1"),
        ],
        2,
        "prev_hash_mismatch",
    ),
    "forged_prev_hash": (
        lambda c, t: run(c, f"UPDATE {t} SET prev_hash = ? WHERE seq = 4", ("0" * 64,)),
        4,
        "prev_hash_mismatch",
    ),
    "rehashed_free_text_row": (_rehashed_free_text_row, 7, "invalid_entry"),
}


@pytest.mark.parametrize("tampering", list(TAMPERING))
def test_verify_names_the_first_tampered_entry(
    ledger: LifecycleLedger, settings: Settings, tampering: str
) -> None:
    record_erasure(ledger, "req-1", str(uuid.uuid4()))
    assert ledger.verify().ok
    tamper, bad_seq, reason = TAMPERING[tampering]
    with direct(settings) as (conn, table):
        switch_off_append_only(conn, table)
        tamper(conn, table)
    result = ledger.verify()
    assert not result.ok
    assert (result.first_bad_seq, result.reason) == (bad_seq, reason)
    assert result.entries_checked == result.head_seq == bad_seq - 1
    assert f"seq {bad_seq}" in result.explanation


def test_removing_the_newest_entries_shows_against_an_anchor(
    ledger: LifecycleLedger, settings: Settings
) -> None:
    record_erasure(ledger, "req-1", str(uuid.uuid4()))
    before = ledger.verify()
    with direct(settings) as (conn, table):
        switch_off_append_only(conn, table)
        run(conn, f"DELETE FROM {table} WHERE seq >= 5")
    assert ledger.verify().ok  # a shorter chain is still a chain...
    result = ledger.verify(anchor=(before.head_seq, before.head_hash))
    assert (result.ok, result.first_bad_seq, result.reason) == (False, 6, "truncated")


@pytest.mark.parametrize(
    "anchor",
    [("x", "y"), (-1, "0" * 64), (True, "0" * 64), (3, "0" * 63), (3, "g" * 64), (3,), "3:abc"],
    ids=["strings", "negative", "bool", "short-hash", "not-hex", "one-part", "a-string"],
)
def test_a_malformed_anchor_is_refused_not_reported_as_truncated(
    ledger: LifecycleLedger, anchor: Any
) -> None:
    record_erasure(ledger, "req-1", str(uuid.uuid4()))
    with pytest.raises(InvalidWrite, match="anchor"):
        ledger.verify(anchor=anchor)
    head = ledger.verify()
    upper = ledger.verify(anchor=(head.head_seq, head.head_hash.upper()))
    assert upper.ok  # the hash's hex digits in either case


def test_the_database_refuses_changes_to_entries(
    ledger: LifecycleLedger, settings: Settings
) -> None:
    record_erasure(ledger, "req-1", str(uuid.uuid4()))
    before = ledger.entries()
    refused = (sqlite3.Error, psycopg.Error)
    with direct(settings) as (conn, table):
        with pytest.raises(refused, match="append-only"):
            run(conn, f"UPDATE {table} SET payload = '{{}}' WHERE seq = 2")
        with pytest.raises(refused, match="append-only"):
            run(conn, f"DELETE FROM {table} WHERE seq = 2")
        with pytest.raises(refused, match="extend the chain"):  # a row out of sequence
            run(
                conn,
                f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?)",
                (99, "req-1", "status", "{}", "t", before[-1].entry_hash, "h"),
            )
        if settings.postgres is None:
            with pytest.raises(refused, match="extend the chain"):  # REPLACE deletes silently
                run(
                    conn,
                    f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (2, "req-1", "status", "{}", "t", GENESIS_HASH, "h"),
                )
        else:
            with pytest.raises(refused, match="append-only"):
                run(conn, f"TRUNCATE {table}")
    assert ledger.entries() == before
    assert ledger.verify().ok


# -- no content, structurally --------------------------------------------------------------

FREE_TEXT = [
    ("request", request("x", scope={"kind": "predicate", "subject": ADDRESS, "predicate": "a"})),
    ("request", request("x", scope={"kind": "source", "turn_id": MEMORY_TEXT})),
    ("request", request("x", scope={"kind": "item", "item_ids": [ADDRESS]})),
    ("request", request("x", scope={"kind": "namespace", "address": ADDRESS})),
    ("request", request("x", note=ADDRESS)),
    ("request", request("x", requested_by=ADDRESS)),
    ("request", request("x", namespace=ADDRESS)),
    # An unkeyed hash of the content is refused too: it is confirmed by guessing.
    ("request", request("x", scope={"kind": "category", "category": "a-" + "ab12" * 16})),
    ("resolved", {"targets": [ADDRESS]}),
    ("resolved", {"targets": [], "counts": {ADDRESS: 1}}),
    ("needs_clarification", {"candidates": [MEMORY_TEXT]}),
    ("tombstone", {"item_id": str(uuid.uuid4()), "position": 3, "value": ADDRESS}),
    ("receipt", receipt(evidence=[ADDRESS])),
    ("receipt", receipt(evidence={"matched": ADDRESS})),
    ("receipt", receipt(evidence={ADDRESS: True})),
    ("receipt", receipt(evidence={"sha256": hashlib.sha256(ADDRESS.encode()).hexdigest()})),
    ("receipt", receipt(action=MEMORY_TEXT)),
    ("status", {"status": "partial", "failed_stores": [ADDRESS]}),
    ("status", {"status": ADDRESS}),
    ("refusal", {"reason": MEMORY_TEXT}),
    ("note", {"text": MEMORY_TEXT}),
]


def test_several_entries_append_in_one_transaction(ledger: LifecycleLedger) -> None:
    item = str(uuid.uuid4())
    ledger.append("req-1", "request", request(item))
    written = ledger.append_many(
        "req-1", [("receipt", receipt()), ("status", {"status": "completed"})]
    )
    assert [e.seq for e in written] == [2, 3]
    assert written[1].prev_hash == written[0].entry_hash  # chained inside the batch
    assert ledger.verify().ok
    # One invalid entry refuses the whole batch: nothing of it is appended.
    with pytest.raises(InvalidWrite, match="nothing was appended"):
        ledger.append_many(
            "req-1", [("receipt", receipt()), ("status", {"status": "done, I promise"})]
        )
    with pytest.raises(InvalidWrite, match="first of its request"):
        ledger.append_many("req-2", [("request", request(item)), ("request", request(item))])
    assert len(ledger.entries()) == 3 and ledger.verify().ok


def test_free_text_is_refused_and_nothing_is_appended(
    ledger: LifecycleLedger, settings: Settings
) -> None:
    ledger.append("req-1", "request", request(str(uuid.uuid4())))
    for entry_type, payload in FREE_TEXT:
        with pytest.raises(InvalidWrite) as refused:
            ledger.append("req-1", entry_type, payload)
        said = str(refused.value) + " ".join(refused.value.problems)
        assert "Haisong" not in said and "nothing was appended" in said, entry_type
    with pytest.raises(InvalidWrite, match="request_id"):
        ledger.append(ADDRESS, "request", request(str(uuid.uuid4())))
    assert len(ledger.entries()) == 1
    assert ledger.verify().ok
    with direct(settings) as (conn, table):
        rows = run(conn, f"SELECT * FROM {table}").fetchall()
    assert "Haisong" not in repr(rows)


@SQLITE_ONLY
def test_ledger_files_never_hold_memory_text(settings: Settings) -> None:
    needles = [
        ADDRESS,
        "Haisong",
        MEMORY_TEXT,
        hashlib.sha256(ADDRESS.encode()).hexdigest(),
        hashlib.sha256(MEMORY_TEXT.encode()).hexdigest(),
    ]
    item = str(uuid.uuid4())  # the id of the memory that held MEMORY_TEXT
    ledger = LifecycleLedger(settings)
    record_erasure(ledger, "req-1", item)
    for entry_type, payload in FREE_TEXT:  # refused attempts leave no bytes behind either
        with pytest.raises(InvalidWrite):
            ledger.append("req-1", entry_type, payload)
    files = [settings.data_dir / LEDGER_FILE, settings.data_dir / f"{LEDGER_FILE}-wal"]
    assert all(p.exists() and p.stat().st_size > 0 for p in files)
    raw = b"".join(p.read_bytes() for p in files)
    assert item.encode() in raw  # the scan reads where the entries really are
    assert not [n for n in needles if n.encode() in raw]
    ledger.close()  # the checkpoint moves WAL frames into the main file
    raw = (settings.data_dir / LEDGER_FILE).read_bytes()
    assert item.encode() in raw
    assert not [n for n in needles if n.encode() in raw]


# -- storage -------------------------------------------------------------------------------

WORKER = """
import sys, time
from pathlib import Path
from memory_ledger.config import Settings
from memory_ledger.ledger import LifecycleLedger

def meet(name):  # wait until both workers got here
    Path(barrier, f"{name}-{request_id}").touch()
    while len(list(Path(barrier).glob(f"{name}-*"))) < 2:
        time.sleep(0.002)

data_dir, url, request_id, barrier = sys.argv[1:5]
meet("started")  # both create the ledger at once...
with LifecycleLedger(Settings.resolve(data_dir, url or None)) as ledger:
    meet("opened")  # ...and then append at once
    ledger.append(request_id, "request", {
        "namespace": "acme/alice", "scope": {"kind": "namespace"}, "requested_by": "alice",
    })
    for attempt in range(1, 50):
        time.sleep(0.001)  # other work between appends, as in a real fan-out
        ledger.append(request_id, "receipt", {
            "store": "facts", "action": "purged", "targets": 1, "status": "ok",
            "attempt": attempt,
        })
"""


def test_two_processes_appending_at_once_keep_one_chain(settings: Settings, tmp_path: Path) -> None:
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}" if pg else ""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(settings.data_dir), url, name, str(barrier)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("req-a", "req-b")
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=HUNG)
        assert worker.returncode == 0, stderr
    with LifecycleLedger(settings) as ledger:
        entries = ledger.entries()
        assert [e.seq for e in entries] == list(range(1, 101))
        owners = [e.request_id for e in entries]
        assert sum(a != b for a, b in itertools.pairwise(owners)) > 2  # they really interleaved
        for name in ("req-a", "req-b"):
            attempts = [e.payload["attempt"] for e in ledger.entries(name)[1:]]
            assert attempts == list(range(1, 50))
        result = ledger.verify()
        assert result.ok and result.entries_checked == 100


def test_the_ledger_is_a_store_of_its_own(ledger: LifecycleLedger, settings: Settings) -> None:
    record_erasure(ledger, "req-1", str(uuid.uuid4()))
    if settings.postgres is None:
        path = settings.data_dir / LEDGER_FILE
        assert ledger.location == str(path)
        assert path not in (settings.events_path, settings.projections_path)
        names = {p.name for p in settings.data_dir.iterdir()}
        assert names <= {LEDGER_FILE, f"{LEDGER_FILE}-wal", f"{LEDGER_FILE}-shm"}
        return
    schema = settings.postgres.schema
    with settings._pg_connect() as conn:
        found = conn.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = %s",
            ("ledger_entries",),
        ).fetchall()
    assert found == [(f"{schema}_ledger",)]
    assert ledger.location.endswith(f"(schema {schema}_ledger)")


def test_an_explicit_ledger_url_wins(settings: Settings, tmp_path: Path) -> None:
    if settings.postgres is None:
        elsewhere = tmp_path / "audit"
        with LifecycleLedger(settings, str(elsewhere)) as ledger:
            ledger.append("req-1", "request", request(str(uuid.uuid4())))
            assert ledger.location == str(elsewhere / LEDGER_FILE)
        assert (elsewhere / LEDGER_FILE).exists()
        assert not (settings.data_dir / LEDGER_FILE).exists()
        return
    pg = settings.postgres
    # trust auth ignores the password; it is here to be masked
    url = f"postgresql://{pg.user}:s3cret@{pg.host}:{pg.port}/{pg.dbname}?schema=audit"
    with LifecycleLedger(settings, url) as ledger:
        ledger.append("req-1", "request", request(str(uuid.uuid4())))
        assert "s3cret" not in ledger.location and "***" in ledger.location
        assert ledger.location.endswith("(schema audit_ledger)")
    with settings._pg_connect() as conn:
        rows = conn.execute('SELECT count(*) FROM "audit_ledger".ledger_entries').fetchone()
        assert rows == (1,)
        missing = conn.execute("SELECT to_regclass('public_ledger.ledger_entries')").fetchone()
        assert missing == (None,)


def test_an_unreachable_ledger_raises_backend_unavailable(tmp_path: Path) -> None:
    url = "postgresql://postgres:s3cret@127.0.0.1:1/nowhere"
    with pytest.raises(BackendUnavailable) as unreachable:
        LifecycleLedger(Settings.resolve(tmp_path / "data", url))
    message = str(unreachable.value)
    assert "postgres:***@127.0.0.1:1/nowhere" in message and "s3cret" not in message

    not_a_database = tmp_path / "broken"
    not_a_database.mkdir()
    (not_a_database / LEDGER_FILE).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BackendUnavailable, match=r"ledger\.sqlite"):
        LifecycleLedger(Settings.resolve(not_a_database))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(BackendUnavailable):
        LifecycleLedger(Settings.resolve(a_file))


def test_latest_statuses_in_one_query(settings: Settings) -> None:
    with LifecycleLedger(settings) as ledger:
        for rid, statuses in (("req-a", ["pending", "completed"]), ("req-b", ["pending"])):
            ledger.append(
                rid,
                "request",
                {
                    "namespace": "acme/alice",
                    "scope": {"kind": "namespace"},
                    "requested_by": "alice",
                },
            )
            for status in statuses:
                ledger.append(rid, "status", {"status": status})
        assert ledger.latest_statuses() == {"req-a": "completed", "req-b": "pending"}
        assert ledger.latest_status("req-b") == "pending"
