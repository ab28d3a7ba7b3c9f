"""Mentions: out-of-scope items that repeat a forgotten value word for word.

Provenance links an item to the turn it was taken from, but a user can repeat the
value later ("send the taxi to 18 Haisong Road") in a turn that produced no item, or an
agent can copy it into another fact. Nothing links those to the target, yet they carry
the forgotten data, and the byte scan would find it there and keep the request
`partial` forever. So a forget request also looks for the forgotten values, by their
text, in the other items of the same namespace, and redacts the value inside them
instead of erasing them: the rest of the turn ("at 7am tomorrow") is not in scope, and
stays. Redaction rotates the item's key, so the earlier wording becomes unreadable too.

The one thing redaction must never do is damage the text it keeps. Two rules see to it.

**What is searched.** Each forgotten value, whole (stripped of surrounding spaces; at
least `MIN_NEEDLE_BYTES`, like the residue scan's needles). And each *distinctive part*
of it, because "send the taxi to 18 Haisong Road" repeats the identifying part of
"18 Haisong Road, Xihu District, Hangzhou" without repeating the rest. Parts are cut at
`; | : ! ?`, line breaks, CJK separators, sentence ends and commas, but never inside a
number or a date: "2,150" and "September 2, 2026" stay whole, so "150 USD", "2" and
"2026" are never parts of them. A part is distinctive (`is_distinctive`) only if

- it is at least `MIN_PART_BYTES` long (UTF-8: a CJK character says about as much as
  a short word);
- once dates, times and years ("September 2", "2026-09-02", "7am", "2026", "9月2日")
  and amounts ("2,150 USD", "$30", "12 kg") are set aside, it still holds a digit: a
  number that identifies (a house, a flat, an account). Dates and amounts do not: many
  people travel on September 2 or pay 2,150 USD;
- and it holds two words of letters besides, one of them a name-sized word (four
  letters, or two CJK characters; month and weekday names do not count): the number
  is *of* something ("18 Haisong Road", "海松路18号"). A number with one word is a
  quantity that many share ("Room 12", "150 USD").

Parts without such a number ("Hangzhou", "Xihu District") name places and things many
people share, and redacting them everywhere would erase far more than the request
asked for.

**Where it matches.** Literally, case-insensitively, and only on token boundaries of
the text searched (`atomic_spans`): a match never starts or ends inside a word, a
number or a date. A word is a run of letters, digits, `_` and combining marks of a
script written with spaces ("Tom" never matches "Tomorrow", "Room 12" never "Room
123"). A number runs on across `. , ' : / -` and thin or no-break spaces between
digits ("150 USD" never matches inside "2,150 USD", nor "1234" inside "555-1234"). A
date ("September 2, 2026", "2 May 2026", "2026年9月2日") is one unit: "2026" or
"September 2" are not cut out of it, while a value that contains the whole date
matches. Letters of scripts written without spaces (Chinese, Japanese, Thai) are not
part of any word, so "海松路18号" matches inside "请把车开到海松路18号门口"; its digits
still end a number ("海松路1" does not match in "海松路18号"). Finding and redacting use
the same `MentionPattern`, so what the dry run lists is what the request redacts.

**In every form it is written in.** A phone number or a code is searched as written
and as people also write it (`units.written_forms`: "(206) 555-0148", "206.555.0148" and
"2065550148" for "206-555-0148"), an amount without its thousands separators.

**How it is found.** Not by opening every sealed cell of the namespace: the mention
index (projections/mention_index.py) names the items that hold every unit of a searched
value (the units are the matcher's own words, memory_ledger/text_units.py), and
only their cells are opened. `where_mentioned` answers the same question for a request
in words: where each named value lives.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from functools import cache

from sqlalchemy import Connection, select

from memory_ledger.projections.base import Projection
from memory_ledger.projections.cells import Cells
from memory_ledger.projections.id_sets import among, unindexed
from memory_ledger.projections.mention_index import candidates, candidates_each
from memory_ledger.residue import MIN_NEEDLE_BYTES

# the word boundaries of the text units: a mention is found where a unit would be cut
from memory_ledger.text_units import NO_SPACE, NUMBER, TOKEN, W, written_forms

REPLACEMENT = "[forgotten]"
MIN_PART_BYTES = 8


_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_AMPM = r"[ap]\.?m\b\.?"
_DATE = re.compile(
    rf"(?<!{W})(?:"
    rf"{_MONTH}\s+{_DAY}(?:,?\s+\d{{4}})?"  # September 2, 2026
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"  # 2 September 2026
    rf"|{_MONTH},?\s+\d{{4}}"  # September 2026
    r"|\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}"  # 2026-09-02, 2/9/2026
    rf"|\d{{1,2}}(?::\d\d){{1,2}}(?:\s?{_AMPM})?|\d{{1,2}}\s?{_AMPM}"  # 7:30, 7am
    r"|\d{2,4}\s*年(?:\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?)?"  # 2026年9月2日
    r"|\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?"  # 9月2日
    r"|(?:19|20)\d\d"  # a year, last: the forms above may begin with one
    rf")(?!{W})",
    re.IGNORECASE,
)
_CURRENCY_SIGN = "[$€£¥₹₩₽¢]"
_CURRENCY = r"(?-i:[A-Z]{3})|usd|eur|gbp|cny|rmb|jpy|rupees?|dollars?|euros?|pounds?|yuan|yen"
_UNIT = (
    r"%|percent|kg|g|mg|km|m|cm|mm|mi|miles?|lbs?|oz|ml|l|kwh|"
    r"元|美元|欧元|英镑|人民币|块|公斤|千克|公里|米"
)
_AMOUNT = re.compile(
    rf"(?<!{W})(?:{_CURRENCY_SIGN}\s?{NUMBER}|(?:{_CURRENCY})\s?{NUMBER}"
    rf"|{NUMBER}\s?(?:{_CURRENCY_SIGN}|%|(?:{_CURRENCY}|{_UNIT})(?!{W})))",
    re.IGNORECASE,
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|mon|tues?|wed|thu(?:rs?)?|fri|sat|sun"
_DATE_WORD = re.compile(rf"{_MONTH}|{_WEEKDAY}", re.IGNORECASE)  # fullmatch: not a name
_CJK_WORD = re.compile(rf"(?:(?=[{NO_SPACE}])[^\W\d_])+")
# Where a value is cut into parts: not inside a number or a date (see `_parts`).
_SEPARATOR = re.compile(r"[;|\n\r，；、。！？]|[,.!?:](?=\s|$)|,|\s[-–—]\s")
_EDGES = re.compile(r"^[\W_]+|[\W_]+$")


def atomic_spans(text: str) -> list[tuple[int, int]]:
    """The words, numbers and dates of `text`, as sorted, disjoint (start, end) spans:
    a mention may start and end only outside them or at their edges."""
    spans = sorted(
        [m.span() for m in TOKEN.finditer(text)] + [m.span() for m in _DATE.finditer(text)]
    )
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:  # overlapping: a date over its words
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _inside(spans: list[tuple[int, int]], position: int) -> bool:
    """Whether `position` falls strictly inside one of the sorted, disjoint spans."""
    i = bisect_left(spans, (position, position)) - 1  # the last span starting before it
    return i >= 0 and spans[i][1] > position


def on_token_boundaries(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] begins and ends between words, numbers and dates."""
    spans = atomic_spans(text)
    return not _inside(spans, start) and not _inside(spans, end)


