"""A small HTTP/1.1 server for the webhooks: POST a JSON body, get a JSON body back.

The API server holds every pod creation until its admission reviews are answered, and
kube-controller-manager creates pods in bursts of hundreds, so the webhook answers
reviews back to back and each one's cost is what the next one waits. A general web
framework spends most of a review on objects the webhook never reads (a request with
a parsed URL, a router, a response with a header map, a stream writer); this server
reads only what a review needs: the method, the path, the body's length and type, and
whether the client keeps the connection open. Everything else in the head is skipped.

Supported: keep-alive (HTTP/1.1's default, HTTP/1.0's on request), `Content-Length`
and chunked bodies, `Expect: 100-continue`, pipelined requests (answered in order).
Errors answer as the HTTP status they are: 400 malformed, 404 unknown path, 405 not a
POST, 411/413 for bodies, 431 for a head over 64 KiB, 505 for another HTTP version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

log = logging.getLogger("webhook")

MAX_HEAD = 64 * 1024
KEEPALIVE_TIMEOUT = 75.0  # aiohttp's default, under the 90 s idle timeout of Go clients
# A started request must arrive whole within this: a client that stops sending
# mid-request would otherwise hold a connection (and its buffer) for ever.
REQUEST_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Request:
    path: str
    content_type: str
    body: bytes


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"


Endpoint = Callable[[Request], Awaitable[Response]]

_HEX_DIGITS = b"0123456789abcdefABCDEF"

_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Request Entity Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}


class HTTPError(Exception):
    """A request answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Server:
    """Endpoints by path; `protocol()` is the factory for `loop.create_server`."""

    def __init__(
        self,
        endpoints: dict[str, Endpoint],
        *,
        max_body: int,
        on_connection: Callable[[], None] | None = None,
        keepalive_timeout: float = KEEPALIVE_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.endpoints = dict(endpoints)
        self.max_body = max_body
        self.on_connection = on_connection
        self.keepalive_timeout = keepalive_timeout
        self.request_timeout = request_timeout
        self.connections: set[Connection] = set()
        self.closing = False

    def protocol(self) -> Connection:
        return Connection(self)

    async def shutdown(self, deadline: float) -> None:
        """Close idle connections now and the others after their answer in flight;
        after `deadline` seconds, abort what is left."""
        self.closing = True
        for conn in list(self.connections):
            conn.close_when_idle()
        ends = time.monotonic() + deadline
        while self.connections and time.monotonic() < ends:
            waits = [conn.closed for conn in self.connections]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*waits, return_exceptions=True),
                    max(0.0, ends - time.monotonic()),
                )
        for conn in list(self.connections):
            conn.abort()


def _status_line(status: int) -> bytes:
    return f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n".encode("latin-1")


def _head(status: int, content_type: str, length: int, keep_alive: bool) -> bytes:
    connection = b"" if keep_alive else b"Connection: close\r\n"
    return b"%sContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n" % (
        _status_line(status),
        content_type.encode("latin-1"),
        length,
        connection,
    )


