"""How the request's words are found in an item's text: whole words for Latin script,
shared characters for Chinese (which has no spaces to split on)."""

from __future__ import annotations

import re


def mentions(text: str, word: str) -> bool:
    """`word` in `text`: as a whole word for Latin script, anywhere for Chinese."""
    if not word:
        return False
    if word.isascii():
        return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text) is not None
    return word in text


def shares_chinese(value: str, run: str) -> bool:
    """A Chinese run of the request and a value say the same thing: one holds the
    other, or they share a two-character word ("助学" in "国家助学贷款")."""
    if len(run) >= 2 and run in value:
        return True
    if value in run and len(value) >= 1 and is_chinese(value):
        return True
    return any(run[i : i + 2] in value for i in range(len(run) - 1))


def is_chinese(text: str) -> bool:
    return all("\u3400" <= ch <= "\u9fff" for ch in text)


def first_person(text: str) -> bool:
    """Whether the request speaks of the user's own things ("my", "我")."""
    return re.search(r"\b(?:my|mine|me|i|i'm|i've|myself)\b|我", text) is not None
