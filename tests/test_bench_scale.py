"""benchmarks/bench_scale.py cannot rot: it runs end to end at a tiny size on PostgreSQL
(every part, several processes), and a kept database is reused, sweeps the next day's
known share, and is refused for other sizes. No timing is asserted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from benchmarks.bench_scale import SWEEP_DAYS

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--users", "3", "--per-user", "60", "--heavy", "200"]

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def run(pg_admin_url: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "benchmarks.bench_scale", "--pg-url", pg_admin_url]
    return subprocess.run(
        [*command, *args, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def ok(done: subprocess.CompletedProcess[str], out: Path) -> dict[str, Any]:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return dict(json.loads(out.read_text()))


def due_on(day: int, sizes: list[int]) -> int:
    """Items of the fill expiring on `day`: item n of each namespace on 1 + n % SWEEP_DAYS."""
    return sum(1 for size in sizes for n in range(size) if n % SWEEP_DAYS == day - 1)


def test_every_part_runs_at_a_tiny_size(pg_admin_url: str, tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    small = ["--forgets", "2", "--recall-rounds", "1", "--clients", "2", "--http-seconds", "0.5"]
    report = ok(run(pg_admin_url, out, *TINY, *small), out)
    assert report["fill"]["append"]["items"] == 3 * 60 + 200
    assert report["forget"]["partial"] == []
    for label in ("1k user", "heavy user"):
        assert report["forget"][label]["forget"]["n"] == 2
        assert report["recall"][label]["context"]["n"] >= 1
    assert report["sweep"]["statuses"] == ["completed"]
    assert report["sweep"]["left_due_after"] == 0
    assert report["rebuild"]["2_runner"]["events"] == report["rebuild"]["events"]
    for servers in ("api", "1_servers", "2_servers", "4_servers"):
        for op in ("remember", "context"):
            assert report["http"][servers][op]["errors"] == 0, report["http"][servers][op]
            assert report["http"][servers][op]["requests"] > 0


def test_a_kept_database_is_reused_and_sweeps_the_next_day(
    pg_admin_url: str, tmp_path: Path
) -> None:
    name = f"ml_test_scale_{uuid.uuid4().hex[:10]}"
    out = tmp_path / "scale.json"
    only_sweep = ["--skip", "recall,forget,rebuild,http", "--reuse-db", name]
    try:
        first = ok(run(pg_admin_url, out, *TINY, *only_sweep), out)
        assert not first["reused_db"]
        assert first["sweep"]["due"] == due_on(1, [60, 60, 60, 200])
        second = ok(run(pg_admin_url, out, *TINY, *only_sweep), out)
        assert second["reused_db"] and "fill" not in second
        assert second["sweep"]["day"] == 2
        assert second["sweep"]["due"] == due_on(2, [60, 60, 60, 200])
        other = run(pg_admin_url, out, "--users", "3", "--per-user", "60", "--heavy", "100",
                    *only_sweep)  # fmt: skip
        assert other.returncode != 0
        assert "holds a fill of" in other.stderr
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        shutil.rmtree(Path(tempfile.gettempdir()) / f"ml_bench_scale_{name}", ignore_errors=True)


def test_bad_options_are_refused_before_anything_is_made() -> None:
    from benchmarks.bench_scale import parse_args

    for argv in (["--skip", "fill"], ["--reuse-db", "Bad-Name"], ["--users", "0", "--heavy", "0"]):
        with pytest.raises(SystemExit):
            parse_args(argv)
