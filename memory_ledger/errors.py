"""Errors a caller can act on.

Every error raised across the public boundary is a MemoryLedgerError with a message a
person can read; the CLI prints it and exits non-zero. None of them carries memory
content, so they are safe to log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


class MemoryLedgerError(Exception):
    """Base class: a clear message, and nothing was half-applied."""

    exit_code = 1


#: At most this many problems are listed in one error, then `... and N more problems`:
#: a request that is wrong in 100,000 places gets an answer of a few kilobytes, not
#: megabytes (every boundary, CLI `--json`, HTTP problem+json and agent tools, shows
#: the list `InvalidWrite` holds).
MAX_PROBLEMS = 20


_MORE = re.compile(r"\.\.\. and [0-9]+ more problems?")


def cap_problems(problems: list[str]) -> list[str]:
    """The first MAX_PROBLEMS problems, and a last line counting the rest. A list capped
    already is kept as it is (an error re-raised with another's problems)."""
    if len(problems) <= MAX_PROBLEMS:
        return list(problems)
    if len(problems) == MAX_PROBLEMS + 1 and _MORE.fullmatch(problems[-1]):
        return list(problems)
    more = len(problems) - MAX_PROBLEMS
    return [*problems[:MAX_PROBLEMS], f"... and {more} more problem{'s' if more > 1 else ''}"]


#: What pydantic puts before the message of a validator's ValueError or assert: noise
#: to a reader ("subject: Value error, not an identifier"), so every boundary drops it.
_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")


def field_message(error: Mapping[str, Any]) -> str:
    """The message of one pydantic field error, as a person should read it: the
    validator's own words, without pydantic's "Value error, " prefix."""
    message = str(error["msg"])
    for prefix in _PYDANTIC_PREFIXES:
        message = message.removeprefix(prefix)
    return message


class InvalidWrite(MemoryLedgerError):
    """A write or request failed validation at the boundary; nothing was stored."""

    exit_code = 2

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = cap_problems(problems or [])

    @classmethod
    def listing(cls, headline: str, problems: list[str]) -> InvalidWrite:
        """`headline: problem; problem; ...`, the problems capped as in `problems`."""
        capped = cap_problems(problems)
        return cls(f"{headline}: " + "; ".join(capped), capped)


class ConfigurationError(MemoryLedgerError):
    exit_code = 3


class BackendUnavailable(ConfigurationError):
    """The database named by the URL or data directory cannot be reached or opened."""


class StoreNotFound(ConfigurationError):
    """There is no store at the location, and what was asked only reads one (the CLI's
    read-only commands, `MemoryService.open(..., create=False)`): nothing was created."""


class WrongMasterKey(ConfigurationError):
    pass


class KeyRotationInProgress(ConfigurationError):
    """A master-key rotation started and has not finished: some data keys are wrapped
    under the old key and some under the new one, so the store serves nothing until
    `memory-ledger keys rotate` is run again and finishes it."""


class KeyRotated(ConfigurationError):
    """This process opened the store under a master key the store no longer has (it was
    rotated since, or is being rotated): a new data key wrapped under it would become
    unreadable once the old key is destroyed, so the write is refused."""


class CorruptKeyEntry(MemoryLedgerError):
    """A wrapped data key fails authentication: tampering or disk corruption."""

    exit_code = 4


class NotFound(MemoryLedgerError):
    """No item with that id exists in the caller's namespace.

    Items of other namespaces are reported the same way, so ids cannot be probed.
    """

    exit_code = 5


class InvalidTransition(MemoryLedgerError):
    """The operation does not apply to the item's current state (e.g. update after erase)."""

    exit_code = 6


class StaleDerivation(InvalidTransition):
    """A derived write read an input that has since been erased, suppressed or changed.

    Refusing it is what keeps background work from writing deleted data back.
    """


class IndexMismatch(ConfigurationError):
    """A query vector was not made by the embedder that built the index.

    Vectors of two models (or two dimensions of one) are not comparable: a search across
    them would return confident nonsense, so it is refused instead.
    """


class MissingKey(CorruptKeyEntry):
    """An item that was never erased has no usable key in the key store: its key row is
    gone, or was destroyed without a tombstone. Not the same as an erased item, whose
    destroyed key row remains: its content cannot be read, and that is not passed off as
    an erasure. `memory-ledger doctor` explains the repair."""


class IntegrityError(MemoryLedgerError):
    """The stores disagree in a way no operation of memory-ledger produces (a row or a
    file was deleted or replaced by hand, or restored from another backup). Nothing is
    served until an operator repairs it; `memory-ledger doctor` says how."""

    exit_code = 10

    def __init__(self, message: str, code: str = "integrity", repair: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.repair = repair


class KeyCheckMissing(IntegrityError):
    """The master-key check row is gone from a store that holds data, so an offered
    master key cannot be told right from wrong; it is not accepted unchecked."""


class LedgerMissing(IntegrityError):
    """The lifecycle ledger is empty (deleted, or replaced by a new one) beside an event
    log that holds tombstones it no longer explains."""


class ProjectionsDamaged(BackendUnavailable):
    """The projections database is not a readable SQLite file. It holds only what the
    log can rebuild: `memory-ledger rebuild` discards it and replays the log."""


class ProjectionMismatch(IntegrityError):
    """A projection named targets the event log does not confirm (another namespace, or
    attributes the scope did not select). The request was refused before any key was
    destroyed: projections are caches, and the log decides."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "projection_mismatch", "memory-ledger rebuild")


class CursorGone(MemoryLedgerError):
    """A change-feed cursor the feed cannot continue from (the store was restored from a
    backup since, or the cursor is not one of this store's): resynchronise from a
    snapshot of the namespace, which carries the cursor to continue from."""

    exit_code = 11


class Unauthenticated(MemoryLedgerError):
    """No token, or one that is unknown, malformed, expired or revoked. The answer is
    the same for each: a caller cannot probe which tokens exist."""

    exit_code = 12


class Forbidden(MemoryLedgerError):
    """The token is valid, but its role or grants do not allow the operation (forget is
    a grant of its own). Never used for another namespace's data: that is NotFound."""

    exit_code = 13