class Connection(asyncio.Protocol):
    """One client connection: its bytes in, one request served at a time, in order."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.busy = False  # a request's endpoint is running
        self.task: asyncio.Task[None] | None = None  # held: the loop keeps weak ones
        self.closing = False
        # Back-pressure: a client that pipelines requests and reads no answers
        # is neither read from nor answered further until it catches up.
        self.reading_paused = False
        self.writing_paused = False
        self.last_activity = 0.0
        self.request_started: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[None] = self.loop.create_future()

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TLS transport is not a subclass of asyncio.Transport, only alike.
        self.transport = cast(asyncio.Transport, transport)
        self.server.connections.add(self)
        if self.server.on_connection is not None:
            self.server.on_connection()
        self.last_activity = self.loop.time()
        self._arm_timer(self.server.keepalive_timeout)
        if self.server.closing:
            self.close_when_idle()

    def data_received(self, data: bytes) -> None:
        self.last_activity = self.loop.time()
        if self.request_started is None:
            self.request_started = self.last_activity
        self.buffer += data
        if self.busy or self.writing_paused:
            self._pace_reading()
        else:
            self._serve_buffered()

    def eof_received(self) -> bool | None:
        if not self.busy:
            self._close()
        # While a request is served, its answer is still written, then the
        # connection closes (the client sent all it will).
        self.closing = True
        return True

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._serve_buffered()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None
        if not self.closed.done():
            self.closed.set_result(None)

    # -- lifecycle

    def close_when_idle(self) -> None:
        self.closing = True
        if not self.busy and not self.buffer:
            self._close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _arm_timer(self, delay: float) -> None:
        self.timer = self.loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        # One timer per connection, re-armed when it fires rather than on every
        # request: activity only moves a timestamp.
        now = self.loop.time()
        if self.busy:
            self._arm_timer(self.server.request_timeout)
            return
        if self.request_started is not None:
            if now - self.request_started >= self.server.request_timeout:
                self._close()
                return
            self._arm_timer(self.request_started + self.server.request_timeout - now)
            return
        if now - self.last_activity >= self.server.keepalive_timeout:
            self._close()
            return
        self._arm_timer(self.last_activity + self.server.keepalive_timeout - now)

    # -- requests

    def _serve_buffered(self) -> None:
        """Answer the buffer's whole requests in turn until one needs its endpoint run
        (or the client must read first); then read more only if that keeps the buffer
        bounded."""
        while self.buffer and not self.busy and not self.writing_paused:
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            try:
                parsed = _parse_request(self.buffer, self.server.max_body, self._continue)
            except HTTPError as err:
                self.buffer.clear()
                self._write(Response(err.status, str(err).encode(), "text/plain"), False)
                return
            if parsed is None:
                break
            consumed, method, path, content_type, keep_alive, body = parsed
            del self.buffer[:consumed]
            self.request_started = self.loop.time() if self.buffer else None
            keep_alive = keep_alive and not self.closing and not self.server.closing
            endpoint = self.server.endpoints.get(path)
            if endpoint is None:
                self._write(Response(404, b"404: Not Found", "text/plain"), keep_alive)
            elif method != "POST":
                self._write(Response(405, b"405: Method Not Allowed", "text/plain"), keep_alive)
            else:
                self.busy = True
                request = Request(path, content_type, body)
                self.task = self.loop.create_task(self._run(endpoint, request, keep_alive))
        self._pace_reading()

    def _pace_reading(self) -> None:
        """Read on while a request is incomplete (the parser bounds it) or the buffer
        is small; pause while requests wait for an endpoint or for the client."""
        transport = self.transport
        if transport is None:
            return
        held = self.busy or self.writing_paused
        if held and len(self.buffer) > MAX_HEAD:
            if not self.reading_paused:
                self.reading_paused = True
                transport.pause_reading()
        elif self.reading_paused:
            self.reading_paused = False
            transport.resume_reading()

    def _continue(self) -> None:
        if self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    async def _run(self, endpoint: Endpoint, request: Request, keep_alive: bool) -> None:
        try:
            response = await endpoint(request)
        except Exception:
            log.exception("webhook endpoint failed", extra={"path": request.path})
            response = Response(500, b"500: Internal Server Error", "text/plain")
        self.busy, self.task = False, None
        if self._write(response, keep_alive and not self.closing and not self.server.closing):
            self._serve_buffered()

    def _write(self, response: Response, keep_alive: bool) -> bool:
        """Send the answer; True when the connection stays open for more."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        head = _head(response.status, response.content_type, len(response.body), keep_alive)
        transport.write(head + response.body)
        if not keep_alive:
            self.closing = True
            self.buffer.clear()
            transport.close()
        return keep_alive


