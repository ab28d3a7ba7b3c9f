"""The write boundary: what a memory write must carry before anything is stored.

Validation happens here, before a write is sealed, appended, projected or indexed, so a
refused write leaves no trace anywhere. Fields stored in clear (subject, predicate,
category, scope, provenance ids) are restricted to identifier syntax: they are what
erasure requests enumerate without decrypting, so free text must not hide in them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    model_validator,
)

from memory_ledger.errors import InvalidWrite, field_message
from memory_ledger.identifiers import IDENTIFIER_PATTERN, Identifier, ItemId
from memory_ledger.times import AwareDatetime, canonical_time

__all__ = [  # the identifier and time types are defined once, and re-exported here
    "AwareDatetime",
    "Identifier",
    "canonical_time",
]

MAX_VALUE_BYTES = 16 * 1024
MAX_TURN_BYTES = 64 * 1024
#: Inputs a derived write may cite: enough for any consolidation, small enough to check.
MAX_DERIVED_FROM = 256
#: Structured candidates one turn may carry (see `TurnCandidate`).
MAX_CANDIDATES = 16

Kind = Literal["fact", "preference", "turn"]
#: The kinds an agent keeps for its own work (memory_ledger/agent_state): recorded through
#: their own handlers, never through `MemoryWrite`, and never recalled as memories.
AgentKind = Literal["run", "run_operation", "run_scratch", "run_checkpoint", "file"]
#: Every kind an item can have, as the retention policy selects them.
AnyKind = Literal[
    "fact", "preference", "turn", "run", "run_operation", "run_scratch", "run_checkpoint", "file"
]  # fmt: skip
Origin = Literal["explicit", "observed", "inferred"]
Sensitivity = Literal["public", "internal", "personal", "restricted"]
RetentionBasis = Literal["session", "consent", "contract", "indefinite"]
RedactionState = Literal["none", "applied", "required"]

_SCOPE = re.compile(rf"global|(?:workspace|task|session):{IDENTIFIER_PATTERN}")


def _check_scope(value: Any) -> str:
    if not (isinstance(value, str) and _SCOPE.fullmatch(value)):
        raise ValueError("a scope is 'global' or workspace:|task:|session: and an identifier")
    return value


Scope = Annotated[str, BeforeValidator(_check_scope)]
#: A share (confidence, strength): a real number in [0, 1]; not a bool, not text.
Fraction = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]


def at_most(limit: int, what: str) -> BeforeValidator:
    """Refuse a list longer than `limit` before its members are validated: a write
    citing 100,000 malformed inputs costs one length check and one problem, not 100,000
    validations and 300,000 problems. (`Field(max_length=...)` alone is checked after
    the members, and it is what the JSON schema shows.)"""

    def check(value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) > limit:
            raise ValueError(f"at most {limit} {what}, not {len(value)}")
        return value

    return BeforeValidator(check)


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Provenance(StrictModel):
    """Where a memory came from, so a later request can find everything it produced."""

    writer: Identifier
    written_at: AwareDatetime
    turn_id: Identifier | None = None
    session_id: Identifier | None = None
    tool_call_id: Identifier | None = None
    consent_ref: Identifier | None = None
    #: A fact promoted from an agent's run (memory_ledger/agent_state/runs.py): the run's
    #: item id and the step it came from.
    run_id: ItemId | None = None
    step_id: Identifier | None = None

    @model_validator(mode="after")
    def _has_a_source(self) -> Provenance:
        if not (self.turn_id or self.session_id or self.tool_call_id or self.run_id):
            raise ValueError(
                "provenance needs a source: at least one of turn_id, session_id, "
                "tool_call_id, run_id"
            )
        if self.step_id and not self.run_id:
            raise ValueError("provenance names a step_id without its run_id")
        return self

    def event_data(self) -> dict[str, Any]:
        """As stored in events: identifiers and a canonical timestamp, nothing else."""
        data = {
            "writer": self.writer,
            "written_at": canonical_time(self.written_at),
            "turn_id": self.turn_id,
            "session_id": self.session_id,
            "tool_call_id": self.tool_call_id,
            "consent_ref": self.consent_ref,
        }
        if self.run_id is not None:  # absent otherwise: earlier events keep their shape
            data["run_id"] = str(self.run_id)
            data["step_id"] = self.step_id
        return data


class Retention(StrictModel):
    basis: RetentionBasis = "indefinite"
    expires_at: AwareDatetime | None = None

    def event_data(self) -> dict[str, Any]:
        expires = canonical_time(self.expires_at) if self.expires_at else None
        return {"basis": self.basis, "expires_at": expires}


class Redaction(StrictModel):
    state: RedactionState = "none"
    fields: tuple[Identifier, ...] = ()

    def event_data(self) -> dict[str, Any]:
        return {"state": self.state, "fields": list(self.fields)}


class DerivedRef(StrictModel):
    """An input of a derived item, pinned to the version that was read."""

    item_id: ItemId
    version: Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]

    def event_data(self) -> dict[str, Any]:
        return {"item_id": str(self.item_id), "version": self.version}


#: The inputs a derived write cites, bounded before they are read.
DerivedFrom = Annotated[
    tuple[DerivedRef, ...],
    Field(max_length=MAX_DERIVED_FROM),
    at_most(MAX_DERIVED_FROM, "derived_from inputs"),
]
#: The members of a many-valued predicate a fact replaces (as many as it may cite).
Replaces = Annotated[
    tuple[ItemId, ...], Field(max_length=MAX_DERIVED_FROM), at_most(MAX_DERIVED_FROM, "ids")
]


#: The subject of what a user says about themselves.
USER_SUBJECT = "user"


class TurnCandidate(StrictModel):
    """A fact or preference the writing agent read in a turn, attached to the turn for
    the consolidation job (jobs/consolidation). It is personal content: sealed with the
    turn's text under the turn's key (`encode_candidates`), never in a clear column.

    `about` says whose it is: `user` (subject `user`) or `third_party` (any other
    subject: "my sister lives in Oslo" is about the sister, not the user). The two are
    checked against each other, so a third party's fact cannot pass as the user's."""

    kind: Literal["fact", "preference"]
    subject: Identifier = "user"
    predicate: Identifier
    value: StrictStr
    category: Identifier = "general"
    about: Literal["user", "third_party"] = "user"

    @model_validator(mode="after")
    def _checked(self) -> TurnCandidate:
        _check_size("value", self.value, MAX_VALUE_BYTES)
        if any(unicodedata.category(c) == "Cc" for c in self.value):
            # One line of text: the sealed encoding keeps values raw, one per line.
            raise ValueError("value must not contain control characters (tab, newline, ...)")
        if (self.about == "user") != (self.subject == USER_SUBJECT):
            raise ValueError(
                f"about 'user' goes with subject '{USER_SUBJECT}', and about 'third_party' "
                "with any other subject"
            )
        return self


_CANDIDATES_FORMAT = "candidates/1"
#: The candidates a turn carries, bounded before they are read.
Candidates = Annotated[
    tuple[TurnCandidate, ...],
    Field(max_length=MAX_CANDIDATES),
    at_most(MAX_CANDIDATES, "candidates"),
]
_CANDIDATE_FIELDS = ("kind", "subject", "predicate", "category", "about")


def encode_candidates(candidates: Sequence[TurnCandidate]) -> str:
    """The text sealed beside a turn's content: a format line, then one line per
    candidate, its identifiers tab-separated and its value last and raw. Raw, so that a
    redaction or a forget's mention removal, which rewrites every sealed field of the
    turn by matching spans, finds a value exactly as it finds it in the content (JSON
    would escape quotes and backslashes, and a span with one would be missed)."""
    lines = [_CANDIDATES_FORMAT]
    for c in candidates:
        lines.append("\t".join([*(getattr(c, name) for name in _CANDIDATE_FIELDS), c.value]))
    return "\n".join(lines)


def decode_candidates(text: str | None) -> tuple[list[TurnCandidate], int]:
    """The candidates sealed with a turn, and how many lines no longer parse (a
    redaction may have rewritten them): those are dropped, never guessed at."""
    if not text:
        return [], 0
    first, _, rest = text.partition("\n")
    if first != _CANDIDATES_FORMAT:
        return [], 1
    out: list[TurnCandidate] = []
    bad = 0
    for line in rest.split("\n") if rest else ():
        parts = line.split("\t", len(_CANDIDATE_FIELDS))
        try:
            out.append(
                TurnCandidate.model_validate(
                    dict(zip((*_CANDIDATE_FIELDS, "value"), parts, strict=True))
                )
            )
        except (ValueError, ValidationError):
            bad += 1
    return out, bad


class MemoryWrite(StrictModel):
    """One memory as an agent or service proposes it."""

    kind: Kind
    subject: Identifier
    predicate: Identifier | None = None
    value: StrictStr | None = None
    content: StrictStr | None = None
    category: Identifier = "general"
    origin: Origin
    confidence: Fraction = 1.0
    provenance: Provenance
    sensitivity: Sensitivity
    retention: Retention = Retention()
    redaction: Redaction = Redaction()
    derived_from: DerivedFrom = ()
    scope: Scope = "global"
    strength: Fraction | None = None
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None
    #: Facts only: join the predicate's set (`add`) or replace (`replace`); None takes
    #: the predicate's cardinality (one: replace, many: add). See policy/cardinality.py.
    mode: Literal["add", "replace"] | None = None
    #: Facts only: the members of a many-valued predicate this value replaces.
    replaces: Replaces = ()
    #: Turns only: facts and preferences the writing agent read in the turn, for the
    #: consolidation job; sealed with the content (see `TurnCandidate`).
    candidates: Candidates = ()

    @model_validator(mode="after")
    def _kind_rules(self) -> MemoryWrite:
        if self.kind == "turn":
            if self.content is None or self.value is not None:
                raise ValueError("a turn carries its text in 'content' and has no 'value'")
            if not (self.provenance.session_id and self.provenance.turn_id):
                raise ValueError("a turn needs provenance.session_id and provenance.turn_id")
            _check_size("content", self.content, MAX_TURN_BYTES)
        else:
            if self.value is None or self.content is not None:
                raise ValueError(f"a {self.kind} carries its text in 'value' and has no 'content'")
            if self.predicate is None:
                raise ValueError(f"a {self.kind} needs a predicate (e.g. home_address, seat)")
            _check_size("value", self.value, MAX_VALUE_BYTES)
        if self.kind != "preference" and (self.scope != "global" or self.strength is not None):
            raise ValueError("scope and strength apply to preferences only")
        valid_from = self.valid_from or self.provenance.written_at
        if self.valid_to is not None and self.valid_to <= valid_from:
            raise ValueError("valid_to must be after valid_from (which defaults to written_at)")
        cited = [ref.item_id for ref in self.derived_from]
        if len(set(cited)) != len(cited):
            raise ValueError("derived_from names an input more than once")
        expires = self.retention.expires_at
        if expires is not None and expires <= self.provenance.written_at:
            raise ValueError("retention.expires_at must be after provenance.written_at")
        if self.kind != "fact" and (self.mode is not None or self.replaces):
            raise ValueError("mode and replaces apply to facts only")
        if self.mode == "add" and self.replaces:
            raise ValueError("mode 'add' replaces nothing: drop replaces, or use mode 'replace'")
        if self.candidates and self.kind != "turn":
            raise ValueError("candidates apply to turns only")
        return self

    @property
    def text(self) -> str:
        """The personal content, whichever field carries it for this kind."""
        return self.content if self.kind == "turn" else self.value  # type: ignore[return-value]

    @property
    def sealed_fields(self) -> dict[str, str]:
        """Every personal field of the write, as sealed under the item's key."""
        if self.kind != "turn":
            return {"value": self.value}  # type: ignore[dict-item]
        fields = {"content": self.content}
        if self.candidates:
            fields["candidates"] = encode_candidates(self.candidates)
        return fields  # type: ignore[return-value]

    @property
    def effective_predicate(self) -> str:
        return self.predicate or "turn"

    @property
    def effective_strength(self) -> float:
        if self.strength is not None:
            return self.strength
        return 1.0 if self.origin == "explicit" else 0.3