def _parts(value: str) -> list[str]:
    """The value cut at its separators, but never inside a number or a date."""
    spans = atomic_spans(value)
    parts, start = [], 0
    for cut in _SEPARATOR.finditer(value):
        if not _inside(spans, cut.start()):
            parts.append(value[start : cut.start()])
            start = cut.end()
    parts.append(value[start:])
    return [p for p in (_EDGES.sub("", p) for p in parts) if p]


def _word_weight(word: str) -> int:
    return 2 * len(word) if _CJK_WORD.fullmatch(word) else len(word)


def is_distinctive(part: str) -> bool:
    """Whether a part of a value identifies on its own (see the module docstring): long
    enough, and a number that is neither a date nor an amount, beside two words."""
    if len(part.encode("utf-8")) < MIN_PART_BYTES:
        return False
    rest = _AMOUNT.sub(" ", _DATE.sub(" ", part))
    if not any(c.isdigit() for c in rest):
        return False
    words = [m.group() for m in TOKEN.finditer(rest) if not any(c.isdigit() for c in m.group())]
    words = [w for w in words if not _DATE_WORD.fullmatch(w)] + _CJK_WORD.findall(rest)
    weights = [w for w in map(_word_weight, words) if w >= 2]
    return len(weights) >= 2 and max(weights) >= 4


