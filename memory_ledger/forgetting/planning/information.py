"""From the pieces of information a request names to the places they are stored in.

A value is looked for where the user's memory holds it, in every item at once, with the
mention lookup (`where_mentioned`: value -> {item: spans as written there}): the user's
own turns, staff notes, the agent's log lines, facts, files. One value in many places
is one thing, never a question: the plan takes every place. Per place it says what
happens:

- a fact or preference whose value *is* the piece is forgotten (`erase`);
- any other item that mentions it (a turn, a file, a summary's input, a fact that says
  more) has the span redacted, as written there, and keeps the rest (`redact`);
- what was derived from them is rebuilt by the request path, as for every erasure.

A description ("the do-not-voicemail note", "my old locker", "the previous trip total")
is resolved where its label is said beside a value ("Confirming the gate code: 3101."),
then through the catalog (a fact or preference whose predicate its words name, "the
parcel note": `delivery_note`; or the facts of the concept it is, "my email address"),
then, for a label the memory never says as the request does ("寄养间门禁码" for a
history in English), by meaning, when one thing stands clearly ahead; the value found
is then looked for everywhere like a literal. "Old", "earlier", "以前", "旧" pick the
superseded version when there is one, the only one on file otherwise; when two
different things fit (two earlier codes, two amounts that are both "the amount"), the
piece is asked about, with its candidates, and the other pieces stay planned.

A literal value may also be said apart, across two consecutive turns
of one session ("my number is 415-555", then "0199, ..."): its head ending the first,
its tail starting the next. Both turns are places then, each redacted as written there
(`_across_turns`); the same halves anywhere else are not.

What a keep clause names ("the current amount remains 3,150 EUR") is looked up too,
listed in the plan, and never touched: a turn that holds the forgotten and the kept
value has only the forgotten span redacted. Look-alikes survive because the lookup
matches on token boundaries ("7142" is not in "71420").

The work per plan follows the places found: lookups by value, and the catalog rows and
texts of the items found, never a pass over every item of the namespace.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select

from memory_ledger.forgetting.mentions import (
    MentionPattern,
    atomic_spans,
    find_mentions,
    mention_pattern,
    where_mentioned,
)
from memory_ledger.forgetting.planning.drafts import AMBIGUOUS, NOT_FOUND, RESOLVED, Draft
from memory_ledger.forgetting.planning.lexicon import Lexicon
from memory_ledger.forgetting.planning.part_sentences import planned_parts
from memory_ledger.forgetting.planning.pieces import (
    AMOUNT,
    Information,
    InformationReader,
    Piece,
    lowered,
)
from memory_ledger.forgetting.planning.pool import Pool, Row, candidate
from memory_ledger.forgetting.planning.when import MONTHS_EN
from memory_ledger.forgetting.redaction import span_pattern
from memory_ledger.forgetting.scope import erased_with
from memory_ledger.phrases import longest, normalise
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.cells import Cells
from memory_ledger.projections.id_sets import among
from memory_ledger.residue import MIN_NEEDLE_BYTES
from memory_ledger.text_units import written_forms as units_forms

if TYPE_CHECKING:
    from memory_ledger.forgetting.planning.reading import Reading
    from memory_ledger.forgetting.planning.request import PlanningRequest

#: The item planner's entry point (a Reading and its words to a Draft).
PlanItems = Callable[["Reading", str], Draft]

#: Candidates offered for one ambiguous piece, at most.
MAX_OPTIONS = 8
#: Item kinds whose whole value can be a piece (erased, not redacted).
VALUE_KINDS = ("fact", "preference")
#: Label words too general to find one thing by themselves.
_GENERIC_LABELS = frozenset((
    "code", "codes", "number", "numbers", "amount", "amounts", "name", "names", "id", "note",
    "notes", "value", "fee", "fees", "line", "phone", "password", "date", "time", "place",
    "room", "house", "hall", "total", "price", "cost", "order", "account", "card", "tag",
    "unit", "密码", "号码", "金额", "电话", "名字", "地址", "备注", "号", "码", "费", "费用",
    "价", "价格", "款", "钱", "单元", "房间", "账号", "牌号", "号牌",
))  # fmt: skip
#: The meaning fallback: how many texts closest to the label are read, and how far the
#: best thing must lead the next to be taken.
MEANING_HITS = 12
MEANING_LEAD = 2.0
#: ... and, of the first MEANING_GROUPS values, the one taken must also be the closest
#: by what the memory says beside it (MEANING_SAID sentences of each).
MEANING_GROUPS = 4
MEANING_SAID = 4
MEANING_MARGIN = 0.1
#: A request that names only a kind of value reads at most this many latest texts to
#: find the values that fit it (when their labels are too short to look up).
RECENT = 200
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；\n])")
_CJK = re.compile(r"[\u3400-\u9fff]")
_SIGNS = {
    "$": "USD", "US$": "USD", "C$": "CAD", "A$": "AUD", "HK$": "HKD", "NZ$": "NZD",
    "S$": "SGD", "R$": "BRL", "€": "EUR", "£": "GBP", "¥": "CNY", "₹": "INR", "₩": "KRW",
    "₽": "RUB", "₺": "TRY", "₱": "PHP", "฿": "THB",
}  # fmt: skip
_CURRENCY_WORDS = {
    "dollar": "USD", "dollars": "USD", "euro": "EUR", "euros": "EUR", "pound": "GBP",
    "pounds": "GBP", "yuan": "CNY", "rmb": "CNY", "元": "CNY", "块": "CNY", "块钱": "CNY",
    "人民币": "CNY", "美元": "USD", "欧元": "EUR", "英镑": "GBP", "港币": "HKD", "港元": "HKD",
    "日元": "JPY", "yen": "JPY",
}  # fmt: skip
_SIGN_OF = {"USD": "$", "CAD": "C$", "AUD": "A$", "EUR": "€", "GBP": "£", "CNY": "¥", "INR": "₹"}


@dataclass
class Thing:
    """One value a piece resolves to: its written forms, where it is, what goes."""

    key: str
    kind: str
    forms: list[str] = field(default_factory=list)
    votes: int = 0
    places: dict[str, list[str]] = field(default_factory=dict)
    erase: set[str] = field(default_factory=set)
    #: When it was first and last said (for "old": the superseded one is said first).
    first_seen: str = ""
    face: str = ""  # the item that stands for it in a question
    #: The two consecutive turns it is said across (its head ends the first, its tail
    #: starts the second), when it is: the plan reports them as such.
    apart: tuple[str, str] | None = None


@dataclass
class Found:
    """What one piece came to."""

    piece: Piece
    status: str
    things: list[Thing] = field(default_factory=list)
    reason: str = ""
    options: list[Thing] = field(default_factory=list)

    @property
    def places(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for thing in self.things:
            for item, spans in thing.places.items():
                known = out.setdefault(item, [])
                known.extend(s for s in spans if s not in known)
        return out

    @property
    def erase(self) -> set[str]:
        return {i for t in self.things for i in t.erase}


def value_identity(kind: str, text: str) -> str:
    """One key for every written form of a value: a phone's digits (without the
    country code written with "+"), an amount's number and currency, a code's letters
    and digits, a text's words."""
    text = text.strip()
    if kind in ("phone", "code") and re.fullmatch(r"[+\d\s().-]+", text):
        digits = re.sub(r"\D", "", text)  # "13818454068" is "138-1845-4068"
        cc = re.match(r"\+(\d{1,3})[ .-]", text)
        return "n:" + (digits[len(cc.group(1)) :] if cc else digits)
    if kind == "amount":
        number, currency = amount_parts(text)
        return f"a:{number}:{currency}"
    if kind == "code":
        return "c:" + re.sub(r"[^0-9a-z]", "", text.lower())
    if kind == "email":
        return "e:" + text.lower()
    return "t:" + " ".join(re.sub(r"[-_]", " ", lowered(normalise(text))).split())


def amount_parts(text: str) -> tuple[str, str]:
    """An amount's number (no grouping) and currency code ("" when none is said)."""
    number = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    digits = number.group(0).replace(",", "") if number else ""
    rest = (text[: number.start()] + " " + text[number.end() :]) if number else text
    rest = rest.strip()
    code = re.search(r"\b([A-Za-z]{3})\b", rest)
    if code and code.group(1).upper() not in ("KWH",):
        upper = code.group(1).upper()
        return digits, "CNY" if upper == "RMB" else upper
    for sign in sorted(_SIGNS, key=len, reverse=True):
        if sign in rest:
            return digits, _SIGNS[sign]
    word = re.sub(r"\s", "", rest.lower())
    return digits, _CURRENCY_WORDS.get(word, word)


