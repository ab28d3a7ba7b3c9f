"""The sentences that say what became of each part of a request of several parts.

Shared by the item planner (its questions), the information planner (its questions)
and the flow (a plan's message), so it lives apart from all three.
"""

from __future__ import annotations

from typing import Any

from memory_ledger.forgetting.planning.drafts import NOT_FOUND, RESOLVED
from memory_ledger.forgetting.planning.lexicon import lexicon
from memory_ledger.forgetting.planning.reading import MAX_PARTS


def missing_parts(parts: list[dict[str, Any]], language: str) -> list[str]:
    """A sentence for each part that is not planned: "I could not find 'my phone
    number': nothing stored matches it now (it may have been erased already)."."""
    words = lexicon().messages
    out = []
    for part in parts:
        if part["status"] != NOT_FOUND or part["reason"] == "too_many_parts":
            continue
        why = words.get(f"{language}_why_{part['reason']}", words[f"{language}_why"])
        if part.get("read_as"):  # "phone number", read as "my sister's phone number"
            template = words[f"{language}_part_not_found_read_as"]
        else:
            template = words[f"{language}_part_not_found"]
        out.append(template.format(said=part["said"], read_as=part.get("read_as"), why=why))
    beyond = sum(1 for p in parts if p["reason"] == "too_many_parts")
    if beyond:  # one sentence for them all
        out.append(words[f"{language}_parts_too_many"].format(count=beyond, max=MAX_PARTS))
    return out


def planned_parts(parts: list[dict[str, Any]], language: str) -> list[str]:
    """The parts that stay planned while another is asked about, with their counts."""
    words = lexicon().messages
    listing = [
        words[f"{language}_part_count"].format(said=p["said"], count=len(p["item_ids"]))
        for p in parts
        if p["status"] == RESOLVED
    ]
    sep = "；" if language == "zh" else "; "
    return [words[f"{language}_parts_planned"].format(listing=sep.join(listing))] if listing else []
