"""Malformed and smuggling-style requests against the webhooks' HTTP server: a few
hundred, generated, each sent first on a connection of its own and followed by a
well-formed request. Every one is refused (a 4xx or 5xx answer, or no answer) and its
connection closed, and no endpoint ever runs: neither for the refused request nor
for anything its bytes might be taken to hold."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from leaderworkerset.runtime import http_server

MAX_BODY = 4096
REQUEST_TIMEOUT = 2.0
OK_BODY = b'{"ok": 1}'
# Sent after each case: served only if the server took the case's bytes for requests.
FOLLOWER = (
    b"POST /smuggled HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(OK_BODY), OK_BODY)
)
# A request hidden in a body, for the parser to find if it framed the body wrongly.
HIDDEN = b"POST /smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"


def request(line: bytes, *headers: bytes, body: bytes = b"") -> bytes:
    return line + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def post(*headers: bytes, body: bytes = b"") -> bytes:
    return request(b"POST /echo HTTP/1.1", b"Host: x", *headers, body=body)


def chunked(body: bytes, *headers: bytes) -> bytes:
    return post(b"Transfer-Encoding: chunked", *headers, body=body)


def bad_request_lines() -> Iterator[bytes]:
    lines = [
        b"GARBAGE",
        b"POST",
        b"POST /echo",
        b"POST /echo HTTP/1.1 extra",
        b"POST /echo HTTP/1.1 ",
        b"POST\t/echo HTTP/1.1",
        b"POST /echo\tHTTP/1.1",
        b" POST /echo HTTP/1.1",
        b"post /echo HTTP/1.1",
        b"P0ST /echo HTTP/1.1",
        b"PO ST /echo HTTP/1.1",
        b"POST\x00 /echo HTTP/1.1",
        b"POST /ec ho HTTP/1.1",
        b"POST /ec\x00ho HTTP/1.1",
        b"POST /ec\x7fho HTTP/1.1",
        b"POST /ec\rho HTTP/1.1",
        b"POST /echo\x00 HTTP/1.1",
        b"POST /echo?\x00 HTTP/1.1",
        b"POST /echo#\x01 HTTP/1.1",
        b"CONNECT localhost:443 HTTP/1.1",
        b"PRI * HTTP/2.0",
    ]
    for line in lines:
        yield request(line, b"Host: x", b"Content-Length: 0")


def bad_versions() -> Iterator[bytes]:
    versions = [
        b"HTTP/0.9",
        b"HTTP/1.2",
        b"HTTP/2.0",
        b"HTTP/3.0",
        b"HTTP/9.9",
        b"HTTP/1",
        b"HTTP/2",
        b"HTTP/11",
        b"HTTP/1.10",
        b"HTTP/1.1.1",
        b"HTTP/ 1.1",
        b"HTTP /1.1",
        b"http/1.1",
        b"HTTPS/1.1",
        b"HTTP/1.x",
        b"HTTP/\x001.1",
        b"",
    ]
    for version in versions:
        yield request(b"POST /echo " + version, b"Host: x", b"Content-Length: 0")


def folded_headers() -> Iterator[bytes]:
    for fold in (b" ", b"\t", b"  \t"):
        yield request(b"POST /echo HTTP/1.1", fold + b"Host: x", b"Content-Length: 0")
        yield post(b"X-A: a", fold + b"b", b"Content-Length: 0")
        yield post(b"Content-Length: 1", fold + b"0", body=b"x" * 10)
        yield post(b"Transfer-Encoding: gzip", fold + b"chunked", body=b"0\r\n\r\n")
        yield post(b"Content-Length: 0", b"X-A: a", fold, body=b"")


def content_length_with_transfer_encoding() -> Iterator[bytes]:
    codings = [b"chunked", b"Chunked", b"CHUNKED", b" chunked", b"chunked ", b"\tchunked"]
    lengths = [b"0", b"4", b"36"]
    body = b"0\r\n\r\n" + HIDDEN
    for coding, length in itertools.product(codings, lengths):
        cl, te = b"Content-Length: " + length, b"Transfer-Encoding: " + coding
        yield post(cl, te, body=body)
        yield post(te, cl, body=body)
        yield post(b"CONTENT-LENGTH: " + length, b"TRANSFER-ENCODING: " + coding, body=body)


def content_lengths() -> Iterator[bytes]:
    duplicates = [
        (b"5", b"5"),
        (b"5", b"6"),
        (b"0", b"46"),
        (b"46", b"0"),
    ]
    for first, second in duplicates:
        yield post(
            b"Content-Length: " + first, b"Content-Length: " + second, body=b"hello" + HIDDEN
        )
        yield post(
            b"Content-Length: " + first, b"content-length: " + second, body=b"hello" + HIDDEN
        )
    values = [
        b"5, 5",
        b"5,6",
        b"+5",
        b"-5",
        b"0x5",
        b"5 5",
        b"5.0",
        b"1e3",
        b"five",
        b"5\x00",
        b"\x005",
        b"5;",
        b"99999999999999999999999",
        b"18446744073709551621",
    ]
    for value in values:
        yield post(b"Content-Length: " + value, body=b"hello" + HIDDEN)


def chunk_sizes() -> Iterator[bytes]:
    sizes = [
        b"0x5",
        b"-5",
        b"+5",
        b" 5",
        b"5 ",
        b"5\t",
        b"g",
        b"5g",
        b"",
        b"fffffffffffffffffffff",
        b"5\x00",
        b"5 ;ext",
    ]
    for size in sizes:
        yield chunked(size + b"\r\nhello\r\n0\r\n\r\n" + HIDDEN)
    bodies = [
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\n0\r\n\r\n",
        b"5\r\nhelloXX0\r\n\r\n",
        b"5\r\nhello!\r\n0\r\n\r\n",
        b"3\r\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\r\n0\r\nno colon\r\n\r\n",
        b"5\r\nhello\r\n0\r\n: x\r\n\r\n",
        b"5\r\nhello\r\n0\r\nX: a\x00\r\n\r\n",
        b"5\r\rhello\r\n0\r\n\r\n",
    ]
    for body in bodies:
        yield chunked(body + HIDDEN)


def bare_cr_and_lf() -> Iterator[bytes]:
    heads = [
        b"POST /echo HTTP/1.1\nHost: x\r\nContent-Length: 0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\nContent-Length: 0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\n\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\n",
        b"POST /echo HTTP/1.1\rHost: x\r\nContent-Length: 0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\rContent-Length: 0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nX-A: a\nContent-Length: 46\r\n\r\n",
        b"POST /echo HTTP/1.1\r\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\r",
    ]
    yield from heads


def transfer_codings() -> Iterator[bytes]:
    codings = [
        b"gzip, chunked",
        b"deflate, chunked",
        b"identity, chunked",
        b"compress,chunked",
        b"chunked, gzip",
        b"chunked, chunked",
        b"chunked,",
        b", chunked",
        b"identity",
        b"gzip",
        b"chunked;q=1",
        b"xchunked",
        b"chunkedx",
        b"chunk",
        b'"chunked"',
        b"",
    ]
    for coding in codings:
        yield chunked(b"0\r\n\r\n" + HIDDEN).replace(
            b"Transfer-Encoding: chunked", b"Transfer-Encoding: " + coding
        )
    yield post(b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n")
    yield post(b"Transfer-Encoding: gzip", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n")
    yield post(b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip", body=b"0\r\n\r\n")
    yield request(b"POST /echo HTTP/1.0", b"Transfer-Encoding: chunked", body=b"0\r\n\r\n" + HIDDEN)


def oversize() -> Iterator[bytes]:
    limit = http_server.MAX_HEAD
    yield post(b"X-Big: " + b"y" * limit, b"Content-Length: 0")
    yield post(*(b"X-%d: %s" % (n, b"y" * 60) for n in range(limit // 60 + 2)))
    yield request(b"POST /echo?" + b"q" * limit + b" HTTP/1.1", b"Content-Length: 0")
    yield post(b"X-" + b"n" * limit + b": y", b"Content-Length: 0")
    yield post(b"Content-Length: %d" % (MAX_BODY + 1), body=b"x" * (MAX_BODY + 1))
    yield chunked(b"%x\r\n%s\r\n0\r\n\r\n" % (MAX_BODY + 1, b"x" * (MAX_BODY + 1)))
    yield chunked(b"".join(b"1\r\nx\r\n" for _ in range(MAX_BODY + 1)) + b"0\r\n\r\n")
    yield chunked(b"0\r\n" + b"X-T: flood\r\n" * (limit // 12 + 1) + b"\r\n")


def header_injection() -> Iterator[bytes]:
    lines = [
        b"Content Length: 5",
        b"Content-Length : 5",
        b"Content-Length\t: 5",
        b" Content-Length: 5",
        b"Content-Length:: 5",
        b": 5",
        b"X-A",
        b"X A: b",
        b"X-A\x00: b",
        b"X-\x7fA: b",
        b"X-\xc3\xa9: b",
        b"X-(A): b",
        b"X-A: b\x00c",
        b"X-A: b\x01c",
        b"X-A: b\x7fc",
        b"X-A: \x00",
        b"X-A: b\rContent-Length: 46",
        b"X-A: b\nContent-Length: 46",
        b"Host: x\r\n\rContent-Length: 46",
        b"Transfer-Encoding\x0b: chunked",
        b"Transfer-Encoding\x00: chunked",
        b"Content-Length\x00: 46",
    ]
    for line in lines:
        yield post(line, b"Content-Length: 0", body=HIDDEN)


def nul_bytes() -> Iterator[bytes]:
    valid = post(b"Content-Type: application/json", b"Content-Length: 2", body=b"{}")
    head_end = valid.index(b"\r\n\r\n")
    # A NUL in place of, or inserted at, every byte of the head (other than its
    # field values' insides, which only carry more values).
    for position in range(0, head_end, 2):
        yield valid[:position] + b"\x00" + valid[position + 1 :]
        yield valid[:position] + b"\x00" + valid[position:]


def pipelined_smuggling() -> Iterator[bytes]:
    # The first request is refused; what follows it in the same bytes is not served.
    hidden = HIDDEN
    yield post(b"Content-Length: 6", b"Transfer-Encoding: chunked", body=b"0\r\n\r\nX" + hidden)
    yield post(b"Transfer-Encoding: chunked", b"Content-Length: 3", body=b"3\r\nabc" + hidden)
    yield (
        post(
            b"Content-Length: %d" % (len(hidden) + 5),
            b"Transfer-Encoding: chunked",
            body=b"0\r\n\r\n",
        )
        + hidden
    )
    yield post(b"Transfer-Encoding: xchunked", b"Content-Length: 5", body=b"0\r\n\r\n" + hidden)
    yield post(b"Content-Length: 5", b"Content-Length: %d" % (len(hidden) + 5), body=b"hello")
    yield chunked(b"5\r\nhello\r\n0\r\n" + hidden)
    yield chunked(b"5\r\nhello\r\n0\r\nX: y\r\n" + hidden)
    yield chunked(b"5\r\nhello\r\n0;" + hidden)
    yield (
        request(
            b"GET /echo HTTP/1.1", b"Connection: Upgrade", b"Upgrade: h2c", b"Content-Length: 0"
        )
        + hidden
    )
    yield (
        request(
            b"POST /echo HTTP/1.1",
            b"Connection: Upgrade",
            b"Upgrade: websocket",
            b"Content-Length: 0",
        )
        + hidden
    )
    yield request(b"POST /echo HTTP/1.1", b"Connection: Upgrade", b"Upgrade: h2c") + hidden


def after_a_well_formed_request() -> Iterator[bytes]:
    """A whole request (answered) with bytes after it that are no request: refused,
    with nothing after them served."""
    first = post(b"Content-Type: application/json", b"Content-Length: 2", body=b"{}")
    junk = [b"\x00", b" ", b"\t", b"X", b"0\r\n\r\n", b"GET", b"HTTP/1.1 200 OK\r\n"]
    for prefix in junk:
        yield first + prefix + HIDDEN


GENERATORS = [
    bad_request_lines,
    bad_versions,
    folded_headers,
    content_length_with_transfer_encoding,
    content_lengths,
    chunk_sizes,
    bare_cr_and_lf,
    transfer_codings,
    oversize,
    header_injection,
    nul_bytes,
    pipelined_smuggling,
]
# Each of these is a well-formed request first, answered with 200, then refused bytes.
SERVED_FIRST = [after_a_well_formed_request]


def cases(generators: list[Callable[[], Iterator[bytes]]]) -> list[tuple[str, bytes]]:
    return [
        (f"{generate.__name__}[{n}]", raw)
        for generate in generators
        for n, raw in enumerate(generate())
    ]


class Counting:
    """Endpoints that count every request that reaches them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    async def __call__(self, request: http_server.Request) -> http_server.Response:
        self.calls.append((request.path, request.body))
        return http_server.Response(200, b"{}")