def searched_for(values: Iterable[str]) -> set[str]:
    """The values whole, in every form they are written in (units.written_forms), and
    their distinctive parts (house numbers with their street)."""
    out = set()
    for value in values:
        for whole in written_forms(value):  # "(206) 555-0148" is "206-555-0148" too
            if len(whole.encode("utf-8")) >= MIN_NEEDLE_BYTES:
                out.add(whole)
            out.update(p for p in _parts(whole) if p != whole and is_distinctive(p))
    return out


class MentionPattern:
    """The forgotten values and their distinctive parts, as one matcher used both to
    find the items that mention them and to redact those items."""

    def __init__(
        self, searched: Iterable[str], replacement: str = REPLACEMENT, names_keep_case: bool = False
    ) -> None:
        self.replacement = replacement
        self.searched = sorted(set(searched))
        # A redaction's spans are as written where they were found: a span written
        # capitalised ("Rose", "Grant") is a name there, and its lower-case namesake in
        # the same text ("the rose bushes", "the grant form") is another word, kept.
        # A forgotten value (names_keep_case False) is matched in any case.
        lower = {v.lower() for v in self.searched if not v[:1].isupper()}
        self._capital_only = (
            {v.lower() for v in self.searched if v[:1].isupper()} - lower
            if names_keep_case
            else set()
        )
        # Longest first, so an overlap is replaced whole. Plain literals: the boundary
        # rule is checked on the spans of the text searched, which needs no lookaround
        # (a class of every word character takes milliseconds to compile, per value).
        literals = [re.escape(v) for v in sorted(set(searched), key=lambda v: (-len(v), v))]
        self._literals = literals
        self._each: list[re.Pattern[str]] | None = None  # compiled when first needed
        # Compiled when first used: a forget whose values the mention index finds in no
        # other item never searches a text, and an alternation of the values of a
        # retention sweep's thousands of items takes most of a second to compile.
        self._any_pattern: re.Pattern[str] | None = None
        # Compiled when a text first matches (most never do: compiling an alternation of
        # ten thousand values takes a second). It tries the literals in order, so its
        # match at a position is the longest literal there, which the loop tries first.
        self._first: re.Pattern[str] | None = None

    def spans(
        self, text: str, atoms_of: Callable[[str], list[tuple[int, int]]] = atomic_spans
    ) -> list[tuple[int, int]]:
        """Where the text mentions a value, left to right and never overlapping.
        `atoms_of`: `atomic_spans`, or a memo of it for a caller that searches the
        same texts for many values."""
        if self._any().search(text) is None:
            return []  # the common case: nothing to check
        atoms = atoms_of(text)
        found: list[tuple[int, int]] = []
        for candidate in self._any().finditer(text):
            start = candidate.start()
            if found and start < found[-1][1]:
                continue
            if _inside(atoms, start):
                continue
            if self._first is None:
                self._first = re.compile("|".join(self._literals), re.IGNORECASE)
            longest = self._first.match(text, start)
            if longest and not _inside(atoms, longest.end()):
                if not self._another_word(longest.group()):
                    found.append(longest.span())
                continue
            for single in self._compiled():  # a shorter literal may end on a boundary
                match = single.match(text, start)
                if match and not _inside(atoms, match.end()):
                    if not self._another_word(match.group()):
                        found.append(match.span())
                    break
        return found

    def _another_word(self, said: str) -> bool:
        """A lower-case namesake of a capitalised span (see `names_keep_case`)."""
        capital_only = self._capital_only
        return bool(capital_only) and said[:1].islower() and said.lower() in capital_only

    def _any(self) -> re.Pattern[str]:
        if self._any_pattern is None:
            self._any_pattern = re.compile("(?=" + "|".join(self._literals) + ")", re.IGNORECASE)
        return self._any_pattern

    def _compiled(self) -> list[re.Pattern[str]]:
        if self._each is None:
            self._each = [re.compile(lit, re.IGNORECASE) for lit in self._literals]
        return self._each

    def search(self, text: str) -> bool:
        return bool(self.spans(text))

    def sub(self, text: str) -> str:
        """The text with every mention replaced (by `REPLACEMENT`, unless told otherwise)."""
        pieces, last = [], 0
        for start, end in self.spans(text):
            pieces += [text[last:start], self.replacement]
            last = end
        return "".join([*pieces, text[last:]])