class MemoryUpdate(StrictModel):
    """A new version of an existing item's value: the old version stays as history."""

    value: StrictStr
    provenance: Provenance
    confidence: Fraction | None = None
    valid_from: AwareDatetime | None = None

    @model_validator(mode="after")
    def _size(self) -> MemoryUpdate:
        _check_size("value", self.value, MAX_VALUE_BYTES)
        return self


def _check_size(name: str, text: str, limit: int) -> None:
    if not text.strip():
        raise ValueError(f"{name} must not be empty")
    if "\x00" in text:  # no text column of PostgreSQL can hold it, nor should a memory
        raise ValueError(f"{name} must not contain NUL (U+0000)")
    size = len(text.encode("utf-8"))
    if size > limit:
        raise ValueError(f"{name} is {size} bytes; the limit is {limit} bytes")


def invalid_input(headline: str, exc: ValidationError, what: str) -> InvalidWrite:
    """One clear error for every bad input at the boundary: a headline, then each
    problem as `field: message`, never the offending value (it may be personal)."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        location = ".".join(str(part) for part in error["loc"]) or what
        message = field_message(error)
        problems.append(f"{location}: {message}")
    return InvalidWrite.listing(headline, problems)


Parsed = TypeVar("Parsed", bound=BaseModel)
NAMESPACE_KEYS = ("namespace", "tenant", "user_id")
#: The problem of an input that names a namespace: the same for every input (a write, an
#: `export` call), so no article has to agree with the input's name.
NAMESPACE_NOT_ALLOWED = "namespace: not allowed (it comes from the authenticated principal)"


def parse_input(
    model: type[Parsed],
    data: Parsed | dict[str, Any],
    what: str,
    outcome: str = "nothing was stored",
) -> Parsed:
    """Validate one input at the boundary (a write, an update, a forget scope, a recall).
    Naming a namespace is refused by name first: it comes only from the authenticated
    principal, never from a request body."""
    if isinstance(data, model):
        return data
    if isinstance(data, dict) and any(k in data for k in NAMESPACE_KEYS):
        raise InvalidWrite(
            f"the {what} must not name a namespace: it is taken from the authenticated "
            f"principal; {outcome}",
            [NAMESPACE_NOT_ALLOWED],
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise invalid_input(f"invalid {what}; {outcome}", exc, what) from None


def parse_write(data: MemoryWrite | dict[str, Any]) -> MemoryWrite:
    return parse_input(MemoryWrite, data, "write")


def parse_update(data: MemoryUpdate | dict[str, Any]) -> MemoryUpdate:
    return parse_input(MemoryUpdate, data, "update")
