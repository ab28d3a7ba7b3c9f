"""The default reader's vocabulary (lexicon.toml), loaded once and compiled.

The words are data: a deployment that needs another phrasing changes the file, not the
code. How a phrase matches is memory_ledger/phrases.py.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from memory_ledger.phrases import Phrases

LEXICON_FILE = "lexicon.toml"


@dataclass(frozen=True)
class SpanKind:
    """A kind of text a redaction removes ("the exact time"): its names and patterns."""

    name: str
    words: Phrases
    patterns: tuple[re.Pattern[str], ...]

    def spans_in(self, text: str) -> list[str]:
        """The distinct spans of this kind in `text`, as written there, longest first."""
        found: list[tuple[int, int]] = []
        for pattern in self.patterns:  # a group named `span` is the part to remove
            group = "span" if "span" in pattern.groupindex else 0
            found += [
                (m.start(group), m.end(group))
                for m in pattern.finditer(text)
                if m.end(group) > m.start(group)
            ]
        kept: list[tuple[int, int]] = []  # a span inside a longer one is part of it
        for start, end in sorted(found, key=lambda s: (s[0] - s[1], s[0])):
            if all(end <= s or start >= e for s, e in kept):
                kept.append((start, end))
        spans = [text[s:e].strip(" ,.;") for s, e in sorted(kept)]
        return list(dict.fromkeys(s for s in spans if s))


@dataclass(frozen=True)
class Patterns:
    """The shapes of words the reader and the planner look for (lexicon.toml)."""

    possessive_en: re.Pattern[str]
    names_zh: tuple[re.Pattern[str], ...]
    not_names: frozenset[str]
    not_names_zh: frozenset[str]
    titles: frozenset[str]
    generic_predicate_parts: frozenset[str]
    plural: re.Pattern[str]
    before: tuple[re.Pattern[str], ...]
    after: tuple[re.Pattern[str], ...]
    new_value: tuple[re.Pattern[str], ...]
    new_value_tail: re.Pattern[str]
    topic: re.Pattern[str]
    kept_clause: re.Pattern[str]

    @classmethod
    def load(cls, raw: dict[str, Any]) -> Patterns:
        return cls(
            possessive_en=re.compile(raw["possessive_en"]),
            names_zh=tuple(re.compile(p) for p in raw["names_zh"]),
            not_names=frozenset(raw["not_names"]),
            not_names_zh=frozenset(raw["not_names_zh"]),
            titles=frozenset(raw["titles"]),
            generic_predicate_parts=frozenset(raw["generic_predicate_parts"]),
            plural=re.compile(raw["plural"]),
            before=tuple(re.compile(p) for p in raw["before"]),
            after=tuple(re.compile(p) for p in raw["after"]),
            new_value=tuple(re.compile(p, re.IGNORECASE) for p in raw["new_value"]),
            new_value_tail=re.compile(raw["new_value_tail"], re.IGNORECASE),
            topic=re.compile(raw["topic"]),
            kept_clause=re.compile(raw["kept_clause"]),
        )


@dataclass(frozen=True)
class PartWords:
    """How a request of several parts is cut into them ([parts] in lexicon.toml)."""

    separators: Phrases
    trim: Phrases
    articles: Phrases
    owners: Phrases
    not_a_part: Phrases

    @classmethod
    def load(cls, raw: dict[str, Any]) -> PartWords:
        return cls(**{name: Phrases({name: list(raw[name])}) for name in raw})


@dataclass(frozen=True)
class Label:
    """A kind of value named in words ("gate code", "押金"): its words and shapes."""

    name: str
    words: Phrases
    shapes: tuple[str, ...]
    terms: tuple[str, ...]


@dataclass(frozen=True)
class InformationWords:
    """How the pieces of information a request names are read ([information])."""

    separators: re.Pattern[str]
    keep: re.Pattern[str]
    keep_only: tuple[re.Pattern[str], ...]
    #: "the phrase copper finch", "短语青石小桥": a literal named without quotes.
    named_literal: tuple[re.Pattern[str], ...]
    filler: Phrases
    sentence_words: frozenset[str]
    not_names: frozenset[str]
    not_prefixes: frozenset[str]
    #: Short labels that name one place ("room 9", "bay 6"): a literal, as said.
    short_labels: tuple[re.Pattern[str], ...]
    generic: frozenset[str]
    #: Chinese function words trimmed from either end of a label ("我的", "都").
    trim_zh: Phrases
    restate: Phrases
    #: Every label word, by label name (for finding them in text).
    labels: Phrases
    kinds: dict[str, Label]
    #: Words that name one thing in English and in Chinese ("server room", "机房"), by
    #: concept ([information.concepts]): a label the memory does not say as the
    #: request does is looked for in the words of the same concepts.
    concepts: Phrases
    concept_words: dict[str, tuple[str, ...]]
    #: The concepts that only say what kind of value a thing is ("door_code", "fee").
    concept_kinds: frozenset[str]
    #: Where a month's name is said as a date ("in May", "May 3"): a regular expression
    #: with NAME for the name; such a place is not one of the name ("ask for May").
    date_use: str = ""

    @classmethod
    def load(cls, raw: dict[str, Any]) -> InformationWords:
        kinds = {
            name: Label(
                name,
                Phrases({name: list(entry["words"])}),
                tuple(entry["shapes"]),
                tuple(entry["words"]),
            )
            for name, entry in raw["labels"].items()
        }
        return cls(
            separators=re.compile(raw["separators"]),
            keep=re.compile(raw["keep"]),
            keep_only=tuple(re.compile(p) for p in raw["keep_only"]),
            named_literal=tuple(re.compile(p) for p in raw["named_literal"]),
            filler=Phrases({"filler": list(raw["filler"])}),
            sentence_words=frozenset(raw["sentence_words"]),
            not_names=frozenset(raw["not_names"]),
            not_prefixes=frozenset(raw["not_prefixes"]),
            short_labels=tuple(re.compile(p) for p in raw["short_labels"]),
            generic=frozenset(raw["generic"]),
            trim_zh=Phrases({"trim": list(raw["trim_zh"])}),
            restate=Phrases({"restate": list(raw["restate"])}),
            labels=Phrases({k: list(v["words"]) for k, v in raw["labels"].items()}),
            kinds=kinds,
            concepts=Phrases({k: list(v) for k, v in raw["concepts"].items()}),
            concept_words={k: tuple(v) for k, v in raw["concepts"].items()},
            concept_kinds=frozenset(raw["concept_kinds"]),
            date_use=raw["date_use"],
        )


@dataclass(frozen=True)
class Lexicon:
    intents: Phrases
    conclusion: Phrases
    not_a_request: Phrases
    which: Phrases
    everything: Phrases
    #: The request says the thing moved or changed ("old" may be the one on file).
    moved: Phrases
    sessions: Phrases
    vague: Phrases
    said: Phrases
    partial: Phrases
    relations: Phrases
    relation_words: dict[str, tuple[str, ...]]
    #: The user's own predicates that name a relation's person (sister: sibling, ...).
    relation_predicates: dict[str, tuple[str, ...]]
    all_relation_predicates: frozenset[str]
    #: Words that ask for every match (`all`) or for one thing (`one`).
    number: Phrases
    #: Concepts: a plural form's hits are named `<concept>#many` ("allergies").
    concepts: Phrases
    concept_predicates: dict[str, tuple[str, ...]]
    categories: Phrases
    kinds: Phrases
    spans: dict[str, SpanKind]
    patterns: Patterns
    questions: dict[str, str]
    messages: dict[str, str]
    stopwords: frozenset[str]
    #: Chinese function words and phrases, masked as phrases (no spaces to split on).
    zh_stopwords: Phrases
    #: Every phrase that selects something, for telling selector words from content.
    selectors: Phrases
    #: What joins the parts of a request of several ("my address and my phone number").
    parts: PartWords
    #: How the pieces of information a request names are read (pieces.py).
    information: InformationWords


def _group(raw: dict[str, Any], name: str) -> Phrases:
    return Phrases({k: list(v) for k, v in raw[name].items()})


def plural(word: str) -> str:
    """The regular English plural of the last word of a phrase."""
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _with_plurals(entries: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each concept's singular phrases, and its plural ones as `<concept>#many`: the
    listed plurals and the regular plural of every ASCII phrase, so "conditions" is
    read as "condition", and known to ask for all of them."""
    out: dict[str, list[str]] = {}
    for name, words in entries.items():
        made = {plural(w) for w in words if w.isascii() and w[-1:].isalpha()}
        many = [w for w in words if w in made] + sorted(made - set(words))
        out[name] = [w for w in words if w not in made]
        out[f"{name}#many"] = many
    return out