def mention_pattern(values: Iterable[str]) -> MentionPattern | None:
    """The matcher for the values, or None when none is long enough to search for."""
    searched = searched_for(values)
    return MentionPattern(searched) if searched else None


def find_mentions(
    conn: Connection,
    cells: Cells,
    projections: Sequence[Projection],
    namespace: str,
    pattern: MentionPattern,
    exclude: Iterable[str],
) -> list[str]:
    """Items of the namespace whose readable content contains a forgotten value.

    Read from the projections' sealed cells, every version they hold, so an item that
    said the value before it was changed is found too. Each cell is opened here, in
    memory: no store keeps the text in clear to search it in place. Only the cells of
    the items the mention index names as candidates are opened (the postings of each
    value's rarest units); every cell of the namespace only for a value the index
    cannot look up."""
    skip = set(exclude)
    found: set[str] = set()
    narrowed = candidates(conn, cells.log, namespace, pattern.searched)
    if narrowed is not None:
        narrowed -= skip
        if not narrowed:
            return []
    for projection in projections:
        table = projection.table
        if projection.sealed_field is None:
            continue  # index terms and summaries hold no item's own content
        query = select(table.c.item_id, table.c.key_generation, table.c.sealed).where(
            table.c.sealed.is_not(None)
        )
        if narrowed is None:
            query = query.where(table.c.namespace == namespace)
        else:  # the few candidates lead: the namespace only confirms
            query = query.where(
                unindexed(table.c.namespace) == namespace, among(table.c.item_id, sorted(narrowed))
            )
        rows = [tuple(r) for r in conn.execute(query) if r[0] not in skip]
        for start in range(0, len(rows), 1000):
            chunk = rows[start : start + 1000]
            for (item_id, _, _), text in zip(
                chunk, cells.open(chunk, projection.sealed_field), strict=True
            ):
                if text and pattern.search(text):
                    found.add(item_id)
    return sorted(found)


def without_mentions(
    fields: dict[str, str], pattern: MentionPattern
) -> tuple[dict[str, str], list[str]]:
    """The fields with every mention replaced, and the names of the fields that changed."""
    rewritten = {name: pattern.sub(text) for name, text in fields.items()}
    return rewritten, sorted(n for n in fields if rewritten[n] != fields[n])