def written_forms(kind: str, text: str) -> list[str]:
    """The values to look up for one piece: the ways a value of this shape is commonly
    written that the mention lookup does not already find from another (it finds a
    phone number or a code in every grouping, and an amount with or without its
    thousands separators: `units.written_forms`). An amount with its currency as a
    sign, a code or a word ("3,400 EUR", "€3,400", "EUR 3,400"); a code with or without
    its hyphen ("relay-14", "relay 14"); a phone number with its country code (which
    finds every national form too); a phrase with spaces or hyphens."""
    text = text.strip()
    forms = [text]
    if kind == "amount":
        number, currency = amount_parts(text)
        if number:
            whole, _, cents = number.partition(".")
            grouped = f"{int(whole):,}" + (f".{cents}" if cents else "") if whole else number
            if currency and re.fullmatch(r"[A-Z]{3}", currency):
                forms += [f"{grouped} {currency}", f"{currency} {grouped}"]
                sign = _SIGN_OF.get(currency)
                if sign:
                    forms += [f"{sign}{grouped}", f"{sign}{number}"]
                if currency == "CNY":
                    forms += [f"{number}元", f"{number}块", f"{grouped}元", f"{number} RMB"]
            elif currency:
                forms += [f"{grouped}{currency}", f"{grouped} {currency}"]
    elif kind == "code" and re.search(r"[A-Za-z]", text) and re.search(r"\d", text):
        forms += [text.replace("-", " "), text.replace(" ", "-")]
        split = re.fullmatch(r"([A-Za-z]+)(\d+)", text)
        if split:
            forms += [f"{split.group(1)}-{split.group(2)}", f"{split.group(1)} {split.group(2)}"]
        joined = re.fullmatch(r"([A-Za-z]+)[- ](\d+)", text)
        if joined:
            forms.append(joined.group(1) + joined.group(2))
    elif kind == "phone":
        forms = [international(text)]
    elif kind in ("quoted", "name", "text") and re.fullmatch(
        r"[a-z]+(?:[ -][a-z]+){1,3}", text, 0 if kind == "name" else re.IGNORECASE
    ):  # a quoted "Copper Finch" is "copper-finch" too: the lookup folds case, not hyphens
        forms += [text.replace(" ", "-"), text.replace("-", " ")]
    out: list[str] = []
    looked_up: set[str] = set()
    for form in dict.fromkeys(f for f in forms if f.strip()):
        if form not in looked_up:  # one lookup finds every form the lookup derives from it
            out.append(form)
            looked_up |= units_forms(form)
    return out


def international(text: str) -> str:
    """A phone number with the country code its length implies (ten digits: +1, eleven
    starting with 1: +86), so one lookup finds it with and without the code."""
    if text.startswith("+"):
        return text
    digits = re.sub(r"\D", "", text)
    if len(digits) == 10 and digits[0] in "23456789":
        return f"+1 {digits[:3]} {digits[3:6]} {digits[6:]}"
    if len(digits) == 11 and digits.startswith("1"):
        return f"+86 {digits[:3]} {digits[3:7]} {digits[7:]}"
    return text


