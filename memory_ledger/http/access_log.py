"""One line per request, as `memory-ledger serve --log-level info` prints it:

    2026-12-03T12:13:14Z POST /v1/memories 201 3.4 ms

the time it ended (UTC), the method, the route's template (`/v1/memories/{item_id}`,
never the id in it) or, for a path no route matched, the path (shortened, its control
characters escaped), the status and how long the answer took. Never a query string (a
`query=` may hold content), a header (a token) or a body.

A plain ASGI middleware, the outermost: it sees the refusals of the body limit too, and
costs a clock read, a wrapped `send` and one formatted line per request. With
`--log-level warning` it is not installed at all.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The longest path written for a request no route matched.
MAX_PATH_CHARS = 80
_UNSAFE = re.compile(r"[^\x21-\x7e]")


def _visible(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}" if ord(match.group()) < 0x100 else "?"


def route_of(scope: Scope) -> str:
    """What a line names: the route's template, or the (sanitised, shortened) path."""
    route = scope.get("route")
    template = getattr(route, "path", None)
    if isinstance(template, str) and template and not isinstance(route, Mount):
        return template
    path = str(scope.get("path", ""))
    if len(path) > MAX_PATH_CHARS:
        path = path[:MAX_PATH_CHARS] + "..."
    return _UNSAFE.sub(_visible, path)


class AccessLog:
    """Write one line per HTTP request to `write` once it is answered (a request that
    ends without an answer is written with status 500)."""

    def __init__(self, app: ASGIApp, write: Callable[[str], object]) -> None:
        self.app = app
        self.write = write
        self._second = -1  # the time stamp is formatted once a second, not per request
        self._stamp = ""

    def stamp(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        return self._stamp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            elapsed = (time.perf_counter() - started) * 1000.0
            self.write(
                f"{self.stamp()} {scope['method']} {route_of(scope)} {status or 500} "
                f"{elapsed:.1f} ms"
            )
