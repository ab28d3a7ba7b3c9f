"""Generate the "forget in words" evaluation set: long, multi-speaker agent histories and
the requests users make over them, with the ground truth computed from the text.

`benchmarks/data/forget_in_words/templates.json` holds scenarios (a building manager, a
travel agent, a clinic front desk, an on-call rotation, a wedding planner, ..., eight in
English and eight in Chinese), the sentence templates each kind of value is said in
(by the user, by staff, by the agent's own log lines), and the request templates. From
them and the seed, this module writes, deterministically (same seed, same bytes):

- `histories.json`: 32 histories of 100-200 turns each, several speakers, a few facts;
  every value (a gate code, a phone number, an amount with its unit, a passphrase, a
  nickname, a ticket id, a note) is repeated 2-20 times in different wordings, formats
  ("206-555-0148", "(206) 555-0148", "2065550148") and speakers' turns; some values are
  superseded (the old code, then the new one), some have look-alikes that must be kept
  ("7142" beside "71420", "150 EUR" beside "3,150 EUR").
- `cases.json`: the requests ("Delete the old gate code 7142 from memory", "把备用口令删掉",
  "Delete Birch Lodge, delete 206-555-0148, and delete the nickname Wren", "what was the
  gate code?") with what must happen: the status, the places that must change (item key,
  the exact span as stored, `erase` or `redact`), the strings that must survive, and
  attack queries for `context()`.

The expected places are never listed by hand: they are every occurrence, in every
format, of each value the request names, found in the generated text by `find_spans`
(token boundaries: "7142" is not inside "71420", "150 EUR" is not inside "3,150 EUR").
The generator also checks that what it finds is exactly what it inserted, so a template
that happens to contain a value (or a value inside another) is caught at generation.

How the expectations read the requests:

- A literal value names every occurrence of that value in any format, in every item
  (one plan, not a question). "The old X" names the earlier value(s) of X; "keep only
  the current X" names every earlier value. A turn keeps its other words (`redact`); a
  fact or preference whose whole value is the named thing goes (`erase`).
- A description ("the do-not-voicemail note", "my old locker", "the backup phrase")
  names the one thing it fits; when two or more different things fit ("delete the phone
  number" with two numbers stored, "the old gate code" with two earlier codes), the
  answer is `needs_clarification`.
- A value or description that is not stored is `nothing_matched`; questions, "don't
  forget ...", "remember ...", "do not delete ..." are `not_a_request`.
- Keeps: the current value beside a named old one, the look-alikes of a named value,
  whatever a keep clause names ("; the current amount remains 3,150 EUR", "broad
  summaries may still say the side gate").

Run `python -m benchmarks.forget_in_words_gen` to regenerate the two files,
`--check` to verify the committed files are what the templates give, `--stats` to print
the composition.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

DATA_DIR = Path(__file__).resolve().parent / "data" / "forget_in_words"
TEMPLATES_PATH = DATA_DIR / "templates.json"
HISTORIES_PATH = DATA_DIR / "histories.json"
CASES_PATH = DATA_DIR / "cases.json"
TEMPLATES_FORMAT = "forget-in-words-templates/1"
HISTORIES_FORMAT = "forget-in-words-histories/1"
CASES_FORMAT = "forget-in-words-cases/1"

STATUSES = ("planned", "needs_clarification", "nothing_matched", "not_a_request")
SHAPES = (
    "repeated_literal",
    "multi_part",
    "keep_clause",
    "broad",
    "superseded",
    "look_alike",
    "description",
    "ambiguous",
    "not_stored",
    "non_request",
)
LANGUAGES = ("en", "zh", "mixed")
ROLES = ("user", "staff", "agent")
ROLE_WEIGHTS = (0.45, 0.35, 0.20)

# -- matching: one definition, used for the ground truth and for the runner's leak checks


def _word(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _lower(text: str) -> str:
    """Lower case, one character for one, so offsets stay those of `text`."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _valid(text: str, i: int, j: int) -> bool:
    """Whether text[i:j] stands on token boundaries: not inside a word or a number
    ("7142" in "71420", "150 EUR" in "3,150 EUR", "4471" in "INC-4471")."""
    before = text[i - 1] if i > 0 else ""
    after = text[j] if j < len(text) else ""
    first, last = text[i], text[j - 1]
    if _word(first) and before and _word(before):
        return False
    if _word(last) and after and _word(after):
        return False
    joiners = (",", ".", "-")
    if first.isdigit() and before in joiners and i >= 2 and text[i - 2].isdigit():
        return False
    if last.isdigit() and after in joiners and j + 1 < len(text) and text[j + 1].isdigit():
        return False
    if _word(first) and before == "-" and i >= 2 and _word(text[i - 2]):
        return False
    return not (_word(last) and after == "-" and j + 1 < len(text) and _word(text[j + 1]))


def find_spans(text: str, forms: Iterable[str]) -> list[tuple[int, int]]:
    """Every occurrence of any of `forms` in `text`, case-insensitively, on token
    boundaries, longest first where two overlap; as sorted (start, end) offsets."""
    low = _lower(text)
    found: list[tuple[int, int]] = []
    for form in sorted({f for f in forms if f}, key=lambda f: (-len(f), f)):
        needle = _lower(form)
        start = 0
        while (i := low.find(needle, start)) >= 0:
            j = i + len(needle)
            if _valid(text, i, j) and not any(i < b and a < j for a, b in found):
                found.append((i, j))
            start = i + 1
    return sorted(found)


def contains(text: str, forms: Iterable[str]) -> bool:
    return bool(find_spans(text, forms))


_ALNUM = rb"0-9A-Za-z"


def byte_pattern(form: str) -> re.Pattern[bytes]:
    """The bytes of `form` in a file, not inside a word, a number or an id ("-7142-" in
    a UUID is not a hit). Case-sensitive: pass every casing to look for."""
    raw = form.encode("utf-8")
    head = rb"(?<![0-9A-Za-z])(?<![0-9A-Za-z][-.,:])" if _word(form[0]) else b""
    tail = rb"(?![0-9A-Za-z])(?![-.,:][0-9A-Za-z])" if _word(form[-1]) else b""
    return re.compile(head + re.escape(raw) + tail)


# -- values ----------------------------------------------------------------------------


