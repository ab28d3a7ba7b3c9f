"""Summarizers: what turns a namespace's live facts and preferences into readable text.

Kept apart from the projection so that a deployment can plug in its own (a model-based
one, say) by naming a factory in `MEMORY_LEDGER_SUMMARIZER`, without it becoming a
dependency of this package and without touching how summaries are stored or forgotten.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memory_ledger.config import SUMMARIZER_ENV, environment
from memory_ledger.errors import ConfigurationError


@dataclass(frozen=True)
class SummaryInput:
    """One live fact or preference, as a summarizer sees it."""

    item_id: str
    version: int  # the item's version in the log, as a derived write would pin it
    kind: str  # fact | preference
    subject: str
    predicate: str
    value: str
    category: str
    origin: str
    status: str  # current | conflict (preferences are always current)
    scope: str | None  # preferences only
    position: int  # log position of the event that set this value


@runtime_checkable
class Summarizer(Protocol):
    """Turns a namespace's live inputs into text.

    A summarizer must be deterministic (the same inputs give the same text) and must not
    fail: it runs inside the projection runner's transaction, during catch-up and during
    rebuilds, and the rebuilt view must equal the incremental one. A model-based
    summarizer should therefore cache its answers by the inputs' ids and versions. Its
    `name` is stored with every summary; changing what it writes means changing its name,
    so that stored summaries are replayed rather than mixed.

    It is given the whole profile (at most MAX_INPUTS inputs) whenever one input changes:
    the projection keeps the inputs, sealed, so gathering them reads only what changed
    (projections/summaries.py), and the default's composition of a few hundred lines
    costs less than sealing its result. A slow summarizer pays its own cost per change.
    """

    name: str

    def summarize(self, inputs: Sequence[SummaryInput]) -> str: ...


class ProfileSummarizer:
    """The default: sections by category, one line per fact or preference.

    Deterministic on purpose, and ordered only by what it is given (never by arrival),
    so a rebuild from the log reproduces every summary byte for byte and no model is a
    dependency of forgetting.
    """

    name = "profile-v1"

    def summarize(self, inputs: Sequence[SummaryInput]) -> str:
        sections: dict[str, list[str]] = {}
        for item in sorted(inputs, key=summary_order):
            sections.setdefault(item.category, []).append(f"- {_line(item)}")
        blocks = [
            f"{category}:\n" + "\n".join(lines) for category, lines in sorted(sections.items())
        ]
        return "\n".join(blocks)


def summary_order(item: SummaryInput) -> tuple[str, ...]:
    return (item.category, item.kind, item.subject, item.predicate, item.value, item.item_id)


def _line(item: SummaryInput) -> str:
    label = item.predicate.replace("_", " ")
    if item.subject != "user":
        label = f"{item.subject}'s {label}"
    notes = [] if item.origin == "explicit" else [item.origin]
    if item.kind == "preference":
        notes.insert(0, f"scope {item.scope}")
        return f"prefers {label}: {item.value} ({', '.join(notes)})"
    if item.status == "conflict":
        notes.append("conflicting statements")
    return f"{label}: {item.value}" + (f" ({', '.join(notes)})" if notes else "")


def load_summarizer(spec: str | None = None) -> Summarizer:
    """The summarizer named `module:factory` (`Settings.summarizer`, from
    MEMORY_LEDGER_SUMMARIZER; None: as the environment says), or the default: how a
    deployment plugs in a model-based summarizer without making it a dependency."""
    spec = (environment().get(SUMMARIZER_ENV, "") if spec is None else spec).strip()
    if not spec:
        return ProfileSummarizer()
    module_name, _, attribute = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"{SUMMARIZER_ENV}: cannot load {spec!r}: {exc}") from None
    try:
        summarizer = factory()
    except Exception as exc:
        raise ConfigurationError(
            f"{SUMMARIZER_ENV}: {spec!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    name = getattr(summarizer, "name", None)
    if not isinstance(summarizer, Summarizer) or not isinstance(name, str) or not name:
        raise ConfigurationError(
            f"{SUMMARIZER_ENV}: {spec!r} did not return a summarizer "
            "(a non-empty `name` and a `summarize(inputs)` method)"
        )
    return summarizer