def where_mentioned(
    conn: Connection,
    cells: Cells,
    projections: Sequence[Projection],
    namespace: str,
    values: Sequence[str],
    atoms_of: Callable[[str], list[tuple[int, int]]] | None = None,
) -> dict[str, dict[str, list[str]]]:
    """For each value, the items of the namespace whose text (any version) mentions it,
    in any of its written forms, each with the spans as they are written there (for a
    redaction of exactly those words): what a request in words that names a value
    resolves to. A value too short to search for maps to no items. The spans are the
    user's data: for their eyes (a plan's sealed part), never for a log. `atoms_of`: a
    memo of `atomic_spans` kept by a caller that looks up several times over the same
    texts (one plan); by default one for this call.

    All the values are looked up together: one mention-index lookup for every value
    (`candidates_each`) and one read of the candidates' cells, each opened once, however
    many values name it. A plan over 700 facts looks up 700 values; one by one that was
    thousands of queries (seconds at 10,000 items). A value the index cannot look up is
    searched the slow way, alone, as before. The answer is what each value looked up
    alone gives (tests/test_mention_lookup_batch.py)."""
    patterns = {value: mention_pattern([value]) for value in dict.fromkeys(values)}
    searched = [v for v, pattern in patterns.items() if pattern is not None]
    narrowed = dict(
        zip(
            searched,
            candidates_each(
                conn,
                cells.log,
                namespace,
                [patterns[v].searched for v in searched],  # type: ignore[union-attr]
            ),
            strict=True,
        )
    )
    sealed = [p for p in projections if p.sealed_field is not None]
    everyone = sorted({i for ids in narrowed.values() if ids for i in ids})
    texts = {id(p): _texts_by_item(conn, cells, p, namespace, everyone) for p in sealed}
    atoms_of = atoms_of or cache(atomic_spans)  # a text is cut into words once
    out: dict[str, dict[str, list[str]]] = {}
    for value in values:
        if value in out:
            continue
        pattern = patterns[value]
        found: dict[str, list[str]] = {}
        out[value] = found
        if pattern is None:
            continue
        ids = narrowed[value]
        if ids is None:  # the index cannot answer: every cell of the namespace
            items = find_mentions(conn, cells, projections, namespace, pattern, ())
            by_item = {id(p): _texts_by_item(conn, cells, p, None, items) for p in projections}
        else:
            items = sorted(ids)
            by_item = texts
        spans_in = {
            (id(p), item_id): [
                [text[a:b] for a, b in pattern.spans(text, atoms_of)]
                for text in by_item.get(id(p), {}).get(item_id, ())
            ]
            for p in projections
            for item_id in items
        }
        for projection in projections:  # items in order, each as its texts are read
            for item_id in items:
                for spans in spans_in[(id(projection), item_id)]:
                    if spans:
                        known = found.setdefault(item_id, [])
                        known.extend(s for s in spans if s not in known)
    return out


def _texts_by_item(
    conn: Connection,
    cells: Cells,
    projection: Projection,
    namespace: str | None,
    item_ids: Sequence[str],
) -> dict[str, list[str]]:
    """item id -> the readable texts the projection keeps of it (every version), read
    in chunks, each cell opened once; with `namespace`, only the namespace's rows (the
    ids lead the lookup, the namespace confirms)."""
    out: dict[str, list[str]] = {}
    if projection.sealed_field is None or not item_ids:
        return out
    table = projection.table
    for start in range(0, len(item_ids), 1000):
        chunk = list(item_ids[start : start + 1000])
        query = select(table.c.item_id, table.c.key_generation, table.c.sealed).where(
            among(table.c.item_id, chunk)
        )
        if namespace is not None:
            query = query.where(unindexed(table.c.namespace) == namespace)
        rows = [tuple(r) for r in conn.execute(query)]
        for (item_id, _, _), text in zip(
            rows, cells.open(rows, projection.sealed_field), strict=True
        ):
            if text is not None:
                out.setdefault(item_id, []).append(text)
    return out
