"""The memory policy: what a deployment decides about memories beyond the write boundary.

Today it holds one thing, each fact predicate's **cardinality**: `one` current value
(`home_address`) or `many`, a set (`allergy`, `visited`), where a new member never
replaces the others. The defaults ship with the package
(`memory_ledger/policy/cardinality.toml`); a deployment overrides them in the
`[cardinality]` table of `<data_dir>/policy.toml`, which has the same shape:

    [cardinality]
    default = "one"            # predicates listed nowhere
    one = ["employer"]
    many = ["visited", "employer_history"]

The file is read once, when the store is opened, and validated whole: a file that is
not TOML, has an unknown table or key, a predicate that is not an identifier or one
listed as both `one` and `many` stops the open with a `ConfigurationError` that names
the file and the problem. On PostgreSQL the data directory still exists
(`Settings.data_dir`), and the same file is read.

The policy only decides what a *new* write does: the cardinality is recorded in the
write's event, so changing the policy never changes how earlier facts are projected,
and a rebuild after a change gives the same view as before it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import ValidationError, model_validator

from memory_ledger.errors import ConfigurationError
from memory_ledger.write_policy import Identifier, StrictModel

POLICY_FILE = "policy.toml"
DEFAULTS_RESOURCE = "cardinality.toml"  # beside this module, in the installed package

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


@dataclass(frozen=True)
class Policy:
    """The effective policy: the packaged defaults with the deployment's file on top."""

    default_cardinality: Cardinality = "one"
    declared: Mapping[str, Cardinality] = field(default_factory=dict)
    #: The files it was read from, for messages and `status`.
    sources: tuple[str, ...] = ()

    def cardinality(self, predicate: str) -> Cardinality:
        """The effective cardinality of a fact predicate."""
        return self.declared.get(predicate, self.default_cardinality)


def load_policy(data_dir: Path | None = None) -> Policy:
    """The packaged defaults, overridden by `<data_dir>/policy.toml` when it exists."""
    defaults = resources.files("memory_ledger.policy").joinpath(DEFAULTS_RESOURCE)
    tables = [(str(defaults), _parse(str(defaults), defaults.read_text(encoding="utf-8")))]
    if data_dir is not None:
        path = Path(data_dir) / POLICY_FILE
        if path.exists():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigurationError(f"cannot read the policy file {path}: {exc}") from None
            tables.append((str(path), _parse(str(path), text)))
    default: Cardinality = "one"
    declared: dict[str, Cardinality] = {}
    for _, table in tables:
        if table.default is not None:
            default = table.default
        declared.update(dict.fromkeys(table.one, "one"))
        declared.update(dict.fromkeys(table.many, "many"))
    return Policy(default, declared, tuple(source for source, _ in tables))


def _parse(source: str, text: str) -> CardinalityTable:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"the policy file {source} is not valid TOML: {exc}") from None
    try:
        return PolicyFile.model_validate(raw).cardinality
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            location = ".".join(str(part) for part in error["loc"]) or "file"
            problems.append(f"{location}: {error['msg'].removeprefix('Value error, ')}")
        raise ConfigurationError(
            f"the policy file {source} is invalid: " + "; ".join(problems)
        ) from None
