"""The promotion gate: what a run produced becomes a long-term memory only through it.

A model that read a tool's result proposes; a user, a rule or a tool confirms (seed
003: automatic extraction makes a candidate, someone decides the commit). The gate
refuses a promotion from a step that has not succeeded, without a named confirmer, of
text that reads like an instruction, or of an inference confirmed by anything less
than the user. Refusals are recorded on the run (the step, the rule; no content).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memory_ledger.errors import InvalidTransition
from memory_ledger.identifiers import IDENTIFIER_PATTERN
from memory_ledger.retrieval.instruction_like import content_flags
from memory_ledger.write_policy import MemoryWrite

CONFIRMED_BY = re.compile(rf"user|(?:rule|tool):{IDENTIFIER_PATTERN}")


class PromotionRefused(InvalidTransition):
    """The gate said no: nothing was stored. `rule` is the code of the rule."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class PromotionGate:
    """The default rules. A deployment passes its own gate (any object with `check`)."""

    def check(
        self, steps: dict[str, Any], step_id: str, write: MemoryWrite, confirmed_by: str
    ) -> None:
        step = steps.get(step_id)
        if step is None or step.get("status") != "succeeded":
            raise PromotionRefused(
                f"step {step_id} has not succeeded: only a succeeded step's result is promoted",
                "step_not_succeeded",
            )
        if not isinstance(confirmed_by, str) or CONFIRMED_BY.fullmatch(confirmed_by) is None:
            raise PromotionRefused(
                "a promotion names who confirmed it: `user`, `rule:<name>` or `tool:<name>`",
                "unconfirmed",
            )
        if write.kind not in ("fact", "preference"):
            raise PromotionRefused("a run promotes facts and preferences only", "wrong_kind")
        if content_flags(write.text):
            raise PromotionRefused(
                "the promoted text reads like an instruction: it is not made a memory",
                "instruction_like",
            )
        if write.origin == "inferred" and confirmed_by != "user":
            raise PromotionRefused(
                "an inference becomes a memory only when the user confirms it",
                "inference_unconfirmed",
            )
