"""Several processes on one PostgreSQL (issue 39, item 5): two `memory-ledger serve`
processes and a projection runner, each with its own data directory (own vector files,
own caches: they stand for different machines), on one database.

Server A writes and forgets; server B's reads are hammered from a thread pool the whole
time. A read whose request started after a forget's response returned must not hold the
erased value, whatever B has or has not caught up with: it counts as stale, and the test
asserts none. Then the runner and server B are killed with SIGKILL mid-load, more is
forgotten while they are down, and both are started again: nothing erased is served,
every live item is still readable, the projections catch up, and every forget request's
receipts end complete (B's and the runner's vector indexes acknowledged).

The figures the report quotes (reads before and after, stale reads, the lag from a
forget's response to B's first read without the item) are printed with `-s`.
"""

from __future__ import annotations

import base64
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import pytest
from waits import HUNG, until

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.feed.hosts import host_name
from memory_ledger.http.instance import INSTANCE_FILE
from memory_ledger.http.local import free_port, wait_for_own_server
from memory_ledger.times import now

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
ROOT = Path(__file__).resolve().parent.parent

ITEMS = 24  # written through server A at the start
ERASED_LIVE = 8  # forgotten through A while B serves
ERASED_DOWN = 3  # forgotten through A while B and the runner are dead
READS_AFTER_EACH = 6  # reads on B that start after each forget, before the next one
READERS = 4  # threads hammering B


@dataclass
class Process:
    """One process of the deployment, with its own data directory."""

    argv: list[str]
    data_dir: Path
    env: dict[str, str]
    port: int | None = None
    popen: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Process:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = list(self.argv)
        if argv[0] == "serve":
            self.port = free_port()
            argv += ["--port", str(self.port), "--log-level", "warning"]
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "memory_ledger.cli", *argv, "--data-dir", str(self.data_dir)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.data_dir / "stderr.log", "ab"),  # noqa: SIM115 (the child's)
        )
        if argv[0] == "serve":
            wait_for_own_server(self.base, self.data_dir / INSTANCE_FILE, self.popen)
        return self

    def kill(self) -> None:
        """SIGKILL: no handler, no cleanup, nothing flushed."""
        assert self.popen is not None
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=HUNG)
        assert self.popen.returncode == -signal.SIGKILL

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            self.popen.wait(timeout=HUNG)


@dataclass
class Read:
    started: float
    ended: float
    route: str
    body: str


@dataclass
class Hammer:
    """Reads on one server from a thread pool until stopped: get, list, context, summary
    of the namespace, round robin, each timed from before its request to after its answer."""

    base: str
    token: str
    item_ids: list[str]
    reads: list[Read] = field(default_factory=list)
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def routes(self, n: int) -> tuple[str, str, dict[str, object] | None]:
        which = n % 4
        if which == 0:
            return "GET", f"/v1/memories/{self.item_ids[n // 4 % len(self.item_ids)]}", None
        if which == 1:
            return "GET", "/v1/memories?limit=500", None
        if which == 2:
            query = {"query": "what is the code word", "limit": 50, "token_budget": 4000}
            return "POST", "/v1/context", query
        return "GET", "/v1/summary", None

    def worker(self, offset: int) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.base, headers=headers, timeout=HUNG) as client:
            n = offset
            while not self.stop.is_set():
                method, path, body = self.routes(n)
                n += READERS
                started = time.monotonic()
                try:
                    answer = client.request(method, path, json=body)
                except httpx.HTTPError:  # the server was killed under it
                    with self.lock:
                        self.failures += 1
                    continue
                ended = time.monotonic()
                if answer.status_code != 200:
                    with self.lock:
                        self.failures += 1
                    continue
                with self.lock:
                    self.reads.append(Read(started, ended, path, answer.text))

    def count(self, after: float = 0.0) -> int:
        with self.lock:
            return sum(1 for r in self.reads if r.started > after)

    def __enter__(self) -> Hammer:
        self.pool = ThreadPoolExecutor(READERS)
        self.futures = [self.pool.submit(self.worker, i) for i in range(READERS)]
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for future in self.futures:
            future.result(timeout=HUNG)
        self.pool.shutdown()


