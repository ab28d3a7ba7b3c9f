"""Deletion acceptance: see `harness` for the method and `cases` for the histories."""

from memory_ledger.acceptance.cases import (
    CASES,
    MIXED_TURN,
    SINGLE_FACT,
    case_named,
    run_all,
)
from memory_ledger.acceptance.harness import (
    RESULT_NAMES,
    Case,
    CaseResult,
    Result,
    all_passed,
    render_table,
    results_json,
    run_case,
    scratch_databases,
)

__all__ = [
    "CASES",
    "MIXED_TURN",
    "RESULT_NAMES",
    "SINGLE_FACT",
    "Case",
    "CaseResult",
    "Result",
    "all_passed",
    "case_named",
    "render_table",
    "results_json",
    "run_all",
    "run_case",
    "scratch_databases",
]
