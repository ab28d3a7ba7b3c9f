"""The import architecture in CI (docs/architecture.md): layer contracts and no cycles.

Runs import-linter's contracts (`[tool.importlinter]` in pyproject.toml) and then checks that
no module of the package takes part in an import cycle, counting every import statement:
inside functions and under `TYPE_CHECKING` too, since a cycle hidden in a function is still a
cycle in the design. Both run on a copy of the installed layout (`installed_layout.py`).
Exit 1 names each broken contract and each cycle.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from installed_layout import PACKAGE, ROOT, copy_installed_layout


def cycles(graph: Any) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan's
    algorithm, iterative: the graph has hundreds of modules)."""
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(imports):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = imports[node]
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        copy_installed_layout(Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp}
        contracts = subprocess.run(
            [
                Path(sys.executable).with_name("lint-imports"),
                "--config",
                ROOT / "pyproject.toml",
                "--no-cache",
            ],
            cwd=tmp,
            env=env,
            check=False,
        )
        sys.path.insert(0, tmp)
        import grimp

        found = cycles(grimp.build_graph(PACKAGE, cache_dir=None))
    for component in found:
        print(f"import cycle of {len(component)} modules: {', '.join(component)}")
    print(f"import cycles: {len(found)}")
    return 1 if contracts.returncode or found else 0


if __name__ == "__main__":
    sys.exit(main())
