"""The compliance page: a small read-only HTML page for a compliance token. Requests of
its subtree with their status, each store's receipt, the ledger's verification result,
and subscribers that are late to acknowledge. Ids, codes, counts and times: no memory
content is on it, and nothing on it changes anything.

A browser cannot send a bearer header by itself, so the page takes the token once in a
form and keeps it in an HttpOnly, SameSite=Strict cookie for the session."""

from __future__ import annotations

import html
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from memory_ledger.errors import MemoryLedgerError

router = APIRouter(tags=["compliance page"], include_in_schema=False)
COOKIE = "ml_compliance"
STYLE = """body{font:14px system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:1rem 0;width:100%}
th,td{border:1px solid #ccc;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f2f2f2}.ok{color:#176a2b}.bad{color:#b00020;font-weight:bold}
code{font-size:12px}"""


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}"
        f"</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}"
        "</body></html>",
        status_code=status,
        headers={"Cache-Control": "no-store", "Content-Security-Policy": "default-src 'none'; "
                 "style-src 'unsafe-inline'; form-action 'self'"},
    )  # fmt: skip


def _login(message: str = "") -> HTMLResponse:
    note = f"<p class=bad>{html.escape(message)}</p>" if message else ""
    return _page(
        "memory-ledger compliance",
        f"{note}<form method=post action=/compliance/session><label>Compliance token "
        "<input type=password name=token autocomplete=off size=70></label> "
        "<button type=submit>Open</button></form>",
        401 if message else 200,
    )


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
def page(request: Request) -> HTMLResponse:
    try:
        caller = request.app.state.tokens.authenticate(request.cookies.get(COOKIE, ""))
    except MemoryLedgerError:
        return _login()
    if caller.role != "compliance":
        return _login("This page is for compliance tokens.")
    service = request.app.state.serving.service
    audit = service.ledger.verify()
    verdict = (
        f"<p>Lifecycle ledger: <b class={'ok' if audit.ok else 'bad'}>"
        f"{'intact' if audit.ok else 'BROKEN'}</b> ({html.escape(audit.explanation)})</p>"
    )
    active = service.subscribers.active()
    rows, late = [], []
    for request_id in reversed(service.ledger.request_ids()):
        report = service.requests.report(request_id)
        if not caller.covers(report.namespace):
            continue
        waiting = service.subscribers.waiting(report, active=active)
        late += [(request_id, w) for w in waiting if w.get("overdue")]
        receipts = "<br>".join(
            f"{html.escape(r.store)}: {html.escape(r.action)} "
            f"<span class={'ok' if r.status == 'ok' else 'bad'}>{html.escape(r.status)}</span>"
            for r in report.receipts
        )
        status = report.status
        rows.append(
            f"<tr><td><code>{html.escape(request_id)}</code></td><td>{html.escape(report.namespace)}"
            f"</td><td class={'ok' if status == 'completed' else 'bad'}>{html.escape(status)}</td>"
            f"<td>{html.escape(str(report.scope.get('kind', '')))}</td>"
            f"<td>{len(report.all_targets)}</td><td>{receipts}</td></tr>"
        )
    requests_table = (
        "<h2>Forget requests</h2><table><tr><th>request</th><th>namespace</th><th>status</th>"
        "<th>scope</th><th>items</th><th>receipts per store</th></tr>" + "".join(rows) + "</table>"
    )
    overdue = "".join(
        f"<li><code>{html.escape(r)}</code>: {html.escape(str(w.get('subscriber', '')))}</li>"
        for r, w in late
    )
    subscribers = f"<h2>Overdue subscribers</h2><ul>{overdue or '<li>none</li>'}</ul>"
    scope = f"<p>Token subtree: <code>{html.escape(caller.namespace)}</code></p>"
    return _page("memory-ledger compliance", scope + verdict + requests_table + subscribers)
