"""Statements around a request ("I am fully out of Grey Pine now.", "..., she no longer
wants to be involved") say why, not what.

Read as pieces they plan the sentence itself ("已经不在华东组" redacted wherever the
team is named) or widen a plan to every place a word of it is said. So before a request
is read, a sentence without a forget verb is cut when another sentence of the request
has one, and so is a trailing clause that is a statement about someone (the shapes are
`[statements]` in lexicon.toml). A sentence that keeps something ("keep the current
one.") is never cut: a keep only narrows.
"""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import resources

from memory_ledger.forgetting.planning.lexicon import LEXICON_FILE, lexicon
from memory_ledger.phrases import normalise

#: A sentence that keeps something is never cut.
_KEEPS = re.compile(r"\bkeep\b|\bleave\b|保留|留着|留下")


@functools.cache
def _words() -> tuple[frozenset[str], tuple[re.Pattern[str], ...]]:
    text = resources.files(__package__).joinpath(LEXICON_FILE).read_text(encoding="utf-8")
    raw = tomllib.loads(text)["statements"]
    return frozenset(raw["abbreviations"]), tuple(re.compile(p) for p in raw["clauses"])


def sentences(text: str) -> list[str]:
    """The request's sentences, as written (quoted text is never split)."""
    abbreviations, _ = _words()
    out, start, quote = [], 0, ""
    for i, ch in enumerate(text):
        if ch in "'\"‘’“”「」" and not (
            ch == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()
        ):
            quote = "" if quote else ch
            continue
        if quote or ch not in ".!?。！？":
            continue
        word = re.findall(r"[A-Za-z]+$", text[start:i])
        if ch == "." and word and word[0].lower() in abbreviations:
            continue
        if ch == "." and i + 1 < len(text) and not text[i + 1].isspace():
            continue  # "3.5", "example.com"
        out.append(text[start : i + 1])
        start = i + 1
    if text[start:].strip():
        out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def without_statements(text: str) -> str:
    """`text` without the sentences and trailing clauses that only say why."""
    lex = lexicon()
    _, clauses = _words()

    def asks(sentence: str) -> bool:
        low = normalise(sentence)
        return lex.intents.any(low) or bool(_KEEPS.search(low))

    parts = sentences(text)
    if len(parts) > 1 and any(asks(s) for s in parts):
        parts = [s for s in parts if asks(s)]
    cut = []
    for sentence in parts:
        for clause in clauses:
            match = clause.search(sentence)
            if match is None or asks(match.group(0)):
                continue  # a clause that asks something is never cut
            shorter = (sentence[: match.start()] + sentence[match.end() :]).strip()
            if asks(shorter):
                sentence = shorter
        cut.append(sentence)
    joined = " ".join(cut).strip()
    return joined if re.search(r"\w", joined) else text
