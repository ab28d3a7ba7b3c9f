"""The pieces of information a request names, before anything stored is looked at.

People ask to forget information, not items: "Delete the old gate code 7142", "the
value relay-17 should not be restated", "Delete Birch Lodge, delete 206-555-0148, and
delete the nickname Wren", "把备用口令删掉". A request is read here into

- **literal pieces**: what it quotes ('copper finch', “青石小桥”) or names as words
  to find without quotes ("the phrase copper finch", "短语青石小桥": the lexicon's
  `named_literal`), and the values it
  names by their shape: e-mail addresses, amounts with their currency or unit (3,400
  EUR, €8,450, 12 kg, 4,150元), phone numbers in any format, times, codes and
  identifiers (7142, relay-17, B2-17, BK-U1371), names (capitalised words that are not
  the sentence's own first word, unless that word is no word of a request: "Birch
  Lodge", "the nickname Wren"), and Chinese text that is neither a request's words nor
  a label ("把松风阁删掉", "我的小名豆包", "豆包这个小名": checked against what is
  stored by the planner);
- **descriptions**: a clause that names no value ("the do-not-voicemail note", "my old
  locker", "the previous trip total", "那条包裹备注"), with the version words it
  carries ("old", "earlier", "以前", "旧": the superseded one) and its label;
- **keeps**: what a keep clause names ("but keep 3,150 EUR", "the current amount remains
  3,150 EUR", "broad summaries may still say the side gate", "不要删 ...", "保留 ...").
  A keep is never touched by the plan, and the plan lists it.

"Keep only the current X" names the earlier versions of X (a description), and keeps
the current one.

Everything here is read from the words alone (the lexicon's `[information]` section),
deterministically; the planner (information.py) resolves each piece to the places it is
stored in. A model-backed reader may return pieces too: `check_pieces` holds them to
what the request's words contain.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

from memory_ledger.forgetting.planning.lexicon import Lexicon
from memory_ledger.phrases import longest

#: Kinds of piece. Literal kinds name a value; `text` is Chinese text that may be a
#: value (a name without quotes), checked against the store; `description` names a
#: thing by what it is.
LITERAL_KINDS = ("quoted", "email", "amount", "phone", "time", "code", "name", "text")
KINDS = (*LITERAL_KINDS, "description")
Which = Literal["previous", "current", "all"]
#: At most this many pieces are read from one request (more are listed as not read).
MAX_PIECES = 12
MAX_PIECE_CHARS = 200

_CJK = "\u3400-\u9fff\uf900-\ufaff"
_ALNUM = "A-Za-z0-9"
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_SIGN = r"(?:US\$|C\$|A\$|HK\$|NZ\$|S\$|R\$|[$€£¥₹₩₽₺₱฿])"
_CODE = r"(?:USD|EUR|GBP|CAD|AUD|CNY|RMB|JPY|CHF|HKD|SGD|NZD|INR|SEK|NOK|DKK)"
_WORDS = r"(?:dollars?|euros?|pounds?|yuan|yen|rupees?|francs?)"
_CJK_UNIT = (
    r"(?:万元|美元|欧元|英镑|港币|港元|人民币|日元|元|块钱|块|公斤|千克|公里|毫升|米|斤|克|升)"
)
_UNIT = r"(?:kg|g|mg|km|m|cm|mm|mi|miles?|lbs?|oz|ml|l|kwh|percent|%)"
AMOUNT = re.compile(
    rf"{_SIGN}\s?(?:{_NUM})"
    rf"|(?<![{_ALNUM}])(?i:{_CODE})\s?(?:{_NUM})(?![{_ALNUM}])"
    rf"|(?<![{_ALNUM}.,])(?:{_NUM})\s?(?:(?i:{_CODE}|{_WORDS})(?![{_ALNUM}])|{_CJK_UNIT}"
    rf"|(?i:{_UNIT})(?![{_ALNUM}]))"
)
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
PHONE = re.compile(
    rf"(?<![{_ALNUM}$€£¥+.,/-])(?:\+\d{{1,3}}[ .-]?)?(?:\(\d{{2,5}}\)[ .-]?)?"
    rf"\d{{2,15}}(?:[ .-]\d{{2,8}}){{0,4}}(?![{_ALNUM}]|[.,:/-]\d)"
)
TIME = re.compile(
    rf"(?<![{_ALNUM}])(?:\d{{1,2}}:\d{{2}}(?:\s?(?i:[ap]\.?m\.?))?|\d{{1,2}}\s?(?i:am|pm|a\.m\.|p\.m\.))"
    rf"(?![{_ALNUM}])"
)
CODE = re.compile(rf"(?<![{_ALNUM}])[{_ALNUM}]+(?:[-_/][{_ALNUM}]+)*(?![{_ALNUM}])")
_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{1,2}/\d{1,2}(?:/\d{2,4})?$")
_QUOTES = (
    re.compile(r"(?<![A-Za-z0-9])'([^'\n]{1,120}?)'(?![A-Za-z0-9])"),
    re.compile(r'"([^"\n]{1,120}?)"'),
    re.compile(r"“([^”\n]{1,120}?)”"),
    re.compile(r"‘([^’\n]{1,120}?)’"),
    re.compile(r"「([^」\n]{1,120}?)」"),
    re.compile(r"『([^』\n]{1,120}?)』"),
)
_NAME = re.compile(
    r"(?<![A-Za-z0-9'])(?:(?:Mr|Mrs|Ms|Dr|Prof)\.?\s)?[A-Z][a-z]+(?:-[A-Z]?[a-z]+|'(?!s\b)[A-Z]?[a-z]+)*"
    r"(?:\s(?:[A-Z][a-z]+(?:-[A-Z]?[a-z]+|'(?!s\b)[A-Z]?[a-z]+)*))*(?![A-Za-z0-9])"
)
_CJK_RUN = re.compile(rf"[{_CJK}]+")
_SENTENCE_END = re.compile(r"[.!?;:。！？；：]\s*$")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)", re.IGNORECASE)
_TRAILING = ("please", "now", "too", "again", "it", "them", "anymore", "thanks", "also")
_DEMONSTRATIVES = ("这个", "那个", "这条", "那条", "这位", "那位")


@dataclass
class Piece:
    """One piece of information a request names (or keeps).

    `text` is the value as the request writes it (a literal), or the description's
    words; `label` the words beside a literal that say what it is ("gate code") or a
    description's label; `which` the version a description asks for; `said` the
    clause, for the user to tell the pieces apart. `prefix`: the word written before a
    code ("relay" in "relay 880"), which may be part of it."""

    text: str
    kind: str
    label: str = ""
    which: Which | None = None
    said: str = ""
    prefix: str = ""
    #: "keep only the current X": every earlier version, not one of them.
    every: bool = False
    #: The label of the description just before this value, when the value may be
    #: what it describes ("the previous cubby, A 490").
    apposition: str = ""
    #: A description read as a request of its own ("delete my old mobile number"), by
    #: the item reader: how the planner finds the facts it names by concept.
    reading: Any = None

    @property
    def literal(self) -> bool:
        return self.kind in LITERAL_KINDS


@dataclass
class Information:
    """What a request names: pieces to forget, and pieces to keep."""

    pieces: list[Piece] = field(default_factory=list)
    kept: list[Piece] = field(default_factory=list)
    #: More pieces than MAX_PIECES were named: listed as not read, never dropped silently.
    beyond: int = 0

    @property
    def literal(self) -> bool:
        return any(p.literal for p in self.pieces)


def prepared(text: str) -> str:
    """The request as pieces are read from it: NFKC, curly single quotes straightened,
    runs of space as one. Case is kept (names are capitalised)."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.split())


