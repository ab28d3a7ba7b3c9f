"""The context an attempt of a run was shown, recorded on the run so that a retry of
the same attempt is shown the same memories (seed 003: a retry reuses the snapshot,
so that memory changing mid-run does not change behaviour; a new step refreshes it and
records what changed).

The run keeps the snapshot's item ids and versions, their clear labels and the hash
of the rendered text, never the text: a retry reads each item again from the log at
the version the snapshot names. An item erased, stopped or expired since is left out
(a forget is never undone by a retry) and named in `dropped`; `reused` says whether
what the retry shows is exactly what the attempt was shown (same hash).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, fields
from typing import Any

from memory_ledger.errors import InvalidTransition, NotFound
from memory_ledger.retrieval.context import Context, ContextItem

_META = [f.name for f in fields(ContextItem) if f.name != "text"]


@dataclass(frozen=True)
class RunContext:
    context: Context
    context_hash: str
    reused: bool
    dropped: list[str]  # snapshot items left out of a retry: erased, stopped or changed
    #: A new step's snapshot against the previous step's: item ids added and removed.
    since_previous_step: dict[str, list[str]] | None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["context"] = self.context.to_dict()
        return out


def digest(context: Context) -> str:
    return hashlib.sha256(context.render().encode("utf-8")).hexdigest()


def snapshot(context: Context) -> dict[str, Any]:
    """What the run records: ids, versions, labels and the hash; no text."""
    return {
        "hash": digest(context),
        "items": [{k: getattr(i, k) for k in _META} for i in context.items],
        "token_budget": context.token_budget,
        "rank": context.rank,
        "embedder": context.embedder,
    }


def replay(ledger: Any, recorded: dict[str, Any]) -> tuple[Context, list[str]]:
    """The recorded snapshot's items read again from the log, at their versions."""
    items, dropped = [], []
    for meta in recorded["items"]:
        text = _text_at(ledger, meta["item_id"], meta["version"], meta["kind"])
        if text is None:
            dropped.append(meta["item_id"])
            continue
        items.append(ContextItem(text=text, **meta))
    tokens = sum(i.tokens for i in items)
    context = Context(items, recorded["token_budget"], tokens, 0, recorded["rank"],
                      recorded["embedder"])  # fmt: skip
    return context, dropped


def step_diff(previous: dict[str, Any] | None, current: dict[str, Any]) -> dict[str, list[str]]:
    before = {i["item_id"] for i in (previous or {}).get("items", [])}
    now = {i["item_id"] for i in current["items"]}
    return {"added": sorted(now - before), "removed": sorted(before - now)}


def _text_at(ledger: Any, item_id: str, version: int, kind: str) -> str | None:
    """The item's text at `version` if it is still usable, else None."""
    try:
        state = ledger.get(item_id)
    except (NotFound, InvalidTransition):
        return None
    if state.erased or state.suppressed or state.expired or state.text is None:
        return None
    if state.version == version:
        return str(state.text)
    if kind == "fact":  # an earlier version of a fact stays readable as history
        for memory in ledger.history(item_id):
            if memory.version == version and memory.text is not None:
                return str(memory.text)
    return None
