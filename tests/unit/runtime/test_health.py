"""The metrics endpoint in its two modes, as controller-runtime serves it: secure is
HTTPS with every caller checked, not secure is plain HTTP for anyone."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from leaderworkerset.localcluster.manager_process import http_get
from leaderworkerset.runtime.health import DelegatedAuth, MetricsServer


class _TokenIsAllowed(DelegatedAuth):
    """Lets the one token "good" through, without an API server."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def check(self, request: web.Request) -> web.Response | None:
        header = request.headers.get("Authorization", "")
        self.asked.append(header)
        return None if header == "Bearer good" else web.Response(status=401)


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("probe_total", "A counter to find in the output.", registry=registry).inc()
    return registry


@pytest.fixture
async def servers() -> AsyncIterator[list[MetricsServer]]:
    started: list[MetricsServer] = []
    yield started
    for server in started:
        await server.stop(5)


async def _start(servers: list[MetricsServer], server: MetricsServer) -> MetricsServer:
    await server.start()
    servers.append(server)
    return server


async def test_not_secure_serves_plain_http_to_anyone(
    servers: list[MetricsServer], caplog: pytest.LogCaptureFixture
) -> None:
    auth = _TokenIsAllowed()
    caplog.set_level(logging.INFO, logger="controller-runtime.metrics")
    server = await _start(
        servers, MetricsServer("127.0.0.1:0", secure=False, auth=auth, registry=_registry())
    )
    status, body = await asyncio.to_thread(http_get, f"http://127.0.0.1:{server.port}/metrics")
    assert status == 200 and "probe_total 1.0" in body
    assert auth.asked == [], "a plain-HTTP endpoint must not ask for credentials"
    https_status, _ = await asyncio.to_thread(http_get, f"https://127.0.0.1:{server.port}/metrics")
    assert https_status == 0, "the plain endpoint answered a TLS handshake"
    (record,) = [r for r in caplog.records if r.getMessage() == "Serving metrics server"]
    assert record.__dict__["bindAddress"] == "127.0.0.1:0"
    assert record.__dict__["secure"] is False


async def test_secure_serves_https_and_checks_callers(
    servers: list[MetricsServer], caplog: pytest.LogCaptureFixture
) -> None:
    auth = _TokenIsAllowed()
    caplog.set_level(logging.INFO, logger="controller-runtime.metrics")
    server = await _start(
        servers, MetricsServer("127.0.0.1:0", secure=True, auth=auth, registry=_registry())
    )
    url = f"https://127.0.0.1:{server.port}/metrics"
    assert (await asyncio.to_thread(http_get, url))[0] == 401
    assert (await asyncio.to_thread(http_get, url, "bad"))[0] == 401
    status, body = await asyncio.to_thread(http_get, url, "good")
    assert status == 200 and "probe_total 1.0" in body
    plain_status, _ = await asyncio.to_thread(http_get, f"http://127.0.0.1:{server.port}/metrics")
    assert plain_status != 200, "the secure endpoint answered plain HTTP"
    (record,) = [r for r in caplog.records if r.getMessage() == "Serving metrics server"]
    assert record.__dict__["secure"] is True


def test_secure_is_the_default_and_a_scheme_prefix_overrides_it() -> None:
    assert MetricsServer(":8443").secure is True
    assert MetricsServer("http://:8443").secure is False
    assert MetricsServer("https://:8443", secure=False).secure is True
    # No credentials are ever checked over plain HTTP.
    assert MetricsServer(":8443", secure=False, auth=_TokenIsAllowed()).auth is None


def test_disabled_address_starts_nothing() -> None:
    assert MetricsServer("0").bind is None
