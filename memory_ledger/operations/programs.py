"""Whole programs the CLI starts, each over stores of its own: the guided demo, and the
deletion acceptance harness (control store beside erased store, four results per case).
Re-exported here so the CLI starts them through the library's public modules."""

from __future__ import annotations

from memory_ledger.acceptance import (
    EXIT_CODES,
    FAILED,
    PASSED,
    overall,
    render_table,
    results_json,
    run_all,
)
from memory_ledger.demo import run_demo

__all__ = [
    "EXIT_CODES",
    "FAILED",
    "PASSED",
    "overall",
    "render_table",
    "results_json",
    "run_all",
    "run_demo",
]
