"""Forget requests in words ("forget my old address", "把我的旧住址删掉"): read, matched
with the principal's items, shown as a plan, executed only when confirmed. See flow.py
for the steps, reading.py for how words are read, planner.py for how they select."""

from memory_ledger.forgetting.planning.flow import ForgetPlanning, ItemChanges, PlanOutcome
from memory_ledger.forgetting.planning.plans import ForgetPlan, PlanRecords, PlansStore
from memory_ledger.forgetting.planning.reading import LexiconReader, Reader, Reading

__all__ = [
    "ForgetPlan",
    "ForgetPlanning",
    "ItemChanges",
    "LexiconReader",
    "PlanOutcome",
    "PlanRecords",
    "PlansStore",
    "Reader",
    "Reading",
]
