"""What a forget request says, before it is matched with anything stored.

A `Reading` is the request understood as selectors (intent, predicates by concept,
subject, version, time, conversation, span kinds), with no item ids: the planner
(planner.py) matches it with the user's items. Readers are pluggable behind `Reader`:
the default `LexiconReader` is deterministic and offline (lexicon.toml and a few
rules); a model-based reader can return a `Reading` too, and its output goes through
the same planner, which only ever narrows (a reader cannot widen a scope by naming
more than the request's items: everything it names is matched against the principal's
own items, under the same rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Literal, Protocol

from memory_ledger.forgetting.planning.lexicon import Lexicon, lexicon
from memory_ledger.forgetting.planning.pieces import Information, InformationReader
from memory_ledger.forgetting.planning.when import Window, window_in
from memory_ledger.phrases import Hit, longest, normalise

Intent = Literal["delete", "stop_using", "update", "redact"]
Which = Literal["current", "previous", "all"]
#: Parts of one request read (and planned) at most; any more are listed, not read.
MAX_PARTS = 12
_CJK = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[^\W_\u3400-\u9fff][^\W\u3400-\u9fff]*(?:['-][^\W\u3400-\u9fff]+)*")


@dataclass
class Reading:
    """A request as selectors. `intent` None: not a request to forget anything."""

    language: Literal["en", "zh"]
    intent: Intent | None
    why_not: str = ""  # for a non-request: which rule said so (a code, never the text)
    conclusion: bool = False
    concepts: list[str] = field(default_factory=list)
    #: Third parties named by relation ("my sister") or by name ("Bob"): words, lowered.
    relations: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    which: Which | None = None
    window: Window | None = None
    session: Literal["this", "last"] | None = None
    everything: bool = False
    #: The request says the thing moved or changed ("I moved, forget my old address"):
    #: "old" may then be the only one on file (without it, that one is asked about).
    moved: bool = False
    vague_one: bool = False
    said: bool = False
    spans: list[str] = field(default_factory=list)  # span kinds, for a redaction
    new_value: str | None = None  # for an update
    #: Words not spent on selectors: what the request is about, for content matching.
    words: list[str] = field(default_factory=list)
    #: The part after "about"/"关于": the topic, when the request names one.
    topic: str = ""
    #: The words that matched concepts, as written ("cat", "allergies"): specific ones
    #: ("cat" for a pet) also narrow by value.
    phrases: list[str] = field(default_factory=list)
    #: `all`: a plural or "all"; `one`: a singular that must not be widened to several
    #: things; None: unmarked (Chinese has no plural: every version and member).
    number: Literal["all", "one"] | None = None
    runs: list[str] = field(default_factory=list)
    #: "the jobs I had before Lumen": a value word that bounds the versions in time.
    before: str | None = None
    after: str | None = None
    #: A request of several parts ("my sister's address and my phone number"): each
    #: part with a reading of its own, planned on its own. Empty: one request.
    parts: list[Part] = field(default_factory=list)
    #: The pieces of information the request names, and those it keeps (pieces.py):
    #: planned by where they are stored when they name values. None: not read.
    information: Information | None = None

    @property
    def selects(self) -> bool:
        """Whether any selector beyond content words was read."""
        return bool(
            self.concepts or self.relations or self.names or self.categories or self.kinds
            or self.window or self.session or self.everything
        )  # fmt: skip


@dataclass
class Part:
    """One part of a request that asks for several things.

    `said` is the part's own words, as the request has them (normalised, without the
    request's verb): what a plan quotes, so the user sees which part is which. `text` is
    what was read for it: those words with what they share with the part before, the
    verb and, when the part says no possessor of its own, the possessor ("phone
    number" in "forget my sister's address and phone number" is read as "forget my
    sister's phone number"). A part never borrows a thing to forget from another."""

    said: str
    text: str
    reading: Reading
    #: When the part borrowed a possessor or modifiers from the part before, what it was
    #: read as ("my sister's phone number" for "phone number"), for the plan to say.
    read_as: str = ""


class Reader(Protocol):
    """Turns a request's words into a Reading. Offline readers and model-backed ones
    share this interface; the planner validates whatever they return."""

    def read(self, text: str, now: datetime, zone: tzinfo) -> Reading: ...


class LexiconReader:
    """The default reader: the bilingual lexicon plus a handful of rules."""

    def __init__(self, words: Lexicon | None = None) -> None:
        self.lex = words or lexicon()

    def read(self, text: str, now: datetime, zone: tzinfo) -> Reading:
        reading = self._read(text, now, zone)
        if reading.intent in ("delete", "stop_using") and not reading.everything:
            reading.parts = self._parts(normalise(text), now, zone)
        if reading.intent in ("delete", "stop_using", "redact") and not reading.everything:
            reading.information = self._information(text, reading, now, zone)
        return reading

    def _information(self, text: str, reading: Reading, now: datetime, zone: tzinfo) -> Information:
        """The pieces the request names; a description also read as a request of its
        own (its concepts, possessor and version words), for the facts it may name."""
        info = InformationReader(self.lex).read(text)
        verb = "删除" if reading.language == "zh" else "delete"
        for piece in info.pieces:
            if piece.kind == "text" and self._selects(piece.text, now, zone):
                # "地址", "昨天", "妈妈": the lexicon's words describe, they name no value
                words = piece.label + piece.text
                piece.kind, piece.text, piece.label = "description", words, words
            if piece.kind == "description":
                words = piece.said or piece.text
                if piece.every:  # "keep only the current X": the old ones, all of them
                    old = "以前的" if reading.language == "zh" else "my old "
                    words = old + piece.label
                sub = self._read(f"{verb} {words}" if verb not in words else words, now, zone)
                if sub.intent in ("stop_using", "redact"):
                    sub.intent = "delete"
                if piece.every and sub.intent is not None:
                    sub.which, sub.number = "previous", "all"
                piece.reading = sub if sub.intent is not None else None
        return info

    def _read(self, text: str, now: datetime, zone: tzinfo) -> Reading:
        lex = self.lex
        self._modifiers: list[str] = []
        norm = normalise(text)
        language: Literal["en", "zh"] = "zh" if _CJK.search(norm) else "en"
        triggers = lex.intents.find(norm)
        conclusion = lex.conclusion.any(norm)
        if not triggers:
            return Reading(language, None, "no_request_words")
        if lex.not_a_request.any(norm) and not self._after_blocker(norm, triggers):
            return Reading(language, None, "reminder_question_or_negation")
        intent = self._intent(norm, triggers)
        if intent is None:
            return Reading(language, None, "no_request_words")
        reading = Reading(language, intent)
        if intent == "update":  # the new value says nothing about what is updated
            reading.new_value = _new_value(text)
            if reading.new_value is None:
                return Reading(language, None, "update_without_value")
            value = normalise(reading.new_value)
            norm = norm.replace(value, " " * len(value))
        spent: list[Hit] = list(triggers)
        partial = intent == "delete" and lex.partial.any(norm)
        concepts = self._concepts(norm, partial)
        reading.concepts = list(dict.fromkeys(h.entry.removesuffix("#many") for h in concepts))
        reading.phrases = [norm[h.start : h.end] for h in concepts] + self._modifiers
        reading.number = _number(lex.number.find(norm), concepts, language, norm)
        spent += concepts
        relations = lex.relations.find(norm)
        reading.relations = list(dict.fromkeys(h.entry for h in relations))
        spent += relations
        reading.categories = list(dict.fromkeys(h.entry for h in lex.categories.find(norm)))
        reading.kinds = list(dict.fromkeys(h.entry for h in lex.kinds.find(norm)))
        which = lex.which.find(norm)
        if which:
            spent += which
            # "delete my current address, keep the old one": the kept clause says what
            # stays, not which version goes
            kept = _kept_clauses(norm)
            chosen = [h for h in which if not any(s <= h.start < e for s, e in kept)]
            reading.which = _which(chosen or which)
        reading.window = window_in(norm, now, zone)
        if reading.window is not None and reading.window.said in norm:
            at = norm.index(reading.window.said)
            spent.append(Hit("window", at, at + len(reading.window.said)))
        sessions = lex.sessions.find(norm)
        if sessions:
            reading.session = "this" if any(h.entry == "this" for h in sessions) else "last"
            spent += sessions
        reading.everything = lex.everything.any(norm)
        reading.said = lex.said.any(norm)
        vague = lex.vague.find(norm)
        reading.vague_one = any(h.entry == "one" for h in vague) and not any(
            h.entry == "many" for h in vague
        )
        reading.conclusion = conclusion
        if conclusion and intent == "delete":
            # "Forget what you concluded": the inference is suppressed so it is not
            # derived again; erasing its sources needs the user's explicit consent.
            reading.intent = "stop_using"
        if partial:
            kept = _kept_clauses(norm)
            words = longest(  # "flat number" is a unit, not a phone "number"
                [
                    Hit(k, h.start, h.end)
                    for k, kind in lex.spans.items()
                    for h in kind.words.find(norm)
                ]
            )
            named = [  # "delete the time but keep the date": the date is not removed
                (h.entry, h) for h in words if not any(s <= h.start < e for s, e in kept)
            ]
            inside = {(h.start, h.end) for h in concepts}
            kinds = list(dict.fromkeys(k for k, h in named if (h.start, h.end) not in inside))
            kinds = kinds or list(dict.fromkeys(k for k, _ in named))
            if kinds and not (concepts and self._whole_value(norm, concepts, kinds)):
                reading.intent = "redact"
                reading.spans = kinds
        reading.topic = _topic(norm)
        reading.words = self._content_words(norm, spent)
        reading.runs = self._cjk_runs(norm, spent)
        reading.before = _anchor(norm, lex.patterns.before)
        reading.after = _anchor(norm, lex.patterns.after)
        return reading

    def _selects(self, words: str, now: datetime, zone: tzinfo) -> bool:
        """Whether words say something the lexicon knows (a concept, category, kind,
        relation, time or conversation): a description, not a value."""
        lex = self.lex
        norm = normalise(words)
        return bool(
            lex.concepts.any(norm) or lex.categories.any(norm) or lex.kinds.any(norm)
            or lex.relations.any(norm) or lex.sessions.any(norm) or lex.said.any(norm)
            or lex.everything.any(norm) or window_in(norm, now, zone) is not None
        )  # fmt: skip

    # -- a request of several parts ------------------------------------------------------

    def _parts(self, norm: str, now: datetime, zone: tzinfo) -> list[Part]:
        """The parts of a request that names several things to forget, each read on its
        own; none when it names one. Cut where the lexicon's separators are; a piece
        is a part when it names something (a concept, a category, a kind, a time or a
        conversation) in a request's own words ("my phone number", "what I said
        yesterday", not "I don't want to be called at work"). A piece that names
        nothing goes with the part next to it; one that says what stays ("keep my
        email", "not my email") is left out. Anything else that names something, or
        fewer than two parts: one request, read whole, as before."""
        pieces = [p for p in self._pieces(norm) if p]
        if len(pieces) < 2:
            return []
        groups: list[list[str]] = []
        leading: list[str] = []
        for piece in pieces:
            kind = self._piece_kind(piece, now, zone)
            if kind == "part":
                groups.append([*leading, piece])
                leading = []
            elif kind == "other":
                return []  # names something, not as a request does: not cut
            elif kind == "plain":
                (groups[-1] if groups else leading).append(piece)
        if len(groups) < 2:
            return []
        language: Literal["en", "zh"] = "zh" if _CJK.search(norm) else "en"
        triggers = longest(self.lex.intents.find(norm))
        verb = norm[triggers[0].start : triggers[0].end] if triggers else ""
        first_end = norm.find(groups[0][-1]) + len(groups[0][-1])
        verb_after = bool(triggers) and triggers[0].start >= first_end  # "把...和...删掉"
        parts: list[Part] = []
        before: tuple[str, str] | None = None  # the last part's frame and possessor
        for n, group in enumerate(groups):
            words = " ".join(group)
            if n >= MAX_PARTS:  # listed as not planned, and why; never read
                parts.append(
                    Part(self._said(words), words, Reading(language, None, "too_many_parts"))
                )
                continue
            body, borrowed, before = self._shared(words, before)
            if verb and not self.lex.intents.any(body):
                body = f"{body} {verb}" if verb_after else f"{verb} {body}"
            said = self._said(words)
            read_as = self._said(body) if borrowed else ""
            reading = self._read(body, now, zone)
            parts.append(Part(said, body, reading, read_as if read_as != said else ""))
        return parts

    def _pieces(self, norm: str) -> list[str]:
        """The request cut at its separators (not inside a phrase that selects)."""
        found = longest(self.lex.parts.separators.find(norm))
        inside = self.lex.selectors.find(norm) if found else []
        cuts = [
            h
            for h in found
            if not any(s.start <= h.start and h.end <= s.end and s.length > h.length
                       for s in inside)
        ]  # fmt: skip
        out, start = [], 0
        for cut in cuts:
            out.append(norm[start : cut.start].strip())
            start = cut.end
        out.append(norm[start:].strip())
        return out

    def _piece_kind(self, piece: str, now: datetime, zone: tzinfo) -> str:
        """`part`, `kept` (says what stays), `plain` (names nothing), or `other` (names
        something, but not in a request's own words)."""
        lex = self.lex
        mask = list(piece)  # "don't keep", "do not store": verbs of forgetting
        for h in lex.intents.find(piece):
            mask[h.start : h.end] = " " * h.length
        rest = "".join(mask)
        if (
            lex.not_a_request.any(piece)
            or lex.patterns.kept_clause.search(rest)
            or lex.parts.not_a_part.any(rest)
        ):
            return "kept"
        first = self._first_selector(piece, now, zone)
        if first is None:
            return "plain"
        return "part" if self._only_known(piece[:first]) else "other"

    def _first_selector(self, piece: str, now: datetime, zone: tzinfo) -> int | None:
        """Where the first thing the piece names starts (None: it names nothing)."""
        lex = self.lex
        starts = [h.start for h in self._things(piece)]
        starts += [h.start for h in lex.sessions.find(piece)]
        window = window_in(piece, now, zone)
        if window is not None and window.said in piece:
            starts.append(piece.index(window.said))
        return min(starts) if starts else None

    def _things(self, piece: str) -> list[Hit]:
        lex = self.lex
        return sorted(
            [*lex.concepts.find(piece), *lex.categories.find(piece), *lex.kinds.find(piece)],
            key=lambda h: h.start,
        )

    def _only_known(self, head: str) -> bool:
        """Whether the words before what a piece names are all selector, possessor and
        function words ("please forget my sister's", "把我的"): a request's shape."""
        lex = self.lex
        mask = list(head)
        hits = [
            *lex.selectors.find(head),
            *lex.number.find(head),
            *lex.zh_stopwords.find(head),
            *lex.parts.trim.find(head),
            *lex.parts.articles.find(head),
            *self._owner_marks(head),
        ]
        for h in hits:
            mask[h.start : h.end] = " " * h.length
        rest = "".join(mask)
        if _CJK.search(rest):
            return False
        return all(w.strip("'-") in lex.stopwords for w in _WORD.findall(rest))

    def _owner_marks(self, head: str) -> list[Hit]:
        """Words that say whose a thing is: "my", "我", "bob's", "sister", "小李"."""
        lex = self.lex
        marks = [*lex.parts.owners.find(head), *lex.relations.find(head)]
        for m in lex.patterns.possessive_en.finditer(head):
            word = m.group(1)
            if word not in lex.patterns.not_names and word not in lex.stopwords:
                marks.append(Hit("owner", m.start(), m.end()))
        for pattern in lex.patterns.names_zh:
            for m in pattern.finditer(head):
                if m.group(1) not in lex.patterns.not_names_zh:
                    marks.append(Hit("owner", m.start(1), m.end(1)))
        return marks

    def _shared(
        self, words: str, before: tuple[str, str] | None
    ) -> tuple[str, bool, tuple[str, str] | None]:
        """What a part's words are read as: with the frame of the part before ("forget",
        "what you concluded about") when they have none of their own, and its possessor
        and modifiers ("my sister's", "my old") when they name no possessor either;
        whether a possessor or modifiers were borrowed; and this part's frame and
        possessor, for the part after it."""
        things = self._things(words)
        if not things:
            return words, False, before
        at = things[0].start
        head = words[:at]
        marks = self._owner_marks(head)
        if marks:
            start = min(h.start for h in marks)
            frame, owner = head[:start], head[start:at]
        else:
            start, frame, owner = at, head, ""
        framed = self._framed(frame)
        if before is None or framed:
            return words, False, (frame, owner)
        if marks:
            return before[0] + words[start:], False, (before[0], owner)
        return before[0] + before[1] + words[at:], bool(before[1].strip()), before

    def _framed(self, frame: str) -> bool:
        """Whether words before a part's possessor say something (a verb, "what you
        concluded about"), beyond articles and the words [parts] trims."""
        mask = list(frame)
        for h in [*self.lex.parts.trim.find(frame), *self.lex.parts.articles.find(frame)]:
            mask[h.start : h.end] = " " * h.length
        return bool(re.search(r"\w", "".join(mask)))

    def _said(self, words: str) -> str:
        """A part's own words, for the plan to quote: without the request's verb and
        the words at either end that [parts] trims ("把", "都", "please")."""
        mask = list(words)
        for h in longest(self.lex.intents.find(words)):
            mask[h.start : h.end] = " " * h.length
        said = " ".join("".join(mask).split())
        trim = self.lex.parts.trim
        for _ in range(4):
            ends = [h for h in trim.find(said) if h.start == 0 or h.end == len(said)]
            if not ends:
                break
            for h in sorted(ends, key=lambda h: -h.start):
                said = said[: h.start] + said[h.end :]
            said = said.strip(" ,;")
        return said or " ".join(words.split())

    def _after_blocker(self, norm: str, triggers: list[Hit]) -> bool:
        """A reminder or a question in one clause, and a real request in another:
        "never mind that, but delete my old phone number". The request counts when a
        trigger appears in a clause of its own (between separators) with no blocker:
        "删掉X，不要删Y" asks for X."""
        clauses = [c for c in re.split(r"[,.;!?，。；！？]|\bbut\b|但是|不过", norm) if c.strip()]
        if len(clauses) < 2:
            return False
        for clause in clauses:
            if self.lex.intents.any(clause) and not self.lex.not_a_request.any(clause):
                return True
        return False

    def _intent(self, norm: str, triggers: list[Hit]) -> Intent | None:
        found = {h.entry for h in triggers}
        if "delete" in found and "stop_using" in found:
            # "stop using it and delete it" erases; "don't use ... any more" alone does not
            return "delete" if _delete_is_separate(norm, triggers) else "stop_using"
        if "stop_using" in found:
            return "stop_using"
        if "delete" in found:
            return "delete"
        if "update" in found:
            return "update"
        return None

    def _whole_value(self, norm: str, concepts: list[Hit], kinds: list[str]) -> bool:
        """ "Delete my phone number" names a whole value, not a span inside another
        item: a concept that names the same thing as the span kind, with no word that
        makes it partial other than the concept's own."""
        same = {"phone": "phone", "email": "email", "home_address": "street"}
        named = {same.get(h.entry) for h in concepts}
        partial_words = [h for h in self.lex.partial.find(norm)]
        return set(kinds) <= named and not any(
            re.search(
                r"but|keep|only|just|exact|from|out of|in what|保留|只|仅|里|中的",
                norm[h.start : h.end],
            )
            for h in partial_words
        )

    def _concepts(self, norm: str, partial: bool) -> list[Hit]:
        """The concepts a request names, settled against the other words it might be:
        a category phrase ("work details"), a kind of text to remove ("the unit number"
        in a partial removal), and a concept that only modifies the next one ("cat
        allergy": an allergy, to cats). The longer reading wins."""
        lex = self.lex
        concepts = lex.concepts.find(norm)
        rivals = lex.categories.find(norm)
        if partial:
            rivals += [h for kind in lex.spans.values() for h in kind.words.find(norm)]
        spans_elsewhere = [r for r in rivals if not any(_overlap(r, c) for c in concepts)]
        # A tie goes to the rival, unless the request names its span kind elsewhere too:
        # "the flat number from my address" keeps "address" as the container.
        order = [*concepts, *rivals] if partial and spans_elsewhere else [*rivals, *concepts]
        kept = longest(order)
        chosen = [h for h in kept if h in concepts]
        out: list[Hit] = []
        for i, hit in enumerate(chosen):
            after = chosen[i + 1] if i + 1 < len(chosen) else None
            if after is not None and not norm[hit.end : after.start].strip(" 的'"):
                self._modifiers.append(norm[hit.start : hit.end])
                continue
            out.append(hit)
        return out

    def _cjk_runs(self, norm: str, spent: list[Hit]) -> list[str]:
        """Runs of Chinese text not spent on selectors or function words: what the
        request says about the item ("对虾", "心理咨询"), for matching with values."""
        mask = list(norm)
        for h in [*spent, *self.lex.selectors.find(norm), *self.lex.zh_stopwords.find(norm)]:
            for i in range(h.start, h.end):
                mask[i] = " "
        return re.findall(r"[\u3400-\u9fff]+", "".join(mask))

    def _content_words(self, norm: str, spent: list[Hit]) -> list[str]:
        spans = [(h.start, h.end) for h in spent] + [
            (h.start, h.end) for h in self.lex.selectors.find(norm)
        ]
        words = []
        for m in _WORD.finditer(norm):
            if any(s <= m.start() < e for s, e in spans):
                continue
            word = m.group(0).strip("'-")
            if word and word not in self.lex.stopwords and not word.isdigit():
                words.append(word)
        return words


def _number(
    hits: list[Hit], concepts: list[Hit], language: str, norm: str = ""
) -> Literal["all", "one"] | None:
    names = {h.entry for h in hits}
    if "all" in names:
        return "all"
    if "one" in names:
        return "one"
    if any(h.entry.endswith("#many") for h in concepts):
        return "all"
    plural = [m.group(1) for m in lexicon().patterns.plural.finditer(norm)]
    if any(not w.endswith(("ss", "us", "is")) for w in plural):  # "the places", not "address"
        return "all"
    if concepts and language == "en":
        return "one"
    return None


def _anchor(norm: str, patterns: tuple[re.Pattern[str], ...]) -> str | None:
    for pattern in patterns:
        m = pattern.search(norm)
        if m:
            return m.group(1)
    return None


def _overlap(a: Hit, b: Hit) -> bool:
    return a.start < b.end and b.start < a.end


def _which(hits: list[Hit]) -> Which:
    names = {h.entry for h in hits}
    if "previous" in names:
        return "previous"
    if "current" in names and "all" not in names:
        return "current"
    return "all"


def _delete_is_separate(norm: str, triggers: list[Hit]) -> bool:
    stop = [h for h in triggers if h.entry == "stop_using"]
    return any(
        h.entry == "delete" and all(h.end <= s.start or h.start >= s.end for s in stop)
        for h in triggers
    )


def _new_value(text: str) -> str | None:
    """The value an update sets: what follows "to", "is now", "改成"; the request's own
    closing ("please update it", "帮我改一下") is not part of it."""
    patterns = lexicon().patterns
    for pattern in patterns.new_value:
        m = pattern.search(text.strip())
        if m:
            value = m.group(1).strip()
            for _ in range(3):
                value = patterns.new_value_tail.sub("", value).strip()
            value = re.sub(r"[,，]?\s*(?:please|thanks|thank you|谢谢|吧|了)$", "", value).strip()
            if value:
                return value
    return None


def _kept_clauses(norm: str) -> list[tuple[int, int]]:
    """Where the clauses that say what stays are ("以前那个留着", "keep the old one")."""
    out, start = [], 0
    for m in re.finditer(r"[,;，；。]|\bbut\b|但", norm + ","):
        clause = norm[start : m.start()]
        if lexicon().patterns.kept_clause.search(clause):
            out.append((start, m.start()))
        start = m.end()
    return out


def _topic(norm: str) -> str:
    m = lexicon().patterns.topic.search(norm)
    if not m:
        return ""
    topic = m.group(1)
    for hit in lexicon().selectors.find(topic):  # "about last time": no topic
        topic = topic[: hit.start] + " " * hit.length + topic[hit.end :]
    words = [w for w in topic.split() if w not in lexicon().stopwords]
    return " ".join(words)
