"""The Python examples in docs/ run as written, and print what they say they print: a
guide whose examples fail, or whose outputs are not the real ones, is not true.

Each ```python block runs in a fresh interpreter, in an empty working directory, with
the deterministic embedder (the examples' results do not depend on the model, and the
default one takes a second to load per block). A block that is only a fragment says so
with `# not run: <why>` on its first line.

Expected output. A comment `# -> TEXT` is one line the block prints; it stands on its
own line after the statement that prints, or at the end of that statement's line:

    print(plan.status, len(plan.targets))   # -> planned 2
    print(report.receipts)
    # -> [('event_log', 'ok'), ...]

The block's stdout must be exactly its `# ->` lines, in order (trailing spaces aside),
and a block that prints anything must have them. Two placeholders stand for what
changes from run to run:

- `...` (or `…`) matches any text within the line, including none;
- `<id>` matches one id: a run of letters, digits, `-`, `_` and `.` (a UUID, `req-…`).

Anything else after `# ->` is matched literally; an explanation goes in a comment of its
own (`# -> planned 2` then `# both parts, not a question`), not after the output. A
mismatch fails with a diff of the expected and the printed lines.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_EXPECTED = re.compile(r"#\s->(?: (.*))?$")
_PLACEHOLDER = re.compile(r"\.\.\.|…|<id>")


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.name}:{line}", match.group(1)))
    return found


BLOCKS = _blocks()


def expected_output(code: str) -> list[str]:
    """The lines a block says it prints: its `# ->` comments, in order."""
    lines = []
    for line in code.splitlines():
        found = _EXPECTED.search(line)
        if found is not None:
            lines.append((found.group(1) or "").rstrip())
    return lines


def _pattern(expected: str) -> re.Pattern[str]:
    parts, at = [], 0
    for placeholder in _PLACEHOLDER.finditer(expected):
        parts.append(re.escape(expected[at : placeholder.start()]))
        parts.append(r"[\w.\-]+" if placeholder.group() == "<id>" else ".*?")
        at = placeholder.end()
    parts.append(re.escape(expected[at:]))
    return re.compile("".join(parts))


def output_matches(expected: list[str], printed: list[str]) -> bool:
    return len(expected) == len(printed) and all(
        _pattern(want).fullmatch(got) for want, got in zip(expected, printed, strict=True)
    )


def check_output(where: str, code: str, stdout: str) -> None:
    """Fail, with a diff, when what the block printed is not what its `# ->` lines say."""
    expected = expected_output(code)
    printed = [line.rstrip() for line in stdout.splitlines()]
    if not expected and printed:
        pytest.fail(
            f"{where} prints but says nothing of what it prints: add its output as "
            f"`# -> ...` lines. It printed:\n" + "\n".join(printed)
        )
    if not output_matches(expected, printed):
        diff = difflib.unified_diff(expected, printed, "the docs (# ->)", "printed", lineterm="")
        pytest.fail(f"{where}: the output is not what the docs say\n" + "\n".join(diff))


def test_the_docs_have_python_examples() -> None:
    assert len(BLOCKS) >= 3


def test_the_output_convention() -> None:
    code = 'print(1)   # -> 1\nprint("req-3f2a", "x")\n# -> <id> ...\nprint()  # ->\n'
    assert expected_output(code) == ["1", "<id> ...", ""]
    assert output_matches(expected_output(code), ["1", "req-3f2a x", ""])
    assert output_matches(["Remembered(id='…', v=1)"], ["Remembered(id='2f88', v=1)"])
    assert not output_matches(["<id> done"], ["req 3f2a done"])  # an id has no spaces
    assert not output_matches(["1"], ["1", "2"])  # every printed line is claimed


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
    check_output(where, code, done.stdout)


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
