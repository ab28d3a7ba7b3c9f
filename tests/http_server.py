"""A real `memory-ledger serve` process on a free loopback port, for the HTTP tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(data_dir: Path) -> Iterator[str]:
    """The server's base URL while it runs; stopped (and waited for) afterwards."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env.update(MEMORY_LEDGER_EMBEDDER="hashing", PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_ledger.cli", "serve", "--port", str(port),
         "--data-dir", str(data_dir)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError("the server did not start")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)
