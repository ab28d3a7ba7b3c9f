"""What the consolidation job reads in a turn: a pluggable extractor.

An extractor is anything with a `name` and `extract(turn) -> candidates`. The default
(`DefaultExtractor`) returns the structured candidates the writing agent attached to the
turn (`MemoryWrite.candidates`) and what the phrase patterns of `patterns.toml` find in
the text (English and Chinese). A deployment plugs in another one, a model-based one
say, by naming a factory in `MEMORY_LEDGER_EXTRACTOR` as `module:factory`, without it
becoming a dependency of this package: the job validates every candidate an extractor
returns exactly as it validates candidates at the write boundary (`TurnCandidate`), and
applies the same gate, promotion rule and third-party rule to all of them.

Extractors must be deterministic enough to be re-run: the job reads each turn once, but
a turn whose extraction raised is read again on the next run.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from memory_ledger.config import EXTRACTOR_ENV, environment
from memory_ledger.errors import ConfigurationError
from memory_ledger.identifiers import is_identifier
from memory_ledger.write_policy import USER_SUBJECT, TurnCandidate

PATTERNS_RESOURCE = "patterns.toml"  # beside this module, in the installed package
#: What one pattern may find in one turn: a turn is at most 64 KiB of text.
MAX_MATCHES_PER_PATTERN = 16
_PATTERN_KEYS = {"name", "regex", "flags", "kind", "predicate", "category", "values"}
_FLAGS = {"i": re.IGNORECASE}
_TRAILING = " \t\"'“”‘’()（）「」"


@dataclass(frozen=True)
class Turn:
    """One transcript turn as an extractor sees it: its text, the candidates the writing
    agent attached, and who spoke (the turn's subject, `user` for the user)."""

    item_id: str
    version: int
    speaker: str
    text: str
    candidates: tuple[TurnCandidate, ...] = ()
    session_id: str | None = None
    turn_id: str | None = None


@runtime_checkable
class Extractor(Protocol):
    """Turns a turn into candidate facts and preferences. Nothing it returns is trusted:
    each item is validated as a `TurnCandidate` (a mapping of the same fields will do)."""

    name: str

    def extract(self, turn: Turn) -> Sequence[TurnCandidate | Mapping[str, Any]]: ...


@dataclass(frozen=True)
class PhrasePattern:
    """One entry of patterns.toml, compiled."""

    name: str
    regex: re.Pattern[str]
    kind: str
    predicate: str
    category: str
    values: Mapping[str, str] = field(default_factory=dict)


class PhrasePatterns:
    """The phrase patterns, read from a TOML file (the packaged one by default) and
    validated whole: a bad file stops the job with a ConfigurationError naming it."""

    def __init__(self, patterns: Sequence[PhrasePattern], relations: Mapping[str, str]) -> None:
        self.patterns = tuple(patterns)
        self.relations = dict(relations)

    @classmethod
    def load(cls, path: Path | None = None) -> PhrasePatterns:
        if path is None:
            source = f"jobs/consolidation/{PATTERNS_RESOURCE}"
            raw = resources.files(__package__).joinpath(PATTERNS_RESOURCE).read_text("utf-8")
        else:
            source, raw = str(path), Path(path).read_text(encoding="utf-8")
        try:
            data = tomllib.loads(raw)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"{source}: not valid TOML: {exc}") from None
        unknown = set(data) - {"pattern", "relations"}
        if unknown:
            raise ConfigurationError(f"{source}: unknown table(s) {', '.join(sorted(unknown))}")
        relations = data.get("relations", {})
        bad = [w for w, ident in relations.items() if not is_identifier(ident)]
        if bad:
            raise ConfigurationError(f"{source}: [relations] needs identifiers as values")
        entries = data.get("pattern", [])
        patterns = [_compile(source, n, entry) for n, entry in enumerate(entries, 1)]
        names = [p.name for p in patterns]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"{source}: pattern names must be unique")
        return cls(patterns, relations)

    def find(self, turn: Turn) -> list[TurnCandidate]:
        """What the patterns find in a user's turn (other speakers' turns: nothing, as
        "I live in ..." said by an assistant is not about the user)."""
        if turn.speaker != USER_SUBJECT:
            return []
        found: list[TurnCandidate] = []
        for pattern in self.patterns:
            for n, match in enumerate(pattern.regex.finditer(turn.text)):
                if n >= MAX_MATCHES_PER_PATTERN:
                    break
                candidate = self._candidate(pattern, match)
                if candidate is not None:
                    found.append(candidate)
        return found

    def _candidate(self, pattern: PhrasePattern, match: re.Match[str]) -> TurnCandidate | None:
        value = match.group("value").strip().strip(_TRAILING)
        value = pattern.values.get(value, pattern.values.get(value.casefold(), value))
        groups = match.groupdict()
        subject, about = USER_SUBJECT, "user"
        if groups.get("subject"):
            word = groups["subject"]
            subject = self.relations.get(word, self.relations.get(word.casefold(), "third_party"))
            about = "third_party"
        try:
            return TurnCandidate(
                kind=pattern.kind,  # type: ignore[arg-type]
                subject=subject,
                predicate=pattern.predicate,
                value=value,
                category=pattern.category,
                about=about,  # type: ignore[arg-type]
            )
        except ValueError:  # an empty or oversized value: not a memory
            return None


