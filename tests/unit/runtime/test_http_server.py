"""The webhooks' HTTP/1.1 server over TCP and TLS: framing, keep-alive, pipelining and
back-pressure, errors, limits, timeouts, shutdown, and the configuration's TLS settings.
The AdmissionReview layer is covered through WebhookServer (test_webhook_unit); floods
of malformed requests in test_http_refusals."""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
from collections.abc import AsyncIterator

import pytest

from leaderworkerset.runtime import http_server
from leaderworkerset.runtime.certs import TLSOptions, load_key_pair, server_ssl_context
from leaderworkerset.runtime.pki import KeyPairs, generate_key_pairs

MAX_BODY = 1024


async def echo(request: http_server.Request) -> http_server.Response:
    return http_server.Response(
        200, b"%s|%s|%s" % (request.path.encode(), request.content_type.encode(), request.body)
    )


async def fail(request: http_server.Request) -> http_server.Response:
    raise RuntimeError("boom")


async def abandoned(request: http_server.Request) -> http_server.Response:
    raise asyncio.CancelledError


class Slow:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def __call__(self, request: http_server.Request) -> http_server.Response:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return http_server.Response(200, b"slow done")


class Running:
    def __init__(self, server: http_server.Server, listener: asyncio.AbstractServer) -> None:
        self.server = server
        self.listener = listener
        self.port = listener.sockets[0].getsockname()[1]
        self.connections = 0

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


async def serve(**options: float) -> AsyncIterator[Running]:
    slow = Slow()
    counted: list[int] = []
    server = http_server.Server(
        {"/echo": echo, "/fail": fail, "/slow": slow, "/abandoned": abandoned},
        max_body=MAX_BODY,
        on_connection=lambda: counted.append(1),
        **options,
    )
    listener = await asyncio.get_running_loop().create_server(server.protocol, "127.0.0.1", 0)
    running = Running(server, listener)
    running.slow = slow  # type: ignore[attr-defined]
    running.counted = counted  # type: ignore[attr-defined]
    try:
        yield running
    finally:
        listener.close()
        await server.shutdown(1.0)
        await listener.wait_closed()


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    async for r in serve():
        yield r


def post(path: str, body: bytes, *extra: str, version: str = "HTTP/1.1") -> bytes:
    head = [f"POST {path} {version}", "Host: x", "Content-Type: application/json; charset=utf-8"]
    head.append(f"Content-Length: {len(body)}")
    head.extend(extra)
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    status, headers, _ = await read_response_head(reader)
    async with asyncio.timeout(5):
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


async def answered_then_closed(running: Running, raw: bytes) -> int:
    """Send `raw` on a new connection: the answer's status, once it came with
    `Connection: close` and the server closed the connection after it."""
    reader, writer = await running.connect()
    writer.write(raw)
    status, headers, _ = await read_response(reader)
    assert headers["connection"] == "close"
    assert await closed(reader)
    writer.close()
    return status


async def closed(reader: asyncio.StreamReader) -> bool:
    async with asyncio.timeout(5):
        return await reader.read() == b""


async def test_keep_alive_serves_requests_in_turn_on_one_connection(running: Running) -> None:
    reader, writer = await running.connect()
    for n in range(3):
        writer.write(post("/echo?timeout=10s", b'{"n": %d}' % n))
        status, headers, body = await read_response(reader)
        assert (status, body) == (200, b'/echo|application/json|{"n": %d}' % n)
        assert headers["content-type"] == "application/json"
        assert "connection" not in headers
    assert running.counted == [1]  # type: ignore[attr-defined]
    writer.close()


async def test_pipelined_requests_are_answered_in_order(running: Running) -> None:
    reader, writer = await running.connect()
    writer.write(post("/slow", b"") + post("/echo", b"second") + post("/echo", b"third"))
    await asyncio.wait_for(running.slow.started.wait(), 5)  # type: ignore[attr-defined]
    running.slow.release.set()  # type: ignore[attr-defined]
    answers = [await read_response(reader) for _ in range(3)]
    assert [body for _, _, body in answers] == [
        b"slow done",
        b"/echo|application/json|second",
        b"/echo|application/json|third",
    ]
    writer.close()


async def test_a_request_split_anywhere_is_read_whole(running: Running) -> None:
    stream = post("/echo", b"one") + post("/echo", b"two" * 50) + post("/echo", b"")
    rng = random.Random(7)
    for _ in range(5):
        reader, writer = await running.connect()
        cuts = sorted(rng.sample(range(1, len(stream)), 12))
        for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            writer.write(stream[a:b])
            await writer.drain()
            await asyncio.sleep(0)
        bodies = [(await read_response(reader))[2] for _ in range(3)]
        assert bodies == [
            b"/echo|application/json|one",
            b"/echo|application/json|" + b"two" * 50,
            b"/echo|application/json|",
        ]
        writer.close()


