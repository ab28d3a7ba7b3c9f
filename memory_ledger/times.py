"""The one definition of a time: what is accepted, and the text form it is stored in.

Times are compared as text in SQL on both backends (the catalog's `written_at`, a fact's
validity, an expiry), so the stored form must have a fixed width and sort as time does:
UTC, four-digit year, microseconds, `Z` (`0999-01-01T00:00:00.000000Z` sorts before
`2025-...`; `strftime('%Y')` would write `999` and sort after it). The accepted range is
what that form can hold: 0001-01-01 through 9999-12-31 in UTC. A time whose offset takes
it outside (year 1 at +01:00) is refused with a clear error instead of overflowing.

Input is strict: a timezone-aware `datetime`, or an ISO-8601 string with an offset. An
integer epoch, a bool, bytes or a naive time is refused, not guessed at.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

TIME_RANGE = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z"
EXAMPLE = "2026-11-29T10:00:00Z"


def to_utc(value: Any) -> datetime:
    """Parse and check one time at the boundary; ValueError with a clear message."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"not an ISO-8601 time (e.g. {EXAMPLE})") from None
    elif not isinstance(value, datetime):
        kind = "a date without a time" if isinstance(value, date) else type(value).__name__
        raise ValueError(f"a time must be an ISO-8601 string or a datetime, not {kind}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"timestamps must carry a timezone (e.g. {EXAMPLE})")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"time outside the accepted range ({TIME_RANGE})") from None


def canonical_time(value: datetime) -> str:
    """The stored text form of an aware time: fixed width, so text order is time order."""
    utc = value.astimezone(UTC).replace(tzinfo=None)
    return utc.isoformat(timespec="microseconds") + "Z"


def now() -> datetime:
    return datetime.now(UTC)


def now_text() -> str:
    """The current time in the stored form (keys, receipts, ledger entries)."""
    return canonical_time(now())


#: A time at the boundary: aware, in range, normalised to UTC.
AwareDatetime = Annotated[datetime, BeforeValidator(to_utc)]
#: The same, serialised in the stored form (for the ledger's payload models).
Timestamp = Annotated[AwareDatetime, PlainSerializer(canonical_time, return_type=str)]
