"""Bilingual phrase matching: the one way a list of words from a data file is found in
text (forget requests, queries about the whole user).

Text is compared after Unicode NFKC and case folding. A phrase of ASCII letters matches
whole words only ("forget" never matches inside "forgetful"); a phrase with CJK
characters matches anywhere, since Chinese is written without spaces; a phrase starting
with `re:` is a regular expression.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


def normalise(text: str) -> str:
    """How a request is compared with the lexicon: NFKC (full-width forms, compatibility
    characters), case folded, curly apostrophes straightened, runs of space as one."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = folded.replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(folded.split())


def compile_phrase(phrase: str) -> re.Pattern[str]:
    if phrase.startswith("re:"):
        return re.compile(phrase[3:])
    body = r"\s+".join(re.escape(part) for part in phrase.split())
    if phrase.isascii():
        return re.compile(rf"(?<![\w']){body}(?![\w])")
    return re.compile(body)


@dataclass(frozen=True)
class Hit:
    """One phrase found in a request: which entry it belongs to, and where."""

    entry: str
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start


class Phrases:
    """Named lists of phrases; `find` returns every occurrence, `longest` the ones left
    when overlapping matches are settled in favour of the longer one ("home address"
    before "address", "work address" before "work")."""

    def __init__(self, entries: dict[str, list[str]]) -> None:
        self.entries = {
            name: [compile_phrase(p) for p in phrases]
            for name, phrases in entries.items()
            if phrases
        }

    def find(self, text: str) -> list[Hit]:
        return [
            Hit(name, m.start(), m.end())
            for name, patterns in self.entries.items()
            for pattern in patterns
            for m in pattern.finditer(text)
            if m.end() > m.start()
        ]

    def any(self, text: str) -> bool:
        return any(p.search(text) for patterns in self.entries.values() for p in patterns)

    def names(self, text: str) -> list[str]:
        return sorted({h.entry for h in self.find(text)})


def longest(hits: list[Hit]) -> list[Hit]:
    """Non-overlapping hits, longest first, then leftmost."""
    chosen: list[Hit] = []
    for hit in sorted(hits, key=lambda h: (-h.length, h.start)):
        if all(hit.end <= c.start or hit.start >= c.end for c in chosen):
            chosen.append(hit)
    return sorted(chosen, key=lambda h: h.start)
