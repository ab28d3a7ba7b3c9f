"""Forget requests as the surfaces list and read them: ONE row shape for the CLI's
`requests` table and HTTP's `GET /v1/forget-requests`, so the two never drift apart
again. They had: the CLI's `targets` counted a target that also cascaded twice, and only
the CLI said which subscribers a request waits on. The count keeps HTTP's name, `items`
(the HTTP client's `RequestSummary.items` reads it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from memory_ledger.feed.subscribers import Subscribers
from memory_ledger.forgetting.requests import ForgetRequests, RequestReport
from memory_ledger.ledger import LifecycleLedger


@dataclass(frozen=True)
class RequestRow:
    """One forget request in a listing: ids, codes and counts only, never content.
    `items` counts everything the request erases (its targets and what cascaded, each
    once); `waiting_for` names the subscribers a partial request still waits on."""

    request_id: str
    namespace: str
    status: str
    scope: dict[str, Any]
    items: int
    waiting_for: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RequestPage:
    """Rows of one page, and the offset the next page starts at (None: the last page).
    The ledger only grows, so an offset always continues where a page ended; a page may
    hold fewer rows than asked when requests outside the caller's subtree lie between."""

    rows: list[RequestRow]
    next_offset: int | None


class RequestListing:
    """Reads of the forget requests the lifecycle ledger records."""

    def __init__(
        self, ledger: LifecycleLedger, requests: ForgetRequests, subscribers: Subscribers
    ) -> None:
        self._ledger = ledger
        self._requests = requests
        self._subscribers = subscribers

    def page(
        self,
        offset: int = 0,
        limit: int | None = None,
        visible: Callable[[str], bool] = lambda _namespace: True,
    ) -> RequestPage:
        """The requests from `offset` (at most `limit` of them; all by default) whose
        namespace `visible` accepts, oldest first."""
        ids = self._ledger.request_ids()
        chosen = ids[offset:] if limit is None else ids[offset : offset + limit]
        active = self._subscribers.active()  # once, for every row
        rows = []
        for request_id in chosen:
            report = self._requests.report(request_id)
            if visible(report.namespace):
                rows.append(self._row(report, active))
        end = offset + len(chosen)
        return RequestPage(rows, end if end < len(ids) else None)

    def _row(self, report: RequestReport, active: Any) -> RequestRow:
        return RequestRow(
            request_id=report.request_id,
            namespace=report.namespace,
            status=report.status,
            scope=report.scope,
            items=len(report.all_targets),
            waiting_for=self._subscribers.waiting(report, active=active),
        )

    def report(self, request_id: str) -> RequestReport:
        """Where one request stands, with its receipts (NotFound for an unknown id)."""
        return self._requests.report(request_id)

    def verify(self, request_id: str) -> RequestReport:
        """Ask every store again for evidence that the request's targets are absent."""
        return self._requests.verify(request_id)

    def resume(self, request_id: str) -> RequestReport:
        """Retry an unfinished request with the scope it recorded."""
        return self._requests.resume(request_id)

    def waiting(self, request_id: str) -> list[dict[str, Any]]:
        """The subscribers a request still waits on."""
        return self._subscribers.waiting(self._requests.report(request_id))
