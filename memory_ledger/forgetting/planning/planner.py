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

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import Connection

from memory_ledger.forgetting.planning.lexicon import Lexicon, lexicon
from memory_ledger.forgetting.planning.pool import Pool, Row, candidate
from memory_ledger.forgetting.planning.reading import Reading
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
_POSSESSIVE_EN = re.compile(r"\b([a-z][a-z-]{1,30})'s\b")
_POSSESSIVE_ZH = re.compile(r"([\u4e00-\u9fff]{1,4})的")
_NOT_NAMES = {
    "it", "that", "this", "what", "there", "here", "who", "one", "let", "today", "yesterday",
    "everyone", "somebody", "someone", "user", "he", "she", "we", "mom", "dad",
}  # fmt: skip
_NOT_NAMES_ZH = {
    "我",
    "我们",
    "你",
    "你们",
    "我家",
    "之前",
    "以前",
    "上次",
    "昨天",
    "今天",
    "现在",
    "目前",
    "所有",
    "全部",
    "说",
    "聊",
    "告诉你",
    "提到",
}
_NAME_PREDICATES = ("name", "full_name", "first_name", "nickname", "chinese_name")


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

    def plan(
        self, reading: Reading, text: str, now: datetime, session_id: str | None = None
    ) -> Draft:
        if reading.intent is None:
            return Draft("not_a_request", reason=reading.why_not)
        self.reading = reading
        self.text = normalise(text)
        self.session_id = session_id
        if reading.everything and not (
            reading.concepts or reading.categories or reading.window or reading.session
        ):
            return self._finish(self._whole_namespace())
        subjects = self._subjects()
        if subjects is not None and not subjects:
            return Draft("nothing_matched", reading.intent, reason="third_party_not_found")
        if reading.intent == "redact":
            return self._finish(self._redaction(subjects))
        if reading.intent == "update":
            return self._finish(self._update(subjects))
        return self._finish(self._select(subjects))

    # -- who ----------------------------------------------------------------------------

    def _subjects(self) -> list[str] | None:
        """The third parties the request names (None: it names none, so it is about the
        user). An empty list: it names someone who is not in this memory."""
        others = sorted({r.subject for r in self.pool.rows if r.subject != "user"})
        reading = self.reading
        named: set[str] = set()
        asked = bool(reading.relations)
        for subject in others:
            tokens = set(re.split(r"[_.:-]+", subject))
            if tokens & set(reading.relations):
                named.add(subject)
            if any(
                re.search(rf"(?<![\w]){re.escape(t)}(?![\w])", self.text)
                for t in tokens
                if len(t) > 2
            ):
                named.add(subject)
        names = self._names_of(others)
        for subject, name in names.items():
            if name and name in self.text:
                named.add(subject)
        for m in _POSSESSIVE_EN.finditer(self.text):
            word = m.group(1)
            if word not in _NOT_NAMES and word not in self.lex.stopwords:
                asked = True
        for m in _POSSESSIVE_ZH.finditer(self.text):
            word = m.group(1)
            if word[-1:] in "我你" or word in _NOT_NAMES_ZH:
                continue
            known = any(word.endswith(w) or w.endswith(word) for w in names.values() if w)
            if known or self.lex.relations.any(word):
                asked = True
        if not asked and not named:
            return None
        return sorted(named)

    def _names_of(self, subjects: list[str]) -> dict[str, str]:
        """Third parties' names, from `name` facts about them (read from the log)."""
        rows = [
            r for r in self.pool.rows if r.subject in subjects and r.predicate in _NAME_PREDICATES
        ]
        texts = self.pool.texts([r.item_id for r in rows])
        return {r.subject: normalise(texts[r.item_id] or "") for r in rows if texts.get(r.item_id)}

    # -- what ---------------------------------------------------------------------------

    def _predicates(self, rows: list[Row]) -> list[str]:
        """The predicates the request's concepts name, among those present in `rows`."""
        present = {r.predicate for r in rows if r.kind != "turn"}
        chosen: list[str] = []
        for concept in self.reading.concepts:
            exact = [p for p in self.lex.concept_predicates[concept] if p in present]
            if exact:
                chosen += [p for p in exact if p not in chosen]
                continue
            key = set(concept.split("_"))
            chosen += [p for p in sorted(present) if set(p.split("_")) & key and p not in chosen]
        words = set(self.reading.words)
        for predicate in sorted(present):  # a predicate spelled out: "favourite colour"
            parts = [p for p in predicate.split("_") if p]
            spelled = parts and all(p in words or p.rstrip("s") in words for p in parts)
            if spelled and predicate not in chosen:
                chosen.append(predicate)
        return chosen

    def _select(self, subjects: list[str] | None) -> Draft:
        reading = self.reading
        rows = list(self.pool.rows)
        rows = self._in_time(rows)
        if rows is None:
            return Draft("needs_clarification", reading.intent, question=self._q("no_session"))
        if reading.conclusion:
            rows = [r for r in rows if r.inferred]
        facts_only = subjects is not None
        people = subjects or ["user"]
        predicates = self._predicates([r for r in rows if r.subject in people])
        if reading.concepts or predicates:
            rows = [
                r
                for r in rows
                if r.kind != "turn" and r.subject in people and r.predicate in predicates
            ]
            if not rows:
                return Draft("nothing_matched", reading.intent, reason="no_such_value")
            rows = self._by_value(rows)
        elif facts_only:
            rows = [r for r in rows if r.subject in people]
        elif reading.categories:
            categories = set(reading.categories)
            rows = [r for r in rows if r.category in categories]
            if not rows:
                return Draft("nothing_matched", reading.intent, reason="no_such_category")
        elif reading.kinds:
            kinds = {"preference": "preference", "turn": "turn"}
            rows = [r for r in rows if r.kind in {kinds[k] for k in reading.kinds}]
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
        if reading.topic and (reading.window or reading.session or reading.vague_one):
            rows = self._on_topic(rows)
        if reading.vague_one and len(rows) > 1:
            return self._clarify(rows)
        scope = self._scope(rows, predicates, people)
        if scope is not None:
            return self._resolved(scope, rows)
        return self._explicit(rows)

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
        """Members the request names by value ("forget that I am allergic to peanuts")."""
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

    def _on_topic(self, rows: list[Row]) -> list[Row]:
        ranked = self._rank(self.reading.topic, rows)
        if not ranked:
            return rows
        best = ranked[0][1]
        return [r for r, s in ranked if s >= best * CLEAR_LEAD] if best >= MIN_MATCH else rows

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
        query = self.reading.topic or " ".join(self.reading.words)
        if self.reading.intent == "stop_using":
            rows = [r for r in rows if not r.suppressed]
        ranked = self._rank(query, rows)
        if not ranked or ranked[0][1] < MIN_MATCH:
            return Draft("nothing_matched", self.reading.intent, reason="no_content_match")
        best = ranked[0][1]
        close = [r for r, s in ranked if s >= best * CLEAR_LEAD]
        if len(close) > 1:
            return self._clarify(close)
        return self._explicit(close)

    def _scope(
        self, rows: list[Row], predicates: list[str], people: list[str]
    ) -> ForgetScope | None:
        """The recorded scope, when the rows are exactly one whole scope's items."""
        reading = self.reading
        if reading.intent != "delete" or reading.conclusion:
            return None
        if len(predicates) == 1 and len(people) == 1 and not (reading.window or reading.session):
            every = [
                r
                for r in self.pool.rows
                if r.subject == people[0] and r.predicate == predicates[0] and r.kind != "turn"
            ]
            if {r.item_id for r in every} == {r.item_id for r in rows}:
                return ForgetScope(
                    kind="predicate",
                    subject=people[0],
                    predicate=predicates[0],
                    which=reading.which or "all",
                )
            return None
        if reading.concepts or predicates or reading.vague_one or reading.topic:
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

    def _resolved(self, scope: ForgetScope, rows: list[Row]) -> Draft:
        found = resolve(self.conn, self.namespace, scope, self.log)
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
        texts = self.pool.texts([r.item_id for r in rows])
        kinds = [self.lex.spans[k] for k in reading.spans]
        holding = [
            r
            for r in rows
            if texts.get(r.item_id) and any(k.spans_in(texts[r.item_id] or "") for k in kinds)
        ]
        if not holding:
            return Draft("nothing_matched", "redact", reason="no_such_span")
        topic = reading.topic or " ".join(reading.words)
        if len(holding) > 1 and topic:
            ranked = self._rank(topic, holding)
            if ranked and ranked[0][1] >= MIN_MATCH:
                best = ranked[0][1]
                holding = [r for r, s in ranked if s >= best * CLEAR_LEAD]
        if len(holding) > 1:
            # The same words said once as a turn and kept as a fact: one thing.
            turns = [r for r in holding if r.kind == "turn"]
            facts = [
                r
                for r in holding
                if r.kind != "turn" and r.turn_id not in {t.turn_id for t in turns}
            ]
            if len(turns) + len(facts) > 1:
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