@pytest.fixture
async def counted() -> AsyncIterator[tuple[Counting, int]]:
    counting = Counting()
    server = http_server.Server(
        {"/echo": counting, "/smuggled": counting},
        max_body=MAX_BODY,
        request_timeout=REQUEST_TIMEOUT,
    )
    listener = await asyncio.get_running_loop().create_server(server.protocol, "127.0.0.1", 0)
    try:
        yield counting, listener.sockets[0].getsockname()[1]
    finally:
        listener.close()
        await server.shutdown(1.0)
        await listener.wait_closed()


def statuses(answer: bytes) -> list[int]:
    """The status of every answer in the bytes a connection returned, each answer's
    body skipped by its Content-Length."""
    found = []
    while answer:
        head, sep, rest = answer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        found.append(int(lines[0].split(b" ")[1]))
        if not sep:
            break
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        answer = rest[length:]
    return found


async def exchange(port: int, raw: bytes) -> tuple[bytes, bool]:
    """What the server answered to `raw` and the follower, and whether it then closed
    the connection (within a deadline past its request timeout)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = b""
    try:
        writer.write(raw + FOLLOWER)
        async with asyncio.timeout(REQUEST_TIMEOUT + 5):
            while data := await reader.read(65536):
                answer += data
        return answer, True
    except ConnectionResetError:
        return answer, True
    except TimeoutError:
        return answer, False
    finally:
        writer.close()


def test_the_corpus_is_a_few_hundred_distinct_requests() -> None:
    generated = cases(GENERATORS + SERVED_FIRST)
    assert len(generated) >= 300
    assert len({raw for _, raw in generated}) == len(generated)


async def exchange_all(port: int, generated: list[tuple[str, bytes]]) -> list[tuple[bytes, bool]]:
    limit = asyncio.Semaphore(16)

    async def one(raw: bytes) -> tuple[bytes, bool]:
        async with limit:
            return await exchange(port, raw)

    return await asyncio.gather(*(one(raw) for _, raw in generated))


async def test_every_malformed_request_is_refused_and_nothing_after_it_served(
    counted: tuple[Counting, int],
) -> None:
    counting, port = counted
    generated = cases(GENERATORS)
    answers = await exchange_all(port, generated)
    wrong = []
    for (name, raw), (answer, closed) in zip(generated, answers, strict=True):
        seen = statuses(answer)
        # At most one answer, a refusal, then the connection closed: the follower
        # and anything hidden in the request's bytes never get one.
        if len(seen) > 1 or any(status < 400 for status in seen) or not closed:
            wrong.append((name, raw[:120], answer[:200], closed))
    assert not wrong, wrong
    assert counting.calls == []


async def test_bytes_after_a_whole_request_are_refused_and_nothing_after_them_served(
    counted: tuple[Counting, int],
) -> None:
    counting, port = counted
    generated = cases(SERVED_FIRST)
    answers = await exchange_all(port, generated)
    wrong = []
    for (name, raw), (answer, closed) in zip(generated, answers, strict=True):
        seen = statuses(answer)
        if len(seen) != 2 or seen[0] != 200 or seen[1] < 400 or not closed:
            wrong.append((name, raw[:120], answer[:300], closed))
    assert not wrong, wrong
    assert counting.calls == [("/echo", b"{}")] * len(generated)


async def test_the_follower_is_served_after_a_well_formed_request(
    counted: tuple[Counting, int],
) -> None:
    """The control: the same exchange with a valid first request serves both, so the
    refusals above are the cases' doing."""
    counting, port = counted
    valid = post(b"Content-Type: application/json", b"Content-Length: 2", body=b"{}")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(valid + FOLLOWER.replace(b"Host: x", b"Host: x\r\nConnection: close"))
    async with asyncio.timeout(10):
        answer = await reader.read(-1)
    writer.close()
    assert statuses(answer) == [200, 200]
    assert counting.calls == [("/echo", b"{}"), ("/smuggled", OK_BODY)]
