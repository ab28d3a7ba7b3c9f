"""Deletion acceptance: see `harness` for the method and `cases` for the histories."""

from memory_ledger.acceptance.cases import (
    CASES,
    MIXED_TURN,
    SINGLE_FACT,
    case_named,
    run_all,
)
from memory_ledger.acceptance.harness import (
    COULD_NOT_CHECK,
    EXIT_CODES,
    FAILED,
    PASSED,
    RESULT_NAMES,
    UNCHECKED,
    Case,
    CaseResult,
    Result,
    all_passed,
    overall,
    render_table,
    results_json,
    run_case,
    scratch_databases,
)

__all__ = [
    "CASES",
    "COULD_NOT_CHECK",
    "EXIT_CODES",
    "FAILED",
    "MIXED_TURN",
    "PASSED",
    "RESULT_NAMES",
    "SINGLE_FACT",
    "UNCHECKED",
    "Case",
    "CaseResult",
    "Result",
    "all_passed",
    "case_named",
    "overall",
    "render_table",
    "results_json",
    "run_all",
    "run_case",
    "scratch_databases",
]