class InformationPlanner:
    """Plans a request that names information (see the module docstring)."""

    def __init__(self, request: PlanningRequest, plan_items: PlanItems) -> None:
        """`plan_items` is the item planner's `plan`, for a piece named by a concept
        ("my phone number": the user's facts of it), passed in so that neither
        planner imports the other."""
        self.request = request
        self.plan_items = plan_items
        store = request.store
        self.conn: Connection = store.conn
        self.namespace = request.namespace
        self.lex: Lexicon = request.lex
        self.reader = InformationReader(self.lex)
        assert store.projections is not None
        self.projections = store.projections
        self.vectors = store.vectors
        self.cells = Cells(store.log)
        self.pool = Pool(store.conn, store.log, request.namespace, only=[])
        self._where: dict[str, dict[str, list[str]]] = {}
        self._atoms = cache(atomic_spans)  # each text cut into words once per plan
        #: The request says the thing moved or changed: "old" may be the one on file.
        self.moved = False

    # -- lookups ---------------------------------------------------------------------

    def where(self, values: Iterable[str]) -> dict[str, dict[str, list[str]]]:
        """Each value's places (the mention lookup), asked once per value per plan."""
        wanted = [v for v in dict.fromkeys(values) if v.strip()]
        new = [v for v in wanted if v not in self._where]
        if new:
            found = where_mentioned(
                self.conn, self.cells, self.projections, self.namespace, new, self._atoms
            )
            for value in new:
                self._where[value] = found.get(value, {})
        return {v: self._where[v] for v in wanted}

    def short_places(self, value: str) -> dict[str, list[str]]:
        """The places of a value too short for the mention index ("May", "Art", "702"):
        the same matcher over every text of the namespace (find_mentions). A pass over
        the namespace's cells, so only for a value the request names as a literal."""
        pattern = MentionPattern({value})
        items = find_mentions(self.conn, self.cells, self.projections, self.namespace, pattern, ())
        found: dict[str, list[str]] = {}
        for projection in self.projections:
            for item in items:
                for text in projection.texts_of(self.conn, self.cells, [item]):
                    known = found.setdefault(item, [])
                    spans = [text[a:b] for a, b in pattern.spans(text)]
                    known.extend(x for x in spans if x not in known)
        self.pool.extend(list(found))
        return {i: s for i, s in found.items() if s and i in self.pool.by_id}

    def places_of(self, forms: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for spans_by_item in self.where(forms).values():
            for item, spans in spans_by_item.items():
                known = out.setdefault(item, [])
                known.extend(s for s in spans if s not in known)
        self.pool.extend(list(out))
        return {i: s for i, s in out.items() if i in self.pool.by_id}

    def thing_where_said(
        self, key: str, kind: str, forms: Iterable[str], votes: int = 0
    ) -> Thing | None:
        """A value and every place it is said, with what happens there."""
        forms = list(dict.fromkeys(f for form in forms for f in written_forms(kind, form)))
        places = self.places_of(forms)
        if not places:
            return None
        thing = Thing(key, kind, forms, votes, places)
        texts = self.pool.texts([i for i in places if self.pool.by_id[i].kind in VALUE_KINDS])
        for item, spans in places.items():
            text = texts.get(item)
            row = self.pool.by_id[item]
            if row.kind in VALUE_KINDS and text and any(is_whole_value(text, s) for s in spans):
                thing.erase.add(item)
        rows = [self.pool.by_id[i] for i in places]
        thing.first_seen = min(r.written_at for r in rows)
        thing.face = _representative_item(rows, thing.erase)
        return thing

    # -- the plan --------------------------------------------------------------------

    def plan(self, reading: Reading, info: Information) -> Draft | None:
        """The plan of the pieces; None when the request names nothing this planner
        can find and the words are better read as a request about items."""
        self.moved = reading.moved
        found = self._resolve_all(info.pieces)
        kept = [self.resolve(k, keeping=True) for k in info.kept]
        shaped = any(p.literal and p.kind not in ("name", "text") for p in info.pieces)
        if not shaped and not any(f.status != NOT_FOUND for f in found):
            return None  # nothing here: the item planner reads it as a request about items
        return self.draft(reading, found, kept, info.beyond)

    def _resolve_all(self, pieces: list[Piece]) -> list[Found]:
        """Each piece resolved; a value said right after a description ("the previous
        cubby, A 490") is that description's value when the memory says the
        description's label with it, and is one piece then (else they are two)."""
        out: list[Found] = []
        for piece in pieces:
            found = self.resolve(piece)
            before = out[-1] if out else None
            if (
                piece.apposition
                and before is not None
                and before.piece.kind == "description"
                and before.piece.label == piece.apposition
                and found.status == RESOLVED
            ):  # the value said is the lead: the description only names it, and planned
                # on its own it may find another version ("my old salary, $86,000")
                out.pop()
                piece.label, piece.which = before.piece.label, before.piece.which
                piece.said = f"{before.piece.said}, {piece.said}"
            out.append(found)
        return out

    def _said_with(self, label: str, found: Found) -> bool:
        places = self.where([lowered(label)])[lowered(label)]
        return bool(set(places) & set(found.places))

    def resolve(self, piece: Piece, keeping: bool = False) -> Found:
        if (
            piece.kind == "name"
            and piece.label
            and not keeping
            and lowered(f"{piece.text} {piece.label}") in lowered(piece.said)
        ):
            # "the Sunbeam callback line": the name says whose line, the line is the
            # value; the name is kept (it is never redacted unless asked for by name)
            return self._of_name(piece)
        if piece.kind == "description":
            return self._description(piece)
        if piece.kind == "quoted" and _MAPPING.search(piece.text):
            mapped = self._mapping(piece)
            if mapped is not None:
                return mapped
        if piece.kind == "text":
            return self._text(piece, keeping)
        key = value_identity(piece.kind, piece.text)
        forms = [piece.text]
        if piece.kind == "code" and piece.prefix:
            joined = [f"{piece.prefix}-{piece.text}", f"{piece.prefix}{piece.text}"]
            spaced = f"{piece.prefix} {piece.text}"
            if _code_like(piece.prefix):  # "MZ 890697": a code's letters, whatever else
                joined.append(spaced)
            if any(self.where(joined).values()):  # "relay 880" is "relay-880", "MZ890697"
                forms = list(dict.fromkeys([*joined, spaced]))
                key = value_identity("code", joined[0])
        thing = self.thing_where_said(key, piece.kind, forms)
        if thing is None and _too_short(piece):
            # "the alias May": named as a literal, looked up as said before anything
            # reads it as a month, a unit or a word
            places = self.short_places(piece.text)
            thing = Thing(key, piece.kind, forms, places=places) if places else None
        split = self._across_turns(key, piece)
        if thing is None:
            thing = split
        elif split is not None:  # said whole somewhere, and apart across two turns too
            for item, spans in split.places.items():
                thing.places.setdefault(item, spans)
            thing.apart = split.apart
        if thing is not None and lowered(piece.text.strip()) in MONTHS_EN:
            thing = self._not_as_a_date(thing, piece.text.strip())
        one_name = piece.kind == "quoted" and re.fullmatch(r"[A-Z][a-z]+", piece.text.strip())
        if thing is not None and (piece.kind == "name" or one_name):
            # "the alias May", "the name Rose": one capitalised word named as a literal
            # is a name, found where it is written as one
            thing = _as_a_name(thing, piece.text.strip())
            if thing is not None and one_name:
                thing = self._not_in_a_longer_name(thing, piece.text.strip())
            if thing is not None:
                thing = self._not_a_common_phrase(thing, piece.text)
        if thing is None:
            return Found(piece, NOT_FOUND, reason="value_not_found")
        return Found(piece, RESOLVED, [thing])

    def _only_places(self, thing: Thing, keep: Callable[[str, str], bool]) -> Thing | None:
        """`thing` with only the places whose text `keep(item, text)` accepts; None when
        no place is left (the value is not said, as meant, anywhere)."""
        texts = self.pool.texts(list(thing.places))
        places = {i: s for i, s in thing.places.items() if keep(i, texts.get(i) or "")}
        if not places:
            return None
        thing.places = places
        thing.erase &= set(places)
        return thing

    def _not_in_a_longer_name(self, thing: Thing, name: str) -> Thing | None:
        """ "the name Art" is not the "Art Walk": a place where the name is only ever
        the start of a longer capitalised name is not one of its places (a redaction
        would cut the longer name's first word)."""
        word = re.compile(rf"\b{re.escape(name)}\b")
        longer = re.compile(rf"\b{re.escape(name)}\s+[A-Z]")
        return self._only_places(
            thing, lambda _, text: len(word.findall(text)) > len(longer.findall(text))
        )

    def _not_as_a_date(self, thing: Thing, name: str) -> Thing | None:
        """A name that is also a month's ("May", "June"): a place where every use of it
        reads as a date ("the rent is due in May", "May 3") is not a place of the name
        (each date use holds the name once)."""
        as_date = re.compile(self.lex.information.date_use.replace("NAME", re.escape(name)), re.I)
        word = re.compile(rf"\b{re.escape(name)}\b", re.I)
        return self._only_places(
            thing,
            lambda item, text: (
                len(word.findall(text)) > len(as_date.findall(text)) or item in thing.erase
            ),
        )

    def _not_a_common_phrase(self, thing: Thing, name: str) -> Thing | None:
        """A name that starts a sentence may be a common word ("Rose bushes need
        water." beside "the rose bushes"): a place whose every "Rose" is followed by a
        word the memory also says after it in lower case is not a place of the name."""
        if not name.isascii() or " " in name:
            return thing

        def named_there(_: str, text: str) -> bool:
            found = list(re.finditer(rf"\b{re.escape(name)}\b(?:\s+([a-z]+))?", text))
            if not found:
                return True
            phrases = [f"{name.lower()} {m.group(1)}" for m in found if m.group(1)]
            lower = self.where(phrases) if phrases else {}
            common = 0
            for m in found:
                after = m.group(1)
                said = lower.get(f"{name.lower()} {after}", {}) if after else {}
                if any(sp[:1].islower() for v in said.values() for sp in v):
                    common += 1
            return common < len(found)

        return self._only_places(thing, named_there)

    def _mapping(self, piece: Piece) -> Found | None:
        """A quoted mapping ("'Teapot = my move-out plan'", "'青鸟计划=收购华岳物流'"):
        each side where it is said, redacted there (a note that holds the whole mapping
        loses both sides, and nothing else). The meaning is also found without its
        article ("the move-out plan") where the code name is said with it."""
        sides = [s.strip(" '\"") for s in _MAPPING.split(piece.text, maxsplit=1)]
        if len(sides) != 2 or not all(len(s.encode()) >= MIN_NEEDLE_BYTES for s in sides):
            return None
        name, meaning = sides
        first = self.thing_where_said(value_identity("quoted", name), "quoted", [name])
        second = self.thing_where_said(value_identity("quoted", meaning), "quoted", [meaning])
        bare = re.sub(r"^(?:my|the|our|his|her|their)\s+", "", meaning, flags=re.IGNORECASE)
        if first is None and second is None:
            return None
        places: dict[str, list[str]] = {}
        for thing in (first, second):
            for item, spans in (thing.places if thing else {}).items():
                known = places.setdefault(item, [])
                known.extend(x for x in spans if x not in known)
        if bare != meaning and first is not None:
            for item, spans in self.places_of([bare]).items():
                if item in first.places:
                    known = places.setdefault(item, [])
                    known.extend(x for x in spans if x not in known)
        thing = Thing(value_identity("quoted", piece.text), "quoted", [name, meaning], 0, places)
        rows = [self.pool.by_id[i] for i in places if i in self.pool.by_id]
        thing.first_seen = min((r.written_at for r in rows), default="")
        thing.face = _representative_item(rows, set()) if rows else next(iter(places))
        return Found(piece, RESOLVED, [thing])

    def _of_name(self, piece: Piece) -> Found:
        """The value a label names among those said where the name is said: "the
        Sunbeam callback line" is the callback number said with "Sunbeam"."""
        label = piece.label
        found = self._description(Piece(label, "description", label, piece.which, piece.said))
        named = set(self.where([piece.text])[piece.text])
        things = [t for t in [*found.things, *found.options] if set(t.places) & named]
        if len(things) == 1:
            return Found(piece, RESOLVED, things)
        if things:
            return self._choose(piece, things)
        return Found(piece, NOT_FOUND, reason="value_not_found")

    def _across_turns(self, key: str, piece: Piece) -> Thing | None:
        """A value no one text holds, said in two consecutive turns of one session: its
        head ends the first ("my number is 415-555") and its tail starts the next
        ("0199, call after six"; "...the word is blue" / "heron, that is it"). It is
        cut where it is written apart (a space, a hyphen, a dot, a slash; anywhere in
        Chinese), and each side must be long enough for the mention lookup. Only that
        pair is planned, each side redacted as written there: nowhere else says it."""
        value = piece.text.strip()
        cuts = [(m.start(), m.end()) for m in re.finditer(r"[\s./-]+", value)]
        cuts += [(i, i) for i in range(2, len(value) - 1) if _CJK.match(value[i - 1 : i + 1])]
        if piece.kind not in ("quoted", "phone", "code", "name", "text"):
            return None  # an amount, a time, an e-mail address: one token, never apart
        for a, b in cuts:
            head, tail = value[:a], value[b:]
            if min(len(head.encode()), len(tail.encode())) < MIN_NEEDLE_BYTES:
                continue
            found = self.where([head, tail])
            heads, tails = found[head], found[tail]
            if not heads or not tails:
                continue
            self.pool.extend([*heads, *tails])
            texts = self.pool.texts([*heads, *tails])
            for first, second in self._consecutive(list(heads), list(tails)):
                said_head = _at_edge(texts.get(first), head, piece.kind, end=True)
                said_tail = _at_edge(texts.get(second), tail, piece.kind, end=False)
                if said_head and said_tail:
                    rows = [self.pool.by_id[first], self.pool.by_id[second]]
                    return Thing(
                        key, piece.kind, [value], 0, {first: [said_head], second: [said_tail]},
                        first_seen=rows[0].written_at, face=first, apart=(first, second),
                    )  # fmt: skip
        return None

    def _consecutive(self, firsts: list[str], seconds: list[str]) -> list[tuple[str, str]]:
        """The pairs (a turn, the next turn of its session) among these items. The
        sessions' turns are read in one query (one per first turn cost a 385-turn value
        seconds at 10k items); the next turn is the one after it among the turns said
        with or after it, as one query per turn found it."""
        rows = self.pool.by_id
        turns = [
            a
            for a in (rows.get(first) for first in firsts)
            if a is not None and a.kind == "turn" and a.session_id is not None
        ]
        c = catalog.c
        by_session: dict[str, list[tuple[str, str]]] = {}
        sessions = sorted({a.session_id for a in turns if a.session_id is not None})
        for start in range(0, len(sessions), 500):
            query = (
                select(c.session_id, c.item_id, c.written_at)
                .where(
                    c.namespace == self.namespace,
                    among(c.session_id, sessions[start : start + 500]),
                    c.kind == "turn",
                )
                .order_by(c.session_id, c.written_at, c.position)
            )
            for session, item_id, written_at in self.conn.execute(query):
                by_session.setdefault(session, []).append((written_at, item_id))
        wanted = set(seconds)
        out = []
        for a in turns:
            said = by_session.get(a.session_id or "", [])
            at = bisect_left(said, a.written_at, key=lambda t: t[0])
            between = [item_id for _, item_id in said[at : at + MAX_OPTIONS]]
            if a.item_id in between:
                k = between.index(a.item_id)
                after = between[k + 1] if k + 1 < len(between) else None
                if after in wanted:
                    out.append((a.item_id, after))
        return out

    def _text(self, piece: Piece, keeping: bool) -> Found:
        """Chinese text without quotes: a value if the memory holds it and it is not a
        label said beside values ("押金" is said with amounts: a description)."""
        value = piece.text
        tries = [value] + [value[i:] for i in range(1, len(value) - 1)]
        for text in tries:
            if len(text) < 2 or not self.where([text])[text]:
                continue
            if not piece.label and self._label_like(text):
                break
            thing = self.thing_where_said(value_identity("text", text), "text", [text])
            if thing is not None:
                return Found(piece, RESOLVED, [thing])
        if keeping:
            return Found(piece, NOT_FOUND, reason="value_not_found")
        words = piece.label + piece.text
        described = Piece(words, "description", words, piece.which, piece.said)
        return self._description(described)

    def _label_like(self, text: str) -> bool:
        """Whether a text is said beside values of a shape (codes, amounts, phone
        numbers) more often than not: a label ("押金", "门禁码"), not a value."""
        places = self.where([text])[text]
        texts = self.pool.texts(list(places)[:40])
        beside = 0
        for body in texts.values():
            if not body:
                continue
            for sentence in _sentences(body):
                if text in sentence and any(
                    s.kind in ("code", "amount", "phone", "email")
                    for s in self.reader._literals(sentence)
                ):
                    beside += 1
                    break
        return bool(texts) and beside * 2 > len(texts)

    # -- descriptions ---------------------------------------------------------------

    def _description(self, piece: Piece) -> Found:
        """A thing named by what it is: where its label is said beside a value first
        ("the storage alarm code", which may be a fact's value too), then the facts
        whose predicate its words name ("the parcel note"), then the facts of the
        concept it names, when the concept is all it names ("my email address")."""
        ways = (
            self._by_label,
            self._by_predicate,
            self._by_concept,
            self._by_concept_words,
            self._by_meaning,
        )
        for way in ways:
            found = way(piece)
            if found is not None:
                return found
        return Found(piece, NOT_FOUND, reason="value_not_found")

    def _by_concept_words(self, piece: Piece) -> Found | None:
        """A label the memory does not say as the request does, found by the words of
        the concepts it is made of ([information.concepts]), in either language: "机房门禁
        码" over a history that says "Code 7242 for the server room", "the backup phrase"
        over one that says "备用口令是“竹影扫阶”", "客房" over "Alder House is the guest
        suite". Tried in turn, and the first that the memory says beside a value of the
        label's own shape wins (chosen among by `_choose`, like `_by_label`):

        1. the concepts together ("server room code", "备用口令", "pager email");
        2. what the label is of, alone ("server room", "florist", "快递柜"), when its last
           word only says what kind of value it is (a code, a phone number, a fee) or is
           no concept at all: the value's shape stands for the rest;
        3. the one concept a label is ("客房", "nickname", "copay"), with words the
           vocabulary does not know dropped, as `_label_phrases` drops them.

        A label that is one concept the memory says in none of its words names nothing
        stored ("我的护照号" over a history without a passport). One whose
        thing-it-is-of the memory never says ("我的银行卡密码" over a history without a
        bank card) names nothing stored either, unless one thing leads clearly by
        meaning (`_by_meaning`): never a question about things it does not name."""
        label = lowered(piece.label).strip()
        info = self.lex.information
        if not label or not info.labels.find(label) or self.generic(label):
            return None
        spans = self._concept_spans(label)
        if not spans:
            return None
        head_text = re.sub(r"\s(?:at|for|of|in|on|from|with|to)\s.*$", "", label)
        head = spans[-1] if spans[-1][1] >= len(head_text.rstrip(" 的")) else None
        modifiers = [s for s in spans if s is not head]
        words = {s: self._concept_equivalents(s[2]) for s in spans}
        said = self.where([w for ws in words.values() for w in ws])
        known = {s: [w for w in words[s] if said.get(w)] for s in spans}
        if not modifiers and not any(known.values()):  # one thing, said in none of its words
            return Found(piece, NOT_FOUND, reason="value_not_found")
        if any(not known[m] for m in modifiers):  # said in no words the vocabulary knows:
            meant = self._by_meaning(piece)  # a clear lead by meaning, or nothing stored
            if meant is not None and meant.status == RESOLVED:
                return meant
            return Found(piece, NOT_FOUND, reason="value_not_found")
        tried = set(self._label_phrases(label))
        shapes = self._shapes(label)
        tries: list[tuple[list[str], set[str]]] = []  # the concepts together first
        if len(spans) > 1:
            tries.append((_combined([known[s] for s in spans]), shapes))
            if head is not None and len(modifiers) > 1:
                for m in reversed(modifiers):
                    tries.append((_combined([known[m], known[head]]), shapes))
        # what it is of, beside a value of a shape (never a name or any text: "密码" is
        # a code here; a phrase is found only with its whole label)
        shaped = shapes & {"code", "amount", "phone", "email"}
        if shaped and modifiers and (head is None or set(head[2]) & info.concept_kinds):
            tries += [(known[m], shaped) for m in reversed(modifiers)]
        if not modifiers and head is not None:
            tries.append((known[head], shapes))
        for group, kinds in tries:
            phrases = [p for p in dict.fromkeys(group) if p not in tried]
            tried.update(phrases)
            found = self._said_beside(piece, phrases, kinds)
            if found is not None:
                return found
        return None

    def _concept_spans(self, label: str) -> list[tuple[int, int, tuple[str, ...]]]:
        """Where a label names concepts: (start, end, the concepts of those words), the
        longer words first ("支持服务" before "服务费"), left to right."""
        hits = self.lex.information.concepts.find(label)
        out: list[tuple[int, int, tuple[str, ...]]] = []
        for hit in longest(hits):
            at = (hit.start, hit.end)
            names = tuple(sorted({h.entry for h in hits if (h.start, h.end) == at}))
            if out and out[-1][2] == names and not label[out[-1][1] : hit.start].strip():
                out[-1] = (out[-1][0], hit.end, names)  # "快递柜取件码": one thing, said twice
            else:
                out.append((hit.start, hit.end, names))
        return out

    def _concept_equivalents(self, names: tuple[str, ...]) -> list[str]:
        words = self.lex.information.concept_words
        return list(
            dict.fromkeys(lowered(w) for n in names for w in words[n] if not w.startswith("re:"))
        )

    def _said_beside(self, piece: Piece, phrases: list[str], shapes: set[str]) -> Found | None:
        """The values of the shapes said beside any of the phrases, each then found
        everywhere it is said; chosen among by `_choose`. None when there are none."""
        if not phrases:
            return None
        places = self.where(phrases)
        texts = self.pool.texts(list({i for found in places.values() for i in found}))
        things: dict[str, Thing] = {}
        for phrase, found in places.items():
            for item in found:
                for sentence in _sentences(texts.get(item) or ""):
                    for kind, value in self._beside(sentence, phrase, shapes):
                        key = value_identity(kind, value)
                        if key == value_identity(kind, phrase) or lowered(value) in phrases:
                            continue
                        thing = things.setdefault(key, Thing(key, kind))
                        thing.votes += 1
                        if value not in thing.forms:
                            thing.forms.append(value)
        whole = [self.thing_where_said(k, t.kind, t.forms, t.votes) for k, t in things.items()]
        found_things = [t for t in whole if t is not None]
        if not found_things:
            return None
        return self._choose(piece, found_things)

    def _by_meaning(self, piece: Piece) -> Found | None:
        """A kind of value whose label the memory never says as the request does, because
        it says things in another language ("寄养间门禁码" for a history in English, "the
        tour price" for one in Chinese): the texts closest in meaning (the vector index),
        and the values of the label's shape they say. Taken only when one thing (a
        value, with the versions a change links to it) stands clearly ahead of every
        other, by the texts and by what is said beside it; otherwise nothing is found.
        A label the memory does not say in its own language is not stored."""
        vectors = self.vectors
        label = lowered(piece.label).strip()
        if vectors is None or not label or not self.lex.information.labels.find(label):
            return None
        shapes = self._shapes(label) & {"code", "amount", "phone", "email", "quoted"}
        if not shapes or any(self.where(self._label_phrases(label)).values()):
            return None  # the memory says this label: what it says it with is the answer
        vectors.catch_up()
        ranked = vectors.search(self.namespace, vectors.embed_query(piece.label), MEANING_HITS)
        if not ranked:
            return None
        texts = self.pool.texts([i for i, _ in ranked])
        chinese = sum(1 for t in texts.values() if t and _CJK.search(t))
        if (chinese * 2 > len(texts)) == bool(_CJK.search(label)):
            return None  # the memory says things in the request's language: not said here
        weight: dict[str, float] = {}
        seen: dict[str, Thing] = {}
        linked: dict[str, set[str]] = {}
        said: dict[str, list[str]] = {}  # each value's sentences, the value masked
        for item, score in ranked:
            body = texts.get(item) or ""
            mine: set[str] = set()
            for sentence in _sentences(body):
                keys = []
                spans = [s for s in self.reader._literals(sentence) if s.kind in shapes]
                if "phone" in shapes:  # a number of the phone kind, not a code beside it
                    spans = [s for s in spans if s.kind == "phone" or s.text.isdigit()]
                for span in spans:
                    value = self._compound(span)
                    key = value_identity(span.kind, value)
                    thing = seen.setdefault(key, Thing(key, span.kind))
                    if value not in thing.forms:
                        thing.forms.append(value)
                    keys.append(key)
                    masked = sentence.replace(span.text, " ")
                    if masked not in said.setdefault(key, []):
                        said[key].append(masked)
                for key in keys:  # "changed from 3101 to 7753": versions of one thing
                    linked.setdefault(key, set()).update(keys)
                mine.update(keys)
            for key in mine:
                weight[key] = weight.get(key, 0.0) + max(score, 0.0)
                seen[key].votes += 1
        groups = _groups(linked)
        scored = sorted(
            ((sum(weight.get(k, 0.0) for k in g), g) for g in groups), key=lambda x: -x[0]
        )
        if not scored or scored[0][0] <= 0:
            return None
        best, group = scored[0]
        runner_up = scored[1][0] if len(scored) > 1 else 0.0
        if best < MEANING_LEAD * runner_up or sum(seen[k].votes for k in group) < 2:
            return None
        # what the memory says of each value, beside it, against the label asked for:
        # the one taken must be the closest by that too, clearly
        query = vectors.embed_query(piece.label)
        near = {
            k: max((_cosine(query, vectors.embed_query(x)) for x in said[k][:MEANING_SAID]),
                   default=0.0)
            for g in [g for _, g in scored[:MEANING_GROUPS]] for k in g
        }  # fmt: skip
        closest = sorted(
            ((max(near[k] for k in g), n) for n, (_, g) in enumerate(scored[:MEANING_GROUPS])),
            key=lambda x: -x[0],
        )
        margin = closest[0][0] - (closest[1][0] if len(closest) > 1 else 0.0)
        if closest[0][1] != 0 or (len(group) < 2 and margin < MEANING_MARGIN):
            return None  # a chain of versions said together, or one value clearly closest
        found = [
            self.thing_where_said(k, seen[k].kind, seen[k].forms, seen[k].votes)
            for k in sorted(group)
        ]
        things = [t for t in found if t is not None]
        if not things or (piece.which == "previous" and len(things) < 2):
            return None  # an earlier version, and no change said what replaced it
        return self._choose(piece, things)

    def _by_concept(self, piece: Piece) -> Found | None:
        """The facts of the concept a description names, planned as a request of its
        own (with its possessor and version words), when the concept's words are all
        the description says: "车位号" is not a "号" (a number) of the user's."""
        reading = piece.reading
        if reading is None or reading.intent is None or not reading.selects:
            return None
        if not only_concept_words(self.lex, piece.label):
            return None
        draft = self.plan_items(reading, piece.said)
        if draft.status == "planned" and draft.intent in ("delete", "stop_using"):
            rows = [self._row(i) for i in draft.targets]
            facts = [r for r in rows if r is not None and r.kind != "turn"]
            if facts:
                return self._of_facts(piece, facts, list(draft.cascaded))
        if draft.status == "needs_clarification":
            options = [self._fact_thing([c["item_id"]]) for c in draft.candidates]
            options = [o for o in options if o is not None]
            if options:
                return Found(piece, AMBIGUOUS, reason="several_things", options=options)
        return None

    def _by_predicate(self, piece: Piece) -> Found | None:
        rows = self._by_predicate_words(piece)
        if not rows:
            return None
        chosen = self._versions(piece, rows)
        if isinstance(chosen, Found):
            return chosen
        return self._of_facts(piece, chosen, []) if chosen else None

    def _row(self, item_id: str) -> Row | None:
        self.pool.extend([item_id])
        return self.pool.by_id.get(item_id)

    def _of_facts(self, piece: Piece, facts: list[Row], cascaded: list[str]) -> Found:
        thing = self._fact_thing([r.item_id for r in facts], cascaded)
        if thing is None:
            return Found(piece, NOT_FOUND, reason="value_not_found")
        return Found(piece, RESOLVED, [thing])

    def _fact_thing(self, ids: list[str], cascaded: Sequence[str] = ()) -> Thing | None:
        """Facts that go, and every place that repeats their values (redacted)."""
        texts = self.pool.texts(ids)
        values = [t for t in texts.values() if t]
        if not values:
            return None
        forms = [f for v in values for f in written_forms(value_shape(v), v)]
        places = self.places_of(forms)
        thing = Thing("f:" + ",".join(sorted(ids)), "fact", forms, 1, places)
        for item in [*ids, *cascaded]:
            thing.places.setdefault(item, [])
            thing.erase.add(item)
        self.pool.extend(list(thing.places))
        rows = [self.pool.by_id[i] for i in thing.places if i in self.pool.by_id]
        thing.first_seen = min((r.written_at for r in rows), default="")
        thing.face = ids[0]
        return thing

    def _by_predicate_words(self, piece: Piece) -> list[Row]:
        """The user's facts and preferences whose predicate a word of the description
        names ("note" for `delivery_note`, "备注" by its label's English words), narrowed
        by the words their value has ("parcel", "voicemail")."""
        words = _words(piece.label)
        low = lowered(piece.label)
        if self.lex.relations.any(low) or re.search(r"[a-z]'s\b", low):
            return []  # "my partner's birthday": someone else's, for the item planner
        terms: set[str] = set()
        named: set[str] = set()
        for hit in self.lex.information.labels.find(low):
            kind = self.lex.information.kinds[hit.entry]
            ascii_terms = {t for t in kind.terms if t.isascii() and " " not in t}
            terms |= ascii_terms
            if kind.shapes == ("text",) and not low[hit.start : hit.end].isascii():
                named |= ascii_terms  # "备注": a note, whatever its predicate's language
        named |= {w for w in words if w in terms}
        if not named:
            return []  # only a kind of value names a predicate ("note", "email")
        c = catalog.c
        predicates = self.conn.execute(
            select(c.predicate)
            .where(c.namespace == self.namespace, c.kind.in_(VALUE_KINDS))
            .distinct()
        ).scalars()
        chosen = [
            p
            for p in predicates
            if p and set(p.split("_")) & {_singular(w) for w in named} - self._generic_parts()
        ]
        if not chosen:
            return []
        ids = list(
            self.conn.execute(
                select(c.item_id).where(
                    c.namespace == self.namespace,
                    c.kind.in_(VALUE_KINDS),
                    c.predicate.in_(chosen),
                )
            ).scalars()
        )
        self.pool.extend(ids)
        rows = [self.pool.by_id[i] for i in ids if i in self.pool.by_id]
        rows = [r for r in rows if r.subject == "user"] or rows
        if len(rows) > 1:
            texts = self.pool.texts([r.item_id for r in rows])
            other = [w for w in words if not set(w.split("_")) & set(chosen)]
            narrowed = [
                r for r in rows if any(_stem_in(w, texts.get(r.item_id) or "") for w in other)
            ]
            rows = narrowed or rows
        return rows

    def _generic_parts(self) -> set[str]:
        return set(self.lex.patterns.generic_predicate_parts)

    def _versions(self, piece: Piece, rows: list[Row]) -> list[Row] | Found:
        if piece.which == "previous":
            old = [r for r in rows if r.status == "superseded"]
            if len(old) > 1 and not piece.every:
                options = [self._fact_thing([r.item_id]) for r in old]
                return Found(piece, AMBIGUOUS, reason="several_things",
                             options=[o for o in options if o is not None])  # fmt: skip
            if not old and not piece.every and not self.moved:
                live = [r for r in rows if r.status in ("current", "conflict")]
                if len(live) == 1:  # "my old X", one X on file: asked, naming it
                    one = self._fact_thing([live[0].item_id])
                    if one is not None:
                        return Found(piece, AMBIGUOUS, reason="only_one", options=[one])
            return old or ([] if piece.every else rows)
        if piece.which == "current":
            return [r for r in rows if r.status in ("current", "conflict")] or rows
        live = [r for r in rows if r.status in ("current", "conflict")]
        if len({r.predicate for r in rows}) == 1 and len(live) <= 1:
            return rows  # one thing with its versions
        if len(live) > 1:
            options = [self._fact_thing([r.item_id]) for r in live]
            return Found(piece, AMBIGUOUS, reason="several_things",
                         options=[o for o in options if o is not None])  # fmt: skip
        return rows

    def _by_label(self, piece: Piece) -> Found | None:
        """Values said beside the description's label ("Confirming the gate code:
        3101."), each then looked for everywhere; the version words choose among them."""
        label = lowered(piece.label).strip()
        if not label or not self.lex.information.labels.find(label):
            return None  # "the metformin": a value, not a kind of one
        if self.generic(label):
            return self._of_kind(piece, label)
        for phrase in self._label_phrases(label):
            places = self.where([phrase])[phrase]
            if places:
                break
        else:
            return None
        shapes = self._shapes(phrase)
        texts = self.pool.texts(list(places))
        things: dict[str, Thing] = {}
        for body in texts.values():
            if not body:
                continue
            for sentence in _sentences(body):
                for kind, value in self._beside(sentence, phrase, shapes):
                    key = value_identity(kind, value)
                    if key == value_identity(kind, phrase):
                        continue
                    thing = things.setdefault(key, Thing(key, kind))
                    thing.votes += 1
                    if value not in thing.forms:
                        thing.forms.append(value)
        found = []
        for key, partial in things.items():
            whole = self.thing_where_said(key, partial.kind, partial.forms, partial.votes)
            if whole is not None:
                found.append(whole)
        if not found:
            return None
        return self._choose(piece, found)

    def generic(self, label: str) -> bool:
        """Whether a label is only a kind of value ("the amount", "那个电话号码", "the
        code"): every value of that kind fits it."""
        label = lowered(label).strip()
        if label in _GENERIC_LABELS or label in ("phone number", "电话号码", "手机号码"):
            return any(
                h.end - h.start == len(label) for h in self.lex.information.labels.find(label)
            )
        return False

    def _of_kind(self, piece: Piece, label: str) -> Found | None:
        """ "The amount", "那个电话号码": the values of that kind said beside any of its
        label words; one is planned, several are asked about (never all of them)."""
        hits = [h for h in self.lex.information.labels.find(label) if h.end - h.start == len(label)]
        kind = self.lex.information.kinds[hits[0].entry]
        shapes = set(kind.shapes) & {"code", "amount", "phone", "email", "quoted"}
        if not shapes:
            return None
        if "phone" in shapes:
            shapes.add("code")
        words = [lowered(t) for t in kind.terms if not t.startswith("re:")]
        places = self.where(words)
        things: dict[str, Thing] = {}
        texts = self.pool.texts(list({i for found in places.values() for i in found}))
        for word, found in places.items():
            for item in found:
                for sentence in _sentences(texts.get(item) or ""):
                    if word not in lowered(sentence):
                        continue
                    for kind_, value in self._beside(sentence, word, shapes):
                        key = value_identity(kind_, value)
                        thing = things.setdefault(key, Thing(key, kind_))
                        thing.votes += 1
                        if value not in thing.forms:
                            thing.forms.append(value)
        if len(things) < 2:  # "费" is too short to look up: what was said lately, then
            for body in self._recent_texts():
                for span in self.reader._literals(body):
                    if span.kind in shapes:
                        key = value_identity(span.kind, span.text)
                        thing = things.setdefault(key, Thing(key, span.kind))
                        if span.text not in thing.forms:
                            thing.forms.append(span.text)
        whole = [self.thing_where_said(k, t.kind, t.forms, t.votes) for k, t in things.items()]
        found_things = [t for t in whole if t is not None][: MAX_OPTIONS * 2]
        if not found_things:
            return None
        return self._choose(piece, found_things, by_votes=False)

    def _recent_texts(self) -> list[str]:
        """The texts of the namespace's latest items (RECENT of them, whatever its size)."""
        c = catalog.c
        ids = list(
            self.conn.execute(
                select(c.item_id)
                .where(c.namespace == self.namespace)
                .order_by(c.written_at.desc())
                .limit(RECENT)
            ).scalars()
        )
        return [t for t in self.pool.texts(ids).values() if t]

    def others_of_kind(self, draft: Draft, piece: Piece) -> Found | None:
        """For a plan of the user's facts that a request names only by their kind ("the
        phone number"): the values of that kind the memory also says elsewhere (the
        office's number, in turns). Several different things fit: they are asked about."""
        label = lowered(piece.label).strip()
        found = self._of_kind(piece, label)
        if found is None:
            return None
        options = found.options or found.things
        self.pool.extend(draft.targets)
        mine = set(draft.targets)
        if len(options) < 2 or all(set(t.places) & mine for t in options):
            return None
        return Found(piece, AMBIGUOUS, reason="several_things", options=options)

    def _label_phrases(self, label: str) -> list[str]:
        """The label, then shorter ends of it ("dog's nickname", "nickname"; "机房门禁码",
        "门禁码"), never a word too generic to name one kind of thing alone."""
        out = [label]
        joined = re.sub(r"(?<=[\u3400-\u9fff]) | (?=[\u3400-\u9fff])", "", label)
        if joined != label:  # "宾客 wifi 密码" is written "宾客WiFi密码"
            out.append(joined)
        words = label.split()
        for i in range(1, len(words)):
            tail = " ".join(words[i:])
            if words[i] not in self.lex.stopwords and self._names_one_kind(tail):
                out.append(tail)
        if _CJK.search(label) and " " not in label:
            for i in range(1, len(label) - 2):
                tail = label[i:]  # three characters at least: "牌号" is said of many things
                if self._names_one_kind(tail):
                    out.append(tail)
        return list(dict.fromkeys(out))

    def _names_one_kind(self, words: str) -> bool:
        """Whether the end of a label still names one kind of value by itself
        ("nickname", "locker number", "门禁码"): it holds a label word that is not said
        of many kinds of things ("code", "number", "note", "place", "密码", "备注")."""
        for hit in self.lex.information.labels.find(words):
            word = words[hit.start : hit.end]
            if word in _GENERIC_LABELS or self.lex.information.kinds[hit.entry].shapes == ("text",):
                continue
            return True
        return False

    def _shapes(self, phrase: str) -> set[str]:
        """The kinds of value a label takes: its last label word's shapes ("gate code":
        codes), or any shape when it has none."""
        head = re.sub(r"\s(?:at|for|of|in|on|from|with|to)\s.*$", "", phrase)
        hits = sorted(self.lex.information.labels.find(head), key=lambda h: (h.end, h.length))
        if not hits:
            return {"code", "amount", "phone", "email", "quoted", "name", "text", "time"}
        last = hits[-1]
        shapes: set[str] = set()
        for hit in hits:  # the head word, in every kind it names ("password": a code, a phrase)
            if (hit.end, hit.length) == (last.end, last.length):
                shapes |= set(self.lex.information.kinds[hit.entry].shapes)
                if hit.entry == "phone":  # a number may be written as a plain code
                    shapes.add("code")
        return shapes

    def _beside(self, sentence: str, phrase: str, shapes: set[str]) -> list[tuple[str, str]]:
        """Values of the label's shapes said in the same sentence as the label."""
        low = lowered(sentence)
        at = low.find(phrase)
        if at < 0:
            return []
        spans = [
            s
            for s in self.reader._literals(sentence)
            if s.kind in shapes and not (s.start < at + len(phrase) and at < s.end)
        ]
        shaped = [s for s in spans if s.kind not in ("name", "quoted", "text")]
        if shaped:
            return [(s.kind, self._compound(s)) for s in shaped]
        quoted = [s for s in spans if s.kind == "quoted"]
        if quoted:
            return [("quoted", quoted[0].text)]
        if not shapes & {"name", "text", "quoted"}:
            return []
        names = [s for s in spans if s.kind == "name" and self._a_name(sentence, s)]
        said = _said_as(sentence, at, len(phrase)) or self._as_said(_said_before(sentence, at))
        ways: list[tuple[str, str]] = []
        if names:
            near = min(names, key=lambda s: min(abs(s.start - at), abs(s.end - at)))
            ways.append(("name", near.text))
        if said:
            ways.insert(
                0 if "quoted" in shapes else len(ways),
                ("text" if _CJK.search(said) else "name", said),
            )
        return ways[:1]

    def _as_said(self, text: str) -> str:
        """Chinese text said before a label ("卡片署名写小葵，那是我的小名") holds the value at
        its end: the shortest end the memory says elsewhere too, as long as a longer end
        is said just as often ("小葵", not "写小葵")."""
        if not text or not _CJK.fullmatch(text[-1]) or len(text) <= 2:
            return text
        ends = [text[i:] for i in range(len(text) - 2, -1, -1)]  # shortest first
        counts = {e: len(self.where([e])[e]) for e in ends}
        found = [e for e in ends if counts[e] > 1]
        if not found:
            return text
        best = found[0]
        for longer in ends[ends.index(best) + 1 :]:
            if counts[longer] < counts[best]:
                break
            best = longer
        return best

    def _a_name(self, sentence: str, span: Any) -> bool:
        """A capitalised word of a stored text that is a name: not the sentence's first
        word (which is capitalised anyway) and no label word ("Note the phrase: ...")."""
        if span.start == 0 or re.search(r"[.!?:]\s*$", sentence[: span.start]):
            return False
        return not self.lex.information.labels.any(lowered(span.text))

    def _compound(self, span: Any) -> str:
        """A code written after a word ("relay 880") is that word's code when the
        memory writes them joined too ("relay-880"): one value, not two."""
        if span.kind == "code" and span.prefix:
            tries = [f"{span.prefix}-{span.text}", f"{span.prefix}{span.text}"]
            if _code_like(span.prefix):
                tries.append(f"{span.prefix} {span.text}")
            for joined in tries:
                if self.where([joined])[joined]:
                    return joined
        return span.text

    def _choose(self, piece: Piece, things: list[Thing], by_votes: bool = True) -> Found:
        """Among the values a description fits: by version words, by how often each is
        said with the label, or asked."""
        things = sorted(things, key=lambda t: (t.first_seen, t.key))
        if piece.which == "previous":
            if len(things) == 1 and not piece.every and not self.moved:
                # "my old X" and one X said: asked, naming it, never taken at a guess
                return Found(piece, AMBIGUOUS, reason="only_one", options=things)
            old = things[:-1] if len(things) > 1 else things
            if piece.every or len(old) == 1:
                return Found(piece, RESOLVED, old)
            return Found(piece, AMBIGUOUS, reason="several_things", options=old)
        if piece.which == "current":
            return Found(piece, RESOLVED, things[-1:])
        if len(things) == 1:
            return Found(piece, RESOLVED, things)
        ranked = sorted(things, key=lambda t: -t.votes)
        if by_votes and ranked[0].votes >= 2 * ranked[1].votes and ranked[0].votes >= 2:
            return Found(piece, RESOLVED, ranked[:1])
        return Found(piece, AMBIGUOUS, reason="several_things", options=things)

    def mentions_of(self, draft: Draft, language: str) -> Draft:
        """A plan of facts (read as a request about items) with every other place
        that repeats their values, where the value is redacted: `pieces` and
        `spans_by_item` (a new draft; `draft` is unchanged). `draft` itself when
        nothing repeats them."""
        self.pool.extend([*draft.targets, *draft.cascaded])
        facts = [
            i
            for i in draft.targets
            if i in self.pool.by_id and self.pool.by_id[i].kind in VALUE_KINDS
        ]
        if not facts:
            return draft
        thing = self._fact_thing(
            facts, [i for i in [*draft.targets, *draft.cascaded] if i not in facts]
        )
        if thing is None:
            return draft
        gone = {*draft.targets, *draft.cascaded, *draft.history}
        redact = {i: s for i, s in thing.places.items() if i not in gone and s}
        if not redact:
            return draft
        places = [
            {"item_id": i, "kind": self.pool.by_id[i].kind, "action": "erase", "spans": 0}
            for i in sorted(gone)
            if i in self.pool.by_id
        ]
        places += [
            {"item_id": i, "kind": self.pool.by_id[i].kind, "action": "redact", "spans": len(s)}
            for i, s in sorted(redact.items())
        ]
        pieces = [
            {"piece": 1, "kind": "description", "status": RESOLVED, "reason": "", "said": "",
             "places": places}
        ]  # fmt: skip
        labels = {i: self.pool.label(i, language) for i in redact if i not in draft.labels}
        return replace(
            draft, pieces=pieces, spans_by_item=redact, labels={**draft.labels, **labels}
        )

    def chosen(self, asked: Any, item_ids: list[str]) -> Draft:
        """The plan for the candidates a user picked in a plan of information: the
        pieces that were resolved, and the picked values of the pieces asked about
        (each with every place it is said); a piece none of whose values was picked is
        not found (`none_chosen`)."""
        found: list[Found] = []
        for n, entry in enumerate(asked.pieces):
            piece = Piece(
                entry.get("said", ""), entry["kind"] or "description", said=entry.get("said", "")
            )
            if entry["status"] == RESOLVED:
                thing = Thing(f"piece:{n}", entry["kind"])
                for place in entry["places"]:
                    thing.places[place["item_id"]] = list(
                        asked.spans_by_item.get(place["item_id"], [])
                    )
                    if place["action"] == "erase":
                        thing.erase.add(place["item_id"])
                found.append(Found(piece, RESOLVED, [thing]))
            elif entry["status"] == AMBIGUOUS:
                picked = [
                    c for c in asked.candidates if c.get("part") == n and c["item_id"] in item_ids
                ]
                things = []
                for option in picked:
                    thing = Thing(option["item_id"], entry["kind"])
                    thing.places = {
                        i: list(option["spans_by_item"].get(i, [])) for i in option["places"]
                    }
                    thing.erase = set(option["erase"])
                    things.append(thing)
                status = RESOLVED if things else NOT_FOUND
                found.append(Found(piece, status, things, "" if things else "none_chosen"))
            else:
                found.append(Found(piece, NOT_FOUND, reason=entry["reason"]))
        for f in found:  # what was erased since the question was asked is gone
            for thing in f.things:
                self.pool.extend(list(thing.places))
                thing.places = {i: s for i, s in thing.places.items() if i in self.pool.by_id}
                thing.erase &= set(thing.places)
            if f.status == RESOLVED and not any(t.places for t in f.things):
                f.status, f.reason = NOT_FOUND, "chosen_items_gone"
        kept = [
            Found(Piece(k.get("said", ""), k["kind"] or "description"), RESOLVED,
                  [Thing("kept", k["kind"], places={i: [] for i in k["item_ids"]})])
            for k in asked.kept
        ]  # fmt: skip
        draft = self.draft(self.request.reading, found, kept, 0)
        if draft.status == "needs_clarification":  # never asked twice about the same
            return Draft("nothing_matched", "delete", reason="chosen_items_gone")
        return draft

    # -- the draft -------------------------------------------------------------------

    def draft(self, reading: Reading, found: list[Found], kept: list[Found], beyond: int) -> Draft:
        language = reading.language
        keep_places = {i for k in kept for i in k.places}
        keep_texts = [s for k in kept for spans in k.places.values() for s in spans]
        keeping = span_pattern(keep_texts)
        for f in found:  # a value the request also keeps is not forgotten
            for thing in f.things:
                for item in list(thing.places):
                    spans = [
                        s for s in thing.places[item] if keeping is None or not keeping.search(s)
                    ]
                    if spans or item in thing.erase:
                        thing.places[item] = spans
                    else:
                        del thing.places[item]
        pieces = [self._piece_entry(n, f) for n, f in enumerate(found, start=1)]
        pieces += [
            {"piece": len(found) + n, "kind": "", "status": NOT_FOUND, "reason": "too_many_parts",
             "said": "", "places": []}
            for n in range(1, beyond + 1)
        ]  # fmt: skip
        kept_entries = [
            {
                "kind": k.piece.kind,
                "said": k.piece.said or k.piece.text,
                "item_ids": sorted(k.places),
            }
            for k in kept
        ]
        parts = [
            {
                "said": p["said"],
                "status": p["status"],
                "item_ids": [pl["item_id"] for pl in p["places"]] or p.get("options", []),
                "reason": p["reason"],
            }
            for p in pieces
        ]
        erase = sorted({i for f in found if f.status == RESOLVED for i in f.erase})
        spans_by_item: dict[str, list[str]] = {}
        for f in found:
            if f.status != RESOLVED:
                continue
            for item, spans in f.places.items():
                if item in erase:
                    continue
                known = spans_by_item.setdefault(item, [])
                known.extend(s for s in spans if s not in known)
        spans_by_item = {i: s for i, s in spans_by_item.items() if s}
        targets = sorted({*erase, *spans_by_item})
        common: dict[str, Any] = {
            "pieces": pieces,
            "kept": kept_entries,
            "parts": parts if len(pieces) > 1 else [],
            "information": True,
        }
        if any(f.status == AMBIGUOUS for f in found):
            return self._ask(reading, found, common)
        if not targets:
            reason = "no_part_matched" if len(pieces) > 1 else (found[0].reason if found else "")
            return Draft("nothing_matched", "delete", reason=reason or "value_not_found", **common)
        cascaded = [i for i in erased_with(self.conn, self.namespace, erase) if i not in targets]
        self.pool.extend(cascaded)
        status = (
            "planned"
            if all(f.status == RESOLVED for f in found) and not beyond
            else "partial_match"
        )
        intent = "delete" if erase else "redact"
        spans = list(dict.fromkeys(s for v in spans_by_item.values() for s in v))
        keeps = sorted(keep_places - set(erase) - set(cascaded))
        # `targets`: what is erased (the redacted places are `spans_by_item`, and each
        # piece lists its places); a plan that only redacts names the redacted items
        draft = Draft(
            status,
            intent,
            scope={"kind": "item", "item_ids": erase} if erase else None,
            targets=erase or targets,
            cascaded=cascaded,
            keeps=keeps,
            spans=spans,
            **common,
        )
        draft.spans_by_item = spans_by_item
        shown = [*erase[:50], *list(spans_by_item)[:50], *keeps[:50]]
        self.pool.texts(shown)  # one read of the log for every label
        draft.labels = {i: self.pool.label(i, language) for i in shown if i in self.pool.by_id}
        return draft

    def _piece_entry(self, n: int, found: Found) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "piece": n,
            "kind": found.piece.kind,
            "status": found.status,
            "reason": found.reason,
            "said": found.piece.said or found.piece.text,
            "places": [],
        }
        if found.status == RESOLVED:
            erase = found.erase
            for item, spans in sorted(found.places.items()):
                row = self.pool.by_id.get(item)
                entry["places"].append(
                    {
                        "item_id": item,
                        "kind": row.kind if row else "",
                        "action": "erase" if item in erase else "redact",
                        "spans": 0 if item in erase else len(spans),
                    }
                )
            apart = [list(t.apart) for t in found.things if t.apart is not None]
            if apart:  # reported as such: the value no one turn holds, and where its parts are
                entry["said_apart"] = apart
        if found.status == AMBIGUOUS:
            entry["options"] = [t.face for t in found.options[:MAX_OPTIONS]]
        return entry

    def _ask(self, reading: Reading, found: list[Found], common: dict[str, Any]) -> Draft:
        language = reading.language
        template = self.lex.questions[f"{language}_candidates"]
        about = self.lex.messages[f"{language}_part_about"]
        options: list[dict[str, Any]] = []
        asked = []
        for n, f in enumerate(found):
            if f.status != AMBIGUOUS:
                continue
            mine = []
            for thing in f.options[:MAX_OPTIONS]:
                if thing.face not in self.pool.by_id:
                    continue
                option = candidate(self.pool, thing.face, language) | {"part": n}
                option["places"] = sorted(thing.places)
                option["erase"] = sorted(thing.erase)
                option["spans_by_item"] = {
                    i: s for i, s in thing.places.items() if i not in thing.erase
                }
                option["label"] = self._thing_label(thing, language)
                mine.append(option)
            listing = "; ".join(f"({len(options) + k}) {o['label']}" for k, o in enumerate(mine, 1))
            options += mine
            question = template.format(count=len(mine), options=listing)
            said = f.piece.said or f.piece.text
            asked.append(about.format(said=said, question=question) if len(found) > 1 else question)
        parts = common["parts"]
        question = " ".join([*asked, *planned_parts(parts, language)])
        return Draft(
            "needs_clarification", "delete", candidates=options, question=question, **common
        )

    def _thing_label(self, thing: Thing, language: str) -> str:
        """A candidate as the user knows it: its value, and where it is said."""
        value = thing.forms[0] if thing.forms else ""
        if thing.kind == "fact" and thing.face in self.pool.by_id:
            return self.pool.label(thing.face, language)
        count = len(thing.places)
        if language == "zh":
            return f"“{value}”（{count}处，最早{thing.first_seen[:10]}）"
        return f"'{value}' ({count} place(s), first said {thing.first_seen[:10]})"