def _fact(n: int, marker: str) -> dict[str, object]:
    return {
        "kind": "fact", "subject": "user", "predicate": f"code_word_{n}",
        "value": f"the code word is {marker}", "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "multi-process-test", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1", "turn_id": f"t{n}"},
    }  # fmt: skip


def _stale(reads: list[Read], forgotten: dict[str, tuple[str, float]]) -> list[Read]:
    """Reads that started after an item's forget returned and still hold its value."""
    return [
        r
        for r in reads
        for marker, done in forgotten.values()
        if r.started > done and marker in r.body
    ]


def _first_clean_lag(reads: list[Read], marker: str, done: float) -> float:
    """Seconds from the forget's response to the end of B's first read, started after it,
    that no longer holds the value."""
    after = sorted((r for r in reads if r.started > done), key=lambda r: r.ended)
    return next(r.ended - done for r in after if marker not in r.body)


def _completed(base: str, auth: dict[str, str], request_id: str) -> bool:
    found = httpx.get(f"{base}/v1/forget-requests/{request_id}", headers=auth, timeout=HUNG)
    return bool(found.json()["status"] == "completed")


def _projections_behind(pg_url: str) -> int:
    """How far the furthest-behind projection is from the log's head, read from the
    database itself (opening a service here would catch them up)."""
    with psycopg.connect(pg_url) as conn:
        head = conn.execute(
            "SELECT coalesce(max(notification_id), 0) FROM memory_ledger_events"
        ).fetchone()
        rows = conn.execute("SELECT position FROM projection_tracking").fetchall()
    assert head is not None and rows
    return int(head[0]) - min(int(r[0]) for r in rows)