@functools.cache
def lexicon() -> Lexicon:
    text = resources.files(__package__).joinpath(LEXICON_FILE).read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    concepts = raw["concepts"]
    spans = {
        name: SpanKind(
            name,
            Phrases({name: list(entry["words"])}),
            # matched on the item's own text, as written: case is ignored, not folded
            tuple(re.compile(p.removeprefix("re:"), re.IGNORECASE) for p in entry["patterns"]),
        )
        for name, entry in raw["spans"].items()
    }
    selector_lists: dict[str, list[str]] = {}
    for group in ("which", "sessions", "vague", "relations", "categories", "kinds"):
        for key, phrases in raw[group].items():
            selector_lists[f"{group}.{key}"] = list(phrases)
    for key, entry in concepts.items():
        selector_lists[f"concepts.{key}"] = list(entry["words"])
    for key, entry in raw["spans"].items():
        selector_lists[f"spans.{key}"] = list(entry["words"])
    for key in ("conclusion", "everything", "said", "not_a_request"):
        selector_lists[key] = list(raw[key]["words"])
    selector_lists["partial"] = list(raw["partial"]["keep"])
    for key, phrases in raw["intents"].items():
        selector_lists[f"intents.{key}"] = list(phrases)
    return Lexicon(
        intents=_group(raw, "intents"),
        conclusion=Phrases({"conclusion": raw["conclusion"]["words"]}),
        not_a_request=Phrases({"not_a_request": raw["not_a_request"]["words"]}),
        which=_group(raw, "which"),
        everything=Phrases({"everything": raw["everything"]["words"]}),
        moved=Phrases({"moved": raw["moved"]["words"]}),
        sessions=_group(raw, "sessions"),
        vague=_group(raw, "vague"),
        said=Phrases({"said": raw["said"]["words"]}),
        partial=Phrases({"partial": raw["partial"]["keep"]}),
        relations=Phrases(
            {k: [*v, *(plural(w) for w in v if w.isascii())] for k, v in raw["relations"].items()}
        ),
        relation_words={k: tuple(v) for k, v in raw["relations"].items()},
        relation_predicates={k: tuple(v) for k, v in raw["relation_predicates"].items()},
        all_relation_predicates=frozenset(
            p for v in raw["relation_predicates"].values() for p in v
        ),
        number=_group(raw, "number"),
        concepts=Phrases(_with_plurals({k: list(v["words"]) for k, v in concepts.items()})),
        concept_predicates={k: tuple(v["predicates"]) for k, v in concepts.items()},
        categories=_group(raw, "categories"),
        kinds=_group(raw, "kinds"),
        spans=spans,
        patterns=Patterns.load(raw["patterns"]),
        questions=dict(raw["questions"]),
        messages=dict(raw["messages"]),
        stopwords=frozenset(raw["stopwords"]["en"]) | frozenset(raw["stopwords"]["zh"]),
        zh_stopwords=Phrases({"zh": raw["stopwords"]["zh"]}),
        selectors=Phrases(selector_lists),
        parts=PartWords.load(raw["parts"]),
        information=InformationWords.load(raw["information"]),
    )
