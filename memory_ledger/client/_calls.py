"""What the sync and async clients share: each operation as a request to make and a
way to read its answer (`Call`), and the server-sent-events parser. Neither does I/O."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

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
    Remembered,
    RequestPage,
    RequestReport,
    Summary,
)

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Call:
    """One HTTP request and how to turn its JSON answer into the method's result."""

    method: str
    path: str
    read: Callable[[Any], Any]
    params: dict[str, Any] | None = None
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def auth_headers(token: str, extra: dict[str, str] | None) -> dict[str, str]:
    if not isinstance(token, str) or not token.strip():
        raise ValueError("a bearer token is needed (memory-ledger tokens create)")
    return {"Authorization": f"Bearer {token.strip()}", "Accept": "application/json",
            **(extra or {})}  # fmt: skip


def _id(value: object) -> str:
    """A path segment: an id as text, quoted so that it stays one segment."""
    return quote(str(value), safe="")


def _keyed(idempotency_key: str | None) -> dict[str, str]:
    return {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}


def _params(**given: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        out[name] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


def _memories(data: Any) -> list[Remembered]:
    return [Remembered.from_dict(m) for m in data["memories"]]


def add(
    text: str,
    *,
    origin: str,
    session_id: str | None,
    turn_id: str | None,
    role: str,
    sensitivity: str,
    category: str,
    writer: str | None,
    idempotency_key: str | None,
) -> Call:
    body: dict[str, Any] = {
        "text": text,
        "origin": origin,
        "role": role,
        "sensitivity": sensitivity,
        "category": category,
    }
    for name, value in (("session_id", session_id), ("turn_id", turn_id), ("writer", writer)):
        if value is not None:
            body[name] = value
    return Call("POST", "/v1/memories", Added.from_answer, json=body,
                headers=_keyed(idempotency_key))  # fmt: skip


def remember(write: dict[str, Any], idempotency_key: str | None) -> Call:
    return Call("POST", "/v1/memories", lambda d: _memories(d)[0], json=write,
                headers=_keyed(idempotency_key))  # fmt: skip


def remember_many(writes: Sequence[dict[str, Any]], idempotency_key: str | None) -> Call:
    return Call("POST", "/v1/memories", _memories, json=list(writes),
                headers=_keyed(idempotency_key))  # fmt: skip


def recall(
    *,
    kind: str | None,
    subject: str | None,
    predicate: str | None,
    category: str | None,
    include_archived: bool,
    limit: int,
    cursor: str | None,
) -> Call:
    params = _params(
        kind=kind,
        subject=subject,
        predicate=predicate,
        category=category,
        include_archived=include_archived or None,
        limit=limit,
        cursor=cursor,
    )
    return Call("GET", "/v1/memories", MemoryPage.from_dict, params=params)


def get(item_id: str) -> Call:
    return Call("GET", f"/v1/memories/{_id(item_id)}", ItemState.from_dict)


def history(item_id: str) -> Call:
    return Call(
        "GET",
        f"/v1/memories/{_id(item_id)}/history",
        lambda d: [Memory.from_dict(m) for m in d["versions"]],
    )


def update(item_id: str, value: str, provenance: dict[str, Any], **extra: Any) -> Call:
    body = {"value": value, "provenance": provenance, **extra}
    return Call("PATCH", f"/v1/memories/{_id(item_id)}", lambda d: int(d["version"]), json=body)


def suppress(item_id: str, undo: bool, idempotency_key: str | None) -> Call:
    action = "unsuppress" if undo else "suppress"
    return Call("POST", f"/v1/memories/{_id(item_id)}/{action}", lambda d: int(d["version"]),
                headers=_keyed(idempotency_key))  # fmt: skip


def context(query: str, options: dict[str, Any]) -> Call:
    body = {"query": query, **{k: v for k, v in options.items() if v is not None}}
    if "kinds" in body:
        body["kinds"] = list(body["kinds"])
    return Call("POST", "/v1/context", Context.from_dict, json=body)


def summary() -> Call:
    def read(data: Any) -> Summary | None:
        found = data.get("summary")
        return Summary.from_dict(found) if found is not None else None

    return Call("GET", "/v1/summary", read)


def export() -> Call:
    return Call("GET", "/v1/export", lambda d: d)


def plan_forget(
    text: str, session_id: str | None, turn_id: str | None, timezone: str | None
) -> Call:
    body: dict[str, Any] = {"text": text}
    for name, value in (("session_id", session_id), ("turn_id", turn_id), ("timezone", timezone)):
        if value is not None:
            body[name] = value
    return Call("POST", "/v1/forget-plans", ForgetPlan.from_dict, json=body)


def find_information(values: Sequence[str], description: str | None) -> Call:
    body: dict[str, Any] = {"values": list(values)}
    if description is not None:
        body["description"] = description
    return Call("POST", "/v1/information/find", FoundInformation.from_dict, json=body)


def forget_information(
    values: Sequence[str],
    chosen: Sequence[dict[str, str]],
    keeps: Sequence[str],
    reason: str | None,
    idempotency_key: str | None,
) -> Call:
    body: dict[str, Any] = {"values": list(values), "chosen": list(chosen), "keeps": list(keeps)}
    if reason is not None:
        body["reason"] = reason
    return Call("POST", "/v1/information/forget", ForgetPlan.from_dict, json=body,
                headers=_keyed(idempotency_key))  # fmt: skip


def forget_plan(plan_id: str) -> Call:
    return Call("GET", f"/v1/forget-plans/{_id(plan_id)}", ForgetPlan.from_dict)


def choose_candidates(plan_id: str, item_ids: Iterable[str]) -> Call:
    body = {"item_ids": [str(i) for i in item_ids]}
    return Call("POST", f"/v1/forget-plans/{_id(plan_id)}/choose", ForgetPlan.from_dict, json=body)


def execute_plan(plan_id: str, idempotency_key: str | None) -> Call:
    return Call("POST", f"/v1/forget-plans/{_id(plan_id)}/execute", PlanOutcome.from_dict,
                headers=_keyed(idempotency_key))  # fmt: skip


def forget_scope(scope: dict[str, Any], dry_run: bool, idempotency_key: str | None) -> Call:
    body = {"scope": scope, "dry_run": dry_run}
    return Call("POST", "/v1/forget-requests", RequestReport.from_dict, json=body,
                headers=_keyed(idempotency_key))  # fmt: skip


def redact(
    item_id: str,
    spans: Sequence[str],
    fields: Sequence[str],
    dry_run: bool,
    idempotency_key: str | None,
) -> Call:
    body = {"spans": list(spans), "fields": list(fields), "dry_run": dry_run}
    return Call("POST", f"/v1/memories/{_id(item_id)}/redact", RequestReport.from_dict, json=body,
                headers=_keyed(idempotency_key))  # fmt: skip


def request_status(request_id: str) -> Call:
    return Call("GET", f"/v1/forget-requests/{_id(request_id)}", RequestReport.from_dict)


def verify_request(request_id: str) -> Call:
    return Call("POST", f"/v1/forget-requests/{_id(request_id)}/verify", RequestReport.from_dict)


def list_requests(limit: int, cursor: str | None) -> Call:
    params = _params(limit=limit, cursor=cursor)
    return Call("GET", "/v1/forget-requests", RequestPage.from_dict, params=params)


def health() -> Call:
    return Call("GET", "/v1/health", lambda d: d)


def ready() -> Call:
    return Call("GET", "/v1/ready", lambda d: d)


def feed_params(after: str | None, wait: float) -> dict[str, Any]:
    return _params(after=after, wait=wait)


class EventStream:
    """Server-sent events from lines (the WHATWG rules the feed needs): `id`, `event`
    and `data` fields, comments skipped, an event dispatched at a blank line."""

    def __init__(self) -> None:
        self._id: str | None = None
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, line: str) -> Notice | None:
        """The notice a line completes, if it completes one."""
        line = line.rstrip("\r")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def _dispatch(self) -> Notice | None:
        if not self._data:
            self._event = None
            return None
        data = json.loads("\n".join(self._data))
        self._data = []
        if not isinstance(data, dict):
            return None
        data.setdefault("cursor", self._id)
        data.setdefault("type", self._event)
        self._event = None
        return Notice.from_dict(data)