async def test_chunked_bodies_and_expect_continue(running: Running) -> None:
    reader, writer = await running.connect()
    writer.write(
        b"POST /echo HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        b"4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\n"
    )
    assert (await read_response(reader))[2] == b"/echo|application/json|wikipedia"
    writer.write(b"POST /echo HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
    status, _, _ = await read_response(reader)
    assert status == 100
    writer.write(b"ok")
    status, _, body = await read_response(reader)
    assert (status, body) == (200, b"/echo||ok")
    writer.close()


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"POST /echo HTTP/2.0\r\n\r\n", 505),
        (b"POST /echo HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", 400),
        (b"POST /echo HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400),
        (
            b"POST /echo HTTP/1.1\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (b"POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400),
        (b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n", 400),
        (b"POST /echo HTTP/1.1\r\n Folded: header\r\n\r\n", 400),
        (b"POST /echo HTTP/1.1\r\nX: a\nContent-Length: 5\r\n\r\nhello", 400),
        (b"POST /echo HTTP/1.1\r\nX: a\rb\r\n\r\n", 400),
        # The parser reads chunk extensions without keeping them: a flood of them
        # is bounded by the request's size on the wire.
        (
            b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;"
            + b"e" * (MAX_BODY + http_server.MAX_HEAD + http_server.FEED_SLICE),
            413,
        ),
        (
            b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            + (b"1;" + b"e" * 900 + b"\r\nx\r\n") * 100,
            413,
        ),
        (
            b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
            + b"Trailer: flood\r\n" * 5000,
            431,
        ),
        (b"POST /echo HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1), 413),
        (
            b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s"
            % (MAX_BODY + 1, b"x" * (MAX_BODY + 1)),
            413,
        ),
        (b"POST /echo HTTP/1.1\r\nX: " + b"y" * (http_server.MAX_HEAD + 1), 431),
    ],
)
async def test_malformed_requests_are_refused_and_the_connection_closed(
    running: Running, raw: bytes, status: int
) -> None:
    assert await answered_then_closed(running, raw) == status


async def test_unknown_paths_methods_and_failing_endpoints_keep_the_connection(
    running: Running,
) -> None:
    reader, writer = await running.connect()
    writer.write(post("/nowhere", b"{}"))
    assert (await read_response(reader))[0] == 404
    writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await read_response(reader))[0] == 405
    writer.write(post("/fail", b"{}"))
    assert (await read_response(reader))[0] == 500
    writer.write(post("/echo", b"still"))
    assert (await read_response(reader))[2] == b"/echo|application/json|still"
    writer.close()


@pytest.mark.parametrize(
    ("extra", "version"), [(("Connection: close",), "HTTP/1.1"), ((), "HTTP/1.0")]
)
async def test_close_is_honoured(running: Running, extra: tuple[str, ...], version: str) -> None:
    assert await answered_then_closed(running, post("/echo", b"x", *extra, version=version)) == 200


async def test_http10_keep_alive_on_request(running: Running) -> None:
    reader, writer = await running.connect()
    for _ in range(2):
        writer.write(post("/echo", b"x", "Connection: keep-alive", version="HTTP/1.0"))
        status, headers, _ = await read_response(reader)
        assert (status, headers["connection"]) == (200, "keep-alive")
    writer.close()


async def test_idle_and_stalled_connections_are_closed() -> None:
    async for running in serve(keepalive_timeout=0.3, request_timeout=0.6):
        reader, writer = await running.connect()
        writer.write(post("/echo", b"x"))
        assert (await read_response(reader))[0] == 200
        assert await closed(reader)  # idle past the keep-alive timeout
        reader, writer = await running.connect()
        writer.write(post("/echo", b"x")[:-1])  # one byte short, then silence
        assert await closed(reader)
        # A review that takes longer than the request timeout is still answered.
        reader, writer = await running.connect()
        writer.write(post("/slow", b""))
        await asyncio.wait_for(running.slow.started.wait(), 5)  # type: ignore[attr-defined]
        await asyncio.sleep(1.0)  # past both timeouts while the endpoint runs
        running.slow.release.set()  # type: ignore[attr-defined]
        assert (await read_response(reader))[2] == b"slow done"


