"""The HTTP service's problem+json answers (RFC 9457) as exceptions.

Each error status has a class of its own, named after the service's error it stands for
(memory_ledger/errors.py, mapped to statuses in memory_ledger/http/problems.py), so a
caller can catch `NotFound` or `InvalidRequest` without reading status codes. All of
them are `ClientError`s carrying `status`, `type`, `title`, `detail` and `problems`
(the failing fields, never the values)."""

from __future__ import annotations

from typing import Any

import httpx


class ClientError(Exception):
    """An answer of the service that is not a success: its problem details."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        type: str = "about:blank",
        problems: list[str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}" if detail != title else f"{status} {title}")
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.problems = list(problems or [])
        #: Seconds to wait before trying again (`Retry-After`), when the service said.
        self.retry_after = retry_after


class Unauthenticated(ClientError):
    """401: a missing, malformed, unknown, expired or revoked token (all alike)."""


class Forbidden(ClientError):
    """403: the token's role or grants do not allow the call (forget is a grant)."""


class NotFound(ClientError):
    """404: no such item or request in the token's namespace (another namespace's
    ids answer the same)."""


class Conflict(ClientError):
    """409: the operation does not apply to the item's state now, a stale derivation,
    a stale run version, or a retry while the first request with its idempotency key
    still runs."""


class CursorGone(ClientError):
    """410: a change-feed cursor the feed cannot continue from (a restore since):
    resynchronise from a snapshot."""


class PayloadTooLarge(ClientError):
    """413: a body over the service's limit (1 MiB)."""


class InvalidRequest(ClientError):
    """422: the input was refused at the boundary; nothing was stored or changed."""


class RateLimited(ClientError):
    """429: too many requests; `retry_after` says when to try again."""


class ServiceUnavailable(ClientError):
    """503: the service cannot serve now (a restore in progress, a store unreachable)."""


class ServerError(ClientError):
    """Any other 5xx: the operation failed; nothing can be assumed done."""


BY_STATUS: dict[int, type[ClientError]] = {
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: CursorGone,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_for(response: httpx.Response) -> ClientError:
    """The exception for a response of status 400 or more (read it first when streamed)."""
    status = response.status_code
    kind = BY_STATUS.get(status) or (ServerError if status >= 500 else ClientError)
    body: Any = None
    if "json" in response.headers.get("content-type", ""):
        try:
            body = response.json()
        except ValueError:
            body = None
    if not isinstance(body, dict):
        body = {}
    title = body.get("title") if isinstance(body.get("title"), str) else response.reason_phrase
    detail = body.get("detail") if isinstance(body.get("detail"), str) else None
    if detail is None:
        detail = response.text[:500] if response.text and not body else title
    problems = body.get("problems")
    problems = [str(p) for p in problems] if isinstance(problems, list) else []
    return kind(
        status,
        title or str(status),
        detail or "",
        type=str(body.get("type") or "about:blank"),
        problems=problems,
        retry_after=_seconds(response.headers.get("retry-after")),
    )


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None  # an HTTP date: not worth parsing here
