"""Mentions: out-of-scope items that repeat a forgotten value word for word.

Provenance links an item to the turn it was taken from, but a user can repeat the
value later ("send the taxi to 18 Haisong Road") in a turn that produced no item, or an
agent can copy it into another fact. Nothing links those to the target, yet they carry
the forgotten data, and the byte scan would find it there and keep the request
`partial` forever. So a forget request also looks for the forgotten values, by their
text, in the other items of the same namespace, and redacts the value inside them
instead of erasing them: the rest of the turn ("at 7am tomorrow") is not in scope, and
stays. Redaction rotates the item's key, so the earlier wording becomes unreadable too.

A value is searched whole, and so is each part of it between commas or semicolons that
contains a digit: "send the taxi to 18 Haisong Road" repeats the identifying part of
"18 Haisong Road, Xihu District, Hangzhou". Parts without a digit ("Hangzhou") name
places and things many people share, and redacting them everywhere would erase far
more than the request asked for. Matching is literal and case-insensitive. A value
that starts or ends with a letter or digit must not continue into a longer word ("Tom"
never matches "Tomorrow"); text in scripts without spaces (Chinese) matches anywhere.
Values shorter than the residue scan's needles are not searched: too short to identify.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, select

from memory_ledger.residue import MIN_NEEDLE_BYTES
from projections.base import Projection

REPLACEMENT = "[forgotten]"
_WORD = "A-Za-z0-9"
_PART_SEPARATORS = re.compile(r"[,;\n，；、]")


def searched_for(values: Iterable[str]) -> set[str]:
    """The values, and their parts that carry a digit (house numbers, phone numbers)."""
    out = set()
    for value in values:
        out.add(value.strip())
        parts = [p.strip() for p in _PART_SEPARATORS.split(value)]
        out.update(p for p in parts if any(c.isdigit() for c in p))
    return {v for v in out if len(v.encode("utf-8")) >= MIN_NEEDLE_BYTES}


def mention_pattern(values: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for all values, longest first so an overlap is replaced whole."""
    parts = []
    for value in sorted(searched_for(values), key=len, reverse=True):
        part = re.escape(value)
        if value[0].isascii() and value[0].isalnum():
            part = f"(?<![{_WORD}])" + part
        if value[-1].isascii() and value[-1].isalnum():
            part += f"(?![{_WORD}])"
        parts.append(part)
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def find_mentions(
    conn: Connection,
    projections: Sequence[Projection],
    namespace: str,
    pattern: re.Pattern[str],
    exclude: Iterable[str],
) -> list[str]:
    """Items of the namespace whose readable content contains a forgotten value.

    Read from the projections' plaintext columns, every version they hold, so an item
    that said the value before it was changed is found too."""
    skip = set(exclude)
    found: set[str] = set()
    for projection in projections:
        table = projection.table
        if not projection.mention_source or not projection.plaintext_columns:
            continue  # index terms are fragments: a value is found in the texts they index
        if "item_id" not in table.c:
            continue  # views that are not items (summaries) are rebuilt by the fan-out
        columns = [table.c[c] for c in projection.plaintext_columns]
        query = select(table.c.item_id, *columns).where(table.c.namespace == namespace)
        for item_id, *texts in conn.execute(query):
            if item_id not in skip and any(t and pattern.search(t) for t in texts):
                found.add(item_id)
    return sorted(found)


def without_mentions(
    fields: dict[str, str], pattern: re.Pattern[str]
) -> tuple[dict[str, str], list[str]]:
    """The fields with every mention replaced, and the names of the fields that changed."""
    rewritten = {name: pattern.sub(REPLACEMENT, text) for name, text in fields.items()}
    return rewritten, sorted(n for n in fields if rewritten[n] != fields[n])