# -- helpers ---------------------------------------------------------------------------


def concept_is_head(lex: Lexicon, label: str) -> bool:
    """Whether a concept of the lexicon is a label's head: its last words ("marathon
    goal", "mobile number", "我妈妈的电话"); in Chinese, two characters at least
    ("订单号" is not a "号" of the user's, nor "半夜别打电话的备注" a phone)."""
    low = lowered(label).strip()
    for hit in lex.concepts.find(low):
        if hit.end == len(low) and (low[hit.start : hit.end].isascii() or hit.end - hit.start >= 2):
            return True
    return False


def only_concept_words(lex: Lexicon, label: str) -> bool:
    """Whether a label says nothing besides the lexicon's concepts, relations and
    function words ("mobile number", "我妹妹的地址"; not "车位号", "florist's number"):
    then the facts of the concept are what it names."""
    low = lowered(label)
    mask = list(low)
    hits = [*lex.concepts.find(low), *lex.relations.find(low), *lex.zh_stopwords.find(low)]
    hits += [*lex.parts.owners.find(low), *lex.which.find(low), *lex.intents.find(low)]
    hits += [*lex.said.find(low), *lex.sessions.find(low), *lex.conclusion.find(low)]
    for h in hits:
        mask[h.start : h.end] = " " * (h.end - h.start)
    rest = "".join(mask)
    if _CJK.search(rest):
        return False
    return all(w.strip("'") in lex.stopwords for w in re.findall(r"[a-z0-9'-]+", rest))


