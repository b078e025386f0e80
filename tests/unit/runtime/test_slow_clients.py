"""Slow and greedy clients of the probe and metrics servers (and the webhook server's
TLS handshake): idle connections, request heads that stop or trickle, TLS handshakes
never begun are all dropped after their timeouts; request bodies are never read, and
oversized heads are refused. Real sockets; the timeouts are shortened here."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from leaderworkerset.runtime.health import (
    MAX_FIELD,
    MAX_HEADERS,
    HealthServer,
    MetricsServer,
    SlowClientTimeouts,
)
from leaderworkerset.runtime.pki import KeyPairs
from leaderworkerset.runtime.webhook import WebhookServer
from tests.toolkit.webhook_client import new_pairs, write_pairs

IDLE = 0.4
HANDSHAKE = 0.4
TIMEOUTS = SlowClientTimeouts(idle=IDLE, handshake=HANDSHAKE)
# Far longer than any timeout above: what a test waits at most for the server to act.
DEADLINE = 10.0
# Within this of the answer, a connection whose request body was not read is closed.
UNREAD_BODY_CLOSE = 5.0


@dataclass
class Servers:
    pairs: KeyPairs
    health: int
    metrics: int
    webhook: int

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.pairs.ca_cert.decode())


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[Servers]:
    registry = CollectorRegistry()
    Counter("probe_total", "Something to serve.", registry=registry).inc()
    pairs = new_pairs()
    write_pairs(tmp_path, pairs)
    health = HealthServer("127.0.0.1:0", timeouts=TIMEOUTS)
    health.add_healthz_check("ping", lambda: True)
    # Secure, without authentication: what is tested is the connection, not the caller.
    metrics = MetricsServer("127.0.0.1:0", registry=registry, cert_dir=tmp_path, timeouts=TIMEOUTS)
    webhook = WebhookServer(
        cert_dir=tmp_path, host="127.0.0.1", port=0, handshake_timeout=HANDSHAKE
    )
    started: list[HealthServer | MetricsServer | WebhookServer] = []
    try:
        for server in (health, metrics, webhook):
            await server.start()
            started.append(server)
        yield Servers(pairs, health.port, metrics.port, webhook.port)
    finally:
        for server in started:
            await server.stop(5)


Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(port: int, tls: ssl.SSLContext | None = None) -> Stream:
    return await asyncio.wait_for(
        asyncio.open_connection(
            "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1" if tls else None
        ),
        DEADLINE,
    )


async def endpoints(servers: Servers) -> AsyncIterator[tuple[str, Stream]]:
    """A fresh connection to the health endpoint and one to the metrics endpoint."""
    yield "/healthz", await connect(servers.health)
    yield "/metrics", await connect(servers.metrics, servers.tls())


def get(path: str, *extra: str) -> bytes:
    return ("\r\n".join([f"GET {path} HTTP/1.1", "Host: x", *extra]) + "\r\n\r\n").encode()


async def response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    async with asyncio.timeout(DEADLINE):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return int(lines[0].split()[1]), headers, body


async def closed_after(reader: asyncio.StreamReader) -> float:
    """Seconds until the server closes the connection (EOF or reset), within DEADLINE."""
    start = time.monotonic()
    async with asyncio.timeout(DEADLINE):
        try:
            while await reader.read(65536):
                pass
        except (ConnectionResetError, ssl.SSLError):
            pass
    return time.monotonic() - start


async def test_idle_keep_alive_connections_are_closed(servers: Servers) -> None:
    async for path, (reader, writer) in endpoints(servers):
        writer.write(get(path))
        assert (await response(reader))[0] == 200
        # Kept alive for a second request, then dropped once idle past the timeout.
        writer.write(get(path))
        assert (await response(reader))[0] == 200
        assert await closed_after(reader) >= IDLE * 0.9, path
        writer.close()


async def test_a_connection_that_sends_nothing_is_closed(servers: Servers) -> None:
    async for path, (reader, writer) in endpoints(servers):
        assert await closed_after(reader) >= IDLE * 0.9, path
        writer.close()


async def test_a_stalled_request_head_is_closed(servers: Servers) -> None:
    async for path, (reader, writer) in endpoints(servers):
        writer.write(get(path)[:-2])  # one line short of a whole head, then silence
        assert await closed_after(reader) >= IDLE * 0.9, path
        writer.close()


async def test_a_trickled_request_head_does_not_extend_the_deadline(servers: Servers) -> None:
    async for path, (reader, writer) in endpoints(servers):
        start = time.monotonic()
        closing = asyncio.ensure_future(closed_after(reader))
        # A header byte at a time, each well within the timeout, never a whole head.
        for byte in get(path, "X-Slow: " + "a" * 1000):
            if closing.done():
                break
            writer.write(bytes([byte]))
            await asyncio.wait([closing], timeout=IDLE / 8)
        await closing
        assert IDLE * 0.9 <= time.monotonic() - start < IDLE + DEADLINE / 2, path
        writer.close()


async def test_a_tls_handshake_never_begun_is_dropped(servers: Servers) -> None:
    for port in (servers.metrics, servers.webhook):
        reader, writer = await connect(port)  # TCP only: no ClientHello follows
        assert await closed_after(reader) >= HANDSHAKE * 0.9, port
        writer.close()


async def test_request_bodies_are_never_read(servers: Servers) -> None:
    # A gigabyte announced, a little sent: answered at once, then the connection is
    # closed rather than the rest read (or waited for) and dropped.
    async for path, (reader, writer) in endpoints(servers):
        writer.write(get(path, "Content-Length: 1000000000") + b"x" * 4096)
        assert (await response(reader))[0] == 200, path
        # aiohttp's default would read on for its lingering time, 10 s.
        assert await closed_after(reader) < UNREAD_BODY_CLOSE, path
        writer.close()
    # Sent in chunks, the same.
    async for path, (reader, writer) in endpoints(servers):
        writer.write(get(path, "Transfer-Encoding: chunked") + b"1000\r\n" + b"y" * 4096)
        assert (await response(reader))[0] == 200, path
        assert await closed_after(reader) < UNREAD_BODY_CLOSE, path
        writer.close()


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (("X-Big: " + "a" * (MAX_FIELD + 1),), "a header field too long"),
        (tuple(f"X-{i}: v" for i in range(MAX_HEADERS + 1)), "too many header fields"),
    ],
)
async def test_oversized_request_heads_are_refused(
    servers: Servers, extra: tuple[str, ...], why: str
) -> None:
    async for path, (reader, writer) in endpoints(servers):
        writer.write(get(path, *extra))
        status, _, _ = await response(reader)
        assert status in (400, 431), (path, why, status)
        await closed_after(reader)
        writer.close()


async def test_a_long_path_is_refused(servers: Servers) -> None:
    async for path, (reader, writer) in endpoints(servers):
        writer.write(get(path + "/" + "a" * 10_000))
        assert (await response(reader))[0] in (400, 414), path
        writer.close()
