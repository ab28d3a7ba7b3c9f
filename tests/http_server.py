"""A real `memory-ledger serve` process for the HTTP tests (memory_ledger/http/local.py),
on a scratch store, with the test environment: no inherited MEMORY_LEDGER_ settings,
the deterministic embedder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memory_ledger.config import Settings
from memory_ledger.http.local import serve_locally

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def running_server(data_dir: Path) -> Iterator[str]:
    """The server's base URL while it runs; stopped (and waited for) afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env.update(MEMORY_LEDGER_EMBEDDER="hashing", PYTHONPATH=str(ROOT))
    with serve_locally(data_dir, env=env) as base:
        yield base


@contextmanager
def server_on_scratch_store(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> Iterator[tuple[str, Settings]]:
    """A server on a new store: its base URL, and the store's settings (to make tokens)."""
    data_dir = tmp_path_factory.mktemp(name) / "data"
    with running_server(data_dir) as base:
        yield base, Settings.resolve(data_dir)
