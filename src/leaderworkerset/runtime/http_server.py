"""The webhooks' HTTP/1.1 server: POST a JSON body, get a JSON body back.

Framing is done by `httptools` (Node's llhttp parser, maintained and fuzzed upstream, as
uvicorn uses it), strict: no lenient mode is turned on, so a request with both
`Content-Length` and `Transfer-Encoding`, two lengths, a bad chunk size, a bare CR or
LF, a folded header line or a NUL is refused by the parser. This module adds what a
parser leaves to its server: which requests it serves and in what order, the limits,
the timeouts and the answers.

The API server holds every pod creation until its admission reviews are answered, and
kube-controller-manager creates pods in bursts of hundreds, so the webhook answers
reviews back to back and each one's cost is what the next one waits: a request here
is its method, path, content type, body and keep-alive, and nothing else is built.

Served: keep-alive (HTTP/1.1's default, HTTP/1.0's on request), `Content-Length` and
chunked bodies, `Expect: 100-continue`, pipelined requests (answered in order, with
back-pressure on a client that does not read its answers). Refused, with the
connection closed after the answer: 400 malformed (the parser's reason is the body),
a transfer coding other than chunked, an upgrade; 413 a body over the limit; 431 a
head or trailer over `MAX_HEAD`; 505 an HTTP version other than 1.0 and 1.1. Answered
with the connection kept: 404 unknown path, 405 not a POST (with `Allow: POST`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

import httptools

log = logging.getLogger("webhook")

MAX_HEAD = 64 * 1024
# Bytes handed to the parser at once. The parser reports a request's start but not
# where in the bytes it was, so a request's size on the wire is known to within this.
# A head is refused once the fields it reported pass MAX_HEAD, or the bytes read while
# it is incomplete do: none longer than MAX_HEAD + FEED_SLICE is read.
FEED_SLICE = 16 * 1024
KEEPALIVE_TIMEOUT = 75.0  # aiohttp's default, under the 90 s idle timeout of Go clients
# A started request must arrive whole within this: a client that stops sending
# mid-request would otherwise hold a connection (and its buffer) for ever.
REQUEST_TIMEOUT = 60.0
# For the listener's TLS handshake (asyncio's default is 60 s); a client that connects
# and sends nothing is dropped after it. The handshake costs the client a round trip or
# two, and Go clients give it 10 s themselves (TLSHandshakeTimeout).
TLS_HANDSHAKE_TIMEOUT = 10.0
# How long a shutdown waits for reviews it cancelled at its deadline to unwind.
CANCEL_WAIT = 1.0
# Whole requests a connection may hold unanswered before it parses no further (what
# it read waits unparsed, and reading pauses): bodiless ones weigh little in bytes,
# yet each is an object in memory. One FEED_SLICE may add as many as it holds.
MAX_QUEUED = 32


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


def _weight(message: _Message) -> int:
    """What a whole request waiting in the queue counts against MAX_HEAD."""
    return len(message.data) + message.head


def _head(response: Response, keep_alive: bool, http10: bool) -> bytes:
    if not keep_alive:
        connection = b"Connection: close\r\n"
    else:
        # HTTP/1.0 closes unless told otherwise, in the answer as in the request.
        connection = b"Connection: keep-alive\r\n" if http10 else b""
    reason = _REASONS.get(response.status, "Unknown")
    return b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s%s\r\n" % (
        response.status,
        reason.encode("latin-1"),
        response.content_type.encode("latin-1"),
        len(response.body),
        response.headers,
        connection,
    )


class _Message:
    """A request: while the parser reads it, what a review needs of its head, its body
    so far and its size; once whole, what waits its turn in the queue."""

    __slots__ = (
        "body",
        "chunked",
        "content_type",
        "data",
        "expect_continue",
        "head",
        "http10",
        "keep_alive",
        "method",
        "path",
        "size",
        "trailer",
        "url",
    )

    def __init__(self) -> None:
        self.url = b""
        self.content_type = ""
        self.chunked = False
        self.expect_continue = False
        self.body: list[bytes] = []
        # Bytes on the wire (to within FEED_SLICE): the head's while it is read, then
        # the whole request's, which bounds what a chunked body's framing may add.
        self.size = 0
        self.head = 16  # bytes of the head's parts reported, and of its request line
        self.trailer = 0  # bytes of the trailer fields read
        # Known once the head is whole.
        self.method = b""
        self.path = ""
        self.http10 = False
        # Known once the request is whole.
        self.data = b""
        self.keep_alive = False


# The lengths of the header names a review reads: the others are not looked at.
_READ_NAMES = (b"content-type", b"content-length", b"transfer-encoding", b"expect")
_READ_NAME_LENGTHS = frozenset(len(name) for name in _READ_NAMES)


class Connection(asyncio.Protocol):
    """One client connection: requests parsed as bytes arrive, served one at a time,
    in order. The parser's callbacks (`on_*`) are called from `feed_data`."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.tls = False
        self.parser = httptools.HttpRequestParser(self)
        self.message: _Message | None = None  # begun, not yet whole
        self.headers_done = False  # of `message`
        self.body_size = 0  # of `message`
        self.queue: collections.deque[_Message] = collections.deque()
        self.queued_bytes = 0  # the requests in `queue`: bodies and heads
        self.unparsed = b""  # read while the queue was full, parsed as it drains
        # What the parser refused: answered in turn, after the whole requests before it.
        self.refusal: HTTPError | None = None
        self.continue_sent = False  # of `message`
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
        # Read on while the connection is open, even when the server shuts down: a
        # request already arriving is answered (with `Connection: close`), not cut off.
        if self.refusal is None and self.transport is not None and not self.transport.is_closing():
            if self.unparsed:
                self.unparsed += data  # in order, behind what waits already
            else:
                self._parse(data)
        self._serve()

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
        self._serve()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None
        if not self.closed.done():
            self.closed.set_result(None)

    # -- parsing

    def _parse(self, data: bytes) -> None:
        """Feed the parser; whole requests join the queue, a refusal is kept. Once the
        queue is full, the rest of `data` waits unparsed (and reading pauses) until
        answers drain it: one read can hold thousands of small pipelined requests."""
        try:
            if len(data) <= FEED_SLICE and len(self.queue) < MAX_QUEUED:
                self.parser.feed_data(data)
                if self.message is not None:
                    self._measure(len(data))
            else:
                view = memoryview(data)
                for start in range(0, len(data), FEED_SLICE):
                    if len(self.queue) >= MAX_QUEUED:
                        self.unparsed = bytes(view[start:])
                        return
                    piece = view[start : start + FEED_SLICE]
                    self.parser.feed_data(piece)
                    if self.message is not None:
                        self._measure(len(piece))
        except HTTPError as err:
            self.refusal = err
        except httptools.HttpParserCallbackError as err:
            # A callback raised: its HTTPError is the reason, anything else a bug.
            cause = err.__context__
            if not isinstance(cause, HTTPError):
                raise
            self.refusal = cause
        except httptools.HttpParserError as err:
            self.refusal = HTTPError(400, str(err) or "malformed request")
        if self.refusal is not None:
            self.message = None

    def _measure(self, fed: int) -> None:
        """Count bytes just fed to the request being read against its limits."""
        message = self.message
        assert message is not None
        message.size += fed
        if not self.headers_done:
            if message.size > MAX_HEAD:
                raise HTTPError(431, "request head too large")
        elif message.size > self.server.max_body + MAX_HEAD:
            # Chunk sizes, extensions and trailers around a body under the limit.
            raise HTTPError(413, f"request body over {self.server.max_body} bytes")

    def on_message_begin(self) -> None:
        self.message = _Message()
        self.headers_done = False
        self.body_size = 0
        self.continue_sent = False

    def on_url(self, url: bytes) -> None:
        message = self.message
        assert message is not None
        message.url += url
        message.head += len(url)
        if message.head > MAX_HEAD:
            raise HTTPError(431, "request head too large")

    def on_header(self, name: bytes, value: bytes) -> None:
        message = self.message
        assert message is not None
        if self.headers_done:
            # A trailer field: not read, only bounded.
            message.trailer += len(name) + len(value) + 4
            if message.trailer > MAX_HEAD:
                raise HTTPError(431, "trailer too large")
            return
        # What the head's fields are known to hold: the bytes read so far bound the
        # rest, to within FEED_SLICE.
        message.head += len(name) + len(value) + 4
        if message.head > MAX_HEAD:
            raise HTTPError(431, "request head too large")
        if len(name) in _READ_NAME_LENGTHS:
            self._read_field(message, name.lower(), value)

    def _read_field(self, message: _Message, key: bytes, value: bytes) -> None:
        if key == b"content-type":
            message.content_type = value.split(b";", 1)[0].strip().lower().decode("latin-1")
        elif key == b"content-length":
            # The parser has checked it is one plain number.
            if int(value) > self.server.max_body:
                raise HTTPError(413, f"request body over {self.server.max_body} bytes")
        elif key == b"transfer-encoding":
            # The parser takes codings before `chunked`; a review has no use for them.
            if value.strip().lower() != b"chunked":
                raise HTTPError(400, "unsupported Transfer-Encoding")
            message.chunked = True
        elif key == b"expect":
            message.expect_continue = value.strip().lower() == b"100-continue"

    def on_headers_complete(self) -> None:
        message = self.message
        assert message is not None
        self.headers_done = True
        version = self.parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise HTTPError(505, "only HTTP/1.1 is served")
        if self.parser.should_upgrade():
            # The parser would hand the bytes after this head over unread.
            raise HTTPError(400, "upgrades are not served")
        message.http10 = version == "1.0"
        if message.chunked and message.http10:
            raise HTTPError(400, "Transfer-Encoding in an HTTP/1.0 request")
        message.method = self.parser.get_method()
        message.path = message.url.split(b"?", 1)[0].decode("latin-1")

    def on_body(self, body: bytes) -> None:
        assert self.message is not None
        self.body_size += len(body)
        if self.body_size > self.server.max_body:
            raise HTTPError(413, f"request body over {self.server.max_body} bytes")
        self.message.body.append(body)

    def on_message_complete(self) -> None:
        message = self.message
        assert message is not None
        self.message = None
        body = message.body
        message.data = body[0] if len(body) == 1 else b"".join(body)
        message.keep_alive = self.parser.should_keep_alive()
        self.queue.append(message)
        self.queued_bytes += _weight(message)

    # -- lifecycle

    def close_when_idle(self) -> None:
        self.closing = True
        if not self.busy and not self.queue and self.message is None:
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

    # -- serving

    def _serve(self) -> None:
        """Answer the queued requests in turn until one needs its endpoint run (or
        the client must read first); then what waits on this turn: a refusal, or a
        100 Continue for the request being read."""
        while not self.busy and not self.writing_paused:
            if self.transport is None or self.transport.is_closing():
                return
            if self.unparsed and len(self.queue) < MAX_QUEUED and self.refusal is None:
                waiting, self.unparsed = self.unparsed, b""
                self._parse(waiting)
            if not self.queue:
                break
            parsed = self.queue.popleft()
            self.queued_bytes -= _weight(parsed)
            self.request_started = self.loop.time() if self.queue or self.message else None
            keep_alive = parsed.keep_alive and not self.closing and not self.server.closing
            endpoint, refusal = self._route(parsed.method, parsed.path)
            if endpoint is None:
                if not self._write(refusal, keep_alive, parsed.method, parsed.http10):
                    return
                continue
            self.busy = True
            request = Request(parsed.path, parsed.content_type, parsed.data)
            self.task = self.loop.create_task(self._run(endpoint, request, keep_alive, parsed))
        if not self.busy and not self.queue:
            if self.refusal is not None:
                err = self.refusal
                self._refuse(Response(err.status, str(err).encode(), "text/plain"))
                return
            if self.message is not None and self.message.expect_continue:
                self._answer_expect_continue(self.message)
        self._pace_reading()

    def _answer_expect_continue(self, message: _Message) -> None:
        if self.continue_sent or not self.headers_done:
            return
        self.continue_sent = True
        endpoint, refusal = self._route(message.method, message.path)
        if endpoint is None:
            # Refused before its body is sent: whether the client sends it anyway
            # is unknown, so the connection cannot carry on.
            self._refuse(refusal)
            return
        self._send(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _route(self, method: bytes, path: str) -> tuple[Endpoint | None, Response]:
        endpoint = self.server.endpoints.get(path)
        if endpoint is None:
            return None, _NOT_FOUND
        if method != b"POST":
            return None, _NOT_ALLOWED
        return endpoint, _NOT_FOUND

    def held_bytes(self) -> int:
        """What this connection holds of requests not yet answered."""
        reading = self.message.size if self.message is not None else 0
        return self.queued_bytes + reading + len(self.unparsed)

    def _pace_reading(self) -> None:
        """Read on while nothing waits, or what waits is small; pause while requests
        wait for an endpoint or for the client."""
        transport = self.transport
        if transport is None:
            return
        held = self.busy or self.writing_paused
        if self.unparsed or (held and self.held_bytes() > MAX_HEAD):
            if not self.reading_paused:
                self.reading_paused = True
                transport.pause_reading()
        elif self.reading_paused:
            self.reading_paused = False
            transport.resume_reading()

    async def _run(
        self, endpoint: Endpoint, request: Request, keep_alive: bool, parsed: _Message
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
        if self._write(response, keep_alive, parsed.method, parsed.http10):
            self._serve()

    def _send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _write(self, response: Response, keep_alive: bool, method: bytes, http10: bool) -> bool:
        """Send the answer; True when the connection stays open for more."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        data = _head(response, keep_alive, http10)
        transport.write(data if method == b"HEAD" else data + response.body)
        # The keep-alive clock runs from the answer, not from the request's last byte.
        self.last_activity = self.loop.time()
        if not keep_alive:
            self.closing = True
            self.queue.clear()
            self.queued_bytes = 0
            self.unparsed = b""
            transport.close()
        return keep_alive

    def _refuse(self, response: Response) -> None:
        self.queue.clear()
        self.queued_bytes = 0
        self.unparsed = b""
        self.message = None
        self._send(_head(response, False, False) + response.body)
        self.closing = True
        self._close()
