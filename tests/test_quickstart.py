"""The HTTP quick starts of README.md and docs/user-guide.md run as printed.

The shell blocks that follow a `<!-- quickstart -->` line are taken from the page, in
order, and run as one bash script in an empty folder, with nothing changed but the
environment: `memory-ledger` found on the PATH (this interpreter's scripts folder
first), `PORT` set to a free port (the blocks default to 8765), and no inherited
`MEMORY_LEDGER_` settings. Each curl call's output is checked, and so is what the
server printed while it ran (startup, one line per request, goodbye)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memory_ledger.http.instance import INSTANCE_FILE, Instance, write
from memory_ledger.http.local import free_port

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- quickstart -->"
_BLOCK = re.compile(r"^<!-- quickstart -->\n```(?:bash|sh)\n(.*?)^```", re.DOTALL | re.MULTILINE)
#: The script's own limit: it waits for the server, so a broken one must not hang here.
#: Minutes: a loaded machine takes long to start interpreters, and only a hang is caught.
TIMEOUT = 30 * 60


def quickstart(page: str) -> str:
    """The quick start's commands on `page`, as one script, exactly as printed."""
    text = (ROOT / page).read_text(encoding="utf-8")
    blocks = _BLOCK.findall(text)
    assert blocks, f"{page} has no {MARKER} block"
    assert len(blocks) == text.count(MARKER), f"a {MARKER} in {page} is not before a bash block"
    return "".join(blocks)


def run_quickstart(page: str, folder: Path) -> tuple[list[str], str]:
    """Run `page`'s quick start in `folder`: the lines it printed, and the server's
    stderr (the script ends by stopping the server)."""
    script = quickstart(page)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    scripts = Path(sys.executable).parent  # where pip put `memory-ledger`
    assert (scripts / "memory-ledger").exists(), "install the package first (pip install -e .)"
    env["PATH"] = f"{scripts}{os.pathsep}{env.get('PATH', '')}"
    env["PORT"] = str(free_port())
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the server is in this group: stopped whatever happens
    )
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{page}'s quick start did not finish:\n{out}\n{err}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)  # a server left behind by a failure
    assert process.returncode == 0, f"{page}'s quick start failed:\n{out}\n{err}"
    return out.strip().split("\n"), err


def check_server_output(err: str, calls: list[tuple[str, str, int]]) -> None:
    """The server said where it listens, logged each call (never its token or content)
    and said goodbye."""
    assert re.search(r"serving on http://127\.0\.0\.1:\d+ ", err), err
    assert "store: SQLite data directory" in err and "/data" in err
    assert "tokens: 1 can call it" in err
    for method, route, status in calls:
        assert re.search(rf"Z {method} {re.escape(route)} {status} \d+\.\d ms$", err, re.M), (
            method,
            route,
            err,
        )
    assert "Goodbye." in err.strip().splitlines()[-1]
    assert "mlt_" not in err  # no token
    assert "Haisong" not in err  # no content


@pytest.mark.slow
def test_the_readme_quick_start_runs_as_printed(tmp_path: Path) -> None:
    lines, err = run_quickstart("README.md", tmp_path)
    written = json.loads(lines[0])
    assert written["memories"][0]["kind"] == "fact" and written["memories"][0]["item_id"]
    context = json.loads(lines[1])
    assert "18 Haisong Road" in context["rendered"]
    assert len(lines) == 2
    assert (tmp_path / "data" / "access.sqlite").exists()  # the token's store: the server's
    check_server_output(err, [("POST", "/v1/memories", 201), ("POST", "/v1/context", 200)])


@pytest.mark.slow
def test_the_guides_http_quick_start_runs_as_printed(tmp_path: Path) -> None:
    lines, err = run_quickstart("docs/user-guide.md", tmp_path)
    assert len(lines) == 4, lines
    assert json.loads(lines[0])["memories"][0]["kind"] == "fact"
    assert "18 Haisong Road" in json.loads(lines[1])["rendered"]
    assert json.loads(lines[2])["status"] == "planned"
    assert lines[3] == "401"
    check_server_output(
        err,
        [
            ("GET", "/v1/health", 200),
            ("POST", "/v1/memories", 201),
            ("POST", "/v1/context", 200),
            ("POST", "/v1/forget-plans", 201),
            ("GET", "/v1/summary", 401),
        ],
    )


def test_the_quick_starts_name_one_store_for_the_token_and_the_server() -> None:
    """The bug this guards against: a token made in ./.memory-ledger, a server on ./data."""
    for page in ("README.md", "docs/user-guide.md"):
        script = quickstart(page)
        commands = [line for line in script.splitlines() if not line.startswith("#")]
        create = next(line for line in commands if "memory-ledger tokens create" in line)
        serve = next(line for line in commands if "memory-ledger serve" in line)
        store = re.search(r"--data-dir (\S+)", serve)
        assert store, f"{page}: serve names no store"
        assert f"--data-dir {store.group(1)}" in create, f"{page}: another store for the token"


class _Foreign(BaseHTTPRequestHandler):
    """Another server on the port: it answers /v1/health, as any memory-ledger does."""

    def do_GET(self) -> None:
        body = json.dumps({"status": "ok", "instance": self.server.instance}).encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _wait_condition(page: str) -> str:
    """The condition of the quick start's `until` loop that waits for the server."""
    loop = next(line for line in quickstart(page).splitlines() if line.startswith("until "))
    condition = re.fullmatch(r"until (.*); do sleep [0-9.]+; done.*", loop)
    assert condition, loop
    return condition.group(1)


@pytest.mark.parametrize("page", ["README.md", "docs/user-guide.md"])
def test_the_wait_loop_is_not_satisfied_by_another_server_on_the_port(
    page: str, tmp_path: Path
) -> None:
    """Its condition, evaluated once, against a server that answers health but is not
    the one serve.json names (and, so that it can pass at all, one that is)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Foreign)
    server.instance = "mli-" + "a" * 32  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {**os.environ, "BASE": f"http://127.0.0.1:{server.server_address[1]}"}

        def satisfied() -> bool:
            done = subprocess.run(["bash", "-c", _wait_condition(page)], cwd=tmp_path, env=env)
            return done.returncode == 0

        assert not satisfied()  # no serve.json yet: nothing of ours is up
        (tmp_path / "data").mkdir()
        write(tmp_path / "data" / INSTANCE_FILE, Instance.new("127.0.0.1", 1, "http://x"))
        assert not satisfied()  # our server's file, another server's answer
        stale = Instance.new("127.0.0.1", 1, "http://x")
        write(tmp_path / "data" / INSTANCE_FILE, replace(stale, instance=server.instance))  # type: ignore[attr-defined]
        assert satisfied()
    finally:
        server.shutdown()
        server.server_close()
