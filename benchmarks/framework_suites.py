"""The frameworks' own test suites against our adapters: LangGraph's store tests
(libs/checkpoint and libs/checkpoint-sqlite, sync and async) against
`MemoryLedgerStore`, the OpenAI Agents SDK's session tests (session, limit, async
SQLite) against `MemoryLedgerSession`.

It needs the frameworks' source checkouts and their test-only dependencies, so it is
never run in CI (pytest collects tests/ only). From the repository root:

    git clone https://github.com/langchain-ai/langgraph /tmp/langgraph
    git clone https://github.com/openai/openai-agents-python /tmp/agents
    # check out the commits matching the installed langgraph-checkpoint / openai-agents
    pip install --target /tmp/fw-deps --no-deps pytest-asyncio pytest-mock aiosqlite sqlite-vec
    python -m benchmarks.framework_suites --langgraph /tmp/langgraph \\
        --agents /tmp/agents --deps /tmp/fw-deps

`--deps` is a directory put on the path of the test runs only (the test-only packages
go there, not into the project's environment). Each suite's test directory is copied
to a temporary directory and run there with this interpreter's pytest and the plugin
`benchmarks.framework_swap`, which rebinds the frameworks' store and session classes
to ours (its docstring says how). The tests that do not apply to our adapters (they
test a SQL schema, a connection's life, a base class) are listed with why in
benchmarks/data/framework_suites.toml and deselected. Results: a table of each suite's
run/passed/failed, then the not-applicable list; exit status 1 when a test failed.
docs/benchmarks.md ("The frameworks' own suites") has the figures.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES_FILE = ROOT / "benchmarks" / "data" / "framework_suites.toml"
PACKAGES = ("langgraph", "langgraph-checkpoint", "openai-agents")
#: The frameworks' own pytest settings (their pyproject.toml), which the copied tests
#: directory does not carry.
PYTEST_OPTIONS = ["-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=session"]


@dataclass
class Outcome:
    name: str
    run: int
    passed: int
    failed: int
    not_applicable: dict[str, str]
    failures: list[str]


def run_suite(suite: dict, checkout: Path, deps: Path | None, workdir: Path) -> Outcome:
    """One suite: its tests directory copied to `workdir`, run with the swap plugin."""
    source = checkout / suite["tests_dir"]
    if not source.is_dir():
        raise SystemExit(f"{source}: no such directory (is {checkout} the right checkout?)")
    run_dir = workdir / suite["name"].replace(" ", "_").replace(":", "").replace(",", "")
    shutil.copytree(source, run_dir / "tests")
    not_applicable: dict[str, str] = dict(suite.get("not_applicable", {}))
    path = [str(p) for p in ([deps] if deps else [])]
    path += [str(ROOT)] + [str(checkout / p) for p in suite.get("pythonpath", [])]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "ML_SUITE_NOT_APPLICABLE": "\n".join(f"tests/{test}" for test in not_applicable),
    }
    report = run_dir / "junit.xml"
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-p", "benchmarks.framework_swap", *PYTEST_OPTIONS,
        f"--junitxml={report}", *[f"tests/{f}" for f in suite["files"]],
    ]  # fmt: skip
    subprocess.run(command, cwd=run_dir, env=env, check=False)
    if not report.exists():
        raise SystemExit(f"{suite['name']}: pytest wrote no report (see its output above)")
    failures = []
    run = 0
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        run += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failures.append(f"{case.get('classname')}::{case.get('name')}")
    return Outcome(suite["name"], run, run - len(failures), len(failures), not_applicable, failures)


def versions(langgraph: Path | None, agents: Path | None) -> list[str]:
    """The installed packages, and the commits of the checkouts the tests came from."""
    lines = []
    for name in PACKAGES:
        try:
            lines.append(f"installed {name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"installed {name}: not installed")
    for label, checkout in (("langgraph", langgraph), ("openai-agents-python", agents)):
        if checkout is None:
            continue
        described = subprocess.run(
            ["git", "-C", str(checkout), "describe", "--tags", "--always"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        lines.append(f"checkout {label}: {described or 'not a git checkout'} ({checkout})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langgraph", type=Path, help="a langgraph checkout (repository root)")
    parser.add_argument("--agents", type=Path, help="an openai-agents-python checkout")
    parser.add_argument("--deps", type=Path, help="a directory of the test-only packages")
    args = parser.parse_args(argv)
    if args.langgraph is None and args.agents is None:
        parser.error("give --langgraph and/or --agents")
    checkouts = {"langgraph": args.langgraph, "agents": args.agents}
    suites = tomllib.loads(SUITES_FILE.read_text(encoding="utf-8"))["suite"]
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="ml-framework-suites-") as workdir:
        for suite in suites:
            checkout = checkouts[suite["checkout"]]
            if checkout is not None:
                outcomes.append(run_suite(suite, checkout.resolve(), args.deps, Path(workdir)))
    print()
    for line in versions(args.langgraph, args.agents):
        print(line)
    print("\n| suite | run | passed | failed | not applicable |\n|---|---|---|---|---|")
    for o in outcomes:
        print(f"| {o.name} | {o.run} | {o.passed} | {o.failed} | {len(o.not_applicable)} |")
    print("\nNot applicable:")
    for o in outcomes:
        for test, why in o.not_applicable.items():
            print(f"- {o.name}: `{test}`: {why}")
    failed = [f for o in outcomes for f in o.failures]
    if failed:
        print("\nFailed:\n" + "\n".join(f"- {f}" for f in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
