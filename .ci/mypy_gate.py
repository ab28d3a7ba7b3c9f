"""mypy in CI against a recorded baseline that only goes down (issue 38).

Runs mypy over the packages and compares its errors with `.ci/mypy-baseline.txt`, one
error per line as `path: message  [code]` (no line number: lines move as code is edited).
It fails when an error is new (not in the baseline, or there more times than recorded) and
prints what went away, so the baseline can be lowered: `python .ci/mypy_gate.py --update`
rewrites it from the present errors, and is only accepted in review when the count falls.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from installed_layout import PACKAGE, ROOT, checkout_path, copy_installed_layout

BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
_ERROR = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<rest>.*)$")


def present() -> Counter[str]:
    with tempfile.TemporaryDirectory() as tmp:
        copy_installed_layout(Path(tmp))
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--config-file",
                str(ROOT / "pyproject.toml"),
                "--cache-dir",
                str(ROOT / ".mypy_cache"),
                PACKAGE,
            ],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
    if run.returncode not in (0, 1):  # 2: mypy itself failed (a crash, bad options)
        sys.exit(f"mypy did not run:\n{run.stdout}{run.stderr}")
    found = (_ERROR.match(line) for line in run.stdout.splitlines())
    return Counter(f"{checkout_path(m['path'])}: {m['rest']}" for m in found if m)


def main() -> int:
    now = present()
    if "--update" in sys.argv[1:]:
        BASELINE.write_text("".join(f"{e}\n" for e in sorted(now.elements())), encoding="utf-8")
        print(f"mypy baseline written: {sum(now.values())} errors")
        return 0
    recorded = Counter(BASELINE.read_text(encoding="utf-8").splitlines())
    new = now - recorded
    gone = recorded - now
    print(f"mypy: {sum(now.values())} errors, baseline {sum(recorded.values())}")
    for error in sorted(gone.elements()):
        print(f"  fixed (lower the baseline with --update): {error}")
    for error in sorted(new.elements()):
        print(f"  NEW: {error}")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
