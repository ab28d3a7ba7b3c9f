"""When two memories say the same thing: the canonical key consolidation and the
near-duplicate merge (jobs/dedupe.py) share.

Two values are the same when they are equal after Unicode NFKC, case folding and the
removal of every whitespace and punctuation character (Unicode categories Z* and P*,
and the control characters): "18 Haisong Road, Hangzhou" and "18 haisong road
hangzhou" are one value, "Window" and "window." are one, "靠窗" and "靠窗。" are one.
Symbols, digits and letters are kept, so "5 kg" and "5 lb" stay apart. Nothing here is
fuzzy: values that differ in a letter are different memories, because merging two facts
wrongly is worse than keeping both.

A key never leaves the process: it holds the value, which is personal content.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

_DROPPED = ("Z", "P", "C")  # separators (spaces), punctuation, control characters


def normalise_value(value: str) -> str:
    """The value as keys compare it (see the module's docstring)."""
    folded = unicodedata.normalize("NFKC", value).casefold()
    return "".join(c for c in folded if not unicodedata.category(c).startswith(_DROPPED))


@dataclass(frozen=True)
class CanonicalKey:
    """(namespace, kind, subject, predicate, normalised value): one memory. `repr` hides
    the value, so a key in a log line or an assertion message shows no content."""

    namespace: str
    kind: str
    subject: str
    predicate: str
    value: str

    @classmethod
    def of(
        cls, namespace: str, kind: str, subject: str, predicate: str, value: str
    ) -> CanonicalKey:
        return cls(namespace, kind, subject, predicate, normalise_value(value))

    def __repr__(self) -> str:
        return f"CanonicalKey({self.namespace}, {self.kind}, {self.subject}, {self.predicate}, …)"