async def test_shutdown_answers_the_request_in_flight_and_closes_idle_ones() -> None:
    async for running in serve():
        idle_reader, idle_writer = await running.connect()
        idle_writer.write(post("/echo", b"x"))
        assert (await read_response(idle_reader))[0] == 200
        reader, writer = await running.connect()
        writer.write(post("/slow", b""))
        await asyncio.wait_for(running.slow.started.wait(), 5)  # type: ignore[attr-defined]
        stopping = asyncio.create_task(running.server.shutdown(5.0))
        assert await closed(idle_reader)
        assert not stopping.done()
        running.slow.release.set()  # type: ignore[attr-defined]
        status, headers, body = await read_response(reader)
        assert (status, headers["connection"], body) == (200, "close", b"slow done")
        await asyncio.wait_for(stopping, 5)
        assert not running.server.connections


async def test_shutdown_aborts_what_outlasts_its_deadline() -> None:
    async for running in serve():
        reader, writer = await running.connect()
        writer.write(post("/slow", b""))
        await asyncio.wait_for(running.slow.started.wait(), 5)  # type: ignore[attr-defined]
        await asyncio.wait_for(running.server.shutdown(0.2), 5)
        assert await closed(reader)
        assert not running.server.connections
        assert running.slow.cancelled  # type: ignore[attr-defined]


async def test_a_client_that_reads_no_answers_is_paused_then_served_in_full(
    running: Running,
) -> None:
    # A small receive window, so that the answers back up into the server's buffers.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", running.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    count = 30000
    writer.write(b"".join(post("/echo", b"%06d" % n + b"." * 200) for n in range(count)))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not any(c.writing_paused for c in running.server.connections):
        assert loop.time() < deadline, "the server never applied back-pressure"
        await asyncio.sleep(0.01)
    # Paused, the server stops reading too: what it holds stays bounded.
    for _ in range(20):
        await asyncio.sleep(0.01)
        sizes = [
            (c.held_bytes(), c.busy, c.writing_paused, c.reading_paused)
            for c in running.server.connections
        ]
        assert all(n <= http_server.MAX_HEAD + 256 * 1024 for n, *_ in sizes), sizes
    for n in range(count):
        status, _, body = await read_response(reader)
        assert (status, body[:29]) == (200, b"/echo|application/json|%06d" % n)
    writer.close()


async def test_head_and_other_methods_get_405_and_the_framing_holds(running: Running) -> None:
    reader, writer = await running.connect()
    writer.write(b"HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n" + post("/echo", b"after"))
    status, headers, _ = await read_response_head(reader)
    assert (status, headers["allow"]) == (405, "POST")
    # No body followed the HEAD answer: the next bytes are the next answer.
    assert (await read_response(reader))[2] == b"/echo|application/json|after"
    writer.close()


async def test_expect_continue_is_refused_before_the_body_for_a_wrong_path(
    running: Running,
) -> None:
    raw = b"POST /nowhere HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
    assert await answered_then_closed(running, raw) == 404


async def test_an_abandoned_review_closes_its_connection(running: Running) -> None:
    reader, writer = await running.connect()
    writer.write(post("/abandoned", b"{}"))
    assert await closed(reader)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    while running.server.connections:
        assert loop.time() < deadline
        await asyncio.sleep(0.01)
    writer.close()


async def read_response_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """The status and header fields of the next answer, its body left unread."""
    async with asyncio.timeout(5):
        head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
    return int(lines[0].split(" ")[1]), headers, b""


async def test_expect_continue_waits_for_the_answers_before_it(running: Running) -> None:
    """A pipelined request's 100 Continue is an answer too: it is not sent before the
    answer of the request ahead of it."""
    reader, writer = await running.connect()
    writer.write(
        post("/slow", b"")
        + b"POST /echo HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
    )
    await asyncio.wait_for(running.slow.started.wait(), 5)  # type: ignore[attr-defined]
    running.slow.release.set()  # type: ignore[attr-defined]
    assert (await read_response(reader))[2] == b"slow done"
    assert (await read_response(reader))[0] == 100
    writer.write(b"ok")
    assert (await read_response(reader))[2] == b"/echo||ok"
    writer.close()


# --- over TLS, with the configuration's settings ------------------------------------

# A handshake the server refuses: its alert, or the connection reset under it.
HANDSHAKE_REFUSED = (ssl.SSLError, ConnectionResetError)


