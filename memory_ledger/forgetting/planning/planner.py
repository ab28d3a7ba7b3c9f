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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import Connection

from memory_ledger.forgetting.planning.lexicon import Lexicon, lexicon
from memory_ledger.forgetting.planning.people import People
from memory_ledger.forgetting.planning.pool import (
    Pool,
    Row,
    candidate,
    face,
    things,
    without_carriers,
    without_derived,
)
from memory_ledger.forgetting.planning.reading import Reading
from memory_ledger.forgetting.planning.text_match import first_person, mentions, shares_chinese
from memory_ledger.forgetting.scope import ForgetScope, erased_with, resolve
from memory_ledger.forgetting.scope import normalized as value_key
from memory_ledger.phrases import normalise
from memory_ledger.times import canonical_time

if TYPE_CHECKING:
    from memory_ledger.event_log import EventLog
    from projections.vector_index import VectorIndex

#: A plan lists at most this many candidates in a clarification (the closest first).
MAX_CANDIDATES = 8
#: Content matching (no selector matched): how similar the best item must be, and how
#: far ahead of the next one, to be taken as the one meant.
MIN_MATCH = 0.35
CLEAR_LEAD = 0.85


@dataclass
class Draft:
    """A plan before it is stored: ids, scope, labels; nothing written anywhere yet."""

    status: str  # planned | needs_clarification | not_a_request | nothing_matched
    intent: str | None = None
    conclusion: bool = False
    scope: dict[str, Any] | None = None  # what execution resolves again (a ForgetScope)
    targets: list[str] = field(default_factory=list)
    cascaded: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    keeps: list[str] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    spans: list[str] = field(default_factory=list)
    new_value: str | None = None
    question: str | None = None
    reason: str = ""  # a code: why it matched nothing, why it is not a request


class Planner:
    def __init__(
        self,
        conn: Connection,
        log: EventLog,
        vectors: VectorIndex | None,
        namespace: str,
        words: Lexicon | None = None,
    ) -> None:
        self.conn = conn
        self.log = log
        self.vectors = vectors
        self.namespace = namespace
        self.lex = words or lexicon()
        self.pool = Pool(conn, log, namespace)

    # -- the entry point ------------------------------------------------------------------

    def plan(self, reading: Reading, text: str, session_id: str | None = None) -> Draft:
        if reading.intent is None:
            return Draft("not_a_request", reason=reading.why_not)
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
            reading.words += [w for w in reading.relations if w.isascii()]
            subjects = None
        if subjects is not None and not subjects:
            return Draft("nothing_matched", reading.intent, reason="third_party_not_found")
        if reading.intent == "redact":
            return self._finish(self._redaction(subjects))
        if reading.intent == "update":
            return self._finish(self._update(subjects))
        return self._finish(self._select(subjects))

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
                exact = sorted(p for p in present if set(p.split("_")) & tokens)
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
            reading.words = [*reading.words, *(p for p in reading.phrases if p.isascii())]
            reading.runs = [*reading.runs, *(p for p in reading.phrases if not p.isascii())]
            reading.concepts = []
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
            rows = old
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
            if (t := texts.get(r.item_id)) and len(value_key(t)) >= 2 and value_key(t) in self.text
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
        for relation in reading.relations:  # "my mom's flight": said of mom, in a turn
            reading.words += [w for w in self.lex.relation_words.get(relation, ()) if w.isascii()]
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

    def chosen(self, reading: Reading, item_ids: list[str]) -> Draft:
        """The plan for candidates a user picked: those items, exactly."""
        self.reading = reading
        self.text = ""
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

    def pool_versions(self, item_ids: list[str]) -> dict[str, int]:
        """Each item's version now (from the log), for an update's retry check."""
        items = self.log.get_many([UUID(i) for i in item_ids])
        return {str(k): v.version for k, v in items.items()}

    # -- answers ------------------------------------------------------------------------

    def _clarify(self, rows: list[Row]) -> Draft:
        chosen = sorted(rows, key=lambda r: (r.written_at, r.item_id))[-MAX_CANDIDATES:]
        language = self.reading.language
        options = [candidate(self.pool, r.item_id, language) for r in chosen]
        listing = "; ".join(f"({n}) {o['label']}" for n, o in enumerate(options, 1))
        template = self.lex.questions[f"{language}_candidates"]
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