def _combined(parts: list[list[str]], limit: int = 64) -> list[str]:
    """The words of several concepts said together, in their order: English words with
    a space between them, Chinese ones without ("server room code", "备用口令",
    "宾客wifi密码"); at most `limit` of them."""
    out = [""]
    for words in parts:
        out = [
            f"{a} {w}" if a and a[-1:].isascii() and w[:1].isascii() else a + w
            for a in out
            for w in words
        ][: limit * 4]
    return [p for p in out if p][:limit]


def _cosine(a: Any, b: Any) -> float:
    import numpy as np

    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(np.dot(a, b) / (na * nb)) if na and nb else 0.0


def _groups(linked: dict[str, set[str]]) -> list[set[str]]:
    """The keys linked to each other (said together in one sentence), as groups."""
    out: list[set[str]] = []
    for key in linked:
        if any(key in g for g in out):
            continue
        group, frontier = {key}, [key]
        while frontier:
            for other in linked.get(frontier.pop(), ()):
                if other not in group:
                    group.add(other)
                    frontier.append(other)
        out.append(group)
    return out


def _at_edge(text: str | None, part: str, kind: str, *, end: bool) -> str:
    """`part` as written at the end (or the start) of `text`, with only spaces and
    punctuation beyond it; "" when it is said elsewhere in the text or not at all.
    Written forms count as the mention lookup counts them (same `value_identity`)."""
    if not text:
        return ""
    pattern = mention_pattern([part])
    spans = pattern.spans(text) if pattern is not None else []
    if not spans:
        return ""
    a, b = spans[-1] if end else spans[0]
    beyond = text[b:] if end else text[:a]
    said = text[a:b]
    if re.fullmatch(r"[\W_]*", beyond) and value_identity(kind, said) == value_identity(kind, part):
        return said
    return ""


