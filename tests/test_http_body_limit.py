"""A body over the limit is refused before it is read (issue 25): the caller is
authenticated first, a body is counted while it streams, and reading stops at
MAX_BODY_BYTES. A real server on loopback and a raw socket, so the test sees how much
of a body the server let the client send before it answered and closed.

No timing: a streamed body is sent only while the socket is writable, and sending stops
the moment an answer is readable; a server that reads the whole body lets the client
send all of it, one that stops reading does not (the socket buffers fill up)."""

from __future__ import annotations

import json
import re
import select
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from http_server import server_on_scratch_store

from memory_ledger.access import TokenStore
from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.http import auth
from memory_ledger.http.app import MAX_BODY_BYTES, create_app
from memory_ledger.http.limits import BODY_METHODS, TOKENLESS
from memory_ledger.times import now

pytestmark = pytest.mark.slow
#: What a streamed body would come to: far more than the limit and the socket buffers.
TOTAL = 128 * 1024 * 1024
PIECE = 64 * 1024
#: Only against a server that hangs: no answer and no room to send (never a threshold).
HANG = 120.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Settings]]:
    with server_on_scratch_store(tmp_path_factory, "body-limit") as served:
        yield served


@pytest.fixture(scope="module")
def alice(server: tuple[str, Settings]) -> Iterator[str]:
    store = TokenStore(server[1], now)
    yield store.create("acme/alice", "agent", ["forget"])[1]
    store.close()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int  # bytes of the body (chunk framing included) sent before the answer
    closed: bool  # the server closed the connection after answering

    def json(self) -> object:
        return json.loads(self.body)


def _fact(value: str = "18 Haisong Road") -> dict[str, object]:
    return {
        "kind": "fact", "subject": "user", "predicate": "home_address", "value": value,
        "origin": "explicit", "sensitivity": "personal",
        "provenance": {"writer": "limit-test", "written_at": datetime.now(UTC).isoformat(),
                       "session_id": "s1", "turn_id": "t1"},
    }  # fmt: skip


