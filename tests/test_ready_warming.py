"""`/v1/ready` under `serve` says ready only once the embedder has answered (issue 37):
until then a `context` would first wait for the model to load. A real server on
loopback, with an embedder plug-in (tests/gated_embedder.py) whose loading the test
ends by creating a file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from gated_embedder import FAIL_ENV, OPEN_ENV
from waits import HUNG

from memory_ledger.http.local import serve_locally

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def _server(data_dir: Path, **extra: str) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env.update(
        MEMORY_LEDGER_EMBEDDER="gated_embedder:GatedEmbedder",
        PYTHONPATH=os.pathsep.join((str(ROOT), str(ROOT / "tests"))),
        **extra,
    )
    with serve_locally(data_dir, env=env) as base:
        yield base


def _until_ready(base: str) -> httpx.Response:
    """Ask until the answer is no longer `warming` (each answer is immediate)."""
    with httpx.Client(timeout=HUNG) as client:
        while True:
            answer = client.get(f"{base}/v1/ready")
            if answer.json().get("status") != "warming":
                return answer


def test_ready_only_once_the_embedder_answered(tmp_path: Path) -> None:
    gate = tmp_path / "model-loaded"
    with _server(tmp_path / "data", **{OPEN_ENV: str(gate)}) as base:
        assert httpx.get(f"{base}/v1/health").json()["status"] == "ok"  # listening
        warming = httpx.get(f"{base}/v1/ready")
        assert warming.status_code == 503
        assert warming.json() == {"status": "warming"}
        assert warming.headers["retry-after"] == "1"
        gate.touch()  # the model "finished loading"
        ready = _until_ready(base)
        assert ready.status_code == 200 and ready.json() == {"status": "ready"}


def test_an_embedder_that_fails_to_load_keeps_the_server_unready(tmp_path: Path) -> None:
    with _server(tmp_path / "data", **{OPEN_ENV: str(tmp_path / "never"), FAIL_ENV: "1"}) as base:
        answer = _until_ready(base)
        assert answer.status_code == 503
        assert answer.json()["status"] == "embedder_failed"
        assert "the model file is missing" in answer.json()["detail"]
