"""The client over `httpx.Client`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import httpx

from memory_ledger.client import _calls
from memory_ledger.client._calls import DEFAULT_TIMEOUT, Call, EventStream, auth_headers
from memory_ledger.client.errors import error_for
from memory_ledger.client.models import (
    Added,
    Context,
    ForgetPlan,
    FoundInformation,
    ItemState,
    Memory,
    MemoryPage,
    Notice,
    PlanOutcome,
    Receipt,
    Remembered,
    RequestPage,
    RequestReport,
    Summary,
)


class MemoryLedgerClient:
    """A memory-ledger HTTP service, as the token's principal sees it.

    `base_url` is the service (`http://127.0.0.1:8765`), `token` a bearer token
    (`memory-ledger tokens create`); the namespace is the token's. `timeout` (seconds)
    bounds every call but the change feed's wait. Errors are raised as
    `memory_ledger.client.errors.ClientError` subclasses; a connection failure or a
    timeout as httpx's own exception. Use it as a context manager, or call `close()`.
    `transport` replaces httpx's (a mock, or `httpx.ASGITransport`-like for tests)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.timeout = timeout
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=auth_headers(token, headers),
            timeout=timeout,
            transport=transport,
        )

    def __repr__(self) -> str:  # never the token
        return f"MemoryLedgerClient({str(self._http.base_url)!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryLedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: Call) -> Any:
        response = self._http.request(
            call.method, call.path, params=call.params, json=call.json, headers=call.headers
        )
        if response.status_code >= 400:
            raise error_for(response)
        return call.read(response.json())

    # -- writes ----------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        origin: str,
        session_id: str | None = None,
        turn_id: str | None = None,
        role: str = "user",
        sensitivity: str = "personal",
        category: str = "general",
        writer: str | None = None,
        idempotency_key: str | None = None,
    ) -> Added:
        """Store one conversation turn from its text (`POST /v1/memories`, text form).
        `origin` is required; the service fills in the writer (the token's user), the
        time, and a session and turn id when none is given: pass the returned
        `session_id` to continue the session."""
        return self._run(
            _calls.add(
                text,
                origin=origin,
                session_id=session_id,
                turn_id=turn_id,
                role=role,
                sensitivity=sensitivity,
                category=category,
                writer=writer,
                idempotency_key=idempotency_key,
            )
        )

    def remember(self, write: dict[str, Any], *, idempotency_key: str | None = None) -> Remembered:
        """Store one memory in the full write form (see the guide's write model)."""
        return self._run(_calls.remember(write, idempotency_key))

    def remember_many(
        self, writes: Sequence[dict[str, Any]], *, idempotency_key: str | None = None
    ) -> list[Remembered]:
        """Store a batch (at most 500) in one transaction: all or nothing."""
        return self._run(_calls.remember_many(writes, idempotency_key))

    def update(self, item_id: str, value: str, provenance: dict[str, Any], **extra: Any) -> int:
        """A new version of a fact's or preference's value; returns the version."""
        return self._run(_calls.update(item_id, value, provenance, **extra))

    def suppress(self, item_id: str, *, idempotency_key: str | None = None) -> int:
        """Stop using an item (still stored); returns its new version."""
        return self._run(_calls.suppress(item_id, False, idempotency_key))

    def unsuppress(self, item_id: str, *, idempotency_key: str | None = None) -> int:
        return self._run(_calls.suppress(item_id, True, idempotency_key))

    # -- reads -----------------------------------------------------------------------

    def recall(
        self,
        *,
        kind: str | None = None,
        subject: str | None = None,
        predicate: str | None = None,
        category: str | None = None,
        include_archived: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> MemoryPage:
        """One page of the live memories, newest written first (`next_cursor` for more)."""
        return self._run(
            _calls.recall(
                kind=kind,
                subject=subject,
                predicate=predicate,
                category=category,
                include_archived=include_archived,
                limit=limit,
                cursor=cursor,
            )
        )

    def list_memories(self, **filters: Any) -> Iterator[Memory]:
        """Every live memory matching `recall`'s filters, following the cursors."""
        cursor = None
        while True:
            page = self.recall(**filters, cursor=cursor)
            yield from page.memories
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def get(self, item_id: str) -> ItemState:
        """One item read from the log: its text, or `erased`."""
        return self._run(_calls.get(item_id))

    def history(self, item_id: str) -> list[Memory]:
        """Every version of a fact."""
        return self._run(_calls.history(item_id))

    def context(
        self,
        query: str,
        *,
        token_budget: int | None = None,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        **options: Any,
    ) -> Context:
        """The context for one turn: ranked items with trust labels and provenance;
        `rendered` is the text for the model. Options as `POST /v1/context` takes them
        (category, workspace, task, session, rank, include_archived)."""
        given = {"token_budget": token_budget, "kinds": kinds, "limit": limit, **options}
        return self._run(_calls.context(query, given))

    def summary(self) -> Summary | None:
        return self._run(_calls.summary())

    def export(self) -> dict[str, Any]:
        """Everything held about the token's person (format `memory-ledger-export/1`)."""
        return self._run(_calls.export())

    # -- forgetting ------------------------------------------------------------------

    def plan_forget(
        self,
        text: str,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        timezone: str | None = None,
    ) -> ForgetPlan:
        """Plan a forget request said in words; nothing is erased yet."""
        return self._run(_calls.plan_forget(text, session_id, turn_id, timezone))

    def find_information(
        self, values: Sequence[str] = (), *, description: str | None = None
    ) -> FoundInformation:
        """The model protocol, step 1: every place each value is said (every written
        form), or the memories nearest a description. Reads only."""
        return self._run(_calls.find_information(values, description))

    def forget_information(
        self,
        values: Sequence[str] = (),
        *,
        chosen: Sequence[dict[str, str]] = (),
        keeps: Sequence[str] = (),
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> ForgetPlan:
        """The model protocol, step 2: a plan over every place each value is said, the
        keeps never cut (the forget grant). Execute it with execute_plan once the user
        confirmed."""
        return self._run(_calls.forget_information(values, chosen, keeps, reason, idempotency_key))

    def forget_plan(self, plan_id: str) -> ForgetPlan:
        return self._run(_calls.forget_plan(plan_id))

    def choose_candidates(self, plan_id: str, item_ids: Iterable[str]) -> ForgetPlan:
        """Answer a plan's clarification: a new plan for the chosen candidates."""
        return self._run(_calls.choose_candidates(plan_id, item_ids))

    def execute_plan(self, plan_id: str, *, idempotency_key: str | None = None) -> PlanOutcome:
        """Carry out a confirmed plan, once (a deletion needs the forget grant)."""
        return self._run(_calls.execute_plan(plan_id, idempotency_key))

    def forget(self, *item_ids: str, idempotency_key: str | None = None) -> RequestReport:
        """Erase items by id: a forget request of kind `item` (the forget grant)."""
        scope = {"kind": "item", "item_ids": [str(i) for i in item_ids]}
        return self.forget_scope(scope, idempotency_key=idempotency_key)

    def forget_scope(
        self,
        scope: dict[str, Any],
        *,
        dry_run: bool = False,
        idempotency_key: str | None = None,
    ) -> RequestReport:
        """File a forget request for any scope (as `MemoryLedger.forget_scope` takes it)."""
        return self._run(_calls.forget_scope(scope, dry_run, idempotency_key))

    def redact(
        self,
        item_id: str,
        *,
        spans: Sequence[str] = (),
        fields: Sequence[str] = (),
        dry_run: bool = False,
        idempotency_key: str | None = None,
    ) -> RequestReport:
        """Remove spans, or whole fields, from one item (the forget grant)."""
        return self._run(_calls.redact(item_id, spans, fields, dry_run, idempotency_key))

    def request_status(self, request_id: str) -> RequestReport:
        """Where a forget request stands, with its receipts."""
        return self._run(_calls.request_status(request_id))

    def receipts(self, request_id: str) -> list[Receipt]:
        """A request's receipts, store by store."""
        return self.request_status(request_id).receipts

    def verify_request(self, request_id: str) -> RequestReport:
        """Ask every store again for evidence that the targets are gone."""
        return self._run(_calls.verify_request(request_id))

    def list_requests(self, *, limit: int = 50, cursor: str | None = None) -> RequestPage:
        return self._run(_calls.list_requests(limit, cursor))

    # -- the change feed -------------------------------------------------------------

    def feed(
        self, after: str | None = None, *, wait: float = 25.0, follow: bool = False
    ) -> Iterator[Notice]:
        """The change feed's notices after cursor `after` (None: from the beginning),
        as they come. A stream ends after `wait` seconds without a notice (0.1 to 60);
        with `follow` it is opened again from the last cursor, until the caller stops
        iterating. Store `notice.cursor` after handling a notice, to resume from it."""
        cursor = after
        read = httpx.Timeout(self.timeout, read=wait + self.timeout)
        while True:
            params = _calls.feed_params(cursor, wait)
            with self._http.stream("GET", "/v1/feed", params=params, timeout=read) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_for(response)
                events = EventStream()
                for line in response.iter_lines():
                    notice = events.feed(line)
                    if notice is not None:
                        cursor = notice.cursor
                        yield notice
            if not follow:
                return

    # -- the service -----------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._run(_calls.health())

    def ready(self) -> dict[str, Any]:
        return self._run(_calls.ready())
