"""Units of text: the one tokenizer and normaliser of the mention matcher and its index.

Where a piece of information lives is found by its units, never by its text: the
mention index (projections/mention_index.py) keeps, per item, keyed hashes of the
units of everything the item ever said, and a lookup hashes the units of the value it
looks for. So both sides must cut text the same way, and the cut must agree with the
matcher (memory_ledger/forgetting/mentions.py), which matches a value literally,
case-insensitively, on word boundaries: **every item the matcher finds a value in holds
every unit of the value** (tests/test_mention_index.py checks this as a property).

- A *word* is a run of letters, digits, `_` and combining marks of a script written with
  spaces; digits joined by `. , ' : / -` or thin and no-break spaces stay one word, so a
  number is one unit whatever its punctuation: "206-555-0148" and "2065550148" are the
  unit `2065550148`, "3,150" is `3150` (and never `150`).
- Scripts written without spaces (Chinese, Japanese, Thai) have no words: each run of
  them gives its overlapping character bigrams (a run of one character, the character).
- Units are NFKC-normalised and case-folded (full-width `７１４２` is `7142`).

A value whose units are all shorter than two characters, or which has none, cannot be
looked up (`lookup_units` answers None) and is searched the slow way.

A number is written many ways: "206-555-0148", "(206) 555-0148", "206.555.0148" and
"2065550148" are one phone number, "3,400 EUR" and "3400 EUR" one amount.
`written_forms` gives the forms the matcher searches for besides the value as given.
"""

from __future__ import annotations

import re
import unicodedata

# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, CJK
# radicals, symbols, kana, bopomofo, Han, compatibility ideographs, half-width kana,
# supplementary Han): their letters belong to no word, so a match may begin or end
# next to them.
NO_SPACE = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3000-\u312f\u31a0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
W = rf"(?:[^\W{NO_SPACE}]|[{MARKS}])"  # one character of a word of a spaced script
JOINER = "[.,'\u2019:/\u00a0\u202f\u2009-]"  # inside a number, between two digits
#: A word (see the module docstring): what a mention may never start or end inside.
TOKEN = re.compile(rf"{W}+(?:(?<=\d){JOINER}(?=\d){W}+)*")
NUMBER = rf"\d+(?:{JOINER}\d+)*"
_JOINERS = re.compile(JOINER)
_UNSPACED_RUN = re.compile(f"[{NO_SPACE}]+")


def fold(text: str) -> str:
    """The normal form units are compared in: NFKC (full-width and compatibility forms),
    then case folding."""
    return unicodedata.normalize("NFKC", text).casefold()


def _word_unit(word: str) -> str:
    """A word as a unit: folded, a number's joiners dropped (`3,150` is `3150`)."""
    folded = fold(word)
    return _JOINERS.sub("", folded) if any(c.isdigit() for c in folded) else folded


def units(text: str, seen: dict[str, str] | None = None) -> set[str]:
    """Every unit of `text`: its words, and the bigrams of its unspaced runs. `seen`
    remembers each word's unit for the caller's one pass over many texts (an index's
    settle folds the same words again and again); it is the caller's, dropped with it."""
    if seen is None:
        out = {_word_unit(m.group()) for m in TOKEN.finditer(text)}
    else:
        out = set()
        for m in TOKEN.finditer(text):
            word = m.group()
            unit = seen.get(word)
            if unit is None:
                unit = seen[word] = _word_unit(word)
            out.add(unit)
    for run in _UNSPACED_RUN.finditer(fold(text)):
        chars = run.group()
        out.update(chars[i : i + 2] for i in range(max(1, len(chars) - 1)))
    out.discard("")
    return out


def lookup_units(value: str) -> set[str] | None:
    """The units an item must hold for the matcher to find `value` in it, or None when
    they cannot narrow anything (a value of one-character units only)."""
    found = {u for u in units(value) if len(u) >= 2}
    return found or None


_PHONE = re.compile(r"\+?\(?\d{1,4}\)?(?:[ .\-]?\(?\d{2,5}\)?){1,4}")
_DATE_LIKE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")
_GROUPED = re.compile(r"(?<![\d,])\d{1,3}(?:,\d{3})+(?![\d,])")


def written_forms(value: str) -> set[str]:
    """The value as given, and the other ways people write the number it is: a phone
    number or code of 7 to 15 digits in groups (dashes, dots, spaces, an area code in
    parentheses, no separators; with a leading `+country`, the national forms too), and
    an amount's thousands separators left out ("3,400 EUR" is also "3400 EUR"; it is
    never "400 EUR"). A date is not a number of this kind."""
    whole = value.strip()
    forms = {whole}
    if _PHONE.fullmatch(whole) and not _DATE_LIKE.fullmatch(whole):
        groups = re.findall(r"\d+", whole)
        if whole.startswith("+") and len(groups) > 2:
            national = groups[1:]
            forms.update(_grouped(national))
            forms.update(f"+{groups[0]} {form}" for form in _grouped(national))
        else:
            forms.update(_grouped(groups))
    if _GROUPED.search(whole):
        forms.add(_GROUPED.sub(lambda m: m.group().replace(",", ""), whole))
    return forms


def _grouped(groups: list[str]) -> set[str]:
    """A number's digit groups written the usual ways (none when it is too short or long
    to be a phone number or a code)."""
    digits = "".join(groups)
    if not 7 <= len(digits) <= 15:
        return set()
    if len(groups) == 1 and len(digits) == 10:  # a bare ten-digit number
        groups = [digits[:3], digits[3:6], digits[6:]]
    forms = {digits}
    if len(groups) > 1:
        forms.update(sep.join(groups) for sep in ("-", ".", " "))
    if len(groups) >= 3:
        rest = "-".join(groups[1:])
        forms.update({f"({groups[0]}) {rest}", f"({groups[0]}){rest}"})
    return forms
