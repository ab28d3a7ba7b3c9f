"""The compliance console: a read-only page for a compliance token, and the JSON and CSV
API its script reads. Forget requests of the token's subtree, one row each, with totals
by status and basis, requests overdue against the erasure deadline, time to completion,
filters, paging, search by request id, a CSV export, a timeline per request from its
ledger entries, the ledger's verdict and the signed tree head. Ids, codes, counts and
times: no memory content is on it, and nothing on it changes anything.

A browser cannot send a bearer header by itself, so the page takes the token once in a
form and keeps it in an HttpOnly, SameSite=Strict cookie for the session (path
/compliance: the page, its script and its API). The API also takes the bearer header,
for scripts. Other roles are refused (403), as on the page.

The signed tree head and the evidence packs are served by the audit routes
(`/v1/audit/head`, `/v1/audit/requests/{id}/pack`); the console asks them in-process
with the caller's token, and says "not available" when they do not answer."""

from __future__ import annotations

import csv
import html
import io
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)

from memory_ledger.access import Access
from memory_ledger.bounds import MAX_SEQ
from memory_ledger.config import Settings
from memory_ledger.errors import (
    Forbidden,
    InvalidWrite,
    MemoryLedgerError,
    NotFound,
    Unauthenticated,
)
from memory_ledger.http.auth import ACCESS_STATE, bearer, serving_of
from memory_ledger.http.compliance.query import FILE, ConsoleIndex, Filters
from memory_ledger.http.compliance.timeline import timeline
from memory_ledger.operations import Operations
from memory_ledger.operations.shapes import is_identifier, is_namespace
from memory_ledger.times import canonical_time

router = APIRouter(tags=["compliance console"], include_in_schema=False)
COOKIE = "ml_compliance"
#: The erasure deadline in days (memory_ledger/config.py `Settings.erasure_deadline_days`).
DEADLINE_ENV = Settings.ERASURE_DEADLINE_ENV
HEAD_PATH = "/v1/audit/head"
PACK_PATH = "/v1/audit/requests/{request_id}/pack"
CSV_COLUMNS = (
    "request_id", "namespace", "basis", "kind", "filed_at", "completed_at", "status",
    "stores_ok", "stores_total", "verified", "key_proof", "targets", "acks", "dry_run",
    "failed_stores", "seconds_to_completion",
)  # fmt: skip
STATIC = {"console.js": "text/javascript", "console.css": "text/css"}
LOGIN_STYLE = """body{font:14px system-ui,sans-serif;margin:2rem;color:#222}
.bad{color:#b00020;font-weight:bold}"""
_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_NO_STORE = {"Cache-Control": "no-store"}
_index_lock = threading.Lock()


# -- who is calling ------------------------------------------------------------------------


def _token(request: Request) -> str:
    header = request.headers.get("authorization")
    if header:
        return header.partition(" ")[2].strip()
    return request.cookies.get(COOKIE, "")


def _caller(request: Request) -> Access:
    """A compliance token's access, from the bearer header or the page's cookie."""
    found = getattr(request.state, ACCESS_STATE, None)
    if not isinstance(found, Access):
        header = request.headers.get("authorization")
        if header:
            found = bearer(request.app.state.tokens, header)
        else:
            cookie = request.cookies.get(COOKIE, "")
            if not cookie:
                raise Unauthenticated("a valid compliance token is needed")
            found = request.app.state.tokens.authenticate(cookie)
    if found.role != "compliance":
        raise Forbidden("the compliance console is for compliance tokens")
    return found


def _index(request: Request) -> ConsoleIndex:
    """The summary of the ledger the service serves now (a restore replaces the service,
    not the ledger's rows; the summary checks its watermark against them anyway)."""
    ops = serving_of(request).operations
    with _index_lock:
        index: ConsoleIndex | None = getattr(request.app.state, "compliance_index", None)
        if index is None or index.ledger is not ops.ledger:
            if index is not None:
                index.close()
            index = ConsoleIndex(ops.settings.data_dir / FILE, ops.ledger)
            request.app.state.compliance_index = index
    return index


# -- the page ------------------------------------------------------------------------------


def _login(message: str = "") -> HTMLResponse:
    note = f"<p class=bad>{html.escape(message)}</p>" if message else ""
    return HTMLResponse(
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>memory-ledger "
        f"compliance</title><style>{LOGIN_STYLE}</style></head><body><h1>memory-ledger "
        f"compliance</h1>{note}<form method=post action=/compliance/session><label>"
        "Compliance token <input type=password name=token autocomplete=off size=70></label> "
        "<button type=submit>Open</button></form></body></html>",
        status_code=401 if message else 200,
        headers={**_NO_STORE, "Content-Security-Policy": "default-src 'none'; "
                 "style-src 'unsafe-inline'; form-action 'self'"},
    )  # fmt: skip