def _batch() -> Iterator[bytes]:
    """A JSON array of memories, TOTAL bytes of it, a piece at a time."""
    item = json.dumps(_fact()).encode() + b","
    piece = b"[" + item * (PIECE // len(item))
    for _ in range(TOTAL // len(piece)):
        yield piece
        piece = item * (PIECE // len(item))


def _chunked(pieces: Iterator[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield b"%x\r\n%s\r\n" % (len(piece), piece)
    yield b"0\r\n\r\n"


def _exchange(
    base: str,
    method: str,
    path: str,
    headers: dict[str, str],
    pieces: Iterator[bytes] | None = None,
    *,
    chunked: bool = True,
) -> Answer:
    """Send the head, then the body while the server takes it and has not answered;
    then read the answer to its end (or to the connection's close)."""
    url = urlsplit(base)
    head = [f"{method} {path} HTTP/1.1", f"Host: {url.netloc}", "Content-Type: application/json"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    if chunked:
        head.append("Transfer-Encoding: chunked")
        pieces = _chunked(pieces or iter(()))
    with socket.create_connection((url.hostname, url.port), timeout=HANG) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)  # little in flight
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sent, pending = 0, b""
        sock.setblocking(False)
        while True:
            want_write = [sock] if pending or pieces is not None else []
            readable, writable, _ = select.select([sock], want_write, [], HANG)
            assert readable or writable, "the server neither answered nor took the body"
            if readable:
                break
            if not pending:
                pending = next(pieces, b"") if pieces is not None else b""
                if not pending:
                    pieces = None  # all sent: wait for the answer
                    continue
            try:
                done = sock.send(pending)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent, pending = sent + done, pending[done:]
        sock.settimeout(HANG)
        received, closed = b"", False
        while True:
            try:
                data = sock.recv(1 << 16)
            except ConnectionResetError:
                closed = True
                break
            if not data:
                closed = True
                break
            received += data
            if _complete(received):
                try:
                    closed = sock.recv(1) == b""
                except ConnectionResetError:
                    closed = True
                break
    return _parse(received, sent, closed)


def _complete(received: bytes) -> bool:
    head, found, body = received.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    return bool(found and length and len(body) >= int(length.group(1)))


def _parse(received: bytes, sent: int, closed: bool) -> Answer:
    head, found, body = received.partition(b"\r\n\r\n")
    assert found, f"no answer came back: {received[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    return Answer(int(lines[0].split()[1]), headers, body, sent, closed)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _stored(base: str, token: str) -> list[object]:
    answer = httpx.get(f"{base}/v1/memories", headers=_bearer(token))
    assert answer.status_code == 200
    return answer.json()["memories"]  # type: ignore[no-any-return]


def _is_problem(answer: Answer, status: int) -> dict[str, object]:
    assert answer.status == status, answer.body[:300]
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert isinstance(problem, dict) and problem["status"] == status
    return problem


def test_a_chunked_body_without_a_token_is_refused_before_it_is_read(
    server: tuple[str, Settings], alice: str
) -> None:
    base, _ = server
    answer = _exchange(base, "POST", "/v1/memories", {}, _batch())
    problem = _is_problem(answer, 401)
    assert answer.headers["www-authenticate"] == "Bearer"
    as_the_routes_say = httpx.get(f"{base}/v1/memories")  # the route's own 401
    assert problem == as_the_routes_say.json()
    assert answer.sent < TOTAL // 2  # the server stopped taking the body
    assert answer.closed
    for token in ("mlt_nope", alice[:-1] + ("A" if alice[-1] != "A" else "B")):
        answer = _exchange(base, "POST", "/v1/memories", _bearer(token), _batch())
        assert _is_problem(answer, 401) == problem and answer.sent < TOTAL // 2
    assert _stored(base, alice) == []


def test_a_chunked_body_over_the_limit_is_refused_once_it_passes_it(
    server: tuple[str, Settings], alice: str
) -> None:
    base, _ = server
    answer = _exchange(base, "POST", "/v1/memories", _bearer(alice), _batch())
    problem = _is_problem(answer, 413)
    assert problem["title"] == "Request too large" and str(MAX_BODY_BYTES) in problem["detail"]
    assert MAX_BODY_BYTES < answer.sent < TOTAL // 2  # read to the limit, and no further
    assert answer.closed
    assert _stored(base, alice) == []


def test_a_declared_length_over_the_limit_is_refused_at_once(
    server: tuple[str, Settings], alice: str
) -> None:
    """Nothing of the body is sent: the answer comes to the head alone."""
    base, _ = server
    over = {"Content-Length": str(MAX_BODY_BYTES + 1)}
    answer = _exchange(base, "POST", "/v1/memories", {**over, **_bearer(alice)}, chunked=False)
    assert _is_problem(answer, 413)["title"] == "Request too large"
    assert answer.sent == 0 and answer.closed
    # authentication first: without a token the same head is a 401
    answer = _exchange(base, "POST", "/v1/memories", over, chunked=False)
    assert _is_problem(answer, 401) and answer.sent == 0 and answer.closed


def test_a_body_at_the_limit_reaches_the_route_and_one_byte_more_does_not(
    server: tuple[str, Settings], alice: str
) -> None:
    base, _ = server
    before = len(_stored(base, alice))
    fact = json.dumps(_fact("Limit Lane 1")).encode()
    at_limit = fact.ljust(MAX_BODY_BYTES, b" ")  # JSON allows the trailing blanks
    assert len(at_limit) == MAX_BODY_BYTES
    json_head = {**_bearer(alice), "Content-Type": "application/json"}
    declared = httpx.post(f"{base}/v1/memories", content=at_limit, headers=json_head)
    assert declared.status_code == 201, declared.text
    streamed = _exchange(
        base, "POST", "/v1/memories", _bearer(alice), iter([at_limit[:1000], at_limit[1000:]])
    )
    assert streamed.status == 201, streamed.body
    assert len(_stored(base, alice)) == before + 2
    one_more = at_limit + b" "
    answer = _exchange(base, "POST", "/v1/memories", _bearer(alice), iter([one_more]))
    assert _is_problem(answer, 413)["title"] == "Request too large"
    answer = _exchange(
        base,
        "POST",
        "/v1/memories",
        {**_bearer(alice), "Content-Length": str(len(one_more))},
        iter([one_more]),
        chunked=False,
    )
    assert _is_problem(answer, 413)["title"] == "Request too large"
    assert len(_stored(base, alice)) == before + 2


def _routes_with_a_body(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], bool]:
    """Every (method, path) of the app that takes a body, from the app's own routes, and
    whether the route authenticates its caller (depends on `auth.access`)."""
    service = MemoryService.open(tmp_path_factory.mktemp("routes") / "data")
    tokens = TokenStore(service.settings, now)
    try:
        app = create_app(service, tokens)
        found = {
            (method, route.path): auth.access in _calls(route.dependant)
            for route in iter_route_contexts(app.routes)
            if isinstance(route.original_route, APIRoute)
            for method in sorted((route.methods or set()) & BODY_METHODS)
        }
    finally:
        tokens.close()
        service.close()
    return found


def _calls(dependant: Dependant) -> set[object]:
    return {dependant.call}.union(*(_calls(d) for d in dependant.dependencies))


def test_every_route_that_takes_a_body_refuses_an_oversized_chunked_one_unread(
    server: tuple[str, Settings], alice: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base, _ = server
    routes = _routes_with_a_body(tmp_path_factory)
    assert len(routes) >= 20 and {("POST", "/v1/memories"), ("PATCH", "/v1/memories/{item_id}"),
                                  ("DELETE", "/v1/holds/{name}")} <= set(routes)  # fmt: skip
    # the body limit authenticates first on every route but those that take no token
    assert {path for (_, path), authenticates in routes.items() if not authenticates} == TOKENLESS
    before = len(_stored(base, alice))
    for method, template in routes:
        path = re.sub(r"\{[^}]+\}", "x1", template)
        answer = _exchange(base, method, path, _bearer(alice), _batch())
        assert answer.status == 413, (method, path, answer.body[:200])
        assert answer.headers["content-type"] == "application/problem+json", (method, path)
        assert answer.sent < TOTAL // 2, (method, path, answer.sent)
        assert answer.closed, (method, path)
        if routes[method, template]:
            answer = _exchange(base, method, path, {}, _batch())
            assert answer.status == 401 and answer.sent < TOTAL // 2, (method, path)
    assert len(_stored(base, alice)) == before
