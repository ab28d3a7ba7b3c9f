"""The bound on a request body, kept while the body streams in, never after.

A middleware that measures a body by reading it (`await request.body()`) has already
spent the memory it was meant to protect: a chunked body has no Content-Length, and a
200 MiB one was buffered whole before it was refused, by any caller, with or without a
token. This is a plain ASGI middleware, the outermost one, so nothing reads a body
before it has decided, in this order:

1. A body sent to a route that needs a bearer token, without a valid one: 401, and not
   a byte of the body is read. The check is the routes' own (`auth.bearer`), so the
   answer is theirs too; a token that is valid but of the wrong role or grant is left
   to the route (403), after its body is read, bounded.
2. A declared Content-Length over the limit, or not a number: 413, nothing read.
3. Otherwise the body is read as it arrives and counted; the moment the count passes
   the limit, reading stops and the answer is 413. Only a whole body within the limit
   is handed on (it is buffered here, at most the limit), so a route never starts on a
   body that is refused later: no write is half done.

Each refusal closes the connection (`Connection: close`), so the rest of the body is
neither read nor waited for.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_ledger.errors import Unauthenticated
from memory_ledger.http import auth, problems

#: The methods whose body a route reads here.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The one route that takes a body without a bearer token: the compliance page's sign-in
#: form, whose body carries the token (memory_ledger/http/routes/compliance.py).
TOKENLESS = frozenset({"/compliance/session"})


class BodyLimit:
    """Refuse a body over `max_bytes`, and any body of a caller without a valid token,
    before reading it (see the module's docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared in (None, "0") and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body
            return
        if scope["method"] in BODY_METHODS and scope["path"] not in TOKENLESS:
            try:  # the route reuses the answer (auth.access): one lookup per request
                scope.setdefault("state", {})[auth.ACCESS_STATE] = auth.bearer(
                    scope["app"].state.tokens, headers.get("authorization")
                )
            except Unauthenticated as exc:  # answered as the routes answer it
                status, title = next((s, t) for k, s, t in problems.STATUS if isinstance(exc, k))
                await _refuse(scope, receive, send, status, title, str(exc))
                return
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._too_large(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away: there is no one to answer
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"a request body is at most {self.max_bytes} bytes"
        await _refuse(scope, receive, send, 413, "Request too large", detail)


async def _refuse(
    scope: Scope, receive: Receive, send: Send, status: int, title: str, detail: str
) -> None:
    response = problems.problem(status, title, detail)
    response.headers["Connection"] = "close"
    await response(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read, as one message; then the connection's own messages (a disconnect)."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
