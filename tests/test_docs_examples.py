"""The Python examples in docs/ run as written: a guide whose examples fail is not true.

Each ```python block runs in a fresh interpreter, in an empty working directory, with
the deterministic embedder (the examples' results do not depend on the model, and the
default one takes a second to load per block). A block that is only a fragment says so
with `# not run: <why>` on its first line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.name}:{line}", match.group(1)))
    return found


BLOCKS = _blocks()


def test_the_docs_have_python_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.slow
@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_a_docs_example_runs(where: str, code: str, tmp_path: Path) -> None:
    if code.startswith("# not run:"):
        pytest.skip(code.splitlines()[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_LEDGER_")}
    env["MEMORY_LEDGER_EMBEDDER"] = "hashing"
    env["PYTHONPATH"] = str(DOCS.parent)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{where}:\n{done.stderr[-3000:]}"


_TOML = re.compile(r"^```toml\n(.*?)^```", re.DOTALL | re.MULTILINE)


def test_the_policy_examples_in_the_docs_are_valid_policy_files() -> None:
    """Every ```toml block of a policy table is what `policy install` would accept."""
    from memory_ledger.policy import policy_from_text

    checked = 0
    for page in sorted(DOCS.glob("*.md")):
        for match in _TOML.finditer(page.read_text(encoding="utf-8")):
            block = match.group(1)
            if "[decay]" in block and "[retention]" not in block:
                block = "[retention]\nversion = 2\n" + block
            if "[retention]" in block or "[cardinality]" in block:
                policy_from_text(block, f"{page.name} example")  # raises if invalid
                checked += 1
    assert checked >= 2
