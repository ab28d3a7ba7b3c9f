"""From a Reading to a plan: which of the principal's items the request means.

The planner only ever narrows. It starts from the items of the principal's own
namespace, keeps those every selector of the reading agrees on, and when what is left
could be several different things the request named as one ("my old address" with two
old addresses, "that thing I said yesterday" with four turns), it asks, with the
candidates, instead of taking all of them. A third party the request names ("my friend
Bob's address") is looked for among the subjects of the user's own memory, and a request
about someone who is not there matches nothing: it never falls back to the user.

Deletions by a single predicate, category, conversation or time window keep their scope
(so execution resolves them again and can refuse if the memory changed); anything
narrower is an explicit list of item ids.

A request of several parts ("my sister's address and my phone number") is planned part
by part, each as a request of its own words; the plan is the union of what the parts
name, as an explicit list of item ids, and it lists every part with what became of it.
No part is dropped without a word: one that is ambiguous is asked about (the others stay
in the plan), and one that matches nothing is named, with why, in a plan whose status
says it covers only part of the request (`partial_match`).

A request that names information ("delete the old gate code 7142", "redact 206-555-0148
everywhere", "把豆包这个小名删掉") is planned by information.py instead: each piece to
every place it is said, a fact whose value it is erased, every other place redacted. A
plan of facts read here lists the places that repeat their values too (`pieces`,
`spans_by_item`), so its execution redacts them in every written form.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memory_ledger.forgetting.planning.drafts import AMBIGUOUS, NOT_FOUND, RESOLVED, Draft
from memory_ledger.forgetting.planning.information import (
    InformationPlanner,
    concept_is_head,
    only_concept_words,
)
from memory_ledger.forgetting.planning.part_sentences import missing_parts, planned_parts
from memory_ledger.forgetting.planning.people import People
from memory_ledger.forgetting.planning.pieces import Piece
from memory_ledger.forgetting.planning.pool import (
    Pool,
    Row,
    candidate,
    face,
    things,
    without_carriers,
    without_derived,
)
from memory_ledger.forgetting.planning.reading import MAX_PARTS, Part, Reading
from memory_ledger.forgetting.planning.text_match import first_person, mentions, shares_chinese
from memory_ledger.forgetting.scope import ForgetScope, erased_with, resolve
from memory_ledger.forgetting.scope import normalized as folded_value
from memory_ledger.phrases import normalise
from memory_ledger.times import canonical_time

if TYPE_CHECKING:
    from memory_ledger.forgetting.planning.request import PlanningRequest

#: A plan lists at most this many candidates in a clarification (the closest first).
MAX_CANDIDATES = 8
#: Content matching (no selector matched): how similar the best item must be, and how
#: far ahead of the next one, to be taken as the one meant.
MIN_MATCH = 0.35
CLEAR_LEAD = 0.85
#: Why a request about items may match nothing and still name information: no such
#: fact, or no such person ("the florist's number", "the aisle-seat note").
_FALLS_THROUGH = ("no_such_value", "third_party_not_found", "no_content_match", "nothing_named")


class Planner:
    """Plans a request about items (see the module docstring) for one call's request.

    What it reads and for whom come from the call's `PlanningRequest`; the reading it
    is planning at a moment (`self.reading`: the request's, or one part's) is its own,
    set by its own entry points and never by a caller."""

    def __init__(self, request: PlanningRequest) -> None:
        self.request = request
        self.conn = request.store.conn
        self.kept = request.store.kept_rows
        self.log = request.store.log
        self.vectors = request.store.vectors
        self.namespace = request.namespace
        self.lex = request.lex
        #: The projections the mention lookup reads (None: requests are planned as
        #: requests about items only, as before pieces of information were read).
        self.projections = request.store.projections

    def _information(self) -> InformationPlanner:
        """The information planner for this call's request; it plans a piece named by
        a concept ("my phone number") with this planner's `plan`."""
        return InformationPlanner(self.request, self.plan)

    @functools.cached_property
    def pool(self) -> Pool:
        """Every item of the namespace: loaded only by a plan about items (a plan of
        information looks only at the places its values are found in)."""
        return Pool(self.conn, self.log, self.namespace, kept=self.kept)

    # -- the entry point ------------------------------------------------------------------

    def plan(self, reading: Reading, text: str, session_id: str | None = None) -> Draft:
        if reading.intent is None:
            return Draft("not_a_request", reason=reading.why_not)
        information = self._may_name_information(reading, text)
        tried = False
        if information and self._contested(reading):
            # "花呗欠款" (my Huabei debt) or "物业电话" (the office's phone, not mine):
            # the user's facts of the concept, if their values say the other words
            tried = True
            draft = self._plan_items(reading, text, session_id)
            if not self._values_say(draft, self._contested(reading)):
                assert reading.information is not None
                found = self._information().plan(reading, reading.information)
                if found is not None and found.status != "nothing_matched":
                    return found
                if draft.status in ("planned", "needs_clarification"):
                    # no fact of the user's says "花艺师": the florist's phone, not mine
                    return Draft("nothing_matched", reading.intent, reason="value_not_found")
            return self._with_mentions(draft)
        if information and self._names_information(reading, text):
            tried = True
            assert reading.information is not None
            draft = self._information().plan(reading, reading.information)
            if draft is not None and not self._suppresses(reading, draft):
                return draft
            if draft is None and reading.concepts and not self._concept_selects(reading):
                # "快递柜号": no such value here, and "号" is no number of the user's
                return Draft("nothing_matched", reading.intent, reason="value_not_found")
            if draft is None and any(p.every for p in reading.information.pieces):
                # "keep only the current X" never means whole messages that mention it
                return Draft("nothing_matched", reading.intent, reason="value_not_found")
        draft = self._plan_items(reading, text, session_id)
        if (
            information
            and not tried
            and draft.status == "nothing_matched"
            and not draft.parts
            and draft.reason in _FALLS_THROUGH
        ):
            # "the aisle-seat note": no seat preference is stored; maybe a note is
            assert reading.information is not None
            found = self._information().plan(reading, reading.information)
            if found is not None and found.status != "nothing_matched":
                return found
        if information and draft.status == "planned" and draft.intent == "delete":
            asked = self._other_things(reading, draft, text)
            if asked is not None:
                return asked
        if self.projections is not None and reading.information is not None:
            return self._with_mentions(draft)
        return draft

    def _other_things(self, reading: Reading, draft: Draft, text: str) -> Draft | None:
        """ "Delete the phone number": the user's phone fact, and the office's number the
        turns say, both fit. Asked about, never erased at a guess (a request that says
        whose, "my phone number", is about the user's own)."""
        info = reading.information
        pieces = info.pieces if info else []
        if len(pieces) != 1 or pieces[0].kind != "description" or first_person(normalise(text)):
            return None
        planner = self._information()
        if not planner.generic(pieces[0].label):
            return None
        found = planner.others_of_kind(draft, pieces[0])
        if found is None:
            return None
        return planner.draft(reading, [found], [], 0)

    def _suppresses(self, reading: Reading, draft: Draft) -> bool:
        """ "我失眠的事以后别再提了": not to bring up a memory stops using it (the item
        planner's reading); the information is redacted only where no fact of the user
        holds it, or when it was named by its value ("别再提503-555-0164")."""
        if reading.intent != "stop_using" or draft.intent != "delete":
            return False
        info = reading.information
        return info is not None and not any(
            (p.literal and p.kind not in ("name", "text")) or self._kind_of_value(p.label)
            for p in info.pieces
        )

    def _may_name_information(self, reading: Reading, text: str) -> bool:
        """Whether the request's pieces of information can be planned at all: a request
        to forget (or not to restate) something, with pieces, and the lookup at hand."""
        info = reading.information
        if info is None or self.projections is None or not info.pieces:
            return False
        if reading.intent not in ("delete", "stop_using", "redact"):
            return False
        return reading.intent != "stop_using" or self.lex.information.restate.any(normalise(text))

    def _said_outside_filler(self, text: str) -> bool:
        """Whether the request speaks of what was said ("what I told you") other than in
        the words that only say where to forget ("from every conversation and note",
        "所有对话和备注里的")."""
        norm = normalise(text)
        filler = self.lex.information.filler.find(norm)
        return any(
            not any(f.start <= h.start and h.end <= f.end for f in filler)
            for h in self.lex.said.find(norm)
        )

    def _names_information(self, reading: Reading, text: str) -> bool:
        """Whether a request is planned by the information it names, rather than by
        the items it describes ("my old address", "what I said yesterday"): it names a
        value by its shape (a code, an amount, a phone number, a quoted phrase); or a
        name, or Chinese text that is no word of the lexicon, and selects nothing
        else; or it describes a kind of value ("the previous gate code", "订单号")
        that no concept of the lexicon is the head of."""
        info = reading.information
        assert info is not None
        kinds = {p.kind for p in info.pieces}
        if kinds - {"name", "text", "description"}:
            return True
        if reading.intent == "redact" and reading.spans:
            return False  # "the time of the Canucks game": kinds of text, in items
        descriptions = [p for p in info.pieces if p.kind == "description"]
        by_items = (
            reading.relations or reading.names or reading.kinds or reading.window
            or reading.session or reading.topic or reading.everything
            or (reading.said and self._said_outside_filler(text))
        )  # fmt: skip
        # A concept or category selects items when it is what a description is ("my
        # mobile number", "marathon goal"), not part of a kind of value that another
        # word heads ("病历号", "打电话的备注", "物业电话": the office's, not mine).
        by_concept = self._concept_selects(reading)
        named = [p for p in info.pieces if p.kind in ("name", "text")]
        if named and not by_items:  # values by name ("豆包", "Wren"), not "the Bristol address"
            return not all(p.kind == "name" and self._narrows(p) for p in named)
        if not descriptions or not any(self._kind_of_value(p.label) for p in descriptions):
            return False
        if any(p.every for p in info.pieces):
            return True
        return not by_items and not by_concept

    def _contested(self, reading: Reading) -> list[str]:
        """The Chinese words that qualify a concept a description ends with, when they
        are no words of the lexicon ("花呗" in "花呗欠款", "物业" in "物业电话"): they
        may narrow the user's facts of the concept, or name someone else's thing."""
        info = reading.information
        if info is None or any(p.literal and p.kind not in ("name", "text") for p in info.pieces):
            return []
        out = []
        for piece in info.pieces:
            low = normalise(piece.label)
            if piece.kind != "description" or low.isascii() or not concept_is_head(self.lex, low):
                continue
            if "的" in low:  # "张医生的电话": whose it is, for the item planner's people
                continue
            if only_concept_words(self.lex, low) or not self._kind_of_value(low):
                continue
            mask = list(low)
            hits = [*self.lex.concepts.find(low), *self.lex.information.trim_zh.find(low)]
            hits += [*self.lex.which.find(low), *self.lex.zh_stopwords.find(low)]
            for h in hits:
                mask[h.start : h.end] = " " * (h.end - h.start)
            out += [w for w in "".join(mask).split() if len(w) >= 2]
        return out

    def _values_say(self, draft: Draft, words: list[str]) -> bool:
        """Whether a plan of facts erases facts whose values say these words."""
        if draft.status != "planned" or not words:
            return False
        rows = [self.pool.by_id[i] for i in draft.targets if i in self.pool.by_id]
        facts = [r.item_id for r in rows if r.kind != "turn"]
        texts = self.pool.texts(facts)
        return any(t and any(w in t for w in words) for t in texts.values())

    def _concept_selects(self, reading: Reading) -> bool:
        """Whether the request's concepts or categories select the user's items: they
        are what its descriptions are, not parts of kinds of value another word heads
        ("病历号", "打电话的备注", "物业电话": the office's, not mine)."""
        info = reading.information
        descriptions = [p for p in info.pieces if p.kind == "description"] if info else []
        values = bool(descriptions) and all(self._describes_value(p.label) for p in descriptions)
        return bool(reading.concepts or reading.categories) and not values

    def _describes_value(self, label: str) -> bool:
        """A description of a kind of value that is no concept of the user's facts: a
        label word is its head ("gate code", "病历号") and no concept is, or the
        concept is, but other Chinese words say whose or which ("物业电话")."""
        low = normalise(label)
        heads = [h for h in self.lex.information.labels.find(low) if h.end == len(low)]
        if not heads:
            return False
        if not concept_is_head(self.lex, low):
            return True
        return not low.isascii() and not only_concept_words(self.lex, low)

    def _kind_of_value(self, label: str) -> bool:
        """Whether a description names a kind of value ("gate code", "押金", "note")."""
        return bool(self.lex.information.labels.find(normalise(label)))

    def _narrows(self, piece: Piece) -> bool:
        """A name said with a concept other than a name ("the Bristol address")."""
        hits = self.lex.concepts.find(normalise(piece.label))
        return any(h.entry.removesuffix("#many") != "name" for h in hits)

    def _with_mentions(self, draft: Draft) -> Draft:
        """A plan that erases facts lists every place that repeats their values (in any
        written form), where the value is redacted and the rest stays."""
        if draft.status not in ("planned", "partial_match") or draft.intent != "delete":
            return draft
        if draft.scope is not None and draft.scope.get("kind") == "namespace":
            return draft
        return self._information().mentions_of(draft, self.reading.language)

    def _plan_items(self, reading: Reading, text: str, session_id: str | None) -> Draft:
        if reading.parts:
            return self._compound(reading, session_id)
        self.reading = reading
        self.text = normalise(text)
        self.session_id = session_id
        if reading.everything and not (
            reading.concepts or reading.categories or reading.window or reading.session
        ):
            return self._finish(self._whole_namespace())
        self.people = People(self.pool, self.lex, reading, self.text)
        subjects = self.people.named()
        if reading.intent == "redact" and subjects == []:
            # "the dentist's number from what I told you": words to find, not a subject
            # (a copy of the reading: the caller's is never changed)
            extra = [w for w in reading.relations if w.isascii()]
            reading = self.reading = replace(reading, words=[*reading.words, *extra])
            subjects = None
        if subjects is not None and not subjects:
            return Draft("nothing_matched", reading.intent, reason="third_party_not_found")
        if reading.intent == "redact":
            return self._finish(self._redaction(subjects))
        if reading.intent == "update":
            return self._finish(self._update(subjects))
        return self._finish(self._select(subjects))

    # -- a request of several parts -----------------------------------------------------

    def _compound(self, reading: Reading, session_id: str | None) -> Draft:
        """Each part planned as a request of its own, then one plan of them all: the
        union of the parts' targets (a part adds only what it names itself), asked
        about where a part is ambiguous, and partial where a part matches nothing."""
        # A request of more parts is planned for its first ones; the others are listed as
        # not planned (and why), never left out.
        drafts = [self.plan(p.reading, p.text, session_id) for p in reading.parts[:MAX_PARTS]]
        kinds = ("delete", "stop_using")  # one request does one of them, to all its parts
        intent = next(
            (d.intent for d in drafts if d.status == "planned" and d.intent in kinds),
            next((d.intent for d in drafts if d.intent in kinds), reading.intent),
        )
        parts = [_part(p, d, intent) for p, d in zip(reading.parts, drafts, strict=False)]
        parts += [
            {"said": p.said, "status": NOT_FOUND, "item_ids": [], "reason": "too_many_parts"}
            for p in reading.parts[MAX_PARTS:]
        ]
        used = [d for d, p in zip(drafts, parts, strict=False) if p["status"] != NOT_FOUND]
        self.reading = replace(
            reading, intent=intent, conclusion=any(d.conclusion for d in used), parts=[]
        )
        if any(p["status"] == AMBIGUOUS for p in parts):
            return self._ask_parts(parts)
        targets = list(dict.fromkeys(i for p in parts for i in p["item_ids"]))
        if not targets:
            return Draft("nothing_matched", intent, reason="no_part_matched", parts=parts)
        return self._parts_plan([self.pool.by_id[i] for i in targets], parts)

    def _parts_plan(self, rows: list[Row], parts: list[dict[str, Any]]) -> Draft:
        draft = self._finish(self._explicit(rows))
        draft.parts = parts
        if any(p["status"] != RESOLVED for p in parts):
            draft.status = "partial_match"
        return draft

    def _ask_parts(self, parts: list[dict[str, Any]]) -> Draft:
        """The question about the ambiguous parts, each named, its candidates numbered
        on from the part before's; what the other parts came to is said after it."""
        language = self.reading.language
        template = self.lex.questions[f"{language}_candidates"]
        about = self.lex.messages[f"{language}_part_about"]
        options: list[dict[str, Any]] = []
        asked = []
        for n, part in enumerate(parts):
            if part["status"] != AMBIGUOUS:
                continue
            mine = [candidate(self.pool, i, language) | {"part": n} for i in part["item_ids"]]
            listing = "; ".join(f"({len(options) + k}) {o['label']}" for k, o in enumerate(mine, 1))
            options += mine
            question = template.format(count=len(mine), options=listing)
            asked.append(about.format(said=part["said"], question=question))
        question = " ".join(
            [*asked, *planned_parts(parts, language), *missing_parts(parts, language)]
        )
        return Draft(
            "needs_clarification",
            self.reading.intent,
            conclusion=self.reading.conclusion,
            candidates=options,
            question=question,
            parts=parts,
        )

    # -- what ---------------------------------------------------------------------------

    def _predicates(self, rows: list[Row]) -> list[str]:
        """The predicates the request's concepts name, among those present in `rows`."""
        present = {r.predicate for r in rows if r.kind != "turn"}
        chosen: list[str] = []
        for concept in self.reading.concepts:
            exact = [p for p in self.lex.concept_predicates[concept] if p in present]
            if not exact:  # a writer's own name for it: "consumer_debt" for a debt
                listed = [concept, *self.lex.concept_predicates[concept]]
                tokens = {
                    part for name in listed for part in name.split("_")
                } - self.lex.patterns.generic_predicate_parts
                # never a predicate the lexicon knows as another concept's: "email" has
                # "email_address", and must not take a stored "home_address" for it
                theirs = {
                    p
                    for other, names in self.lex.concept_predicates.items()
                    if other != concept
                    for p in names
                } - set(listed)
                exact = sorted(p for p in present if set(p.split("_")) & tokens and p not in theirs)
            chosen += [p for p in exact if p not in chosen]
        words = {w.removesuffix("s") for w in self.reading.words} | set(self.reading.words)
        for predicate in sorted(present):  # a predicate spelled out: "favourite colour"
            parts = [p for p in predicate.split("_") if p]
            if parts and all(p in words for p in parts) and predicate not in chosen:
                chosen.append(predicate)
        return chosen

    def _select(self, subjects: list[str] | None) -> Draft:
        reading = self.reading
        rows = self._in_time(list(self.pool.rows))
        if rows is None:
            return Draft("needs_clarification", reading.intent, question=self._q("no_session"))
        if reading.conclusion:
            rows = [r for r in rows if r.inferred]
        people = subjects or ["user"]
        if "name" in reading.concepts and reading.relations and self.people.relation_facts():
            return self._things_or_ask(self.people.relation_facts(), whole=None)
        if subjects is None and reading.number == "one" and not first_person(self.text):
            # "that phone number": whose is not said; any of them, and asked if several
            people = sorted({r.subject for r in rows})
        predicates = self._predicates([r for r in rows if r.subject in people])
        if reading.concepts or predicates:
            rows = [
                r
                for r in rows
                if r.kind != "turn" and r.subject in people and r.predicate in predicates
            ]
            if rows:
                return self._things_or_ask(rows, whole=(predicates, people))
            if not (reading.said or reading.session or reading.window or reading.topic):
                return Draft("nothing_matched", reading.intent, reason="no_such_value")
            # "what I said about my counselling": no such fact, but maybe such words
            reading = self.reading = replace(
                reading,
                words=[*reading.words, *(p for p in reading.phrases if p.isascii())],
                runs=[*reading.runs, *(p for p in reading.phrases if not p.isascii())],
                concepts=[],
            )
            rows = self._in_time(list(self.pool.rows)) or []
        named = {n for s in people for n in self.people.aliases.get(s, set())}
        words, runs = self._topic_words()
        if subjects is not None and [w for w in [*words, *runs] if w not in named]:
            rows = self._by_words([r for r in rows if r.subject in people])
        elif subjects is not None:  # everything about them, and the user's facts naming them
            texts = self.pool.texts(
                [r.item_id for r in rows if r.subject == "user" and r.kind != "turn"]
            )
            naming = {i for i, v in texts.items() if v and len(v) >= 2 and normalise(v) in named}
            rows = [r for r in rows if r.subject in people or r.item_id in naming]
        elif reading.categories:
            categories = set(reading.categories)
            rows = [r for r in rows if r.category in categories]
            if not rows:
                return Draft("nothing_matched", reading.intent, reason="no_such_category")
            rows = self._by_words(rows)
        elif reading.kinds:
            rows = [r for r in rows if r.kind in set(reading.kinds)]
        elif reading.vague_one and reading.said:
            rows = [r for r in rows if r.kind == "turn" and r.subject == "user"] or [
                r for r in rows if r.kind == "turn"
            ]
        elif not (reading.window or reading.session or reading.conclusion):
            return self._by_content(rows)
        if reading.intent == "stop_using":
            rows = [r for r in rows if not r.suppressed and r.status != "superseded"]
        if not rows:
            return Draft("nothing_matched", reading.intent, reason="nothing_selected")
        topical = reading.window or reading.session or reading.conclusion or reading.vague_one
        narrowed = self._on_topic(rows) if topical else rows
        if narrowed is None:
            return self._clarify(rows)
        if reading.vague_one and len(narrowed) > 1:
            return self._clarify(narrowed)
        if narrowed != rows:
            return self._explicit(without_carriers(narrowed))
        scope = self._scope(rows)
        if scope is not None:
            return self._resolved(scope, rows, exactly=True)
        return self._explicit(rows)

    def _things_or_ask(self, rows: list[Row], whole: tuple[list[str], list[str]] | None) -> Draft:
        """Items of named predicates: narrowed by what the request says of their values,
        then by version; several different things where one was named are asked about."""
        reading = self.reading
        narrowed = self._by_anchor(rows)
        if narrowed == rows:
            narrowed = self._by_value(rows)
        if narrowed == rows:
            narrowed = self._by_words(rows)
        asks_one = reading.intent in ("delete", "update") and reading.number != "all"
        if asks_one and narrowed == rows and len(rows) > 1 and any(self._topic_words()):
            # the request says more than the predicate ("大一住的宿舍地址"), and no value
            # says it: by meaning, or asked; never all of them
            ranked = self._on_topic(rows)
            if ranked is None:
                return self._clarify(rows)
            narrowed = ranked
        if reading.intent == "stop_using":
            narrowed = [r for r in narrowed if not r.suppressed and r.status != "superseded"]
            if not narrowed:
                return Draft("nothing_matched", reading.intent, reason="nothing_in_use")
        predicates, people = whole or ([], [])
        single = len({(r.subject, r.predicate) for r in narrowed}) == 1
        if (
            narrowed == rows
            and whole is not None
            and len(predicates) == 1
            and len(people) == 1
            and reading.intent == "delete"
            and not reading.conclusion
        ):
            found = things(rows)
            if len(found) > 1 and reading.number == "one" and reading.which is None:
                return self._clarify([face(t) for t in found])
            scope = ForgetScope(
                kind="predicate",
                subject=people[0],
                predicate=predicates[0],
                which=reading.which or "all",
            )
            return self._resolved(scope, rows)
        chosen = self._versions(narrowed)
        if isinstance(chosen, Draft):
            return chosen
        found = things(chosen)
        if len(found) > 1 and reading.number == "one" and not (single and reading.which):
            return self._clarify([face(t) for t in found])
        return self._explicit(chosen)

    def _versions(self, rows: list[Row]) -> list[Row] | Draft:
        which = self.reading.which
        if which == "current":
            rows = [r for r in rows if r.status in ("current", "conflict")]
        elif which == "previous":
            old = [r for r in rows if r.status == "superseded"]
            if len(old) > 1 and self.reading.number != "all":
                return self._clarify(old)
            if not old and len(rows) == 1 and not self.reading.moved:
                # "my old address" with one address on file: asked, naming it (the
                # seed's own example); planned when the request says it moved
                return self._clarify(rows, "old_only_one")
            rows = old or (rows if len(rows) == 1 else [])
        if not rows:
            return Draft("nothing_matched", self.reading.intent, reason="no_such_version")
        return rows

    def _by_words(self, rows: list[Row]) -> list[Row]:
        """Narrow (never widen) to the items whose value has the request's own words:
        "the Bristol address", "my cat allergy", "对虾过敏"."""
        own, runs = self._topic_words()
        words = [*own, *(p for p in self.reading.phrases if p.isascii())]
        runs = [*runs, *(p for p in self.reading.phrases if not p.isascii())]
        single = [r for r in self.reading.runs if len(r) == 1]  # "虾": only a value "虾"
        if not (words or runs or single) or len(rows) < 2:
            return rows
        texts = self.pool.texts([r.item_id for r in rows])
        hit = []
        for row in rows:
            value = normalise(texts.get(row.item_id) or "")
            if not value:
                continue
            if (
                any(mentions(value, w) or mentions(value, w.removesuffix("s")) for w in words)
                or any(shares_chinese(value, run) for run in runs)
                or value in single
                or set(row.predicate.split("_"))
                & {w for w in own if w not in self.lex.patterns.generic_predicate_parts}
            ):
                hit.append(row)
        hit = without_derived(hit)  # what was derived from a hit goes with it
        if any(r.kind != "turn" for r in hit):  # turns that repeat a fact's value are
            hit = [r for r in hit if r.kind != "turn"]  # redacted with it (mentions)
        return hit if hit else rows

    def _by_anchor(self, rows: list[Row]) -> list[Row]:
        """ "The jobs I had before Lumen": versions before (or after) the one named."""
        for word, earlier in ((self.reading.before, True), (self.reading.after, False)):
            if not word or len(rows) < 2:
                continue
            texts = self.pool.texts([r.item_id for r in rows])
            anchors = [r for r in rows if mentions(normalise(texts.get(r.item_id) or ""), word)]
            if len(anchors) != 1:
                continue
            at = anchors[0].valid_from
            return [r for r in rows if (r.valid_from < at if earlier else r.valid_from > at)]
        return rows

    def _in_time(self, rows: list[Row]) -> list[Row] | None:
        reading = self.reading
        if reading.window is not None:
            since = canonical_time(reading.window.since)
            until = canonical_time(reading.window.until)
            rows = [r for r in rows if since <= r.written_at < until]
        if reading.session == "this":
            session = self.session_id or self._latest_session(rows, exclude=None)
            if session is None:
                return None
            rows = [r for r in rows if r.session_id == session]
        elif reading.session == "last":
            if reading.concepts:  # "the address I gave you last time": the latest one
                return rows
            session = self._latest_session(rows, exclude=self.session_id)
            rows = [r for r in rows if r.session_id == session] if session else []
        return rows

    @staticmethod
    def _latest_session(rows: list[Row], exclude: str | None) -> str | None:
        sessions = [r for r in rows if r.session_id and r.session_id != exclude]
        return max(sessions, key=lambda r: r.written_at).session_id if sessions else None

    def _by_value(self, rows: list[Row]) -> list[Row]:
        """Members the request names by value ("forget that I am allergic to peanuts"),
        or, for "the one I gave you last time", the latest."""
        texts = self.pool.texts([r.item_id for r in rows])
        named = [
            r
            for r in rows
            if (t := texts.get(r.item_id))
            and len(folded_value(t)) >= 2
            and folded_value(t) in self.text
        ]
        if named:
            return named
        if self.reading.session == "last" and self.reading.concepts:
            return [max(rows, key=lambda r: r.written_at)]
        return rows

    def _topic_words(self) -> tuple[list[str], list[str]]:
        words = [w for w in self.reading.words if len(w) >= 3]
        runs = [r for r in self.reading.runs if len(r) >= 2]
        return words, runs

    def _on_topic(self, rows: list[Row]) -> list[Row] | None:
        """Narrow a selection (a conversation, a day) to what the request is about:
        its words in the items' text first, then by meaning. None: the request names a
        topic and nothing here is about it (asked, never taken as the whole day)."""
        narrowed = self._by_words(rows)
        if narrowed != rows:
            return self._facts_for_turns(narrowed)
        reading = self.reading
        words, runs = self._topic_words()
        query = reading.topic or " ".join([*words, *runs])
        if not query.strip():
            return rows
        ranked = self._rank(query, rows)
        if not ranked or ranked[0][1] < MIN_MATCH:
            return None
        best = ranked[0][1]
        return self._facts_for_turns([r for r, s in ranked if s >= best * CLEAR_LEAD])

    def _facts_for_turns(self, rows: list[Row]) -> list[Row]:
        """A turn that facts were taken from stands for them: erasing the facts erases
        the turn too (cascade), and the facts are what the user meant."""
        out: list[Row] = []
        for row in rows:
            facts = [
                r
                for r in self.pool.rows
                if row.kind == "turn" and r.kind != "turn"
                and (r.session_id, r.turn_id) == (row.session_id, row.turn_id)
            ]  # fmt: skip
            out += facts or [row]
        return list({r.item_id: r for r in out}.values())

    def _rank(self, query: str, rows: list[Row]) -> list[tuple[Row, float]]:
        if self.vectors is None or not query.strip() or not rows:
            return []
        self.vectors.catch_up()
        vector = self.vectors.embed_query(query)
        allowed = {r.item_id for r in rows}
        hits = self.vectors.search(self.namespace, vector, min(len(allowed), 50), allowed)
        return [(self.pool.by_id[i], s) for i, s in hits if i in self.pool.by_id]

    def _by_content(self, rows: list[Row]) -> Draft:
        """No selector matched: find the item by what the request says about it."""
        words, runs = self._topic_words()
        query = self.reading.topic or " ".join([*words, *runs])
        if self.reading.intent == "stop_using":
            rows = [r for r in rows if not r.suppressed and r.status != "superseded"]
        if not query.strip():
            return Draft("nothing_matched", self.reading.intent, reason="nothing_named")
        lexical = self._by_words(rows)
        if lexical != rows:
            close = without_carriers(lexical)
        else:
            ranked = self._rank(query, rows)
            if not ranked or ranked[0][1] < MIN_MATCH:
                return Draft("nothing_matched", self.reading.intent, reason="no_content_match")
            best = ranked[0][1]
            close = without_carriers([r for r, s in ranked if s >= best * CLEAR_LEAD])
        if len(things(close)) > 1 and self.reading.number != "all":
            return self._clarify(close)
        return self._explicit(close)

    def _scope(self, rows: list[Row]) -> ForgetScope | None:
        """The scope to record, when the selection was one category, conversation or
        time window (checked against the rows by `_resolved`)."""
        reading = self.reading
        if reading.intent != "delete" or reading.conclusion:
            return None
        if reading.concepts or reading.vague_one or reading.topic:
            return None
        if (
            reading.categories
            and len(reading.categories) == 1
            and not (reading.window or reading.session)
        ):
            return ForgetScope(kind="category", category=reading.categories[0])
        if reading.session and not reading.window and not reading.categories:
            session = {r.session_id for r in rows}
            if len(session) == 1 and None not in session:
                return ForgetScope(kind="source", session_id=session.pop())
        if reading.window and not reading.session and not reading.categories and not reading.kinds:
            return ForgetScope(
                kind="time_range", since=reading.window.since, until=reading.window.until
            )
        return None

    def _resolved(self, scope: ForgetScope, rows: list[Row], exactly: bool = False) -> Draft:
        """The plan of a scope, resolved as execution will. With `exactly`, a scope that
        resolves to other items than the selection is not used: the selection is."""
        found = resolve(self.conn, self.namespace, scope, self.log)
        if exactly and (
            found.status != "resolved" or set(found.targets) != {r.item_id for r in rows}
        ):
            return self._explicit(rows)
        if found.status == "needs_clarification" and self.reading.number == "all":
            # "all my old addresses": every candidate, if each is a whole item
            rows = [
                self.pool.by_id[c.item_id] for c in found.candidates if c.item_id in self.pool.by_id
            ]
            if rows and all(r.status == "superseded" for r in rows):
                return self._explicit(rows)
        if found.status == "needs_clarification":
            return self._clarify(
                [
                    self.pool.by_id[c.item_id]
                    for c in found.candidates
                    if c.item_id in self.pool.by_id
                ]
            )
        if (
            found.status == "nothing_matched"
            and scope.kind == "predicate"
            and (scope.which == "previous")
        ):  # "my old address" with no older one: the one on file, asked about
            now = resolve(
                self.conn, self.namespace, scope.model_copy(update={"which": "current"}), self.log
            )
            one = [self.pool.by_id[i] for i in now.targets if i in self.pool.by_id]
            if now.status == "resolved" and len(one) == 1:
                return self._explicit(one) if self.reading.moved else (
                    self._clarify(one, "old_only_one")
                )  # fmt: skip
        if found.status == "nothing_matched":
            return Draft("nothing_matched", self.reading.intent, reason="no_such_version")
        return Draft(
            "planned",
            self.reading.intent,
            scope=scope.ledger_parameters(),
            targets=found.targets,
            cascaded=erased_with(self.conn, self.namespace, found.targets),
            history=found.history,
        )

    def _explicit(self, rows: list[Row]) -> Draft:
        ids = [r.item_id for r in rows]
        draft = Draft(
            "planned", self.reading.intent, conclusion=self.reading.conclusion, targets=sorted(ids)
        )
        if self.reading.intent == "delete":
            draft.scope = {"kind": "item", "item_ids": sorted(ids)}
            draft.cascaded = erased_with(self.conn, self.namespace, ids)
        return draft

    def _whole_namespace(self) -> Draft:
        scope = ForgetScope(kind="namespace")
        found = resolve(self.conn, self.namespace, scope, self.log)
        if found.status != "resolved":
            return Draft("nothing_matched", self.reading.intent, reason="nothing_stored")
        if self.reading.intent != "delete":
            rows = [self.pool.by_id[i] for i in found.targets if i in self.pool.by_id]
            return self._explicit([r for r in rows if not r.suppressed])
        return Draft(
            "planned",
            "delete",
            scope={"kind": "namespace"},
            targets=found.targets,
            cascaded=found.cascaded,
        )

    def _update(self, subjects: list[str] | None) -> Draft:
        people = subjects or ["user"]
        rows = [r for r in self.pool.rows if r.subject in people and r.kind != "turn"]
        predicates = self._predicates(rows)
        live = [
            r for r in rows if r.predicate in predicates and r.status in ("current", "conflict")
        ]
        if not live:
            return Draft("nothing_matched", "update", reason="nothing_to_update")
        if len(live) > 1 and self.reading.new_value:  # "my new number is +65 ...": a phone
            shaped = {
                concept
                for concept, kind in (("phone", "phone"), ("email", "email"))
                if self.lex.spans[kind].spans_in(self.reading.new_value)
            }
            fitting = {p for c in shaped for p in self.lex.concept_predicates[c]}
            live = [r for r in live if r.predicate in fitting] or live
        if len(live) > 1:
            return self._clarify(live)
        return Draft(
            "planned", "update", targets=[live[0].item_id], new_value=self.reading.new_value
        )

    def _redaction(self, subjects: list[str] | None) -> Draft:
        """Spans inside items: the items that hold text of the named kinds, narrowed by
        the other selectors and the topic; the spans are read from those items' text."""
        reading = self.reading
        rows = self._in_time(list(self.pool.rows)) or []
        if subjects:
            rows = [r for r in rows if r.subject in subjects or r.kind == "turn"]
        said_of = [  # "my mom's flight": said of mom, in a turn
            w
            for relation in reading.relations
            for w in self.lex.relation_words.get(relation, ())
            if w.isascii()
        ]
        if said_of:
            reading = self.reading = replace(reading, words=[*reading.words, *said_of])
        people = subjects or ["user"]
        predicates = self._predicates([r for r in rows if r.subject in people])
        if predicates:  # "the flat number from my current address": in that fact
            named = [
                r
                for r in rows
                if r.kind != "turn" and r.predicate in predicates and r.subject in people
            ]
            chosen = self._versions(named) if named else []
            if isinstance(chosen, Draft):
                return chosen
            rows = chosen or rows
        texts = self.pool.texts([r.item_id for r in rows])
        kinds = [self.lex.spans[k] for k in reading.spans]
        holding = [
            r
            for r in rows
            if texts.get(r.item_id) and any(k.spans_in(texts[r.item_id] or "") for k in kinds)
        ]
        if not holding:
            return Draft("nothing_matched", "redact", reason="no_such_span")
        if len(holding) > 1:
            holding = self._on_topic(holding) or holding
        # A fact and the turn it was taken from: the fact; the redaction rewrites its turn.
        holding = without_carriers(holding)
        if len(holding) > 1:
            return self._clarify(holding)
        spans: list[str] = []
        for row in holding:
            for kind in kinds:
                spans += [s for s in kind.spans_in(texts[row.item_id] or "") if s not in spans]
        ids = sorted(r.item_id for r in holding)
        return Draft("planned", "redact", targets=ids, keeps=ids, spans=spans)

    def chosen(
        self, reading: Reading, item_ids: list[str], parts: list[dict[str, Any]] | None = None
    ) -> Draft:
        """The plan for candidates a user picked: those items, exactly. For a request of
        several parts, with the items of the parts that were resolved: an ambiguous
        part is resolved to what was picked of its candidates, or not found if none."""
        self.reading = reading
        self.text = ""
        if parts:
            return self._chosen_parts(item_ids, parts)
        rows = [self.pool.by_id[i] for i in item_ids if i in self.pool.by_id]
        if not rows:
            return Draft("nothing_matched", reading.intent, reason="chosen_items_gone")
        if reading.intent == "redact":
            texts = self.pool.texts([r.item_id for r in rows])
            spans: list[str] = []
            for row in rows:
                for kind in (self.lex.spans[k] for k in reading.spans):
                    spans += [s for s in kind.spans_in(texts[row.item_id] or "") if s not in spans]
            ids = sorted(r.item_id for r in rows)
            return self._finish(Draft("planned", "redact", targets=ids, keeps=ids, spans=spans))
        return self._finish(self._explicit(rows))

    def _chosen_parts(self, item_ids: list[str], asked: list[dict[str, Any]]) -> Draft:
        parts = []
        for part in asked:
            part = dict(part)
            if part["status"] == AMBIGUOUS:
                picked = [i for i in part["item_ids"] if i in item_ids]
                part.update(status=RESOLVED if picked else NOT_FOUND, item_ids=picked)
                part["reason"] = "" if picked else "none_chosen"
            if part["status"] == RESOLVED:
                part["item_ids"] = [i for i in part["item_ids"] if i in self.pool.by_id]
                if not part["item_ids"]:
                    part.update(status=NOT_FOUND, reason="chosen_items_gone")
            parts.append(part)
        targets = list(dict.fromkeys(i for p in parts for i in p["item_ids"]))
        if not targets:
            return Draft("nothing_matched", self.reading.intent, reason="chosen_items_gone",
                         parts=parts)  # fmt: skip
        return self._parts_plan([self.pool.by_id[i] for i in targets], parts)

    def pool_versions(self, item_ids: list[str]) -> dict[str, int]:
        """Each item's version now (from the log), for an update's retry check."""
        items = self.log.get_many([UUID(i) for i in item_ids])
        return {str(k): v.version for k, v in items.items()}

    # -- answers ------------------------------------------------------------------------

    def _clarify(self, rows: list[Row], question: str = "candidates") -> Draft:
        chosen = sorted(rows, key=lambda r: (r.written_at, r.item_id))[-MAX_CANDIDATES:]
        language = self.reading.language
        options = [candidate(self.pool, r.item_id, language) for r in chosen]
        listing = "; ".join(f"({n}) {o['label']}" for n, o in enumerate(options, 1))
        template = self.lex.questions[f"{language}_{question}"]
        return Draft(
            "needs_clarification",
            self.reading.intent,
            conclusion=self.reading.conclusion,
            candidates=options,
            question=template.format(count=len(options), options=listing),
        )

    def _q(self, name: str) -> str:
        return self.lex.questions[f"{self.reading.language}_{name}"]

    def _finish(self, draft: Draft) -> Draft:
        """What stays (siblings of the targets that are not touched), and labels."""
        if draft.status != "planned":
            return draft
        draft.conclusion = draft.conclusion or self.reading.conclusion
        targets = set(draft.targets) | set(draft.cascaded)
        if draft.intent in ("delete",) and not draft.keeps:
            touched = [self.pool.by_id[i] for i in draft.targets if i in self.pool.by_id]
            predicates = {(r.predicate) for r in touched if r.kind != "turn"}
            siblings = [
                r.item_id
                for r in self.pool.rows
                if r.kind != "turn" and r.predicate in predicates and r.item_id not in targets
            ]
            draft.keeps = sorted(set(siblings) | set(draft.history))[:50]
        elif draft.intent in ("stop_using", "update"):
            draft.keeps = list(draft.targets)
        language = self.reading.language
        shown = [*draft.targets[:50], *draft.keeps[:50], *draft.history[:50]]
        draft.labels = {i: self.pool.label(i, language) for i in shown if i in self.pool.by_id}
        return draft


def _part(part: Part, draft: Draft, intent: str | None) -> dict[str, Any]:
    """What one part's own plan came to, as the compound plan lists it."""
    out: dict[str, Any] = {"said": part.said, "status": NOT_FOUND, "item_ids": [], "reason": ""}
    if part.read_as:
        out["read_as"] = part.read_as
    if draft.status in ("planned", "needs_clarification") and draft.intent != intent:
        out["reason"] = "other_intent"  # "stop using my X and delete my Y": asked apart
    elif draft.status == "planned" and draft.history:
        # earlier versions inside an item that stays: a scope of their own, not an item
        out["reason"] = "needs_own_request"
    elif draft.status == "planned":
        out.update(status=RESOLVED, item_ids=list(draft.targets))
    elif draft.status == "needs_clarification":
        out.update(status=AMBIGUOUS, item_ids=[c["item_id"] for c in draft.candidates])
    elif draft.status == "not_a_request" and draft.reason != "too_many_parts":
        out["reason"] = "not_a_request"  # its own words ask for nothing
    else:
        out["reason"] = draft.reason or draft.status
    return out
