"""What `memory-ledger serve` prints, read from a real server process: where it listens,
the store (a database URL's password masked), its tokens, one access line per request
(no token, no body, no query string), and goodbye on SIGTERM or SIGINT; and what it
answers at `/` and `/docs` (the docs' assets from the server itself, no other host)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from waits import HUNG

from memory_ledger.access import TokenStore
from memory_ledger.cli.serve import store_text
from memory_ledger.config import Settings
from memory_ledger.http.access_log import route_of
from memory_ledger.http.instance import INSTANCE_FILE, Instance, remove_if_ours, write
from memory_ledger.http.instance import read as read_instance
from memory_ledger.http.local import START_SECONDS, free_port
from memory_ledger.times import now

ROOT = Path(__file__).resolve().parent.parent
SECRET = "Secret Street 9"


def _fact(value: str) -> dict[str, object]:
    return {
        "kind": "fact",
        "subject": "user",
        "predicate": "home_address",
        "value": value,
        "origin": "explicit",
        "sensitivity": "personal",
        "provenance": {
            "writer": "test",
            "written_at": "2026-12-01T09:00:00+00:00",
            "session_id": "s1",
            "turn_id": "t1",
        },
    }


class Served:
    """A server process and the file its stderr goes to."""

    def __init__(self, process: subprocess.Popen[bytes], base: str, log: Path) -> None:
        self.process, self.base, self.log = process, base, log

    def stop(self, sig: int = signal.SIGTERM) -> str:
        """Send `sig`, wait for the process to end (exit 0), and return what it printed."""
        self.process.send_signal(sig)
        assert self.process.wait(timeout=START_SECONDS) == 0  # catches a hang only
        return self.log.read_text(encoding="utf-8")


@contextmanager
def serving(data_dir: Path, *args: str) -> Iterator[Served]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env.update(MEMORY_LEDGER_EMBEDDER="hashing", PYTHONPATH=str(ROOT))
    port = free_port()
    log = data_dir.parent / f"serve-{port}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "memory_ledger.cli", "serve", "--port", str(port),
             "--data-dir", str(data_dir), *args],
            env=env, stdout=sink, stderr=sink,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while "serving on" not in log.read_text(encoding="utf-8"):
            assert process.poll() is None, log.read_text(encoding="utf-8")
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        yield Served(process, base, log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=HUNG)


def _token(data_dir: Path) -> str:
    store = TokenStore(Settings.resolve(data_dir), now)
    try:
        return store.create("acme/alice", "agent", ["forget"])[1]
    finally:
        store.close()


@pytest.mark.slow
def test_serve_prints_where_it_listens_each_request_and_goodbye(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    token = _token(data_dir)
    auth = {"Authorization": f"Bearer {token}"}
    with serving(data_dir) as server:
        base = server.base
        _assert_instance_file(data_dir / INSTANCE_FILE, server)
        written = httpx.post(f"{base}/v1/memories", json=_fact(SECRET), headers=auth)
        assert written.status_code == 201
        item_id = written.json()["memories"][0]["item_id"]
        assert httpx.get(f"{base}/v1/memories/{item_id}", headers=auth).status_code == 200
        listed = httpx.get(
            f"{base}/v1/memories", params={"predicate": "hidden_query"}, headers=auth
        )
        assert listed.status_code == 200
        assert httpx.post(f"{base}/v1/memories", json=_fact(SECRET)).status_code == 401
        assert httpx.get(f"{base}/no/such/path").status_code == 404
        printed = server.stop()
    assert not (data_dir / INSTANCE_FILE).exists()  # removed when it stopped
    lines = printed.strip().splitlines()
    assert lines[0] == f"memory-ledger 0.1.0 serving on {base} (API docs: {base}/docs)"
    assert lines[1] == f"  store: SQLite data directory {data_dir.resolve()}"
    assert lines[2] == "  tokens: 1 can call it"
    assert lines[3].startswith("  log: info, one line per request")
    access = [line for line in lines if re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ", line)]
    assert [line.split(" ")[1:4] for line in access] == [
        ["GET", "/v1/health", "200"],
        ["POST", "/v1/memories", "201"],
        ["GET", "/v1/memories/{item_id}", "200"],
        ["GET", "/v1/memories", "200"],
        ["POST", "/v1/memories", "401"],
        ["GET", "/no/such/path", "404"],
    ]
    assert all(re.search(r" \d+\.\d ms$", line) for line in access)
    assert lines[-2] == "memory-ledger: stopping (finishing the requests in flight)"
    assert lines[-1] == "memory-ledger: stopped after 6 requests. Goodbye."
    assert len(lines) == 4 + len(access) + 2  # nothing else: no traceback, no uvicorn chatter
    for never in (token, token.split("_")[1], SECRET, "Secret", "hidden_query", item_id, "?"):
        assert never not in printed


def _assert_instance_file(path: Path, server: Served) -> None:
    """The file names this process, where it listens, and the id its health answers."""
    found = read_instance(path)
    assert found is not None, path
    assert found.pid == server.process.pid and found.url == server.base
    assert found.port == int(server.base.rsplit(":", 1)[1])
    assert httpx.get(f"{server.base}/v1/health").json()["instance"] == found.instance


@pytest.mark.slow
def test_at_log_level_warning_there_is_no_access_log(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    elsewhere = tmp_path / "where" / "serve-here.json"
    elsewhere.parent.mkdir()
    with serving(data_dir, "--log-level", "warning", "--instance-file", str(elsewhere)) as server:
        _assert_instance_file(elsewhere, server)  # its health call is the one request
        assert not (data_dir / INSTANCE_FILE).exists()
        printed = server.stop(signal.SIGINT)
    assert not elsewhere.exists()
    lines = printed.strip().splitlines()
    assert lines[0].startswith("memory-ledger 0.1.0 serving on")
    assert lines[2] == "  tokens: 0 can call it (none yet: `memory-ledger tokens create`)"
    assert "/v1/health" not in printed and "log:" not in printed
    assert lines[-1] == "memory-ledger: stopped after 1 requests. Goodbye."
    assert "Traceback" not in printed and "KeyboardInterrupt" not in printed


@pytest.mark.slow
def test_the_root_points_the_way_and_the_docs_work_offline(tmp_path: Path) -> None:
    with serving(tmp_path / "data", "--log-level", "warning") as server:
        base = server.base
        root = httpx.get(f"{base}/")
        assert root.status_code == 200
        about = root.json()
        assert about["name"] == "memory-ledger" and about["version"] == "0.1.0"
        links = about["links"]
        assert {"docs", "openapi", "health", "compliance"} <= set(links)
        assert all(link.startswith("/") for link in links.values())
        assert httpx.get(f"{base}{links['health']}").status_code == 200
        assert httpx.get(f"{base}{links['openapi']}").status_code == 200
        page = httpx.get(f"{base}/", headers={"Accept": "text/html"})
        assert page.headers["content-type"].startswith("text/html")
        assert 'href="/docs"' in page.text
        for doc in ("/docs", "/redoc"):
            html = httpx.get(f"{base}{doc}")
            assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
            urls = re.findall(
                r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", html.text
            )
            referenced = {a or b for a, b in urls}
            assert referenced, html.text
            assert not re.search(r"https?://", html.text), html.text  # no other host
            for url in referenced:
                assert not urlsplit(url).netloc, url
                asset = httpx.get(f"{base}{url}")
                assert asset.status_code == 200, url
                assert asset.content, url
        server.stop()


def test_a_database_urls_password_is_never_printed() -> None:
    settings = Settings.resolve(None, "postgresql://ml:hunter2@db.internal:5433/memory")
    shown = store_text(settings)
    assert "hunter2" not in shown
    assert shown == "PostgreSQL postgresql://ml:***@db.internal:5433/memory"


def test_a_line_names_the_route_not_the_values_in_it() -> None:
    class Route:
        path = "/v1/memories/{item_id}"

    assert route_of({"route": Route(), "path": "/v1/memories/abc"}) == "/v1/memories/{item_id}"
    unmatched = route_of({"path": "/x/\x1b[31m" + "y" * 200})
    assert "\x1b" not in unmatched and "\\x1b" in unmatched
    assert len(unmatched) <= 100


def test_the_instance_file_is_removed_only_by_the_server_it_names(tmp_path: Path) -> None:
    path = tmp_path / INSTANCE_FILE
    first = Instance.new("127.0.0.1", 8765, "http://127.0.0.1:8765")
    second = Instance.new("127.0.0.1", 8766, "http://127.0.0.1:8766")
    assert first.instance != second.instance
    write(path, second)  # another server, same data directory, wrote it since
    remove_if_ours(path, first)
    assert read_instance(path) == second
    remove_if_ours(path, second)
    assert not path.exists()
    path.write_text("{not json", encoding="utf-8")
    assert read_instance(path) is None
