"""JSON answers encoded once, straight to bytes, for the routes an agent calls on every
turn (remember, context, recall, read).

FastAPI's own path for a route returning `dict[str, Any]` validates the dict against
that annotation and encodes it; for a plain `def` route the validation is one more hop
to the thread pool, and the dict itself was built first by `dataclasses.asdict`, which
copies every nested value. A route that returns `JSONBytes` skips all three: the value
(dataclasses included, as they are) is encoded where the route runs, in the thread
pool, by orjson when it is installed and by the standard library otherwise. The bytes
are the same JSON as `asdict` would give.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime
from typing import Any

from starlette.background import BackgroundTask
from starlette.responses import Response

try:
    import orjson
except ImportError:  # pragma: no cover - the standard library's encoder instead
    orjson = None  # type: ignore[assignment]


def _default(value: object) -> object:
    """What the standard library's encoder cannot take itself: what orjson takes natively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def encode(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON; dataclasses as their fields, in order."""
    if orjson is not None:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":")).encode()


def fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields as a shallow dict: `asdict` without its deep copy, for a
    body that adds a key (the encoder takes the nested dataclasses as they are)."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


class JSONBytes(Response):
    """An `application/json` response of any value `encode` takes."""

    media_type = "application/json"

    def __init__(
        self,
        content: Any,
        status_code: int = 200,
        headers: dict[str, str] | None = None,
        background: BackgroundTask | None = None,
    ) -> None:
        super().__init__(content, status_code, headers, self.media_type, background)

    def render(self, content: Any) -> bytes:
        return encode(content)
