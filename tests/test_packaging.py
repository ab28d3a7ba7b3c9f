"""The installed package: one top-level name, the three mapped folders inside it.

Builds the wheel the way a user's `pip install` does and checks what would land in
site-packages (issue 38: an application's own `jobs` package once mixed with ours), then
imports the installed copy, not the checkout, and reads its packaged data files.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("memory_ledger-*.whl")
    return built


def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"memory_ledger", next(t for t in top if t.endswith(".dist-info"))}
    for path in (
        "memory_ledger/projections/runner.py",
        "memory_ledger/jobs/consolidation/__init__.py",
        "memory_ledger/jobs/consolidation/patterns.toml",
        "memory_ledger/restore/restore.py",
        "memory_ledger/policy/cardinality.toml",
    ):
        assert path in names
    assert not any(name.startswith(("tests/", "benchmarks/")) for name in names)


def test_the_installed_copy_imports_its_own_folders(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    # An application with a `jobs` package of its own, first on its path.
    app = tmp_path / "app"
    (app / "jobs").mkdir(parents=True)
    (app / "jobs" / "__init__.py").write_text("MINE = True\n")
    probe = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "import jobs, memory_ledger, memory_ledger.jobs.consolidation as c\n"
        "import memory_ledger.jobs.scheduler, memory_ledger.projections.runner\n"
        "from memory_ledger import _source_tree\n"
        "assert jobs.MINE\n"
        "assert not any(isinstance(f, _source_tree.SourceFolders) for f in sys.meta_path)\n"
        "from memory_ledger.jobs.consolidation.extractors import PhrasePatterns\n"
        "print(memory_ledger.__file__); print(c.__file__)\n"
        "print(len(PhrasePatterns.load().patterns) > 0)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, str(app), str(target)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    own, consolidation, patterns = run.stdout.splitlines()
    assert own.startswith(str(target)) and consolidation.startswith(str(target))
    assert patterns == "True"


def test_setup_maps_the_folders_the_source_finder_maps() -> None:
    """setup.py cannot import the package it builds, so it names the folders itself."""
    from memory_ledger._source_tree import MAPPED

    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    (mapped,) = (
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "MAPPED"
    )
    assert mapped == MAPPED
