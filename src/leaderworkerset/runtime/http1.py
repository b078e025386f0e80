"""A small HTTP/1.1 server for the webhooks: POST a JSON body, get a JSON body back.

The API server holds every pod creation until its admission reviews are answered, and
kube-controller-manager creates pods in bursts of hundreds, so the webhook answers
reviews back to back and each one's cost is what the next one waits. A general web
framework spends most of a review on objects the webhook never reads (a request with
a parsed URL, a router, a response with a header map, a stream writer); this server
reads only what a review needs: the method, the path, the body's length and type, and
whether the client keeps the connection open. Everything else in the head is skipped.

Supported: keep-alive (HTTP/1.1's default, HTTP/1.0's on request), `Content-Length`
and chunked bodies (`http1_framing`), `Expect: 100-continue`, pipelined requests
(answered in order, with back-pressure on a client that does not read its answers).
Errors answer as the HTTP status they are: 400 malformed, 404 unknown path, 405 not a
POST, 413 a body over the limit, 431 a head over 64 KiB, 505 another HTTP version.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from leaderworkerset.runtime.http1_framing import MAX_HEAD, Body, HTTPError, RequestHead, parse_head

log = logging.getLogger("webhook")

KEEPALIVE_TIMEOUT = 75.0  # aiohttp's default, under the 90 s idle timeout of Go clients
# A started request must arrive whole within this: a client that stops sending
# mid-request would otherwise hold a connection (and its buffer) for ever.
REQUEST_TIMEOUT = 60.0
# How long a shutdown waits for reviews it cancelled at its deadline to unwind.
CANCEL_WAIT = 1.0


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
    headers: bytes = b""  # further header lines, each ending in CRLF


Endpoint = Callable[[Request], Awaitable[Response]]

_REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Request Entity Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    505: "HTTP Version Not Supported",
}

_NOT_FOUND = Response(404, b"404: Not Found", "text/plain")
_NOT_ALLOWED = Response(405, b"405: Method Not Allowed", "text/plain", b"Allow: POST\r\n")
_FAILED = Response(500, b"500: Internal Server Error", "text/plain")


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
        after `deadline` seconds, abort what is left and cancel its reviews."""
        self.closing = True
        for conn in list(self.connections):
            conn.close_when_idle()
        # Callers close the listener first; a connection accepted anyway sees `closing`.
        closing = [conn.closed for conn in self.connections]
        if closing:
            await asyncio.wait(closing, timeout=deadline)
        tasks = [conn.task for conn in self.connections if conn.task is not None]
        for conn in list(self.connections):
            conn.abort()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=CANCEL_WAIT)


def _status_line(status: int) -> bytes:
    return f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n".encode("latin-1")


def _head(response: Response, keep_alive: bool, http10: bool) -> bytes:
    if not keep_alive:
        connection = b"Connection: close\r\n"
    else:
        # HTTP/1.0 closes unless told otherwise, in the answer as in the request.
        connection = b"Connection: keep-alive\r\n" if http10 else b""
    return b"%sContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
        _status_line(response.status),
        response.content_type.encode("latin-1"),
        len(response.body),
        response.headers,
        connection,
    )


class Connection(asyncio.Protocol):
    """One client connection: its bytes in, one request served at a time, in order."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.tls = False
        self.buffer = bytearray()
        # The request being read: its head once whole, and its body's reader.
        self.head: RequestHead | None = None
        self.body: Body | None = None
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
        self.tls = transport.get_extra_info("ssl_object") is not None
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
        # The client sends no more: an answer in flight is still written, then the
        # connection closes. TLS transports close on EOF whatever is returned (and
        # warn when True is).
        self.closing = True
        if not self.busy:
            self._close()
        return None if self.tls else True

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

    def _expire(self) -> None:
        """A timeout: close, or abort when answers wait for a client that reads none."""
        if self.transport is not None and self.transport.get_write_buffer_size():
            self.abort()
        else:
            self._close()

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
                self._expire()
                return
            self._arm_timer(self.request_started + self.server.request_timeout - now)
            return
        if now - self.last_activity >= self.server.keepalive_timeout:
            self._expire()
            return
        self._arm_timer(self.last_activity + self.server.keepalive_timeout - now)

    # -- requests

    def _serve_buffered(self) -> None:
        """Answer the buffer's whole requests in turn until one needs its endpoint run
        (or the client must read first); then read more only if that keeps the buffer
        bounded."""
        while self.buffer and not self.busy and not self.writing_paused:
            if self.transport is None or self.transport.is_closing():
                return
            try:
                request = self._read_request()
            except HTTPError as err:
                self._refuse(Response(err.status, str(err).encode(), "text/plain"))
                return
            if request is None:
                break
            head, body = request
            keep_alive = head.keep_alive and not self.closing and not self.server.closing
            endpoint, refusal = self._route(head)
            if endpoint is None:
                self._write(refusal, keep_alive, head)
                continue
            self.busy = True
            req = Request(head.path, head.content_type, body)
            self.task = self.loop.create_task(self._run(endpoint, req, keep_alive, head))
        self._pace_reading()

    def _read_request(self) -> tuple[RequestHead, bytes] | None:
        """The next whole request, taken off the buffer; None while incomplete."""
        if self.head is None:
            head = parse_head(self.buffer)
            if head is None:
                return None
            self.head, self.body = head, Body(head, self.server.max_body)
            if head.expect_continue and len(self.buffer) == head.size:
                endpoint, refusal = self._route(head)
                if endpoint is None:
                    # Refused before its body is sent: whether the client sends it
                    # anyway is unknown, so the connection cannot carry on.
                    self._refuse(refusal)
                    return None
                self._send(b"HTTP/1.1 100 Continue\r\n\r\n")
        assert self.body is not None
        read = self.body.read(self.buffer)
        if read is None:
            return None
        body, consumed = read
        head, self.head, self.body = self.head, None, None
        del self.buffer[:consumed]
        self.request_started = self.loop.time() if self.buffer else None
        return head, body

    def _route(self, head: RequestHead) -> tuple[Endpoint | None, Response]:
        endpoint = self.server.endpoints.get(head.path)
        if endpoint is None:
            return None, _NOT_FOUND
        if head.method != "POST":
            return None, _NOT_ALLOWED
        return endpoint, _NOT_FOUND

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

    async def _run(
        self, endpoint: Endpoint, request: Request, keep_alive: bool, head: RequestHead
    ) -> None:
        try:
            response = await endpoint(request)
        except asyncio.CancelledError:
            # Abandoned (a shutdown, or its call on the manager's loop was
            # cancelled): no answer, and a closed connection tells the client so.
            self.busy, self.task = False, None
            self._close()
            raise
        except Exception:
            log.exception("webhook endpoint failed", extra={"path": request.path})
            response = _FAILED
        self.busy, self.task = False, None
        keep_alive = keep_alive and not self.closing and not self.server.closing
        if self._write(response, keep_alive, head):
            self._serve_buffered()

    def _send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _write(self, response: Response, keep_alive: bool, head: RequestHead) -> bool:
        """Send the answer; True when the connection stays open for more."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        data = _head(response, keep_alive, head.http10)
        transport.write(data if head.method == "HEAD" else data + response.body)
        # The keep-alive clock runs from the answer, not from the request's last byte.
        self.last_activity = self.loop.time()
        if not keep_alive:
            self.closing = True
            self.buffer.clear()
            transport.close()
        return keep_alive

    def _refuse(self, response: Response) -> None:
        self.buffer.clear()
        self.head = self.body = None
        self._send(_head(response, False, False) + response.body)
        self.closing = True
        self._close()
