"""Redaction at span granularity: what a request to remove part of what was said names.

"Delete the exact time, keep that we met"; "remove the card number from that message".
A redaction names items (a turn, a fact) and the spans to remove from them: substrings
of their text, or whole fields. It goes through the forget request path like any
erasure (resolution, dry run, a receipt per store, ledger entries, verification,
`completed` only when proven): the named spans are replaced by `[redacted]` in the
items and in what was derived from them or carried their words (an inference made from
the turn, the turn a fact was taken from), the rest stays readable under a fresh key,
and every older key generation is destroyed, so the earlier wording is unreadable in
every sealed copy.

A span is matched literally, case-insensitively, and never inside a longer word or
number ("14:30" does not cut "114:30"); a span that occurs in none of the named items is
refused instead of silently ignored. Spans are content: they are held in memory only,
never written to the ledger, a receipt or a log line (the ledger records how many).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import Field, StrictStr, model_validator

from memory_ledger.domain import MemoryItem
from memory_ledger.event_log import EventLog
from memory_ledger.forgetting.mentions import MentionPattern
from memory_ledger.identifiers import ItemId
from memory_ledger.keystore import KeyDestruction
from memory_ledger.write_policy import MAX_VALUE_BYTES, StrictModel

REDACTED = "[redacted]"
MAX_SPANS = 32
MAX_ITEMS = 100

Span = Annotated[StrictStr, Field(min_length=1)]


class RedactionRequest(StrictModel):
    """Items of the caller's namespace, and either spans to remove or whole fields."""

    item_ids: Annotated[tuple[ItemId, ...], Field(min_length=1, max_length=MAX_ITEMS)]
    spans: Annotated[tuple[Span, ...], Field(max_length=MAX_SPANS)] = ()
    fields: tuple[Literal["value", "content"], ...] = ()

    @model_validator(mode="after")
    def _one_way(self) -> RedactionRequest:
        if bool(self.spans) == bool(self.fields):
            raise ValueError("name the spans to remove, or whole fields: exactly one of them")
        for span in self.spans:
            if not span.strip():
                raise ValueError("a span must not be blank")
            if "\x00" in span:
                raise ValueError("a span must not contain NUL (U+0000)")
            if len(span.encode("utf-8")) > MAX_VALUE_BYTES:
                raise ValueError(f"a span is at most {MAX_VALUE_BYTES} bytes")
        if len(set(self.item_ids)) != len(self.item_ids):
            raise ValueError("item_ids names an item more than once")
        return self

    def ledger_parameters(self) -> dict[str, object]:
        """Ids and counts only: the spans are the content being removed."""
        out: dict[str, object] = {"kind": "redaction", "item_ids": [str(i) for i in self.item_ids]}
        if self.spans:
            out["spans"] = len(self.spans)
        else:
            out["fields"] = list(self.fields)
        return out


def span_pattern(spans: Iterable[str]) -> MentionPattern | None:
    """The spans as one matcher, on the token boundaries a forget's mentions use (see
    `mentions`), replacing with `[redacted]`. Whole spans only: never their parts; and a
    capitalised span ("Rose") never takes its lower-case namesake ("the rose bushes")."""
    wanted = {s.strip() for s in spans if s.strip()}
    return MentionPattern(wanted, replacement=REDACTED, names_keep_case=True) if wanted else None


def rewrite_items(
    log: EventLog, rewrites: list[tuple[MemoryItem, dict[str, str], list[str]]]
) -> int:
    """Re-seal each item's content (already rewritten) under a new key generation and
    destroy every older one, all in one transaction: a crash leaves every item as it was
    or every item rewritten. The log position of the last Redacted event is returned.

    `rewrites`: (item, its new fields, the names of the fields that changed)."""
    items, keys, destroyed = [], [], []
    for item, fields, changed in rewrites:
        generation = item.key_generation + 1
        sealed, key = log.seal_new(item.id, generation, fields)
        retired = item.redact(fields=changed, key_generation=generation, sealed=sealed)
        items.append(item)
        keys.append(key)
        destroyed.append(KeyDestruction(str(item.id), tuple(retired)))
    return log.save(items, keys, destroyed) if items else log.max_position()