def lowered(text: str) -> str:
    """Lower case, one character for one, so offsets stay those of `text`."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


@dataclass
class _Span:
    start: int
    end: int
    kind: str
    text: str
    prefix: str = ""


class InformationReader:
    """Reads the pieces of a request with the lexicon's `[information]` words."""

    def __init__(self, lex: Lexicon) -> None:
        self.lex = lex
        self.words = lex.information

    def read(self, text: str) -> Information:
        text = prepared(text)
        low = lowered(text)
        literals = self._literals(text)
        out = Information()
        keeping = False
        for start, end, joined in self._clauses(low, literals):
            clause, lclause = text[start:end], low[start:end]
            if not re.search(rf"[A-Za-z0-9{_CJK}]", clause):
                continue
            mine = [s for s in literals if start <= s.start and s.end <= end]
            only = self._keep_only(lclause)
            if only is not None:  # "keep only the current X": its earlier versions go
                piece = Piece(only, "description", only, "previous", self._said(clause, lclause))
                piece.every = True
                out.pieces.append(piece)
                keeping = False
                continue
            if self._keeps(lclause):
                keeping = True
            elif self._forgets(lclause):
                keeping = False
            said = self._said(clause, lclause)
            if any(s.kind != "name" for s in mine):  # "the guest Wi-Fi password 'x'"
                mine = [s for s in mine if s.kind != "name"]
            found = [self._piece(s, lclause, start, mine, said) for s in mine]
            target = out.kept if keeping else out.pieces
            listed = bool(re.search(r"\b(?:and|plus|also)\b|和|及|还有|、|另外|并且", joined))
            if (
                len(found) == 1
                and not found[0].label
                and target
                and not listed
                and self._apposed(target[-1], clause, mine)
            ):
                # "the previous cubby, A 490": perhaps the value of the description just
                # before ("the exam fee, 5,750 CAD" may be two things); the planner asks
                # the memory whether the description's label is said with this value
                found[0].apposition = target[-1].label
            if not found and not keeping:
                description = self._description(clause, lclause)
                found = [description] if description is not None else []
            target.extend(found)
        out.pieces = _unique(out.pieces)
        out.kept = [k for k in _unique(out.kept) if not _named_in(k, out.pieces)]
        if len(out.pieces) > MAX_PIECES:
            out.beyond = len(out.pieces) - MAX_PIECES
            out.pieces = out.pieces[:MAX_PIECES]
        return out

    def _apposed(self, before: Piece, clause: str, mine: list[_Span]) -> bool:
        """Whether a clause that is a value and nothing else ("A 490") gives the value
        of the description just before it ("the previous cubby")."""
        if before.kind != "description" or before.every or len(mine) != 1:
            return False
        rest = clause.replace(mine[0].text, " ")
        return not re.search(
            rf"[A-Za-z{_CJK}]", rest.replace(mine[0].prefix, " ") if mine[0].prefix else rest
        )

    # -- literals -------------------------------------------------------------------

    def _literals(self, text: str) -> list[_Span]:
        taken: list[_Span] = []

        def free(a: int, b: int) -> bool:
            return all(b <= s.start or a >= s.end for s in taken)

        for pattern in _QUOTES:
            for m in pattern.finditer(text):
                inner = m.group(1).strip()
                if inner and free(m.start(), m.end()) and not self._quoted_words(inner):
                    taken.append(_Span(m.start(), m.end(), "quoted", inner))
        low = lowered(text)  # one character for one: its offsets are the text's
        for pattern in self.words.named_literal:  # "the phrase copper finch": as if quoted
            for m in pattern.finditer(low):
                a, b = m.span("value")
                inner = text[a:b].strip()
                if inner and free(a, b) and not self._quoted_words(inner):
                    taken.append(_Span(a, b, "quoted", inner))
        for pattern in self.words.short_labels:  # "room 9": one place, as said
            for m in pattern.finditer(low):
                if free(m.start(), m.end()):
                    taken.append(_Span(m.start(), m.end(), "quoted", text[m.start() : m.end()]))
        shapes = (("email", EMAIL), ("amount", AMOUNT), ("time", TIME), ("phone", PHONE))
        for kind, pattern in shapes:
            for m in pattern.finditer(text):
                value = m.group(0).strip()
                if not value or not free(m.start(), m.end()):
                    continue
                digits = sum(c.isdigit() for c in value)
                if kind == "phone" and (not 7 <= digits <= 15 or _DATE.match(value)):
                    continue
                taken.append(_Span(m.start(), m.end(), kind, value))
        for m in CODE.finditer(text):
            value = m.group(0)
            if not free(m.start(), m.end()) or not any(c.isdigit() for c in value):
                continue
            if _DATE.match(value) or _ORDINAL.fullmatch(value):
                continue
            prefix = ""
            before = re.search(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9]{0,11}) $", text[: m.start()])
            word = before.group(1) if before else ""
            if word and (
                word.lower() not in self.words.not_prefixes or re.fullmatch("[A-Z]", word)
            ):
                prefix = word  # "relay 43", "A 490": perhaps "relay-43", "A-490"
            if len(value) < (2 if prefix else 3):  # "relay 43" may be "relay-43"
                continue
            taken.append(_Span(m.start(), m.end(), "code", value, prefix))
        for m in _NAME.finditer(text):
            span = self._name(text, m.start(), m.end())
            if span is not None and free(span.start, span.end):
                taken.append(span)
        return sorted(taken, key=lambda s: s.start)

    def _quoted_words(self, inner: str) -> bool:
        """Quotes around the request's own words ("'forget' it") quote no value."""
        low = lowered(inner)
        return len(low.split()) <= 2 and self.lex.intents.any(low)

    def _name(self, text: str, start: int, end: int) -> _Span | None:
        """A run of capitalised words, without the words a request starts with ("Treat",
        "Please", "My"), month and day names, and never a possessive ("Bob's" says
        whose, not what)."""
        words = list(re.finditer(r"\S+", text[start:end]))
        while words:
            first = words[0].group(0).lower().rstrip(".")
            at = start + words[0].start()
            initial = at == 0 or bool(_SENTENCE_END.search(text[:at]))
            if first in self.words.not_names or (initial and self._request_word(first)):
                words = words[1:]
                continue
            break
        while words and words[-1].group(0).lower() in self.words.not_names:
            words = words[:-1]
        if not words:
            return None
        a, b = start + words[0].start(), start + words[-1].end()
        if re.match(r"'s\b|s'", text[b - 1 : b + 2]) or text[b : b + 2] == "'s":
            return None
        return _Span(a, b, "name", text[a:b])

    def _request_word(self, word: str) -> bool:
        lex = self.lex
        return (
            word in lex.stopwords
            or word in self.words.sentence_words
            or lex.intents.any(word)
            or lex.selectors.any(word)
        )

    # -- clauses --------------------------------------------------------------------

    def _clauses(self, low: str, literals: list[_Span]) -> list[tuple[int, int, str]]:
        """The request cut at its separators, never inside a literal: each clause with
        the separators before it ("and" lists another thing; a comma may not)."""
        out, start, joined = [], 0, ""
        filler = [
            (h.start, h.end)
            for h in self.words.filler.find(low)
            if " " in low[h.start : h.end] or _CJK_RUN.search(low[h.start : h.end])
        ]
        for m in self.words.separators.finditer(low):
            if any(s.start < m.end() and m.start() < s.end for s in literals):
                continue
            if any(a < m.start() and m.end() < b for a, b in filler):
                continue
            if low[start : m.start()].strip():
                out.append((start, m.start(), joined))
                joined = ""
            joined += m.group(0)
            start = m.end()
        out.append((start, len(low), joined))
        return out

    def _keep_only(self, lclause: str) -> str | None:
        for pattern in self.words.keep_only:
            m = pattern.search(lclause)
            if m:
                label = self._label_of(m.group("label"))
                if label:
                    return label
        return None

    def _keeps(self, lclause: str) -> bool:
        """A clause that says what stays ("but keep ...", "... remains ...", "保留 ..."):
        a keep word that is no part of a verb of forgetting ("no longer keep")."""
        verbs = self.lex.intents.find(lclause)
        for m in self.words.keep.finditer(lclause):
            if not any(h.start <= m.start() < h.end for h in verbs):
                return True
        return False

    def _forgets(self, lclause: str) -> bool:
        return self.lex.intents.any(lclause)

    # -- what a clause names --------------------------------------------------------

    def _piece(self, span: _Span, lclause: str, offset: int, mine: list[_Span], said: str) -> Piece:
        mask = list(lclause)
        for s in mine:
            mask[s.start - offset : s.end - offset] = " " * (s.end - s.start)
        label = self._masked("".join(mask))
        return Piece(span.text, span.kind, label, self._which(lclause), said, span.prefix)

    def _masked(self, low: str, demonstratives: bool = False) -> str:
        """`low` without the request's own words (verbs, version words, filler,
        stopwords): what is left says what a thing is. With `demonstratives`, "这个"
        and "那个" stay (in "豆包这个小名" they say which words are the value)."""
        mask = list(low)
        lex = self.lex
        hits = [
            *lex.intents.find(low),
            *lex.which.find(low),
            *self.words.filler.find(low),
            *self.words.trim_zh.find(low),
        ]
        kept = (
            [m.span() for m in re.finditer("|".join(_DEMONSTRATIVES), low)]
            if demonstratives
            else []
        )
        for h in hits:
            if any(a < h.end and h.start < b for a, b in kept):
                continue
            mask[h.start : h.end] = " " * (h.end - h.start)
        words = []
        for m in re.finditer(r"[^\s,;:.!?()\"“”、，；：。！？]+", "".join(mask)):
            word = m.group(0).strip("'")
            if word and word not in lex.stopwords and word not in self.words.sentence_words:
                words.append(word)
        return " ".join(words)

    def _label_of(self, low: str) -> str:
        """A description's label: its words without the verbs and filler, and without
        the determiners, possessives and version words at either end ("the previous
        gate code at the new place": "gate code at the new place")."""
        mask = list(low)
        for h in [*self.lex.intents.find(low), *self.words.filler.find(low)]:
            mask[h.start : h.end] = " " * (h.end - h.start)
        tokens = [
            t.strip("'") for t in re.findall(r"[^\s,;:.!?()\"“”、，；：。！？]+", "".join(mask))
        ]
        tokens = [t for t in tokens if t]

        def edge(token: str) -> bool:
            return (
                token in self.lex.stopwords
                or token in self.words.sentence_words
                or token in self.words.generic
                or (self.lex.which.any(token) and not _CJK_RUN.search(token))
            )

        while tokens and edge(tokens[0]):
            tokens = tokens[1:]
        while tokens and (tokens[-1] in self.words.generic or tokens[-1] in _TRAILING):
            tokens = tokens[:-1]
        words = []
        for token in tokens:
            if _CJK_RUN.search(token):
                token = self._trim_cjk(token)
            if token:
                words.append(token)
        return " ".join(words)

    def _trim_cjk(self, token: str) -> str:
        """Chinese words without the function words and version words at their ends
        ("我以前的手机号": "手机号")."""
        for _ in range(6):
            hits = [*self.words.trim_zh.find(token), *self.lex.which.find(token)]
            ends = [h for h in hits if h.start == 0 or h.end == len(token)]
            if not ends:
                break
            h = max(ends, key=lambda h: h.end - h.start)
            token = token[h.end :] if h.start == 0 else token[: h.start]
        return token

    def _which(self, lclause: str) -> Which | None:
        """The version a clause asks for ("old", "以前": previous), not counting the
        filler it says it with ("from now on")."""
        mask = list(lclause)
        for h in self.words.filler.find(lclause):
            mask[h.start : h.end] = " " * (h.end - h.start)
        found = {h.entry for h in self.lex.which.find("".join(mask))}
        if "previous" in found:
            return "previous"
        if "current" in found:
            return "current"
        return None

    def _description(self, clause: str, lclause: str) -> Piece | None:
        """A clause that names no value: a description, or Chinese text that may be a
        value written without quotes ("把松风阁删掉", "我的小名豆包")."""
        label = self._label_of(lclause)
        if not re.search(rf"[a-z{_CJK}]", label):
            return None
        said = self._said(clause, lclause)
        which = self._which(lclause)
        segments = self._masked(lclause, demonstratives=True).split()
        cjk = [w for w in segments if _CJK_RUN.fullmatch(w)]
        words = [w for w in segments if not _CJK_RUN.search(w)]
        run = "".join(cjk)
        if run not in lclause:  # masked words between: the longest run as written
            run = max(cjk, key=len) if cjk else ""
        if run and (not words or len(cjk) == 1):  # "我的小名豆包", "the venue 半山堂"
            named = self._cjk_value(run)
            if named is not None and self._possessor(named[0], lclause):
                named = None  # "刘洋的信息": whose, not what
            if named is not None:
                value, what = named
                what = " ".join([*words, what]).strip()
                return Piece(value, "text", what, which, said)
        return Piece(label, "description", label, which, said)

    def _possessor(self, value: str, lclause: str) -> bool:
        """Whether Chinese text is said as whose something is ("刘洋的信息"), not as the
        thing ("提到小葵的记录": the records that mention it)."""
        at = lclause.find(value + "的")
        if at < 0:
            return False
        rest = lclause[at + len(value) + 1 :]
        mask = list(rest)
        for h in [*self.lex.intents.find(rest), *self.words.filler.find(rest)]:
            mask[h.start : h.end] = " " * (h.end - h.start)
        return bool(_CJK_RUN.search("".join(mask)))

    def _cjk_value(self, run: str) -> tuple[str, str] | None:
        """Chinese text that may name a value: (the value, its label). "豆包这个小名"
        and "小名豆包" name 豆包; "包裹备注" and "我的小名" end with a label and
        describe a thing; "松风阁" has no label, and may be a value."""
        m = re.fullmatch(rf"([{_CJK}]{{2,}}?)(?:这个|那个|这条|那条|这位|那位)([{_CJK}]+)", run)
        if m:
            return m.group(1), m.group(2)
        run = re.sub("这个|那个|这条|那条|这位|那位", "", run)
        hits = longest(self.words.labels.find(run))
        if any(h.end == len(run) for h in hits):
            return None
        head = [h for h in hits if h.start == 0]
        if head and len(run) - head[0].end >= 2:
            return run[head[0].end :], run[: head[0].end]
        return (run, "") if len(run) >= 2 else None

    def _said(self, clause: str, lclause: str) -> str:
        """The clause's own words, without the verb: what the plan quotes."""
        mask = list(clause)
        hits = [*self.lex.intents.find(lclause), *self.words.restate.find(lclause)]
        hits += [
            h for h in self.words.filler.find(lclause) if _CJK_RUN.search(lclause[h.start : h.end])
        ]
        for h in hits:
            mask[h.start : h.end] = " " * (h.end - h.start)
        said = " ".join("".join(mask).split()).strip(" ,;.!?:，；。！？")
        for _ in range(4):  # "把 ... 都", "please": the request's words at either end
            ends = [h for h in self.words.trim_zh.find(said) if h.start == 0 or h.end == len(said)]
            ends += [
                h
                for h in self.lex.parts.trim.find(lowered(said))
                if h.start == 0 or h.end == len(said)
            ]
            if not ends:
                break
            h = max(ends, key=lambda h: h.end - h.start)
            said = (said[h.end :] if h.start == 0 else said[: h.start]).strip(" ,;.!?:，；。！？")
        return (said or " ".join(clause.split()))[:MAX_PIECE_CHARS]


def _unique(pieces: list[Piece]) -> list[Piece]:
    out: list[Piece] = []
    for piece in pieces:
        if not any(p.kind == piece.kind and p.text == piece.text for p in out):
            out.append(piece)
    return out


def _named_in(keep: Piece, pieces: list[Piece]) -> bool:
    return any(p.literal and lowered(p.text) == lowered(keep.text) for p in pieces)