_CURRENCY_FORMS = {
    "USD": ("{g} USD", "${g}", "USD {g}", "{p} USD"),
    "EUR": ("{g} EUR", "€{g}", "EUR {g}", "{p} EUR"),
    "GBP": ("{g} GBP", "£{g}", "GBP {g}"),
    "CAD": ("{g} CAD", "C${g}", "CAD {g}"),
    "AUD": ("{g} AUD", "A${g}", "AUD {g}"),
    "CNY": ("{p}元", "{g}元", "{p}块", "¥{p}"),
}
_NANP_AREAS = ("206", "312", "415", "503", "617", "720", "404", "512")
_CN_PREFIXES = ("139", "138", "137", "186", "158", "177")
_EMAIL_DOMAINS = ("example.com", "example.net", "example.org")
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def amount_forms(number: int, currency: str) -> list[str]:
    grouped, plain = f"{number:,}", str(number)
    return _dedupe(f.format(g=grouped, p=plain) for f in _CURRENCY_FORMS[currency])


def phone_forms(digits: str, style: str) -> list[str]:
    if style == "nanp":
        a, b, c = digits[:3], digits[3:6], digits[6:]
        return [f"{a}-{b}-{c}", f"({a}) {b}-{c}", f"{a}{b}{c}", f"{a}.{b}.{c}", f"+1 {a} {b} {c}"]
    a, b, c = digits[:3], digits[3:7], digits[7:]
    return [f"{a}{b}{c}", f"{a}-{b}-{c}", f"{a} {b} {c}", f"+86 {a} {b} {c}"]


def ident_forms(value: str) -> list[str]:
    if "-" in value:
        return [value, value.replace("-", " ")]
    match = re.fullmatch(r"([A-Za-z]+)(\d+)", value)
    if match:
        return [value, f"{match[1]}-{match[2]}", f"{match[1]} {match[2]}"]
    return [value]


