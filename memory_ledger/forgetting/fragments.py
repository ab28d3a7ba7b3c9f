"""Distinctive fragments of an erased text, for the verification scan.

A whole-text search misses the copies that matter most after a forget: a term list, a
half-rewritten page, a substring cut at a page boundary. So the scan also looks for the
text's fragments: its long words, its numbers, and overlapping windows of its characters
(so any surviving run of WINDOW characters contains one). A fragment that is part of
what stays in clear by design (the item's identifiers, the schema's own names) would be
found in every file and prove nothing; those are left out.
"""

from __future__ import annotations

import functools
import re
import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING

from memory_ledger.domain import EVENT_NAMES
from memory_ledger.residue import search_bytes

if TYPE_CHECKING:
    from memory_ledger.domain import MemoryItem

#: Words shorter than this (in UTF-8 bytes) are too common to mean anything when found.
MIN_WORD_BYTES = 6
#: Digit runs this long or longer: phone, passport and account numbers. Shorter ones
#: turn up by chance in every store's timestamps and hexadecimal ids.
MIN_DIGITS = 7
#: Characters per window, and the step between windows: any run of WINDOW + STEP - 1
#: characters of the text contains a whole window. Twelve, so that a window matching
#: by chance somewhere in a store's ids and timestamps is too unlikely to matter.
WINDOW = 12
STEP = 6
#: Fragments per text at most: a long turn must not make the scan's pattern set huge;
#: and per request, shared out over its texts (a whole-user forget of thousands of items
#: keeps a few fragments of each, and every whole text).
MAX_PER_TEXT = 64
MAX_PER_REQUEST = 8192

_WORD = re.compile(r"\w+")
_DIGITS = re.compile(rf"\d{{{MIN_DIGITS},}}")


def fragments(texts: Iterable[str], clear: Iterable[str] = ()) -> list[bytes]:
    """The texts' distinctive fragments as UTF-8, minus any inside a `clear` string.

    The clear strings are joined into one text (NUL between them: no fragment holds a
    NUL, refused at every write), and every candidate fragment of every text is looked
    for in it in one multi-needle pass (memory_ledger/residue.py): a request
    of ten thousand items against their identifiers stays linear in both."""
    vocabulary = "\x00".join(sorted({c.casefold() for c in clear if c}))
    texts = list(texts)
    per_text = max(4, min(MAX_PER_TEXT, MAX_PER_REQUEST // max(1, len(texts))))
    candidates = [
        [p for p in _pieces(text) if len(p.encode("utf-8")) >= MIN_WORD_BYTES and p.strip()]
        for text in texts
    ]
    folded = sorted({p.casefold() for pieces in candidates for p in pieces})
    found = search_bytes(vocabulary.encode("utf-8"), [f.encode("utf-8") for f in folded])
    inside = {folded[i] for i in found}
    out: dict[bytes, None] = {}
    for pieces in candidates:
        kept = 0
        for piece in pieces:
            if kept >= per_text:
                break
            if piece.casefold() in inside:
                continue
            raw = piece.encode("utf-8")
            if raw not in out:
                out[raw] = None
                kept += 1
    return list(out)


def _pieces(text: str) -> list[str]:
    """Candidate fragments, in the order they are preferred: long digit runs, long
    words, then windows across the text."""
    found = [m.group() for m in _DIGITS.finditer(text)]
    found.extend(w for w in _WORD.findall(text) if len(w.encode("utf-8")) >= MIN_WORD_BYTES)
    found.extend(text[i : i + WINDOW] for i in range(0, max(len(text) - WINDOW, 0) + 1, STEP))
    return found


def clear_strings(items: Iterable[MemoryItem]) -> list[str]:
    """What stays in clear by design around these items: their clear attributes and
    provenance, and the names the stores' schemas and events use."""
    out: list[str] = [*_schema_words(), *EVENT_WORDS, *_ledger_words()]
    for item in items:
        # The names events store in clear beside the values (`retention`, `basis`, ...).
        out.extend(vars(item))
        out.extend(item.provenance or {})
        out.extend(item.retention or {})
        for flag in getattr(item, "flags", None) or []:  # clear codes: `status:running`
            out.extend([flag, *flag.split(":")])
        out.extend(
            str(v)
            for v in (
                item.namespace,
                item.kind,
                item.subject,
                item.predicate,
                item.category,
                item.origin,
                item.sensitivity,
                *(item.provenance or {}).values(),
                *(item.retention or {}).values(),
            )
            if v is not None
        )
    return out


#: What the event store's rows say in clear about every event: its envelope and topics.
EVENT_WORDS = (
    "memory_ledger.domain:MemoryItem",
    *EVENT_NAMES,
    "ContextServed",
    "originator_topic",
    "timestamp",
    "datetime_iso",
    "_type_",
    "_data_",
    "user_request",
    "retention_expiry",
    "operator_request",
    "session_end",
    "restore_replay",
)


@functools.cache
def _ledger_words() -> tuple[str, ...]:
    """What the lifecycle ledger holds in clear in every request's entries: the entry
    types, the payloads' field names and their fixed values (statuses, bases, reasons).
    An erased text that says "completed" is not residue because the ledger does."""
    from memory_ledger.ledger import PAYLOAD_MODELS, EntryType

    words: set[str] = {t.value for t in EntryType}
    for model in PAYLOAD_MODELS.values():
        for name, info in model.model_fields.items():
            words.add(name)
            words.update(_literal_values(info.annotation))
    return tuple(sorted(words))


def _literal_values(annotation: object) -> set[str]:
    found: set[str] = set()
    if typing.get_origin(annotation) is typing.Literal:
        found.update(str(a) for a in typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        found |= _literal_values(arg)
    return found


def _schema_words() -> list[str]:
    import memory_ledger.projections.runner  # noqa: F401 - registers every projection's tables
    from memory_ledger.projections.base import metadata  # the projections' tables and their columns

    words = [t.name for t in metadata.tables.values()]
    words += [c.name for t in metadata.tables.values() for c in t.columns]
    return words