def _compile(source: str, n: int, entry: Any) -> PhrasePattern:
    where = f"{source}: pattern {n}"
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where}: a [[pattern]] table")
    unknown = set(entry) - _PATTERN_KEYS
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    for key in ("name", "predicate", "category"):
        if not is_identifier(entry.get(key)):
            raise ConfigurationError(f"{where}: {key} must be an identifier")
    if entry.get("kind") not in ("fact", "preference"):
        raise ConfigurationError(f"{where}: kind must be fact or preference")
    flags = entry.get("flags", "")
    if not isinstance(flags, str) or set(flags) - set(_FLAGS):
        raise ConfigurationError(f"{where}: flags may only be {''.join(_FLAGS)}")
    values = entry.get("values", {})
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        raise ConfigurationError(f"{where}: values maps matched text to text")
    try:
        regex = re.compile(entry.get("regex", ""), sum(_FLAGS[f] for f in flags))
    except (re.error, TypeError) as exc:
        raise ConfigurationError(f"{where}: regex does not compile: {exc}") from None
    if "value" not in regex.groupindex:
        raise ConfigurationError(f"{where}: regex needs a named group `value`")
    return PhrasePattern(
        entry["name"], regex, entry["kind"], entry["predicate"], entry["category"], values
    )


class DefaultExtractor:
    """The structured candidates attached to the turn, then the phrase patterns' finds."""

    name = "default"

    def __init__(self, patterns: PhrasePatterns | None = None) -> None:
        self.patterns = patterns or PhrasePatterns.load()

    def extract(self, turn: Turn) -> list[TurnCandidate]:
        return [*turn.candidates, *self.patterns.find(turn)]


def load_extractor(spec: str | None = None) -> Extractor:
    """`spec` (`Settings.extractor`, from MEMORY_LEDGER_EXTRACTOR; None: as the
    environment says): empty or `default` for `DefaultExtractor`, else
    `module:factory`, a callable returning an Extractor."""
    spec = (environment().get(EXTRACTOR_ENV, "") if spec is None else spec).strip()
    if spec in ("", "default"):
        return DefaultExtractor()
    module_name, colon, attribute = spec.partition(":")
    if not (colon and module_name and attribute):
        raise ConfigurationError(
            f"{EXTRACTOR_ENV}: expected `module:factory` (or `default`), got {spec!r}"
        )
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"{EXTRACTOR_ENV}: cannot load {spec!r}: {exc}") from None
    if not callable(factory):
        raise ConfigurationError(f"{EXTRACTOR_ENV}: {spec!r} is not callable")
    try:
        extractor = factory()
    except Exception as exc:
        raise ConfigurationError(
            f"{EXTRACTOR_ENV}: {spec!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    name = getattr(extractor, "name", None)
    if not isinstance(extractor, Extractor) or not isinstance(name, str) or not name:
        raise ConfigurationError(
            f"{EXTRACTOR_ENV}: {spec!r} did not return an extractor "
            "(a non-empty `name` and an `extract(turn)` method)"
        )
    return extractor
