"""The memory policy: what a deployment decides about memories beyond the write boundary.

It holds three tables, each with packaged defaults that a deployment overrides in
`<data_dir>/policy.toml`:

- `[cardinality]`, each fact predicate's cardinality: `one` current value
  (`home_address`) or `many`, a set (`allergy`, `visited`), where a new member never
  replaces the others (memory_ledger/policy/cardinality.py). Merged over the defaults
  (`cardinality.toml`):

      [cardinality]
      default = "one"            # predicates listed nowhere
      one = ["employer"]
      many = ["visited", "employer_history"]

- `[retention]`, the versioned retention classes and the protect list, and `[decay]`,
  strength decay and the archived tier (memory_ledger/policy/retention.py). Each
  replaces the packaged table (`retention.toml`) whole when present: a retention policy
  is reviewed as one document, not as a patch over defaults nobody re-read.

The file is read when the store is opened, and validated whole: a file that is not
TOML, has an unknown table or key, a bad value or a contradiction stops the open with a
`ConfigurationError` naming the file, the line and the problem. `memory-ledger policy
install FILE` checks a new file the same way before it replaces the old one, so an
invalid file never takes effect and the policy in force stays. On PostgreSQL the data
directory still exists (`Settings.data_dir`), and the same file is read.

Cardinality only decides what a *new* write does (it is recorded in the write's event).
Retention applies to existing items from the moment a version is installed; each item
records the version it was written under, for audit.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import ValidationError, model_validator

from memory_ledger.errors import ConfigurationError, field_message
from memory_ledger.policy.retention import DecayTable, RetentionPolicy, RetentionTable
from memory_ledger.write_policy import Identifier, StrictModel

POLICY_FILE = "policy.toml"
DEFAULTS_RESOURCE = "cardinality.toml"  # beside this module, in the installed package
RETENTION_RESOURCE = "retention.toml"
MAX_POLICY_BYTES = 1024 * 1024

Cardinality = Literal["one", "many"]


class CardinalityTable(StrictModel):
    """A `[cardinality]` table: the packaged defaults, or a deployment's overrides."""

    default: Cardinality | None = None
    one: tuple[Identifier, ...] = ()
    many: tuple[Identifier, ...] = ()

    @model_validator(mode="after")
    def _each_predicate_once(self) -> CardinalityTable:
        both = sorted(set(self.one) & set(self.many))
        if both:
            raise ValueError(f"listed as both one and many: {', '.join(both)}")
        return self


class PolicyFile(StrictModel):
    """The whole file. Unknown tables are refused, so a misspelt one is not ignored."""

    cardinality: CardinalityTable = CardinalityTable()
    retention: RetentionTable | None = None
    decay: DecayTable | None = None


@dataclass(frozen=True)
class Policy:
    """The effective policy: the packaged defaults with the deployment's file on top."""

    default_cardinality: Cardinality = "one"
    declared: Mapping[str, Cardinality] = field(default_factory=dict)
    #: The files it was read from, for messages and `status`.
    sources: tuple[str, ...] = ()
    retention: RetentionPolicy | None = None

    def cardinality(self, predicate: str) -> Cardinality:
        """The effective cardinality of a fact predicate."""
        return self.declared.get(predicate, self.default_cardinality)


def load_policy(data_dir: Path | None = None) -> Policy:
    """The packaged defaults, overridden by `<data_dir>/policy.toml` when it exists."""
    path = None if data_dir is None else Path(data_dir) / POLICY_FILE
    text = None
    if path is not None and path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"cannot read the policy file {path}: {exc}") from None
    return policy_from_text(text, str(path) if path else None)


def policy_from_text(text: str | None, source: str | None = "policy.toml") -> Policy:
    """The effective policy if `text` were the deployment's policy file (None: no file).
    Raises ConfigurationError naming the line and reason; nothing is changed."""
    package = resources.files("memory_ledger.policy")
    files = [
        (str(package.joinpath(name)), package.joinpath(name).read_text(encoding="utf-8"))
        for name in (DEFAULTS_RESOURCE, RETENTION_RESOURCE)
    ]
    if text is not None:
        files.append((source or POLICY_FILE, text))
    default: Cardinality = "one"
    declared: dict[str, Cardinality] = {}
    retention: RetentionTable | None = None
    decay: DecayTable | None = None
    for name, body in files:
        parsed = parse_policy_file(name, body)
        table = parsed.cardinality
        if table.default is not None:
            default = table.default
        declared.update(dict.fromkeys(table.one, "one"))
        declared.update(dict.fromkeys(table.many, "many"))
        retention = parsed.retention or retention
        decay = parsed.decay or decay
    assert retention is not None and decay is not None  # the packaged file has both
    sources = tuple(name for name, _ in files)
    return Policy(default, declared, sources, RetentionPolicy(retention, decay))


def parse_policy_file(source: str, text: str) -> PolicyFile:
    """One file, validated whole: every problem with its line, or the parsed file."""
    if len(text.encode("utf-8")) > MAX_POLICY_BYTES:
        raise ConfigurationError(f"the policy file {source} is over {MAX_POLICY_BYTES} bytes")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"the policy file {source} is not valid TOML: {exc}") from None
    try:
        return PolicyFile.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False, include_input=False):
            loc = [part for part in error["loc"] if not str(part).startswith("function-")]
            location = ".".join(str(part) for part in loc) or "file"
            line = line_of(text, loc)
            where = f" (line {line})" if line else ""
            problems.append(f"{location}: {field_message(error)}{where}")
        raise ConfigurationError(
            f"the policy file {source} is invalid: " + "; ".join(problems)
        ) from None


def line_of(text: str, loc: Sequence[int | str]) -> int | None:
    """The line a validation error points at: the key's line inside its table (for an
    array of tables, the n-th `[[...]]`), else the table's header. TOML parsers keep no
    positions, so this reads the text; it only has to find what the error names."""
    lines = text.splitlines()
    path: list[str] = []
    index: int | None = None
    rest = list(loc)
    while rest and isinstance(rest[0], str):
        name = str(rest.pop(0))
        if rest and isinstance(rest[0], int):
            index = int(rest.pop(0))
            path.append(name)
            break
        path.append(name)
    header = ".".join(path)
    start = None
    seen = -1
    for number, raw in enumerate(lines):
        line = raw.strip()
        if index is not None and line == f"[[{header}]]":
            seen += 1
            if seen == index:
                start = number
                break
        elif index is None and line == f"[{header}]":
            start = number
            break
    key = str(rest[0]) if rest and isinstance(rest[0], str) else None
    if start is None and len(path) > 1:  # a key (or a list's element) of the parent table
        key, header = path[-1], ".".join(path[:-1])
        start = next((n for n, r in enumerate(lines) if r.strip() == f"[{header}]"), None)
    if start is None:
        return None
    if key is not None:
        for number in range(start + 1, len(lines)):
            line = lines[number].strip()
            if line.startswith("["):
                break
            if re.match(rf"{re.escape(key)}\s*=", line):
                return number + 1
    return start + 1