@router.post("/compliance/session")
def session(request: Request, token: Annotated[str, Form(max_length=200)]) -> object:
    try:
        caller = request.app.state.tokens.authenticate(token.strip())
    except MemoryLedgerError:
        return _login("That token is not valid.")
    if caller.role != "compliance":
        return _login("This page is for compliance tokens.")
    response = RedirectResponse("/compliance", status_code=303)
    response.set_cookie(COOKIE, token.strip(), httponly=True, samesite="strict", path="/compliance")
    return response


@router.get("/compliance")
def page(request: Request) -> Response:
    try:
        caller = request.app.state.tokens.authenticate(request.cookies.get(COOKIE, ""))
    except MemoryLedgerError:
        return _login()
    if caller.role != "compliance":
        return _login("This page is for compliance tokens.")
    text = _static("console.html").replace("{{subtree}}", html.escape(caller.namespace))
    return HTMLResponse(text, headers={**_NO_STORE, "Content-Security-Policy": _PAGE_CSP})


@router.get("/compliance/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        raise NotFound("no such file")
    return Response(_static(name), media_type=STATIC[name])


def _static(name: str) -> str:
    return (resources.files(__package__) / "static" / name).read_text(encoding="utf-8")


# -- the API -------------------------------------------------------------------------------


def _time(value: str, name: str) -> str:
    if not value:
        return ""
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidWrite(f"invalid {name}: use an ISO 8601 date or time", [name]) from None
    return canonical_time(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


Text = Annotated[str, Query(max_length=200)]


def _filters(
    namespace: Text = "",
    status: Text = "",
    basis: Text = "",
    kind: Text = "",
    since: Text = "",
    until: Text = "",
    search: Text = "",
) -> Filters:
    """The list's filters from the query string (a dependency of every list route)."""
    problems = [
        name
        for name, value in (("status", status), ("basis", basis), ("kind", kind),
                            ("search", search))
        if value and not is_identifier(value)
    ]  # fmt: skip
    if namespace and not (is_namespace(namespace) or is_identifier(namespace)):
        problems.append("namespace")
    if problems:  # never echoed: a filter is the caller's text
        raise InvalidWrite.listing("invalid filter; nothing was read", problems)
    return Filters(
        namespace=namespace.strip("/"),
        status=status,
        basis=basis,
        kind=kind,
        since=_time(since, "since"),
        until=_time(until, "until"),
        search=search,
    )


Filtered = Annotated[Filters, Depends(_filters)]


@router.get("/compliance/api/requests")
def list_requests(
    request: Request,
    filters: Filtered,
    after: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> JSONResponse:
    """One page of requests, newest first; `next` is the `after` of the next page."""
    caller = _caller(request)
    items, cursor = _index(request).page(caller.namespace, filters, after, limit)
    return JSONResponse({"requests": items, "next": cursor}, headers=_NO_STORE)


@router.get("/compliance/api/totals")
def totals(
    request: Request,
    filters: Filtered,
) -> JSONResponse:
    caller = _caller(request)
    deadline = serving_of(request).operations.settings.erasure_deadline_days
    found = _index(request).totals(caller.namespace, filters, deadline, datetime.now(UTC))
    return JSONResponse({**found, "subtree": caller.namespace}, headers=_NO_STORE)


@router.get("/compliance/api/requests.csv")
def export_csv(
    request: Request,
    filters: Filtered,
) -> StreamingResponse:
    """Every request the filters select, newest first, one CSV row each."""
    caller = _caller(request)
    rows = _index(request).every(caller.namespace, filters)

    def lines() -> Iterator[str]:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(CSV_COLUMNS)
        for n, row in enumerate(rows, 1):
            writer.writerow(_csv_row(row))
            if n % 500 == 0:
                yield out.getvalue()
                out.seek(0)
                out.truncate()
        yield out.getvalue()

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return StreamingResponse(lines(), media_type="text/csv; charset=utf-8", headers={
        **_NO_STORE,
        "Content-Disposition": f'attachment; filename="forget-requests-{stamp}.csv"',
    })  # fmt: skip


def _csv_row(row: dict[str, Any]) -> list[object]:
    values = {**row, "seconds_to_completion": row["done_seconds"]}
    values["failed_stores"] = " ".join(row["failed_stores"])
    values["dry_run"] = "true" if row["dry_run"] else "false"
    out = []
    for column in CSV_COLUMNS:
        value = values[column]
        value = "" if value is None else value
        if isinstance(value, str) and value[:1] in ("=", "+", "-", "@"):
            value = "'" + value  # never a formula in a spreadsheet
        out.append(value)
    return out


@router.get("/compliance/api/requests/{request_id}")
def detail(request: Request, request_id: str) -> JSONResponse:
    """One request: its row, its timeline from its ledger entries, the subscribers it
    waits for, and where its evidence pack is served."""
    caller = _caller(request)
    row = _index(request).one(request_id) if is_identifier(request_id) else None
    if row is None or not caller.covers(row["namespace"]):
        raise NotFound("no forget request with that id in this token's subtree")
    ops = serving_of(request).operations
    entries = ops.entries(request_id)
    waiting: list[dict[str, Any]] = []
    if row["status"] == "partial":
        waiting = ops.requests.waiting(request_id)
    return JSONResponse(
        {
            "request": row,
            "timeline": timeline(entries),
            "waiting_for": waiting,
            "pack_url": PACK_PATH.format(request_id=request_id),
            "pack_download": f"/compliance/requests/{request_id}/pack",
        },
        headers=_NO_STORE,
    )


@router.get("/compliance/api/ledger")
def ledger_verdict(request: Request) -> JSONResponse:
    """The whole chain verified now, and its head (an anchor for the next audit); whether
    the ledger still extends the last head the audit-head job kept (a rollback or fork
    is the page's banner); and when the verification scan is next due."""
    _caller(request)
    ops = serving_of(request).operations
    audit = ops.verify_ledger()
    return JSONResponse(
        {
            "ok": audit.ok,
            "explanation": audit.explanation,
            "entries_checked": audit.entries_checked,
            "anchor": f"{audit.head_seq}:{audit.head_hash}",
            "kept_head": _kept_head(ops),
            "scan": _scan_schedule(ops),
        },
        headers=_NO_STORE,
    )


def _kept_head(ops: Operations) -> dict[str, Any]:
    """The check `doctor` and the audit-head job make (memory_ledger/audit/kept.py)."""
    try:
        kept, problem = ops.kept_head()
    except MemoryLedgerError as exc:
        return {"ok": False, "size": None, "explanation": str(exc)}
    return {"ok": not problem, "size": kept["size"] if kept else None, "explanation": problem}


def _scan_schedule(ops: Operations) -> dict[str, Any]:
    """When the verification-scan job next runs: a completed request whose files are
    `not yet` verified is scanned then. `next_run` is None when no scheduler has the
    job (then it runs only with `jobs run-once verification-scan` or `verify`)."""
    name = "verification-scan"
    every, next_run = ops.jobs.schedule(name)
    return {
        "job": name,
        "every_minutes": every,
        "next_run": canonical_time(next_run) if next_run else None,
    }


@router.get("/compliance/api/head")
async def signed_head(request: Request) -> JSONResponse:
    """The signed tree head from /v1/audit/head, asked with the caller's token, or
    `available: false` when that route does not answer."""
    _caller(request)
    status, _, body = await _forward(request, HEAD_PATH)
    if status == 200:
        try:
            return JSONResponse({"available": True, "head": json.loads(body)}, headers=_NO_STORE)
        except ValueError:
            pass
    return JSONResponse({"available": False, "status": status}, headers=_NO_STORE)


@router.get("/compliance/requests/{request_id}/pack")
async def pack(request: Request, request_id: str) -> Response:
    """The request's evidence pack, from /v1/audit/requests/{id}/pack with the caller's
    token: what the page's download link opens (a link cannot send a bearer header)."""
    _caller(request)
    if not is_identifier(request_id):
        raise NotFound("no forget request with that id in this token's subtree")
    status, headers, body = await _forward(request, PACK_PATH.format(request_id=request_id))
    if status == 404 and not _has_route(request, "/pack"):
        raise NotFound("evidence packs are not available on this server")
    keep = {k: v for k, v in headers.items() if k in ("content-type", "content-disposition")}
    return Response(body, status_code=status, headers={**keep, **_NO_STORE})


def _has_route(request: Request, suffix: str) -> bool:
    return any(
        str(getattr(r, "path", "")).startswith("/v1/audit/")
        and str(getattr(r, "path", "")).endswith(suffix)
        for r in request.app.routes
    )


async def _forward(request: Request, path: str) -> tuple[int, dict[str, str], bytes]:
    """GET `path` from this same app, in-process, with the caller's token as bearer."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 0), "server": ("localhost", 80),
        "headers": [(b"authorization", f"Bearer {_token(request)}".encode()),
                    (b"host", b"localhost")],
    }  # fmt: skip
    status, headers, chunks = 502, {}, []
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = int(message["status"])
            headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await request.app(scope, receive, send)
    return status, headers, b"".join(chunks)