#: How a quoted mapping joins its sides: "A = B", "A: B", "A is B", "A→B".
_MAPPING = re.compile(r"\s*(?:=|＝|:|：|→|->)\s*|\s+is\s+")


def _as_a_name(thing: Thing, name: str) -> Thing | None:
    """A capitalised name is found where it is written as a name: "Bill" the person,
    not the "water bill"; "May" the alias, not "may". The mention lookup folds case,
    so the places where only the common word is said are dropped here."""
    if not name[:1].isupper() or not name.isascii():
        return thing
    places = {}
    for item, spans in thing.places.items():
        named = [s for s in spans if s[:1].isupper() or not s[:1].isalpha()]
        if named:
            places[item] = named
    if not places:
        return None
    thing.places = places
    thing.erase &= set(places)
    return thing


def _code_like(word: str) -> bool:
    """Letters written as part of a code ("MZ", "BK", "A", "B2"), not a word ("relay")."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9]{0,4}", word))


def is_whole_value(text: str, span: str) -> bool:
    """Whether an item's whole value is the span (case and spacing aside)."""
    return " ".join(lowered(text).split()).strip(" .") == " ".join(lowered(span).split())


def _representative_item(rows: list[Row], erase: set[str]) -> str:
    """The item that stands for a value: the fact it is, or the first place it is said."""
    for row in rows:
        if row.item_id in erase:
            return row.item_id
    return min(rows, key=lambda r: (r.written_at, r.item_id)).item_id


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCES.split(text) if s.strip()]