async def serve_tls(options: TLSOptions) -> AsyncIterator[tuple[int, KeyPairs]]:
    pairs = generate_key_pairs(
        ca_name="test-ca", ca_organization="t", dns_names=["localhost"], ip_addresses=["127.0.0.1"]
    )
    context = server_ssl_context(options)
    load_key_pair(context, pairs.cert, pairs.key)
    server = http_server.Server({"/echo": echo}, max_body=MAX_BODY)
    listener = await asyncio.get_running_loop().create_server(
        server.protocol, "127.0.0.1", 0, ssl=context
    )
    try:
        yield listener.sockets[0].getsockname()[1], pairs
    finally:
        listener.close()
        await server.shutdown(1.0)
        await listener.wait_closed()


def tls_client(
    pairs: KeyPairs, maximum: ssl.TLSVersion | None = None, ciphers: str | None = None
) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=pairs.ca_cert.decode())
    if maximum is not None:
        context.maximum_version = maximum
    if ciphers is not None:
        context.set_ciphers(ciphers)
    return context


async def tls_exchange(port: int, context: ssl.SSLContext) -> tuple[int, bytes, str, str | None]:
    """A review posted over a fresh TLS connection: its status and body, with the
    protocol version and cipher the handshake settled on."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"
    )
    try:
        sslobj = writer.get_extra_info("ssl_object")
        writer.write(post("/echo", b"{}"))
        status, _, body = await read_response(reader)
        return status, body, sslobj.version(), sslobj.cipher()[0]
    finally:
        writer.close()


async def test_tls_minimum_version_is_enforced() -> None:
    async for port, pairs in serve_tls(TLSOptions(min_version="VersionTLS13")):
        status, body, version, _ = await tls_exchange(port, tls_client(pairs))
        assert (status, body, version) == (200, b"/echo|application/json|{}", "TLSv1.3")
        with pytest.raises(HANDSHAKE_REFUSED):
            await tls_exchange(port, tls_client(pairs, maximum=ssl.TLSVersion.TLSv1_2))
    # Without a configured minimum, TLS 1.2 (Go's default) is served.
    async for port, pairs in serve_tls(TLSOptions()):
        client = tls_client(pairs, maximum=ssl.TLSVersion.TLSv1_2)
        assert (await tls_exchange(port, client))[2] == "TLSv1.2"


async def test_tls_cipher_suites_are_enforced() -> None:
    suites = ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",)
    options = TLSOptions(min_version="VersionTLS12", cipher_suites=suites)
    async for port, pairs in serve_tls(options):
        tls12 = ssl.TLSVersion.TLSv1_2
        allowed = tls_client(pairs, maximum=tls12, ciphers="ECDHE-RSA-AES128-GCM-SHA256")
        status, _, _, cipher = await tls_exchange(port, allowed)
        assert (status, cipher) == (200, "ECDHE-RSA-AES128-GCM-SHA256")
        other = tls_client(pairs, maximum=tls12, ciphers="ECDHE-RSA-AES256-GCM-SHA384")
        with pytest.raises(HANDSHAKE_REFUSED):
            await tls_exchange(port, other)


async def test_bodiless_requests_pipelined_unread_are_bounded_too(running: Running) -> None:
    """Requests without a body weigh nothing in body bytes: a client that pipelines
    thousands of them and reads no answers must still be paused, not queued for ever."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", running.port))
    _, writer = await asyncio.open_connection(sock=sock)
    writer.write(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n" * 200_000)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not any(c.reading_paused for c in running.server.connections):
        assert loop.time() < deadline, "the server never stopped reading"
        await asyncio.sleep(0.01)
    for _ in range(20):
        await asyncio.sleep(0.01)
        queued = [len(c.queue) for c in running.server.connections]
        # At most one slice of the read past the bound: 16 bytes is the least a request
        # line and its end can take.
        bound = http_server.MAX_QUEUED + http_server.FEED_SLICE // 16
        assert all(n <= bound for n in queued), queued
    writer.transport.abort()


async def test_shutdown_answers_a_request_still_arriving() -> None:
    """A review half sent when the server starts shutting down is read to its end and
    answered (with `Connection: close`), not cut off."""
    async for running in serve():
        reader, writer = await running.connect()
        raw = post("/echo", b'{"x": 1}')
        writer.write(raw[:40])
        await writer.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while not any(c.message is not None for c in running.server.connections):
            assert loop.time() < deadline, "the request never began"
            await asyncio.sleep(0.01)
        stopping = asyncio.create_task(running.server.shutdown(5.0))
        await asyncio.sleep(0)
        writer.write(raw[40:])
        status, headers, body = await read_response(reader)
        assert (status, headers["connection"]) == (200, "close")
        assert body.endswith(b'{"x": 1}')
        await asyncio.wait_for(stopping, 5)
        assert await closed(reader)
