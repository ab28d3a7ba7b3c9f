"""The benchmarks cannot rot: every one imports, and the heavy-namespace ones run end to
end in their smallest mode (a TypeError from a changed internal signature once broke
bench_recall_heavy for good without any test noticing). No timing is asserted."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", MODULES)
def test_every_benchmark_imports(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    assert module.__doc__, f"benchmarks/{name}.py says what it measures"


SMALL = {
    "bench_recall_heavy": [
        "--sizes",
        "200",
        "--rounds",
        "3",
        "--runs",
        "1",
        "--backends",
        "sqlite",
    ],
    "bench_keyword_topk": ["--sizes", "300", "--rounds", "2", "--backends", "sqlite"],
    "bench_forget_namespace": ["--sizes", "300", "--forgets", "2", "--backends", "sqlite"],
    "bench_erasure": ["--quick"],
    "bench_audit": ["--quick"],
    "bench_cli_start": ["--quick"],
    "bench_cold_start": ["--sizes", "200", "--rounds", "1", "--embedder", "hashing"],
    "bench_console": ["--requests", "300", "--rounds", "3"],
    "bench_summary": ["--sizes", "300", "--rounds", "3", "--forget", "20", "--backends", "sqlite"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_heavy_namespace_benchmark_runs_in_its_smallest_mode(name: str, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    args = [sys.executable, "-m", f"benchmarks.{name}", *SMALL[name]]
    done = subprocess.run(
        [*args, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert json.loads(out.read_text())  # a result was written
