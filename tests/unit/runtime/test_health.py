"""The metrics endpoint in its two modes, as controller-runtime serves it: secure is
HTTPS with every caller checked, not secure is plain HTTP for anyone; a secure server
presents the mounted certificate of its certificate directory when there is one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from lws_localcluster.manager_process import http_get
from prometheus_client import CollectorRegistry, Counter

from leaderworkerset.runtime.health import DEFAULT_METRICS_CERT_DIR, DelegatedAuth, MetricsServer
from leaderworkerset.runtime.metrics import RuntimeMetrics
from tests.toolkit.waiting import eventually
from tests.toolkit.webhook_client import new_pairs, presented_certificate, write_pairs


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
    servers: list[MetricsServer], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    auth = _TokenIsAllowed()
    caplog.set_level(logging.INFO, logger="controller-runtime.metrics")
    server = await _start(
        servers,
        MetricsServer(
            "127.0.0.1:0", secure=True, auth=auth, registry=_registry(), cert_dir=tmp_path
        ),
    )
    # No certificate was mounted: a self-generated one for localhost.
    pem, _ = await presented_certificate(server.port)
    subject = x509.load_pem_x509_certificate(pem).subject.rfc4514_string()
    assert subject.startswith("CN=localhost@"), subject
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


def test_the_certificate_directory_is_controller_runtimes() -> None:
    # Where the charts mount cert-manager's metrics Secret.
    assert str(DEFAULT_METRICS_CERT_DIR) == "/tmp/k8s-metrics-server/serving-certs"
    assert MetricsServer(":8443").cert_files.cert_path == DEFAULT_METRICS_CERT_DIR / "tls.crt"


async def test_a_mounted_certificate_is_served_and_reloaded(
    servers: list[MetricsServer], tmp_path: Path
) -> None:
    first, second = new_pairs(), new_pairs()
    write_pairs(tmp_path, first)
    metrics = RuntimeMetrics()
    server = await _start(
        servers,
        MetricsServer(
            "127.0.0.1:0",
            auth=_TokenIsAllowed(),
            metrics=metrics,
            cert_dir=tmp_path,
            reload_interval=0.05,
        ),
    )
    assert (await presented_certificate(server.port))[0] == first.cert
    status, body = await asyncio.to_thread(
        http_get, f"https://127.0.0.1:{server.port}/metrics", "good"
    )
    # The Manager's metrics are served, and count the certificate's reads.
    assert status == 200 and "certwatcher_read_certificate_total 1.0" in body

    # cert-manager renewed the Secret and the kubelet swapped the files.
    write_pairs(tmp_path, second)

    async def presents_second() -> bool:
        return (await presented_certificate(server.port))[0] == second.cert

    await eventually(presents_second, "the renewed metrics certificate is presented", within=10)
    assert metrics.certificate_reads._value.get() == 2
    assert metrics.certificate_read_errors._value.get() == 0


async def test_a_mounted_pair_that_does_not_match_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_bytes(new_pairs().cert)
    (tmp_path / "tls.key").write_bytes(new_pairs().key)
    server = MetricsServer("127.0.0.1:0", auth=_TokenIsAllowed(), cert_dir=tmp_path)
    with pytest.raises(RuntimeError, match="do not form a valid pair"):
        await server.start()
    await server.stop(1)