def _parse_request(
    buffer: bytearray, max_body: int, send_continue: Callable[[], None]
) -> tuple[int, str, str, str, bool, bytes] | None:
    """(bytes consumed, method, path, content type, keep-alive, body) of the whole
    request at the buffer's start, or None while it is incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise HTTPError(431, "request head too large")
        return None
    if end > MAX_HEAD:
        raise HTTPError(431, "request head too large")
    lines = bytes(buffer[:end]).split(b"\r\n")
    try:
        method_b, target_b, version_b = lines[0].split(b" ")
    except ValueError:
        raise HTTPError(400, "malformed request line") from None
    if version_b == b"HTTP/1.1":
        keep_alive = True
    elif version_b == b"HTTP/1.0":
        keep_alive = False
    elif version_b.startswith(b"HTTP/"):
        raise HTTPError(505, "only HTTP/1.1 is served")
    else:
        raise HTTPError(400, "malformed request line")
    length: int | None = None
    chunked = False
    content_type = ""
    expect_continue = False
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise HTTPError(400, "malformed header line")
        key = name.lower()
        if key == b"content-length":
            digits = value.strip()
            if not digits.isdigit() or len(digits) > 18:
                raise HTTPError(400, "invalid Content-Length")
            n = int(digits)
            if length is not None and n != length:
                raise HTTPError(400, "invalid Content-Length")
            length = n
        elif key == b"transfer-encoding":
            codings = [c.strip().lower() for c in value.split(b",")]
            if codings != [b"chunked"]:
                raise HTTPError(400, "unsupported Transfer-Encoding")
            chunked = True
        elif key == b"content-type":
            content_type = value.split(b";", 1)[0].strip().lower().decode("latin-1")
        elif key == b"connection":
            tokens = {t.strip().lower() for t in value.split(b",")}
            if b"close" in tokens:
                keep_alive = False
            elif b"keep-alive" in tokens:
                keep_alive = True
        elif key == b"expect" and value.strip().lower() == b"100-continue":
            expect_continue = True
    if chunked and length is not None:
        # RFC 9112 6.3: both at once is how request smuggling starts.
        raise HTTPError(400, "both Content-Length and Transfer-Encoding")
    body_start = end + 4
    if chunked:
        parsed = _dechunk(buffer, body_start, max_body)
        if parsed is None:
            if expect_continue and len(buffer) == body_start:
                send_continue()
            return None
        body, consumed = parsed
    else:
        n = length or 0
        if n > max_body:
            raise HTTPError(413, f"request body over {max_body} bytes")
        if len(buffer) < body_start + n:
            if expect_continue and len(buffer) == body_start:
                send_continue()
            return None
        body, consumed = bytes(buffer[body_start : body_start + n]), body_start + n
    path = target_b.split(b"?", 1)[0].decode("latin-1")
    return consumed, method_b.decode("latin-1"), path, content_type, keep_alive, body


def _dechunk(buffer: bytearray, start: int, max_body: int) -> tuple[bytes, int] | None:
    """A chunked body from `start`: (body, end offset), or None while incomplete."""
    parts: list[bytearray] = []
    size_total = 0
    pos = start
    while True:
        eol = buffer.find(b"\r\n", pos)
        if eol < 0:
            if len(buffer) - pos > 1024:
                raise HTTPError(400, "malformed chunk size")
            return None
        size_field = bytes(buffer[pos:eol]).split(b";", 1)[0].strip()
        # int() would also take "0x", "+" and "_": only hex digits are a size.
        if not size_field or size_field.strip(_HEX_DIGITS) or len(size_field) > 16:
            raise HTTPError(400, "malformed chunk size")
        size = int(size_field, 16)
        pos = eol + 2
        if size == 0:
            break
        size_total += size
        if size_total > max_body:
            raise HTTPError(413, f"request body over {max_body} bytes")
        if len(buffer) < pos + size + 2:
            return None
        if buffer[pos + size : pos + size + 2] != b"\r\n":
            raise HTTPError(400, "malformed chunk")
        parts.append(buffer[pos : pos + size])
        pos += size + 2
    # Trailer fields, if any, end with an empty line; they are not read.
    while True:
        eol = buffer.find(b"\r\n", pos)
        if eol < 0:
            if len(buffer) - pos > MAX_HEAD:
                raise HTTPError(431, "trailer too large")
            return None
        line_empty = eol == pos
        pos = eol + 2
        if line_empty:
            break
    return b"".join(parts), pos