def _too_short(piece: Piece) -> bool:
    """A literal the request names as one (quoted, "the alias …", "the name …", a code)
    too short for the mention index, but long enough to be a word of its own. A bare
    name ("my cousin Art") is not: it says who, and is never looked for by itself."""
    size = len(piece.text.strip().encode())
    return piece.kind in ("quoted", "code") and 2 <= size < MIN_NEEDLE_BYTES


def value_shape(value: str) -> str:
    """The shape of a stored value, for its written forms."""
    v = value.strip()
    if AMOUNT.fullmatch(v):
        return "amount"
    if re.fullmatch(r"\+?[\d\s().-]{7,}", v) and 7 <= sum(c.isdigit() for c in v) <= 15:
        return "phone"
    if re.fullmatch(r"[A-Za-z0-9]+(?:[- ][A-Za-z0-9]+)*", v) and re.search(r"\d", v):
        return "code"
    return "text"


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s,;:.!?()\"“”'‘’-]+", lowered(text)) if w]


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _stem_in(word: str, text: str) -> bool:
    """A description's word in a value: "parcel" in "parcels", "seating" in "seat"."""
    low = lowered(text)
    if _CJK.search(word):
        return word in low
    stem = re.sub(r"(?:ing|ed|es|s)$", "", word) if len(word) > 4 else word
    return bool(stem) and re.search(rf"(?<![a-z]){re.escape(stem)}", low) is not None


