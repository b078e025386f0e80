"""Talking to a webhook server in tests: its key pairs written where it reads them,
AdmissionReviews posted over TLS (async, or blocking from a thread of its own), and the
certificate a handshake presents."""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from leaderworkerset.runtime.pki import KeyPairs, generate_key_pairs
from leaderworkerset.runtime.webhook import WebhookServer


def write_pairs(directory: Path, pairs: KeyPairs) -> None:
    (directory / "tls.crt").write_bytes(pairs.cert)
    (directory / "tls.key").write_bytes(pairs.key)


def new_pairs() -> KeyPairs:
    return generate_key_pairs(
        ca_name="test-ca", ca_organization="t", dns_names=["localhost"], ip_addresses=["127.0.0.1"]
    )


def client_context(pairs: KeyPairs) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=pairs.ca_cert.decode())
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    return ctx


async def presented_certificate(port: int) -> tuple[bytes, str | None]:
    """The server certificate (PEM) and ALPN protocol of a fresh handshake."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        sslobj = writer.get_extra_info("ssl_object")
        der = sslobj.getpeercert(binary_form=True)
        pem = x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)
        return pem, sslobj.selected_alpn_protocol()
    finally:
        writer.close()
        await writer.wait_closed()


def review(obj: dict[str, Any], uid: str = "uid-1") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "object": obj},
    }


async def post(
    srv: WebhookServer,
    pairs: KeyPairs,
    path: str,
    body: Any,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{srv.port}{path}",
            data=json.dumps(body),
            headers={"Content-Type": content_type},
            ssl=client_context(pairs),
        ) as response,
    ):
        return response.status, await response.json(content_type=None)


def blocking_connection(srv: WebhookServer, pairs: KeyPairs) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection(
        "127.0.0.1", srv.port, context=client_context(pairs), timeout=10
    )


def post_over(connection: http.client.HTTPSConnection, path: str) -> dict[str, Any]:
    """A review posted over `connection`, which stays open for the next."""
    body = json.dumps(review({"metadata": {"name": "x"}}))
    connection.request("POST", path, body, {"Content-Type": "application/json"})
    answer: dict[str, Any] = json.loads(connection.getresponse().read())
    return answer


def post_blocking(srv: WebhookServer, pairs: KeyPairs, path: str) -> dict[str, Any]:
    """A review posted with a blocking client, for a thread of its own."""
    connection = blocking_connection(srv, pairs)
    try:
        return post_over(connection, path)
    finally:
        connection.close()
