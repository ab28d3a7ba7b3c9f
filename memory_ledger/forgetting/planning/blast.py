"""The one safety check every plan made from words passes: how much it touches.

A reader of words can be wrong in one direction that matters: wider than asked (a
location phrase read as content, a person's name read as the thing to forget, a
description matched to every turn that shares a word). Whatever read the words, this
check runs on the plan before it is stored (`flow.plan`), so no reader can slip past it:

- every plan states its blast radius: places touched, items touched, and their share of
  the namespace (`ForgetPlan.blast`), so the user sees the size before saying yes;
- a whole-namespace or subtree scope, or a plan over every item, is made only when the
  request asks for everything ("forget everything you know about me"), and then the
  blast names that scope and its counts;
- a piece (or an item plan) wider than the bounds (bounds.py) becomes a question with
  the counts and a few example places, never a plan.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from memory_ledger.forgetting.planning.bounds import MAX_EXAMPLES, SHARE_FROM, share, too_wide
from memory_ledger.forgetting.planning.drafts import Blast, Draft
from memory_ledger.forgetting.planning.lexicon import lexicon
from memory_ledger.forgetting.planning.pool import Pool, candidate
from memory_ledger.projections.catalog import catalog

if TYPE_CHECKING:
    from memory_ledger.forgetting.planning.reading import Reading
    from memory_ledger.forgetting.planning.request import PlanningRequest

#: Scopes that cover a whole namespace or a subtree of them, whatever they hold.
WHOLE_SCOPES = frozenset({"namespace", "subtree"})
EXECUTABLE = ("planned", "partial_match")
AMBIGUOUS = "ambiguous"
TOO_WIDE = "too_wide"
#: "the nanny one", "那个保姆的": words that say which of several a description means.
_QUALIFIER = re.compile(r"^(?:the|that)\s.+\sone$|^那个.+的$", re.IGNORECASE)


def namespace_items(request: PlanningRequest) -> int:
    """How many items the namespace holds now (one count, not a load of the catalog)."""
    query = (
        select(func.count()).select_from(catalog).where(catalog.c.namespace == request.namespace)
    )
    return int(request.store.conn.execute(query).scalar_one())


def blast_of(draft: Draft, total: int) -> Blast:
    if draft.information:
        places = sum(len(p["places"]) for p in draft.pieces if p["status"] == "resolved")
    else:
        places = len(set(draft.targets) | set(draft.history))
    items = len({*draft.targets, *draft.cascaded, *draft.history, *draft.spans_by_item})
    kind = (draft.scope or {}).get("kind")
    return Blast(places, items, total, share(items, total), None if kind == "item" else kind)


def checked(request: PlanningRequest, draft: Draft, reading: Reading) -> Draft:
    """`draft` with its blast radius, or a question in its place when it is wider than
    words may plan. Drafts that plan nothing pass unchanged."""
    if draft.status not in EXECUTABLE:
        return draft
    total = namespace_items(request)
    blast = blast_of(draft, total)
    kind = (draft.scope or {}).get("kind")
    every = total >= SHARE_FROM and blast.items >= total and not draft.information
    whole = kind in WHOLE_SCOPES or every
    if whole:
        if reading.everything:
            blast.scope = kind if kind in WHOLE_SCOPES else "every_item"
            return replace(draft, blast=blast)
        return _ask_whole(request, draft, reading, blast)
    if draft.information:
        wide = [
            p for p in draft.pieces
            if p["status"] == "resolved" and too_wide(len(p["places"]), total)
        ]  # fmt: skip
        if wide:
            return _ask_pieces(request, draft, reading, wide, total)
        unsure = _qualified(draft)
        if unsure:
            return _ask_pieces(request, draft, reading, unsure, total, "which_one")
    elif reading.topic and kind == "item":
        # "what I said about the window repairs": turns that share words with a topic
        # are a guess, with no value to lead to them; the user picks
        return _ask_whole(request, draft, reading, blast, template="candidates")
    elif kind not in ("category", "source", "time_range") and too_wide(blast.places, total):
        # items chosen by the reader (not a scope the words named): too many to guess
        return _ask_whole(request, draft, reading, blast, template="too_many")
    return replace(draft, blast=blast)


def _examples(
    request: PlanningRequest, ids: list[str], language: str
) -> tuple[Pool, list[dict[str, Any]]]:
    chosen = sorted(ids)[:MAX_EXAMPLES]
    pool = Pool(request.store.conn, request.store.log, request.namespace, only=chosen)
    pool.texts([i for i in chosen if i in pool.by_id])
    return pool, [candidate(pool, i, language) for i in chosen if i in pool.by_id]


def _listing(options: list[dict[str, Any]]) -> str:
    return "; ".join(f"({n}) {o['label']}" for n, o in enumerate(options, 1))


def _ask_whole(
    request: PlanningRequest,
    draft: Draft,
    reading: Reading,
    blast: Blast,
    template: str = "whole_scope",
) -> Draft:
    """An item plan too wide for words: asked about, with a few of its items to pick."""
    language = reading.language
    _, options = _examples(request, [*draft.targets, *draft.history], language)
    words = lexicon().questions[f"{language}_{template}"]
    question = words.format(
        count=len(options),
        places=blast.places,
        total=blast.namespace_items,
        share=round(100 * blast.share),
        options=_listing(options),
    )
    asked = Draft(
        "needs_clarification",
        draft.intent,
        conclusion=draft.conclusion,
        candidates=options,
        question=question,
        reason=TOO_WIDE,
    )
    asked.blast = blast
    return asked


def _qualified(draft: Draft) -> list[dict[str, Any]]:
    """Descriptions the request narrows with words that matched nothing ("June's phone
    number, the nanny one"): what the description found may be another's, so it is
    asked about, not planned without the words that said which."""
    out = []
    for before, after in zip(draft.pieces, draft.pieces[1:], strict=False):
        if (
            before["status"] == "resolved"
            and before["kind"] == "description"
            and after["status"] == "not_found"
            and after["kind"] == "description"
            and _QUALIFIER.search(after.get("said", ""))
        ):
            out.append(before)
    return out


def _ask_pieces(
    request: PlanningRequest,
    draft: Draft,
    reading: Reading,
    wide: list[dict[str, Any]],
    total: int,
    template: str = "too_wide",
) -> Draft:
    """A plan of information with pieces said in too many places: those pieces become
    questions (a few example places each, to choose from); the others stay resolved,
    planned again as they are when the user answers."""
    blast = blast_of(draft, total)  # before its pieces become questions
    reason = TOO_WIDE if template == "too_wide" else template
    language = reading.language
    words = lexicon().questions[f"{language}_{template}"]
    options: list[dict[str, Any]] = []
    questions = []
    for entry in wide:
        n = draft.pieces.index(entry)
        places = {p["item_id"]: p for p in entry["places"]}
        _, mine = _examples(request, list(places), language)
        for option in mine:
            item = option["item_id"]
            erase = places[item]["action"] == "erase"
            option |= {
                "part": n,
                "places": [item],
                "erase": [item] if erase else [],
                "spans_by_item": {} if erase else {item: draft.spans_by_item.get(item, [])},
            }
        listing = "; ".join(f"({len(options) + k}) {o['label']}" for k, o in enumerate(mine, 1))
        options += mine
        questions.append(
            words.format(
                said=entry["said"],
                places=len(places),
                total=total,
                share=round(100 * share(len(places), total)),
                options=listing,
            )
        )
        entry["status"], entry["reason"] = AMBIGUOUS, reason
        entry["options"] = [o["item_id"] for o in mine]
    for part in draft.parts:
        for entry in wide:
            if part["said"] == entry["said"]:
                part["status"], part["reason"] = AMBIGUOUS, reason
    asked = Draft(
        "needs_clarification",
        draft.intent,
        candidates=options,
        question=" ".join(questions),
        reason=reason,
        pieces=draft.pieces,
        kept=draft.kept,
        parts=draft.parts,
        information=True,
    )
    asked.spans_by_item = draft.spans_by_item
    asked.blast = blast
    return asked
