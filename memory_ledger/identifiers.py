"""The one definition of every identifier the system keeps in clear.

Identifiers (subjects, predicates, categories, provenance ids, codes) and namespace parts
are what erasure enumerates without decrypting, so the write boundary, forget scopes,
recalls, the ledger and the principal must agree on them exactly: a value accepted by
one and refused by another is data that can be written but never erased. Every check
here is a full-string match (`re.fullmatch`: no `$` that matches before a trailing
newline), nothing is stripped or coerced (a bytes value or a padded string is refused,
not repaired), and a refusal never echoes the value, which may be free text.
"""

from __future__ import annotations

import re
import secrets
from typing import Annotated, Any
from uuid import UUID

from pydantic import BeforeValidator

IDENTIFIER_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}"
NAMESPACE_PART_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"
NAMESPACE_PATTERN = rf"{NAMESPACE_PART_PATTERN}(?:/{NAMESPACE_PART_PATTERN}){{1,2}}"

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_NAMESPACE_PART = re.compile(NAMESPACE_PART_PATTERN)
_NAMESPACE = re.compile(NAMESPACE_PATTERN)

IDENTIFIER_RULE = (
    "letters, digits and _.:- (starting with a letter or digit), at most 128, without a "
    "run of 40 or more hex digits (the ledger refuses what looks like a hash)"
)
#: A SHA-1/SHA-2 hex digest fits identifier syntax, and the lifecycle ledger refuses one
#: (a hash of content is confirmable by guessing): refused here too, so that every
#: identifier a write accepts can be named in a forget request the ledger records.
_DIGEST = re.compile(r"[0-9A-Fa-f]{40,}")
NAMESPACE_PART_RULE = "letters, digits and _.- (starting with a letter or digit), at most 64"


def is_identifier(value: object) -> bool:
    return (
        isinstance(value, str)
        and _IDENTIFIER.fullmatch(value) is not None
        and _DIGEST.search(value) is None
    )


def is_namespace_part(value: object) -> bool:
    return isinstance(value, str) and _NAMESPACE_PART.fullmatch(value) is not None


def is_namespace(value: object) -> bool:
    """tenant/user or tenant/user/project, each part a namespace part."""
    return isinstance(value, str) and _NAMESPACE.fullmatch(value) is not None


def check_identifier(value: Any) -> str:
    """For pydantic fields and plain calls alike: the value itself, or ValueError."""
    if not is_identifier(value):
        raise ValueError(f"not an identifier: use {IDENTIFIER_RULE}")
    return value  # type: ignore[no-any-return]


def check_namespace(value: Any) -> str:
    if not is_namespace(value):
        raise ValueError(
            f"not a namespace: tenant/user or tenant/user/project, each part {NAMESPACE_PART_RULE}"
        )
    return value  # type: ignore[no-any-return]


Identifier = Annotated[str, BeforeValidator(check_identifier)]
Namespace = Annotated[str, BeforeValidator(check_namespace)]


def check_item_id(value: Any) -> UUID:
    """An item id: a UUID, or its text form. Not 16 raw bytes, not an int."""
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value)
        except ValueError:
            pass
    raise ValueError("not an item id: a UUID such as 6f1c0e4e-0b7a-4d43-9d51-8d0c1b1f0a11")


ItemId = Annotated[UUID, BeforeValidator(check_item_id)]


#: A forget request's id, and a forget plan's (forgetting/planning): a prefix and 16
#: hex digits, random, so ids say nothing about what they name.
REQUEST_ID = re.compile(r"req-[0-9a-f]{16}")
PLAN_ID = re.compile(r"plan-[0-9a-f]{16}")


def new_request_id() -> str:
    return f"req-{secrets.token_hex(8)}"


def new_plan_id() -> str:
    return f"plan-{secrets.token_hex(8)}"
