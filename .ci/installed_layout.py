"""The package as the wheel lays it out, for the tools that read source by module name.

`projections/`, `jobs/` and `restore/` sit beside `memory_ledger/` in the checkout and install
inside it (setup.py's package mapping). mypy and grimp (import-linter) find modules by walking
folders, not through the import system, so they are given a copy of the installed layout; the
paths they report are mapped back to the checkout with `checkout_path`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "memory_ledger"
MAPPED = ("projections", "jobs", "restore")


def copy_installed_layout(into: Path) -> Path:
    """Copies the package and the mapped folders into `into`; returns the package's path."""
    skip = shutil.ignore_patterns("__pycache__")
    package = into / PACKAGE
    shutil.copytree(ROOT / PACKAGE, package, ignore=skip)
    for name in MAPPED:
        shutil.copytree(ROOT / name, package / name, ignore=skip)
    return package


def checkout_path(path: str) -> str:
    """A reported path in the checkout: memory_ledger/jobs/x.py is jobs/x.py."""
    for name in MAPPED:
        if path.startswith(f"{PACKAGE}/{name}/"):
            return path.removeprefix(f"{PACKAGE}/")
    return path
