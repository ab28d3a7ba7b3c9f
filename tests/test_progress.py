"""`rebuild` shows a progress bar in a terminal, and stays quiet otherwise."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from factories import fact

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.principal import Principal


@pytest.fixture
def store(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    with MemoryService(Settings.resolve(data)) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        ledger.remember_many([fact("note", f"note {i}", turn=f"t{i}") for i in range(50)])
    return data


def _rebuild(
    data: Path, *extra: str, terminal: bool, env_extra: dict[str, str] | None = None
) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "memory_ledger.cli", "rebuild", "--data-dir", str(data)]
    env = {**os.environ, "MEMORY_LEDGER_EMBEDDER": "hashing", "COLUMNS": "120", **(env_extra or {})}
    if not terminal:
        done = subprocess.run([*command, *extra], capture_output=True, text=True, env=env)
        return done.returncode, done.stdout, done.stderr
    leader, follower = pty.openpty()  # stderr is a terminal; stdout stays a pipe
    with subprocess.Popen(
        [*command, *extra], stdout=subprocess.PIPE, stderr=follower, env=env, text=True
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


@pytest.mark.slow
def test_a_terminal_sees_the_replay_progress(store: Path) -> None:
    code, stdout, stderr = _rebuild(store, terminal=True)
    assert code == 0, stderr
    assert "replaying the log" in stderr and "50/50" in stderr
    assert "vector index" in stderr
    assert "rebuilt" in stdout


@pytest.mark.slow
@pytest.mark.parametrize("side_by_side", ["0", "1"])
def test_each_phase_has_its_own_bar(store: Path, side_by_side: str) -> None:
    """The vector index's embedding is a phase of its own with its counts (it used to sit
    under a bar already full), also when it runs in a second process beside the
    projections (`1`: its progress is relayed from the child)."""
    env = {"MEMORY_LEDGER_REBUILD_SIDE_BY_SIDE": side_by_side}
    code, _, stderr = _rebuild(store, terminal=True, env_extra=env)
    assert code == 0, stderr
    assert "vector index: reading the log" in stderr
    assert "vector index: embedding" in stderr
    assert "50/50" in stderr and "/s" in stderr  # counts and a rate


@pytest.mark.slow
@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_no_progress_when_not_a_terminal_or_json(store: Path, extra: tuple[str, ...]) -> None:
    code, stdout, stderr = _rebuild(store, *extra, terminal=bool(extra))
    assert code == 0, stderr
    assert "replaying the log" not in stderr + stdout
