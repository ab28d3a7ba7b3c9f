"""A `memory-ledger serve` process on a free loopback port, for as long as a `with`
block lasts: what the HTTP tests and the HTTP benchmark run against (a real server
process, a real client), started and stopped one way."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx

from memory_ledger.http.instance import INSTANCE_FILE
from memory_ledger.http.instance import read as read_instance

#: How long to wait for the server to start before it is given up as hung: minutes,
#: since a new interpreter can take that long on a loaded machine. Waiting ends at once
#: when the process exits.
START_SECONDS = 30 * 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: How many free ports `serve_locally` tries when the server it started exits before it
#: listens: another process (a parallel test worker, say) can take a port between
#: `free_port()` closing its probe socket and the server binding it.
PORT_TRIES = 5


@contextmanager
def serve_locally(
    data_dir: Path, *, port: int | None = None, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """The server's base URL while it runs; it is stopped (and waited for) afterwards.
    `env` replaces the process's environment (default: this one's). Without `port`, a
    free one is chosen, and another is tried if the server cannot have it."""
    for attempt in range(1 if port else PORT_TRIES):
        chosen = port or free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "memory_ledger.cli", "serve", "--port", str(chosen),
             "--data-dir", str(data_dir)],
            env=dict(os.environ if env is None else env),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base = f"http://127.0.0.1:{chosen}"
        try:
            wait_for_own_server(base, data_dir / INSTANCE_FILE, process)
        except RuntimeError:
            process.terminate()
            process.wait(timeout=30)
            if port or attempt + 1 == PORT_TRIES:
                raise
            continue
        try:
            yield base
        finally:
            process.terminate()
            process.wait(timeout=30)
        return


def wait_for_own_server(base: str, instance_file: Path, process: subprocess.Popen[bytes]) -> None:
    """Wait until the server at `base` is the one `process` runs: its `/v1/health` names
    the instance its instance file names (another server on the port never does).
    Raises RuntimeError when the process exits first, or after START_SECONDS (hung)."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        started = read_instance(instance_file)
        if started is not None and started.pid == process.pid:
            try:
                answer = httpx.get(f"{base}/v1/health", timeout=10)
                if answer.status_code == 200 and answer.json().get("instance") == started.instance:
                    return
            except (httpx.HTTPError, ValueError):
                pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"memory-ledger serve did not start on {base}")
        time.sleep(0.1)