_COPULA_EN = re.compile(
    r"^\s*(?:is|was|=|:|as)\s*['\"“]?(?P<v>[^,.;!?'\"”()]{2,60}?)['\"”]?\s*(?:[,.;!?()]|$|\bnot\b|\bnow\b)"
)
_COPULA_ZH = re.compile(
    r"^\s*(?:确定|就|还|也|已)?(?:是|为|叫|用|设成了|设成|设为|登记为|改成了|改成|:)\s*[“\"]?"
    r"(?P<v>[^,，。;；!！?？“”\"了()（）]{2,30}?)[”\"]?\s*(?:[,，。;；!！?？了()（）]|$)"
)


_BEFORE_EN = re.compile(
    r"(?:^|[.;!?]\s+)(?P<v>[A-Z][\w'-]*(?:\s[A-Z][\w'-]*){0,3})\s+(?:is|was)\s+(?:\w+\s+){0,2}"
    r"(?:the|my|our|your)\s+$"
)
_BEFORE_ZH = re.compile(
    r"(?P<v>[\u3400-\u9fff]{2,8})(?:[,，]\s*(?:那|这|它))?(?:就)?是(?:我们|我)?的?$"
)


def _said_before(sentence: str, at: int) -> str:
    """The value a sentence gives its label before it: "Heron Point is confirmed as
    the hotel", "Alder House is the guest suite"."""
    before = sentence[:at]
    m = (_BEFORE_ZH if _CJK.search(before[-3:]) else _BEFORE_EN).search(before)
    return m.group("v").strip() if m else ""


def _said_as(sentence: str, at: int, length: int) -> str:
    """The value a sentence gives its label: "the backup phrase is copper finch",
    "Note the backup phrase: copper finch", "客房是松风阁"."""
    after = sentence[at + length :]
    pattern = _COPULA_ZH if _CJK.search(sentence[at : at + length]) else _COPULA_EN
    m = pattern.match(after)
    if m:
        value = m.group("v").strip()
        if value and not re.fullmatch(
            r"(?:the|a|an|my|our|your|it|this|that|not|no|now|still|also)\b.*", value.lower()
        ):
            return value
    return ""