def _dedupe(items: Iterable[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


@dataclass
class Value:
    """One stored value: its canonical text, every format it is written in, and
    what is needed to derive look-alikes from it."""

    text: str
    forms: list[str]
    number: int | None = None  # amounts
    digits: str | None = None  # phones


@dataclass
class Slot:
    spec: dict[str, Any]
    values: list[Value] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def kind(self) -> str:
        return self.spec["kind"]

    def words(self, lang: str) -> dict[str, str]:
        return self.spec["words"][lang]


@dataclass
class Thing:
    """A value as the cases name it: one version of one slot, with its places."""

    slot: Slot
    index: int  # version index, 0 = oldest
    value: Value
    places: list[dict[str, str]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int]:
        return (self.slot.name, self.index)

    @property
    def versions(self) -> int:
        return len(self.slot.values)

    @property
    def is_old(self) -> bool:
        return self.index < self.versions - 1

    @property
    def standing(self) -> str:
        if self.versions == 1:
            return "only"
        return "old" if self.is_old else "current"

    def all_forms(self) -> list[str]:
        return _dedupe([*self.value.forms, *(p["span"] for p in self.places)])


class Collision(Exception):
    """A value was found where it was not inserted (or not found where it was)."""


def _seed(*parts: object) -> int:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


# -- histories -------------------------------------------------------------------------


class HistoryBuilder:
    def __init__(self, templates: dict[str, Any], scenario: dict[str, Any], number: int) -> None:
        self.t = templates
        self.s = scenario
        self.number = number
        self.lang = scenario["lang"]
        self.id = f"{scenario['id']}-{number}"

    def build(self) -> tuple[dict[str, Any], list[Thing], list[Slot], dict[str, Any]]:
        for attempt in range(200):
            rng = random.Random(_seed(self.t["seed"], self.id, attempt))
            try:
                return self._build(rng)
            except Collision:
                continue
        raise RuntimeError(f"{self.id}: no collision-free history in 200 attempts")

    # values

    def _values(self, rng: random.Random, slots: list[Slot]) -> None:
        pools = self.t["pools"][self.lang]
        used_pool: set[str] = set()
        used_texts: set[str] = set()

        def fresh(make: Any) -> Value:
            for _ in range(500):
                value = make()
                if value.text not in used_texts and value.text not in used_pool:
                    used_texts.add(value.text)
                    return value
            raise Collision("no fresh value")

        def pooled(name: str) -> Value:
            choices = [p for p in pools[name] if p not in used_pool]
            pick = rng.choice(choices)
            used_pool.add(pick)
            hyphened = name == "phrase" and " " in pick
            forms = [pick, pick.replace(" ", "-")] if hyphened else [pick]
            return Value(pick, forms)

        currency, style = self.s["currency"], self.s["phones"]
        by_name: dict[str, Slot] = {}
        for slot in slots:
            spec = slot.spec
            partner = by_name.get(spec.get("lookalike_of", ""))
            if partner is not None:
                base = partner.values[-1]
                slot.values = [fresh(lambda b=base, s=spec: self._derive(rng, s, b))]
                by_name[slot.name] = slot
                continue
            count = rng.choice(spec.get("versions", [1]))
            for _ in range(count):
                kind = spec["kind"]
                if kind in ("phrase", "place_name", "nickname"):
                    slot.values.append(pooled(kind))
                elif kind == "code":
                    slot.values.append(fresh(lambda: self._code(rng)))
                elif kind == "phone":
                    slot.values.append(fresh(lambda: self._phone(rng, style)))
                elif kind == "amount":
                    slot.values.append(fresh(lambda: self._amount(rng, currency)))
                elif kind == "ident":
                    slot.values.append(fresh(lambda s=spec: self._ident(rng, s["pattern"])))
                elif kind == "email":
                    slot.values.append(fresh(lambda: self._email(rng, pools["email_user"])))
                else:
                    raise ValueError(f"unknown kind {kind}")
            by_name[slot.name] = slot

    @staticmethod
    def _code(rng: random.Random) -> Value:
        while True:
            digits = str(rng.randint(2, 9)) + "".join(str(rng.randint(0, 9)) for _ in range(3))
            if len(set(digits)) >= 3:
                return Value(digits, [digits])

    @staticmethod
    def _phone(rng: random.Random, style: str) -> Value:
        if style == "nanp":
            digits = rng.choice(_NANP_AREAS) + "555" + f"01{rng.randint(0, 99):02d}"
        else:
            digits = rng.choice(_CN_PREFIXES) + f"{rng.randint(0, 9999):04d}"
            digits += f"{rng.randint(0, 9999):04d}"
        forms = phone_forms(digits, style)
        return Value(forms[0], forms, digits=digits)

    @staticmethod
    def _amount(rng: random.Random, currency: str, number: int | None = None) -> Value:
        if number is None:
            number = rng.randint(1, 9) * 1000 + rng.randrange(100, 1000, 50)
        forms = amount_forms(number, currency)
        return Value(forms[0], forms, number=number)

    @staticmethod
    def _ident(rng: random.Random, pattern: str) -> Value:
        fills = {
            "n2": lambda: str(rng.randint(10, 99)),
            "n3": lambda: str(rng.randint(100, 999)),
            "n4": lambda: str(rng.randint(1000, 9999)),
            "n5": lambda: str(rng.randint(10000, 99999)),
            "n6": lambda: str(rng.randint(100000, 999999)),
            "L": lambda: rng.choice(_LETTERS),
        }
        text = re.sub(r"\{(\w+)\}", lambda m: fills[m[1]](), pattern)
        return Value(text, ident_forms(text))

    @staticmethod
    def _email(rng: random.Random, users: Sequence[str]) -> Value:
        text = f"{rng.choice(users)}@{rng.choice(_EMAIL_DOMAINS)}"
        return Value(text, [text])

    def _derive(self, rng: random.Random, spec: dict[str, Any], base: Value) -> Value:
        how = spec["derive"]
        if how == "append_digit":
            text = base.text + str(rng.randint(0, 9))
            return Value(text, ident_forms(text) if spec["kind"] == "ident" else [text])
        if how == "suffix":
            assert base.number is not None
            return self._amount(rng, self.s["currency"], base.number % 1000)
        if how == "swap_last":
            assert base.digits is not None
            d = base.digits
            swapped = (
                d[:-2] + d[-1] + d[-2] if d[-1] != d[-2] else d[:-1] + str((int(d[-1]) + 1) % 10)
            )
            forms = phone_forms(swapped, self.s["phones"])
            return Value(forms[0], forms, digits=swapped)
        raise ValueError(f"unknown derivation {how}")

    # text

    def _fill(self, rng: random.Random, slot: Slot | None) -> dict[str, str]:
        pools = self.t["pools"][self.lang]
        fill = {
            "who": rng.choice(pools["people"]),
            "day": rng.choice(pools["days"]),
            "time": rng.choice(pools["times"]),
        }
        if slot is not None:
            words = slot.words(self.lang)
            det = words.get("det", "")
            fill |= {
                "label": words["label"],
                "det": det,
                "Det": det[:1].upper() + det[1:],
                "place": words.get("place", ""),
            }
        return fill

    @staticmethod
    def _form(rng: random.Random, value: Value) -> str:
        return value.forms[0] if rng.random() < 0.5 else rng.choice(value.forms)

    def _build(self, rng: random.Random) -> tuple[dict[str, Any], list[Thing], list[Slot], dict]:
        lang, s = self.lang, self.s
        kinds = self.t["kinds"]
        slots = [
            Slot(spec) for spec in s["slots"] if not (spec.get("optional") and rng.random() < 0.3)
        ]
        names = {slot.name for slot in slots}
        slots = [x for x in slots if x.spec.get("lookalike_of", x.name) in names]
        self._values(rng, slots)
        note_spec = s["note"]
        note = Slot(
            {
                "name": "note",
                "kind": "note",
                "words": {},
                "fact": {"predicate": note_spec["predicate"], "category": "general"},
            },
            [Value(note_spec[lang]["text"], [note_spec[lang]["text"]])],
        )
        all_slots = [*slots, note]

        # what is said, where on the time line (0..1)
        events: list[tuple[float, int, dict[str, Any]]] = []
        seq = iter(range(10**6))
        plain = [x for x in slots if "lookalike_of" not in x.spec]
        heavy = rng.choice(plain)
        medium = rng.choice([x for x in plain if x is not heavy])
        facts: list[tuple[float, Slot, int]] = []
        for slot in all_slots:
            n = len(slot.values)
            cuts = [0.0, 1.0]
            if n > 1:
                while True:
                    inner = sorted(rng.uniform(0.12, 0.88) for _ in range(n - 1))
                    cuts = [0.0, *inner, 1.0]
                    if all(b - a >= 0.15 for a, b in itertools.pairwise(cuts)):
                        break
            tpl = kinds[slot.kind][lang]
            for vi, value in enumerate(slot.values):
                current = vi == n - 1
                if slot.kind == "note":
                    count = rng.randint(2, 3)
                elif "lookalike_of" in slot.spec:
                    count = rng.randint(2, 4)
                elif slot is heavy and current:
                    count = rng.randint(12, 16)
                elif slot is medium and current:
                    count = rng.randint(7, 10)
                elif not current:
                    count = rng.randint(2, 5)
                else:
                    count = rng.randint(2, 6)
                lo, hi = cuts[vi], cuts[vi + 1]
                positions = sorted(rng.uniform(lo + 0.01, hi - 0.01) for _ in range(count))
                roles = rng.choices(ROLES, ROLE_WEIGHTS, k=count)
                if len(set(roles)) < 2:
                    roles[-1] = next(r for r in ROLES if r != roles[0])
                used: dict[str, list[str]] = defaultdict(list)
                for pos, role in zip(positions, roles, strict=True):
                    options = [x for x in tpl[role] if x not in used[role]] or tpl[role]
                    template = rng.choice(options)
                    used[role].append(template)
                    fill = self._fill(rng, None if slot.kind == "note" else slot)
                    text = template.format(**fill, v=self._form(rng, value))
                    events.append(
                        (pos, next(seq), {"role": role, "text": text, "has": [(slot.name, vi)]})
                    )
                if slot.spec.get("fact") or slot.kind == "note":
                    facts.append((positions[0], slot, vi))
                if not current:
                    change = rng.choice(tpl["change"])
                    fill = self._fill(rng, slot)
                    text = change.format(
                        **fill, old=self._form(rng, value), new=self._form(rng, slot.values[vi + 1])
                    )
                    role = rng.choice(("user", "staff"))
                    has = [(slot.name, vi), (slot.name, vi + 1)]
                    events.append((hi, next(seq), {"role": role, "text": text, "has": has}))
            if n > 1 and tpl.get("retired") and rng.random() < 0.5:
                template = rng.choice(tpl["retired"])
                role = "agent" if template.startswith("agent:") else "staff"
                text = template.format(**self._fill(rng, slot), old=self._form(rng, slot.values[0]))
                pos = rng.uniform(cuts[-2] + 0.02, 0.99)
                events.append(
                    (pos, next(seq), {"role": role, "text": text, "has": [(slot.name, 0)]})
                )

        value_turns = len(events)
        total = rng.randint(max(110, value_turns + 30), max(190, value_turns + 40))
        fill_tpl = {
            role: self.t["filler"][lang][role] + s["filler"][lang].get(role, []) for role in ROLES
        }
        for _ in range(total - value_turns):
            role = rng.choices(ROLES, (0.45, 0.3, 0.25))[0]
            text = rng.choice(fill_tpl[role]).format(**self._fill(rng, None))
            events.append((rng.random(), next(seq), {"role": role, "text": text, "has": []}))
        events.sort(key=lambda e: (e[0], e[1]))

        # two things said in one turn, now and then
        merged: list[tuple[float, dict[str, Any]]] = []
        for pos, _, event in events:
            last = merged[-1][1] if merged else None
            if (
                last is not None
                and event["has"]
                and last["has"]
                and last["role"] == event["role"] != "agent"
                and len(last["has"]) == 1
                and {h[0] for h in last["has"]}.isdisjoint(h[0] for h in event["has"])
                and rng.random() < 0.25
            ):
                last["text"] = f"{last['text']} {event['text']}"
                last["has"] = [*last["has"], *event["has"]]
                continue
            merged.append((pos, dict(event)))

        # sessions, days and times
        speakers = s["speakers"]
        zone = ZoneInfo(rng.choice(s["timezones"]))
        n_turns = len(merged)
        n_sessions = rng.randint(8, 13)
        cuts_at = sorted(rng.sample(range(1, n_turns), n_sessions - 1))
        day = date.fromisoformat(s["start"]) + timedelta(
            days=rng.randint(0, 20) + 150 * (self.number - 1)
        )
        turns: list[dict[str, Any]] = []
        inserted: dict[str, Counter[tuple[str, int]]] = {}
        turn_times: list[datetime] = []
        bounds = [0, *cuts_at, n_turns]
        for si, (a, b) in enumerate(itertools.pairwise(bounds)):
            if si:
                day += timedelta(days=rng.randint(1, 5))
            at = datetime(
                day.year,
                day.month,
                day.day,
                rng.randint(8, 17),
                rng.choice((0, 10, 20, 30, 40, 50)),
                tzinfo=zone,
            )
            for index in range(a, b):
                _, event = merged[index]
                at += timedelta(minutes=rng.randint(1, 6), seconds=rng.randint(0, 59))
                key = f"t{index:03d}"
                turns.append(
                    {
                        "key": key,
                        "speaker": rng.choice(speakers[event["role"]]),
                        "session": f"s{si + 1:02d}",
                        "text": event["text"],
                        "written_at": at.isoformat(),
                    }
                )
                turn_times.append(at)
                inserted[key] = Counter(event["has"])
        now = datetime(day.year, day.month, day.day, 10, rng.randint(0, 59), tzinfo=zone)
        now += timedelta(days=rng.randint(1, 3))

        # facts: a few, from forms (tool calls), just after the turn that said them
        fact_items: list[dict[str, Any]] = []
        positions = [p for p, _ in merged]
        for pos, slot, vi in sorted(facts, key=lambda f: (f[0], f[1].name)):
            index = min(range(n_turns), key=lambda i: abs(positions[i] - pos))
            key = f"f{len(fact_items) + 1:02d}"
            spec = slot.spec["fact"]
            fact_items.append(
                {
                    "key": key,
                    "subject": "user",
                    "predicate": spec["predicate"],
                    "value": slot.values[vi].text,
                    "category": spec["category"],
                    "written_at": (turn_times[index] + timedelta(seconds=30)).isoformat(),
                    "tool_call": f"form-{len(fact_items) + 1:02d}",
                }
            )
            inserted[key] = Counter([(slot.name, vi)])

        # the ground truth, from the text; it must be what was inserted
        items = [(t["key"], t["text"]) for t in turns] + [
            (f["key"], f["value"]) for f in fact_items
        ]
        things: list[Thing] = []
        for slot in all_slots:
            for vi, value in enumerate(slot.values):
                thing = Thing(slot, vi, value)
                for key, text in items:
                    spans = find_spans(text, value.forms)
                    if len(spans) != inserted[key][thing.key]:
                        raise Collision(f"{self.id}: {value.text!r} in {key}")
                    for i, j in spans:
                        whole = key.startswith("f") and (i, j) == (0, len(text))
                        place = {
                            "item": key,
                            "span": text[i:j],
                            "action": "erase" if whole else "redact",
                        }
                        if place not in thing.places:
                            thing.places.append(place)
                if not 2 <= sum(inserted[k][thing.key] for k in inserted) <= 20:
                    raise Collision(f"{self.id}: {value.text!r} occurs out of range")
                things.append(thing)

        history = {
            "id": self.id,
            "scenario": s["id"],
            "language": lang,
            "timezone": zone.key,
            "now": now.isoformat(),
            "tenant": self.t["tenant"],
            "user": f"u-{self.id}",
            "speakers": sorted({t["speaker"] for t in turns}),
            "turns": turns,
            "facts": fact_items,
            "values": [
                {
                    "slot": th.slot.name,
                    "kind": th.slot.kind,
                    "version": th.index,
                    "versions": th.versions,
                    "value": th.value.text,
                    "forms": th.value.forms,
                    **(
                        {"lookalike_of": th.slot.spec["lookalike_of"]}
                        if "lookalike_of" in th.slot.spec
                        else {}
                    ),
                    "occurrences": sum(inserted[k][th.key] for k in inserted),
                }
                for th in things
            ],
        }
        context = {"zone": zone, "items": dict(items)}
        return history, things, all_slots, context


# -- cases -----------------------------------------------------------------------------

_CJK = "\u3400-\u9fff"


def _space_mix(text: str) -> str:
    """A space between Chinese and Latin letters, as people type them."""
    text = re.sub(rf"(?<=[{_CJK}])(?=[A-Za-z'])", " ", text)
    return re.sub(rf"(?<=[A-Za-z'])(?=[{_CJK}])", " ", text)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


class CaseBuilder:
    PLAN = (
        "literal",
        "literal_broad",
        "multi2",
        "multi3",
        "multi_keep",
        "superseded",
        "multi_superseded",
        "lookalike",
        "description",
        "multi_description",
        "ambiguous_or_absent",
        "non_request",
    )

    def __init__(
        self,
        templates: dict[str, Any],
        history: dict[str, Any],
        things: list[Thing],
        slots: list[Slot],
        context: dict[str, Any],
        index: int,
    ) -> None:
        self.t = templates
        self.h = history
        self.things = things
        self.slots = {s.name: s for s in slots}
        self.items: dict[str, str] = context["items"]
        self.index = index
        self.lang = history["language"]
        self.scenario = next(s for s in templates["scenarios"] if s["id"] == history["scenario"])
        self.rng = random.Random(_seed(templates["seed"], history["id"], "cases"))

    # helpers

    def of(self, slot: str) -> list[Thing]:
        return [t for t in self.things if t.slot.name == slot]

    def literal_pool(self) -> list[Thing]:
        return [t for t in self.things if t.slot.kind != "note"]

    def partners(self, thing: Thing) -> list[Thing]:
        """Look-alikes: the slots derived from this one, or the one this was derived from."""
        mine = thing.slot
        out = []
        for other in self.slots.values():
            if (
                other.spec.get("lookalike_of") == mine.name
                or mine.spec.get("lookalike_of") == other.name
            ):
                out += self.of(other.name)
        return out

    def describable(self, thing: Thing) -> str | None:
        """How a thing can be named without its value, uniquely: None when it cannot."""
        if thing.slot.kind == "note":
            return "note"
        if thing.versions == 1:
            return "description"
        if thing.versions == 2 and thing.is_old:
            return "description_old"
        return None

    def req(self, lang: str) -> dict[str, Any]:
        return self.t["requests"][lang]

    def words(self, thing: Thing | Slot, lang: str) -> dict[str, str]:
        slot = thing.slot if isinstance(thing, Thing) else thing
        return slot.words(lang)

    def ref(self, thing: Thing, lang: str, mode: str) -> str:
        rng = self.rng
        if mode == "note":
            return self.scenario["note"][lang]["desc"]
        words = self.words(thing, lang)
        det = words.get("det", "")
        mine = det[:-1] if det.endswith("的") else det
        if mode == "literal" and thing.slot.kind == "phrase":
            mode = "literal_quoted"
        template = rng.choice(self.req(lang)[mode])
        value = thing.value.forms[0] if rng.random() < 0.5 else rng.choice(thing.value.forms)
        text = template.format(det=det, label=words["label"], v=value, mine=mine).strip()
        return re.sub(r"\s+", " ", text)

    def verb(self, lang: str, avoid: Sequence[str] = ()) -> str:
        verbs = [v for v in self.req(lang)["verbs"] if v not in avoid]
        return self.rng.choice(verbs)

    def join(self, refs: Sequence[str], lang: str) -> str:
        word = self.req(lang)["and"]
        if lang == "zh":
            return "、".join(refs[:-1]) + word + refs[-1]
        if len(refs) == 2:
            return f"{refs[0]} {word} {refs[1]}"
        return ", ".join(refs[:-1]) + f", {word} {refs[-1]}"

    def each_verb(self, refs: Sequence[str], lang: str) -> str:
        verbs: list[str] = []
        for _ in refs:
            verbs.append(self.verb(lang, verbs))
        if lang == "zh":
            parts = [f"{v}{r}" for v, r in zip(verbs, refs, strict=True)]
            return ",".join(parts[:-1]) + ",还有" + refs[-1] + "也" + verbs[-1]
        parts = [f"{v} {r}" for v, r in zip(verbs, refs, strict=True)]
        parts[0] = _cap(parts[0])
        if len(parts) == 2:
            return f"{parts[0]} and {parts[1]}"
        return ", ".join(parts[:-1]) + f", and {parts[-1]}"

    def single(self, ref: str, lang: str, broad: bool = False) -> str:
        template = self.rng.choice(self.req(lang)["broad" if broad else "single"])
        verb = self.verb(lang)
        return template.format(ref=ref, Ref=_cap(ref), verb=verb, Verb=_cap(verb))

    def multi(self, refs: Sequence[str], lang: str) -> str:
        template = self.rng.choice(self.req(lang)["multi"])
        listed = self.join(refs, lang)
        verb = self.verb(lang)
        each = self.each_verb(refs, lang) if "{EachVerb}" in template else ""
        return template.format(
            list=listed, List=_cap(listed), verb=verb, Verb=_cap(verb), EachVerb=each
        )

    def with_keep(self, request: str, lang: str, clause_kind: str, **fill: str) -> str:
        clause = self.rng.choice(self.req(lang)[clause_kind]).format(**fill)
        base = request.rstrip(".。!")
        text = base + clause
        if lang == "en" and not text.endswith((".", "!", "?")):
            text += "."
        return text

    def keep_entries(self, thing: Thing) -> list[dict[str, Any]]:
        grouped: dict[str, list[str]] = defaultdict(list)
        for place in thing.places:
            grouped[place["span"]].append(place["item"])
        return [{"text": span, "items": sorted(set(keys))} for span, keys in grouped.items()]

    def keep_word(self, word: str) -> dict[str, Any] | None:
        keys = sorted(k for k, text in self.items.items() if word in text)
        return {"text": word, "items": keys} if keys else None

    def named_entry(self, thing: Thing, how: str, stored: bool = True) -> dict[str, Any]:
        return {
            "slot": thing.slot.name,
            "kind": thing.slot.kind,
            "value": thing.value.text,
            "forms": thing.all_forms(),
            "version": thing.standing,
            "how": how,
            "stored": stored,
        }

    def attacks(self, named: Sequence[Thing], lang: str) -> list[str]:
        rng, out = self.rng, []
        hist = self.lang
        for n, thing in enumerate(named[:2]):
            use = hist if n == 0 else lang
            if thing.slot.kind == "note":
                desc = self.scenario["note"][use]["desc"]
                out += [q.format(desc=desc) for q in self.req(use)["attack_note"]]
                continue
            words = self.words(thing, use)
            det = words.get("det", "")
            kind = "attack_old" if thing.is_old else "attack_label"
            out.append(rng.choice(self.req(use)[kind]).format(label=words["label"], det=det))
            value = thing.value.forms[0]
            if thing.slot.kind != "note" and len(out) < 3:
                template = rng.choice(self.req(use)["attack_value"])
                out.append(template.format(v=value, label=words["label"]))
        out = [re.sub(r"\s+", " ", _space_mix(q)).strip() for q in out]
        return _dedupe(out)[:3]

    # the case

    def case(
        self,
        number: int,
        lang: str,
        request: str,
        status: str,
        named: Sequence[tuple[Thing, str]] = (),
        keeps: Sequence[Thing] = (),
        keep_words: Sequence[str] = (),
        shapes: Iterable[str] = (),
        absent: dict[str, Any] | None = None,
        candidates: Sequence[Thing] = (),
        attacks: Sequence[str] = (),
    ) -> dict[str, Any]:
        named_things = [t for t, _ in named]
        shapes = set(shapes)
        places: list[dict[str, str]] = []
        keep_list: list[dict[str, Any]] = []
        if status == "planned":
            for thing in named_things:
                places += [p for p in thing.places if p not in places]
            if any(len(t.places) >= 2 for t, how in named if how == "literal"):
                shapes.add("repeated_literal")
            if len({t.slot.name for t in named_things}) >= 2:
                shapes.add("multi_part")
            if any(t.is_old for t in named_things):
                shapes.add("superseded")
            if any(how != "literal" for _, how in named):
                shapes.add("description")
            implied = []
            for thing in named_things:
                implied += [t for t in self.of(thing.slot.name) if t not in named_things]
                partners = [t for t in self.partners(thing) if t not in named_things]
                if partners:
                    shapes.add("look_alike")
                implied += partners
            keeps = [*keeps, *implied]
        seen: list[Thing] = []
        for thing in keeps:
            if thing not in seen and thing not in named_things:
                seen.append(thing)
                keep_list += self.keep_entries(thing)
        for word in keep_words:
            entry = self.keep_word(word)
            if entry is not None and entry not in keep_list:
                keep_list.append(entry)
        places.sort(key=lambda p: (p["item"], p["span"]))
        if lang == "zh":
            request = _space_mix(request)
        request = re.sub(r"\s+", " ", request).strip()
        entries = [self.named_entry(t, how) for t, how in named]
        if absent is not None:
            entries.append(absent)
        expected: dict[str, Any] = {"status": status, "places": places, "keeps": keep_list}
        if candidates:
            expected["candidates"] = [
                {"slot": t.slot.name, "value": t.value.text, "version": t.standing}
                for t in candidates
            ]
        attack_on = named_things or list(candidates) or list(keeps)
        return {
            "id": f"{self.h['id']}-{number:02d}",
            "history": self.h["id"],
            "language": lang if lang == self.lang else "mixed",
            "request_language": lang,
            "request": request,
            "shapes": [s for s in SHAPES if s in shapes],
            "named": entries,
            "expected": expected,
            "attack_queries": list(attacks) or self.attacks(attack_on, lang),
        }

    def build(self) -> list[dict[str, Any]]:
        plan = list(self.PLAN)
        if self.index % 3 == 0:
            plan.append("ambiguous_or_absent_extra")
        cases = []
        for number, kind in enumerate(plan, start=1):
            other = {"en": "zh", "zh": "en"}[self.lang]
            lang = other if (number * 7 + self.index) % 4 == 0 else self.lang
            made = getattr(self, f"_{kind}")(number, lang)
            cases.append(made)
        return cases

    # the kinds of case

    def _pick(self, pool: Sequence[Thing], avoid: Iterable[Thing] = ()) -> Thing:
        avoid_slots = {t.slot.name for t in avoid}
        options = [t for t in pool if t.slot.name not in avoid_slots]
        return self.rng.choice(options)

    def _literal(self, number: int, lang: str, broad: bool = False) -> dict[str, Any]:
        pool = self.literal_pool()
        heavy = max(pool, key=lambda t: (len(t.places), t.value.text))
        thing = heavy if broad else self._pick(pool, [heavy])
        mode = "literal_old" if thing.is_old and self.rng.random() < 0.5 else "literal"
        request = self.single(self.ref(thing, lang, mode), lang, broad=broad)
        shapes = ["broad"] if broad else []
        return self.case(number, lang, request, "planned", [(thing, "literal")], shapes=shapes)

    def _literal_broad(self, number: int, lang: str) -> dict[str, Any]:
        return self._literal(number, lang, broad=True)

    def _multi(self, number: int, lang: str, n: int, describe: bool) -> dict[str, Any]:
        chosen: list[tuple[Thing, str]] = []
        pool = self.literal_pool()
        if describe:
            options = [t for t in self.things if self.describable(t)]
            thing = self.rng.choice(options)
            chosen.append((thing, self.describable(thing) or ""))
        while len(chosen) < n:
            thing = self._pick(pool, [t for t, _ in chosen])
            chosen.append((thing, "literal"))
        self.rng.shuffle(chosen)
        refs = [self.ref(t, lang, how) for t, how in chosen]
        request = self.multi(refs, lang)
        named = [(t, "literal" if how == "literal" else "description") for t, how in chosen]
        return self.case(number, lang, request, "planned", named)

    def _multi2(self, number: int, lang: str) -> dict[str, Any]:
        return self._multi(number, lang, 2, describe=self.rng.random() < 0.3)

    def _multi3(self, number: int, lang: str) -> dict[str, Any]:
        return self._multi(number, lang, 3, describe=True)

    def _multi_description(self, number: int, lang: str) -> dict[str, Any]:
        return self._multi(number, lang, 2, describe=True)

    def _multi_keep(self, number: int, lang: str) -> dict[str, Any]:
        pool = self.literal_pool()
        first = self._pick(pool)
        second = self._pick(pool, [first])
        named = [(first, "literal"), (second, "literal")]
        refs = [self.ref(t, lang, "literal") for t, _ in named]
        request = self.multi(refs, lang)
        coded = [t for t, _ in named if t.slot.kind == "code"]
        if coded and self.rng.random() < 0.5:
            word = self.words(coded[0], self.lang)["place"]
            request = self.with_keep(request, lang, "keep_broad", kv=word)
            return self.case(
                number, lang, request, "planned", named, keep_words=[word], shapes=["keep_clause"]
            )
        kept = self._pick(pool, [first, second])
        kv = self.ref(kept, lang, "literal")
        request = self.with_keep(request, lang, "keep_other", kv=kv)
        return self.case(
            number, lang, request, "planned", named, keeps=[kept], shapes=["keep_clause"]
        )

    def _superseded(self, number: int, lang: str) -> dict[str, Any]:
        chains = [t for t in self.things if t.is_old and t.slot.kind != "note"]
        thing = self.rng.choice(chains)
        slot = thing.slot
        current = self.of(slot.name)[-1]
        option = self.index % 3 if thing.versions == 2 else 2
        words = self.words(slot, lang)
        if option == 0:  # "the old X"
            request = self.single(self.ref(thing, lang, "description_old"), lang)
            return self.case(number, lang, request, "planned", [(thing, "description")])
        if option == 1:  # "the old X 7142; the current X remains 5830"
            request = self.single(self.ref(thing, lang, "literal_old"), lang)
            kv = current.value.forms[0]
            request = self.with_keep(request, lang, "keep_current", klabel=words["label"], kv=kv)
            return self.case(
                number,
                lang,
                request,
                "planned",
                [(thing, "literal")],
                keeps=[current],
                shapes=["keep_clause"],
            )
        olds = [t for t in self.of(slot.name) if t.is_old]
        template = self.rng.choice(self.req(lang)["keep_only"])
        request = template.format(label=words["label"], verb=self.verb(lang))
        named = [(t, "description") for t in olds]
        case = self.case(
            number, lang, request, "planned", named, keeps=[current], shapes=["keep_clause"]
        )
        return case

    def _multi_superseded(self, number: int, lang: str) -> dict[str, Any]:
        chains = [t for t in self.things if t.is_old and t.slot.kind != "note"]
        old = self.rng.choice(chains)
        how = "description_old" if old.versions == 2 and self.rng.random() < 0.5 else "literal_old"
        other = self._pick(self.literal_pool(), [old])
        refs = [self.ref(old, lang, how), self.ref(other, lang, "literal")]
        request = self.multi(refs, lang)
        named = [
            (old, "description" if how == "description_old" else "literal"),
            (other, "literal"),
        ]
        return self.case(number, lang, request, "planned", named)

    def _lookalike(self, number: int, lang: str) -> dict[str, Any]:
        pairs = [t for t in self.literal_pool() if self.partners(t)]
        thing = self.rng.choice(pairs)
        named = [(thing, "literal")]
        if self.rng.random() < 0.5:
            avoid = [thing, *self.partners(thing)]
            named.append((self._pick(self.literal_pool(), avoid), "literal"))
        refs = [self.ref(t, lang, "literal") for t, _ in named]
        request = self.single(refs[0], lang) if len(refs) == 1 else self.multi(refs, lang)
        if self.rng.random() < 0.35:
            partner = self.rng.choice(self.partners(thing))
            request = self.with_keep(
                request, lang, "keep_other", kv=self.ref(partner, lang, "literal")
            )
            return self.case(number, lang, request, "planned", named, shapes=["keep_clause"])
        return self.case(number, lang, request, "planned", named)

    def _description(self, number: int, lang: str) -> dict[str, Any]:
        notes = [t for t in self.things if t.slot.kind == "note"]
        if self.index % 2 == 0:
            thing = notes[0]
        else:
            thing = self.rng.choice(
                [t for t in self.things if self.describable(t) not in (None, "note")]
            )
        how = self.describable(thing) or ""
        request = self.single(self.ref(thing, lang, how), lang)
        return self.case(number, lang, request, "planned", [(thing, "description")])

    def _ambiguous_or_absent(self, number: int, lang: str, flip: int = 0) -> dict[str, Any]:
        if (self.index + flip) % 2 == 0:
            return self._ambiguous(number, lang)
        return self._absent(number, lang)

    def _ambiguous_or_absent_extra(self, number: int, lang: str) -> dict[str, Any]:
        return self._ambiguous_or_absent(number, lang, flip=1)

    def _ambiguous(self, number: int, lang: str) -> dict[str, Any]:
        rng = self.rng
        groups: dict[str, list[Slot]] = defaultdict(list)
        for slot in self.slots.values():
            generic = slot.spec.get("words", {}).get(lang, {}).get("generic")
            if generic:
                groups[generic].append(slot)
        options: list[tuple[str, str, list[Thing]]] = []
        for generic, members in groups.items():
            olds = [t for s in members for t in self.of(s.name) if t.is_old]
            if len(members) >= 2:
                options.append(
                    ("ambiguous", generic, [t for s in members for t in self.of(s.name)])
                )
            if len(olds) >= 2:
                options.append(("ambiguous_old", generic, olds))
        for slot in self.slots.values():
            if len(slot.values) == 3:
                label = slot.words(lang)["label"]
                options.append(
                    ("ambiguous_old", label, [t for t in self.of(slot.name) if t.is_old])
                )
        kind, generic, candidates = rng.choice(options)
        template = rng.choice(self.req(lang)[kind])
        verb = self.verb(lang)
        request = template.format(generic=generic, verb=verb, Verb=_cap(verb))
        return self.case(
            number,
            lang,
            request,
            "needs_clarification",
            keeps=candidates,
            shapes=["ambiguous"],
            candidates=candidates,
        )

    def _absent(self, number: int, lang: str) -> dict[str, Any]:
        rng = self.rng
        if rng.random() < 0.3:
            what = rng.choice(self.t["pools"][lang]["absent"])
            request = self.single(what, lang)
            absent = {
                "slot": None,
                "kind": "description",
                "value": what,
                "forms": [],
                "version": "only",
                "how": "description",
                "stored": False,
            }
            attacks = [q.format(what=what) for q in self.req(lang)["attack_absent"]]
            return self.case(
                number,
                lang,
                request,
                "nothing_matched",
                shapes=["not_stored"],
                absent=absent,
                attacks=attacks,
            )
        pool = [
            t for t in self.literal_pool() if t.slot.kind in ("code", "phone", "amount", "ident")
        ]
        source = rng.choice(pool)
        fake = self._fake(source)
        words = self.words(source, lang)
        template = rng.choice(self.req(lang)["literal"][:1] + self.req(lang)["literal"][1:2])
        ref = re.sub(
            r"\s+",
            " ",
            template.format(
                det=words.get("det", ""), label=words["label"], v=fake.forms[0], mine=""
            ),
        ).strip()
        request = self.single(ref, lang)
        absent = {
            "slot": source.slot.name,
            "kind": source.slot.kind,
            "value": fake.text,
            "forms": fake.forms,
            "version": "only",
            "how": "literal",
            "stored": False,
        }
        return self.case(
            number,
            lang,
            request,
            "nothing_matched",
            keeps=[source],
            shapes=["not_stored"],
            absent=absent,
        )

    def _fake(self, source: Thing) -> Value:
        rng = self.rng
        texts = list(self.items.values())
        for _ in range(200):
            kind = source.slot.kind
            if kind == "code":
                digits = list(source.value.text)
                rng.shuffle(digits)
                value = Value("".join(digits), ["".join(digits)])
            elif kind == "phone":
                assert source.value.digits is not None
                d = source.value.digits[:-2] + f"{rng.randint(0, 99):02d}"
                style = self.scenario["phones"]
                forms = phone_forms(d, style)
                value = Value(forms[0], forms, digits=d)
            elif kind == "amount":
                assert source.value.number is not None
                number_ = source.value.number + 50 * rng.choice((-3, -2, -1, 1, 2, 3))
                forms = amount_forms(number_, self.scenario["currency"])
                value = Value(forms[0], forms, number=number_)
            else:
                text = re.sub(r"\d", lambda _: str(rng.randint(0, 9)), source.value.text)
                value = Value(text, ident_forms(text))
            stored = {t.value.text for t in self.things}
            if value.text not in stored and not any(contains(x, value.forms) for x in texts):
                return value
        raise RuntimeError("no value that is not stored")

    def _non_request(self, number: int, lang: str) -> dict[str, Any]:
        thing = self._pick(self.literal_pool())
        words = self.words(thing, lang)
        template = self.rng.choice(self.req(lang)["non_request"])
        request = template.format(label=words["label"], v=thing.value.forms[0])
        return self.case(
            number, lang, request, "not_a_request", keeps=[thing], shapes=["non_request"]
        )


# -- the set ---------------------------------------------------------------------------


def load_templates(path: str | Path | None = None) -> dict[str, Any]:
    data = json.loads(Path(path or TEMPLATES_PATH).read_text(encoding="utf-8"))
    if data.get("format") != TEMPLATES_FORMAT:
        raise ValueError(
            f"templates format is {data.get('format')!r}, expected {TEMPLATES_FORMAT!r}"
        )
    return data


def generate(templates: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The histories and cases documents the templates and their seed give."""
    t = dict(templates or load_templates())
    histories, cases = [], []
    index = 0
    for scenario in t["scenarios"]:
        for number in range(1, t["histories_per_scenario"] + 1):
            history, things, slots, context = HistoryBuilder(t, scenario, number).build()
            histories.append(history)
            cases += CaseBuilder(t, history, things, slots, context, index).build()
            index += 1
    return (
        {"format": HISTORIES_FORMAT, "seed": t["seed"], "histories": histories},
        {"format": CASES_FORMAT, "seed": t["seed"], "cases": cases},
    )


def _leaf(obj: Any) -> bool:
    scalar = (str, int, float, bool, type(None))
    if isinstance(obj, scalar):
        return True
    if isinstance(obj, list):
        return all(isinstance(x, scalar) for x in obj)
    if isinstance(obj, dict):
        return all(
            isinstance(v, scalar) or (isinstance(v, list) and _leaf(v)) for v in obj.values()
        )
    return False


def dumps(obj: Any, depth: int = 0) -> str:
    """JSON with one line per leaf object (a turn, a place), for readable diffs."""
    if _leaf(obj) or not obj:
        return json.dumps(obj, ensure_ascii=False)
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(obj, dict):
        body = ",\n".join(
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {dumps(v, depth + 1)}"
            for k, v in obj.items()
        )
        return "{\n" + body + "\n" + pad + "}"
    body = ",\n".join(f"{inner}{dumps(v, depth + 1)}" for v in obj)
    return "[\n" + body + "\n" + pad + "]"


def rendered() -> tuple[str, str]:
    """The bytes (as text) of histories.json and cases.json the templates give."""
    histories, cases = generate()
    return dumps(histories) + "\n", dumps(cases) + "\n"


# -- composition -----------------------------------------------------------------------


def composition(histories: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]) -> dict:
    """Counts the tests and the report use."""
    langs = Counter(c["language"] for c in cases)
    by_shape = {
        shape: {
            lang: sum(1 for c in cases if shape in c["shapes"] and c["language"] == lang)
            for lang in LANGUAGES
        }
        for shape in SHAPES
    }
    return {
        "cases": len(cases),
        "histories": len(histories),
        "turns": sum(len(h["turns"]) for h in histories),
        "facts": sum(len(h["facts"]) for h in histories),
        "min_turns": min(len(h["turns"]) for h in histories),
        "max_turns": max(len(h["turns"]) for h in histories),
        "min_speakers": min(len(h["speakers"]) for h in histories),
        "by_language": dict(sorted(langs.items())),
        "by_request_language": dict(sorted(Counter(c["request_language"] for c in cases).items())),
        "by_status": {s: sum(1 for c in cases if c["expected"]["status"] == s) for s in STATUSES},
        "by_shape": by_shape,
        "multi_part": sum(1 for c in cases if "multi_part" in c["shapes"]),
        "places": sum(len(c["expected"]["places"]) for c in cases),
        "max_places": max(len(c["expected"]["places"]) for c in cases),
    }


def composition_table(
    histories: Sequence[Mapping[str, Any]], cases: Sequence[Mapping[str, Any]]
) -> str:
    comp = composition(histories, cases)
    lines = [
        f"{comp['cases']} cases over {comp['histories']} histories "
        f"({comp['turns']} turns: {comp['min_turns']}-{comp['max_turns']} per history, "
        f">= {comp['min_speakers']} speakers each; {comp['facts']} facts); "
        f"{comp['places']} expected places (at most {comp['max_places']} in one case).",
        f"multi-part (2+ things named): {comp['multi_part']} "
        f"({comp['multi_part'] / comp['cases']:.0%})",
        "",
        f"{'shape':<18}" + "".join(f"{x:>7}" for x in (*LANGUAGES, "all")),
    ]
    for shape in SHAPES:
        row = comp["by_shape"][shape]
        lines.append(
            f"{shape:<18}" + "".join(f"{row[x]:>7}" for x in LANGUAGES) + f"{sum(row.values()):>7}"
        )
    lines.append(
        f"{'all cases':<18}"
        + "".join(f"{comp['by_language'].get(x, 0):>7}" for x in LANGUAGES)
        + f"{comp['cases']:>7}"
    )
    lines += ["", "expected status: " + ", ".join(f"{k} {v}" for k, v in comp["by_status"].items())]
    lines += [
        "",
        f"{'history':<14}{'lang':<6}{'timezone':<22}{'turns':>6}{'speakers':>9}{'facts':>6}{'values':>7}{'cases':>6}",
    ]
    for h in histories:
        n = sum(1 for c in cases if c["history"] == h["id"])
        lines.append(
            f"{h['id']:<14}{h['language']:<6}{h['timezone']:<22}{len(h['turns']):>6}"
            f"{len(h['speakers']):>9}{len(h['facts']):>6}{len(h['values']):>7}{n:>6}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify the committed files")
    parser.add_argument("--stats", action="store_true", help="print the composition only")
    args = parser.parse_args(argv)
    histories_text, cases_text = rendered()
    if args.check:
        ok = True
        for path, text in ((HISTORIES_PATH, histories_text), (CASES_PATH, cases_text)):
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                print(f"{path} differs from what the templates give", file=sys.stderr)
                ok = False
        return 0 if ok else 1
    if not args.stats:
        HISTORIES_PATH.write_text(histories_text, encoding="utf-8")
        CASES_PATH.write_text(cases_text, encoding="utf-8")
    histories = json.loads(histories_text)["histories"]
    cases = json.loads(cases_text)["cases"]
    print(composition_table(histories, cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
