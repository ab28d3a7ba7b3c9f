"""`memory_ledger.projections`, `.jobs` and `.restore` in a source checkout.

The wheel installs the three folders beside `memory_ledger/` under this package (setup.py's
package mapping). Run from a checkout (the tests, a benchmark against an older commit, a
worktree), the same names must resolve to that checkout's folders, not to whatever an
editable install elsewhere mapped them to: this finder, first on `sys.meta_path`, maps them
to the folders beside this package. Installed from a wheel, the folders are inside the
package and the finder is never registered.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

MAPPED = ("projections", "jobs", "restore")
_PACKAGE = Path(__file__).resolve().parent


class SourceFolders(MetaPathFinder):
    """Finds the three mapped packages in the checkout `root`; nothing else."""

    def __init__(self, root: Path) -> None:
        self.names = {f"{_PACKAGE.name}.{name}": root / name for name in MAPPED}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        folder = self.names.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def register() -> None:
    """Registers the finder when this package runs from a source checkout."""
    root = _PACKAGE.parent
    if (_PACKAGE / MAPPED[0]).is_dir() or not (root / MAPPED[0] / "__init__.py").is_file():
        return  # installed: the folders are inside the package
    if not any(isinstance(finder, SourceFolders) for finder in sys.meta_path):
        sys.meta_path.insert(0, SourceFolders(root))
