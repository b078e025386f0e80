"""`lws controller --tls-min-version`: it overrides the configuration file's
`tls.minVersion`, bad values are refused naming the flag, and with VersionTLS13 both
TLS servers the manager builds (webhook and metrics) refuse a client that speaks no
more than TLS 1.2."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from leaderworkerset.controller_command import controller_command
from leaderworkerset.runtime.certs import TLSOptions
from leaderworkerset.runtime.health import MetricsServer
from leaderworkerset.runtime.pki import KeyPairs
from leaderworkerset.runtime.webhook import WebhookServer
from tests.toolkit.commands import run_command
from tests.toolkit.webhook_client import new_pairs, write_pairs

HEADER = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"
# A handshake the server refuses: its alert, or the connection reset under it.
HANDSHAKE_REFUSED = (ssl.SSLError, ConnectionResetError)


def config_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + body)
    return path


def test_the_flag_overrides_the_file(tmp_path: Path) -> None:
    path = config_file(tmp_path, "tls: {minVersion: VersionTLS12}\n")
    settings, _ = run_command([f"--config={path}", "--tls-min-version=VersionTLS13"])
    assert settings.manager_options().tls == TLSOptions("VersionTLS13")
    # Not given, the file's value holds; without either, nothing is set (TLS 1.2).
    settings, _ = run_command([f"--config={path}"])
    assert settings.manager_options().tls.min_version == "VersionTLS12"
    settings, _ = run_command(["--tls-min-version", "VersionTLS12"])
    assert settings.manager_options().tls.min_version == "VersionTLS12"
    assert run_command([])[0].manager_options().tls == TLSOptions()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("VersionTLS11", "insecure TLS version"),
        ("VersionTLS10", "insecure TLS version"),
        ("TLS13", "unknown TLS version"),
        ("", "unknown TLS version"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(value: str, why: str) -> None:
    ran: list[object] = []
    result = CliRunner().invoke(controller_command(ran.append), [f"--tls-min-version={value}"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--tls-min-version'" in result.output
    assert why in result.output
    assert "use VersionTLS12 or VersionTLS13" in result.output
    assert ran == []


def test_tls13_with_cipher_suites_in_the_file_is_refused(tmp_path: Path) -> None:
    # Go ignores cipher suites under TLS 1.3, so the combination is a mistake, whichever
    # of the file and the flag asked for 1.3.
    path = config_file(tmp_path, "tls: {cipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]}\n")
    result = CliRunner().invoke(
        controller_command(lambda s: None), [f"--config={path}", "--tls-min-version=VersionTLS13"]
    )
    assert result.exit_code == 1
    assert "may not be specified when minVersion is VersionTLS13" in result.output


def client(pairs: KeyPairs, maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=pairs.ca_cert.decode())
    if maximum is not None:
        context.maximum_version = maximum
    return context


async def negotiated(port: int, context: ssl.SSLContext) -> str | None:
    _, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"), 10
    )
    try:
        return writer.get_extra_info("ssl_object").version()
    finally:
        writer.close()


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[tuple[KeyPairs, int, int]]:
    """The webhook and metrics servers as the manager builds them from the command line
    `--tls-min-version=VersionTLS13`, both serving one certificate."""
    settings, _ = run_command(["--tls-min-version=VersionTLS13"])
    tls = settings.manager_options().tls
    pairs = new_pairs()
    write_pairs(tmp_path, pairs)
    webhook = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0, tls=tls)
    metrics = MetricsServer("127.0.0.1:0", tls=tls, cert_dir=tmp_path)
    await webhook.start()
    try:
        await metrics.start()
        try:
            yield pairs, webhook.port, metrics.port
        finally:
            await metrics.stop(5)
    finally:
        await webhook.stop(5)


async def test_tls13_refuses_a_tls12_client_on_webhook_and_metrics(
    servers: tuple[KeyPairs, int, int],
) -> None:
    pairs, webhook_port, metrics_port = servers
    for port in (webhook_port, metrics_port):
        assert await negotiated(port, client(pairs)) == "TLSv1.3"
        with pytest.raises(HANDSHAKE_REFUSED):
            await negotiated(port, client(pairs, maximum=ssl.TLSVersion.TLSv1_2))