def test_two_servers_and_a_runner_never_serve_an_erased_value(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    master = base64.b64encode(secrets.token_bytes(32)).decode()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env.update(
        MEMORY_LEDGER_EMBEDDER="hashing",
        MEMORY_LEDGER_MASTER_KEY=master,
        MEMORY_LEDGER_URL=pg_url,
        PYTHONPATH=str(ROOT),
    )
    monkeypatch.setenv("MEMORY_LEDGER_MASTER_KEY", master)
    settings = Settings.resolve(tmp_path / "setup", pg_url)
    MemoryService(settings).close()  # the schema, made once before the processes start
    tokens = TokenStore(settings, now)
    token = tokens.create("acme/alice", "agent", ["forget"])[1]
    tokens.close()
    auth = {"Authorization": f"Bearer {token}"}

    a = Process(["serve"], tmp_path / "a", env).start()
    b = Process(["serve"], tmp_path / "b", env).start()
    runner = Process(["run", "--interval", "0.2"], tmp_path / "runner", env).start()
    try:
        markers = [secrets.token_hex(8) for _ in range(ITEMS)]
        answer = httpx.post(
            f"{a.base}/v1/memories",
            json=[_fact(n, m) for n, m in enumerate(markers)],
            headers=auth,
            timeout=HUNG,
        )
        assert answer.status_code == 201, answer.text
        ids = [m["item_id"] for m in answer.json()["memories"]]
        value_of = dict(zip(ids, markers, strict=True))
        forgotten: dict[str, tuple[str, float]] = {}  # item -> (marker, its forget's return)
        requests: list[str] = []

        def forget(item_id: str) -> None:
            scope = {"scope": {"kind": "item", "item_ids": [item_id]}}
            done = httpx.post(
                f"{a.base}/v1/forget-requests", json=scope, headers=auth, timeout=HUNG
            )
            assert done.status_code in (200, 202), done.text
            forgotten[item_id] = (value_of[item_id], time.monotonic())
            requests.append(done.json()["request_id"])

        host_b, host_runner = host_name(b.data_dir), host_name(runner.data_dir)

        def hosts_registered() -> bool:
            with MemoryService(settings) as service:
                names = {s.name for s in service.subscribers.active()}
            return {host_b, host_runner} <= names

        # -- the race: forgets on A while B is read --------------------------------------
        with Hammer(b.base, token, ids) as hammer:
            until(lambda: hammer.count() >= 4 * READERS, "reads on B before the forgets")
            # B's index holds vectors once it has built a context, the runner's once it
            # caught up: each registers, and every request from now on waits for both
            until(hosts_registered, "B and the runner to register as hosts")
            first_forget = time.monotonic()
            acked: list[float] = []  # a forget's response -> its request completed
            for item_id in ids[:ERASED_LIVE]:
                forget(item_id)
                returned = forgotten[item_id][1]
                until(lambda r=requests[-1]: _completed(a.base, auth, r), "the hosts' acks")
                acked.append(time.monotonic() - returned)
                until(lambda t=returned: hammer.count(t) >= READS_AFTER_EACH, "reads after it")
        reads = hammer.reads
        stale = _stale(reads, forgotten)
        before = sum(1 for r in reads if r.started < first_forget)
        after = sum(1 for r in reads if r.started > first_forget)
        lags = sorted(_first_clean_lag(reads, m, t) for m, t in forgotten.values())
        print(
            f"\nrace: {len(reads)} reads on B ({before} started before the first forget, "
            f"{after} after), {len(forgotten)} forgets on A, stale reads {len(stale)}, "
            f"failed reads {hammer.failures}; lag from a forget's response to B's first read "
            f"without the item: median {lags[len(lags) // 2] * 1000:.1f} ms, "
            f"max {lags[-1] * 1000:.1f} ms; to the request completed (B's and the runner's "
            f"acks): median {sorted(acked)[len(acked) // 2] * 1000:.0f} ms, "
            f"max {max(acked) * 1000:.0f} ms"
        )
        assert before > 0 and after >= ERASED_LIVE * READS_AFTER_EACH
        assert stale == [], [(r.route, r.started) for r in stale[:5]]

        # -- kill -9 of the runner and of B, mid-load ------------------------------------
        with Hammer(b.base, token, ids) as hammer:
            until(lambda: hammer.count() >= 2 * READERS, "reads on B before the kill")
            runner.kill()
            more = [secrets.token_hex(8) for _ in range(2)]
            written = httpx.post(
                f"{a.base}/v1/memories",
                json=[_fact(ITEMS + n, m) for n, m in enumerate(more)],
                headers=auth,
                timeout=HUNG,
            )
            assert written.status_code == 201, written.text
            new_ids = [m["item_id"] for m in written.json()["memories"]]
            value_of.update(zip(new_ids, more, strict=True))
            b.kill()
        down_from = len(hammer.reads)
        assert hammer.failures > 0 or down_from > 0
        for item_id in [*ids[ERASED_LIVE : ERASED_LIVE + ERASED_DOWN - 1], new_ids[0]]:
            forget(item_id)  # while B and the runner are down
        b.start()
        runner.start()

        # -- after the restart: nothing erased served, every live item readable ----------
        live = [i for i in value_of if i not in forgotten]
        with Hammer(b.base, token, [*ids, *new_ids]) as hammer:
            until(lambda: hammer.count() >= 8 * READERS, "reads on B after the restart")
        assert hammer.reads and _stale(hammer.reads, forgotten) == []
        with httpx.Client(base_url=b.base, headers=auth, timeout=HUNG) as client:
            for item_id in live:
                got = client.get(f"/v1/memories/{item_id}").json()
                assert got["text"] == f"the code word is {value_of[item_id]}", got
            for item_id in forgotten:
                got = client.get(f"/v1/memories/{item_id}").json()
                assert got["erased"] is True and got["text"] is None
            listed = client.get("/v1/memories?limit=500").text
            assert all(value_of[i] in listed for i in live)
            assert not any(marker in listed for marker, _ in forgotten.values())

        # -- the projections catch up, and every request's receipts end complete ---------
        until(lambda: _projections_behind(pg_url) == 0, "the runner to catch the projections up")

        until(
            lambda: all(_completed(b.base, auth, r) for r in requests),
            "every forget request to complete",
        )
        with MemoryService(settings) as service:
            for request_id in requests:  # a copy on each host: B's and the runner's acked
                report = service.operations.requests.report(request_id)
                assert report.completed and report.failed_stores == []
                last = {r.store: r for r in report.receipts}  # each store's latest attempt
                assert all(r.status == "ok" for r in last.values()), report.receipts
                hosts = {r.store.removeprefix("subscriber:") for r in report.receipts}
                assert {host_b, host_runner} <= hosts, (request_id, hosts)
    finally:
        for process in (a, b, runner):
            process.stop()
