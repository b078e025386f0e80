"""ApiClient against a real local HTTP(S) server: authentication (lightkube's flows
driven from aiohttp), timeouts, errors, TLS from a kubeconfig and connection reuse."""

from __future__ import annotations

import asyncio
import base64
import gc
import ssl
import warnings
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import yaml
from aiohttp import web

from leaderworkerset.api.resources import CONFIGMAPS, PODS
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiClient, ApiError
from leaderworkerset.runtime.pki import issue_cert, make_ca
from tests.toolkit.api_server import Served, api_server, status

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}


def kubeconfig(path: Path, server: str, user: dict[str, Any], **cluster: Any) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


async def ok(request: web.Request) -> web.Response:
    return web.json_response(CONFIGMAP)


def accepting(tokens: list[str]) -> Any:
    """Accepts only the bearer token last in `tokens` (the test appends to rotate)."""

    async def handle(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {tokens[-1]}":
            return status(401, "Unauthorized", "Unauthorized")
        return web.json_response(CONFIGMAP)

    return handle


async def test_a_bearer_token_and_the_default_headers(tmp_path: Path) -> None:
    async with api_server(accepting(["abc"])) as served:
        config = kubeconfig(tmp_path / "config", served.url, {"token": "abc"})
        api = ApiClient.from_kubeconfig(config, qps=0, user_agent="lws-test")
        assert api.namespace == "ns"
        assert await api.get(CONFIGMAPS, "a", "ns") == CONFIGMAP
        await api.close()
    (request,) = served.requests
    assert request.headers["Authorization"] == "Bearer abc"
    assert request.headers["User-Agent"] == "lws-test"
    assert request.headers["Accept"] == "application/json"


async def test_no_credentials_sends_no_authorization(tmp_path: Path) -> None:
    async with api_server(ok) as served:
        api = ApiClient.from_kubeconfig(kubeconfig(tmp_path / "config", served.url, {}), qps=0)
        await api.get(CONFIGMAPS, "a", "ns")
        await api.close()
    assert served.header("Authorization") == [None]


async def test_a_token_file_is_read_again_on_401(tmp_path: Path) -> None:
    """The service account token rotated under a running client: the cached token is
    refused once, the file is read again and the request retried with the new one."""
    token_file = tmp_path / "token"
    token_file.write_text("old\n")
    tokens = ["old"]
    async with api_server(accepting(tokens)) as served:
        config = kubeconfig(tmp_path / "config", served.url, {"tokenFile": str(token_file)})
        api = ApiClient.from_kubeconfig(config, qps=0)
        await api.get(CONFIGMAPS, "a", "ns")
        token_file.write_text("new\n")
        tokens.append("new")
        assert await api.get(CONFIGMAPS, "a", "ns") == CONFIGMAP
        await api.get(CONFIGMAPS, "a", "ns")
        await api.close()
    assert served.header("Authorization") == [
        "Bearer old",
        "Bearer old",
        "Bearer new",
        "Bearer new",
    ]


class FakeExec(httpx.Auth):
    """An exec plugin's flow: a token fetched on first use and again after a 401."""

    def __init__(self) -> None:
        self.fetched = 0
        self._bearer: str | None = None

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        if self._bearer is not None:
            request.headers["Authorization"] = self._bearer
            response = yield request
            if response.status_code != 401:
                return
        await asyncio.sleep(0)  # the plugin runs as a subprocess
        self.fetched += 1
        request.headers["Authorization"] = self._bearer = f"Bearer t{self.fetched}"
        yield request


async def test_an_exec_style_flow_fetches_a_token_and_again_after_401() -> None:
    tokens = ["t1"]
    auth = FakeExec()
    async with api_server(accepting(tokens)) as served:
        api = ApiClient(served.url, auth=auth, qps=0)
        await api.get(CONFIGMAPS, "a", "ns")
        await api.get(CONFIGMAPS, "a", "ns")
        tokens.append("t2")
        await api.get(CONFIGMAPS, "a", "ns")
        await api.close()
    assert auth.fetched == 2
    assert served.header("Authorization") == ["Bearer t1", "Bearer t1", "Bearer t1", "Bearer t2"]


async def test_a_401_the_flow_cannot_mend_is_an_api_error() -> None:
    tokens = ["never"]
    async with api_server(accepting(tokens)) as served:
        api = ApiClient(served.url, auth=FakeExec(), qps=0)
        with pytest.raises(ApiError) as raised:
            await api.get(CONFIGMAPS, "a", "ns")
        await api.close()
    assert raised.value.status == 401
    assert served.header("Authorization") == ["Bearer t1"]  # one fetch, one request


async def test_errors_carry_the_decoded_status_and_bodies_go_as_sent() -> None:
    bodies: list[tuple[str, str, bytes]] = []

    async def handle(request: web.Request) -> web.Response:
        bodies.append((request.method, request.content_type, await request.read()))
        if request.method == "GET":
            return status(404, "NotFound", 'configmaps "a" not found')
        return status(409, "AlreadyExists", 'configmaps "a" already exists')

    async with api_server(handle) as served:
        api = ApiClient(served.url, qps=0)
        assert await api.get_or_none(CONFIGMAPS, "a", "ns") is None
        with pytest.raises(ApiError) as raised:
            await api.create(CONFIGMAPS, {**CONFIGMAP, "metadata": {"namespace": "ns"}})
        with pytest.raises(ApiError):
            await api.apply(CONFIGMAPS, {**CONFIGMAP, "data": {"k": "\x85"}}, field_manager="m")
        await api.close()
    assert raised.value.already_exists and raised.value.message == 'configmaps "a" already exists'
    assert str(raised.value).startswith("POST /api/v1/namespaces/ns/configmaps: 409")
    assert served.requests[2].query["fieldManager"] == "m"
    assert served.requests[2].query["force"] == "true"
    assert bodies[2][1] == "application/apply-patch+yaml" and b"\\u0085" in bodies[2][2]


async def test_the_request_timeout_bounds_a_silent_server() -> None:
    served_ref: list[Served] = []

    async def silent(request: web.Request) -> web.Response:
        await served_ref[0].done.wait()
        return web.json_response({})

    async with api_server(silent) as served:
        served_ref.append(served)
        api = ApiClient(served.url, qps=0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TRANSPORT_ERRORS):
            await api.request("GET", "/api/v1/pods", request_timeout=0.3)
        assert loop.time() - started < 5
        await api.close()


async def test_the_response_hook_sees_method_code_and_host() -> None:
    seen: list[tuple[str, str, str]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            return web.Response(body=b"", content_type="application/json")
        return status(404, "NotFound", "gone")

    async with api_server(handle) as served:
        api = ApiClient(served.url, qps=0, on_response=lambda *a: seen.append(a))
        await api.get_or_none(PODS, "p", "ns")
        assert [e async for e in api.watch(PODS, "ns")] == []
        await api.close()
    assert seen == [("GET", "404", "127.0.0.1"), ("WATCH", "200", "127.0.0.1")]


def tls_material(tmp_path: Path) -> tuple[ssl.SSLContext, dict[str, str], dict[str, str]]:
    """A server context requiring client certificates, and the kubeconfig's cluster
    (CA data) and user (client certificate data) entries to reach it."""
    ca = make_ca("test-ca")
    server = issue_cert(ca, "apiserver", ip_addresses=["127.0.0.1"], server=True)
    client = issue_cert(ca, "user", client=True)
    crt, key = server.write(tmp_path, "server")
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(ca.cert_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca_file))
    context.load_cert_chain(crt, key)
    context.verify_mode = ssl.CERT_REQUIRED

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    cluster = {"certificate-authority-data": b64(ca.cert_pem)}
    user = {"client-certificate-data": b64(client.cert_pem), "client-key-data": b64(client.key_pem)}
    return context, cluster, user


async def test_tls_with_a_client_certificate_and_one_connection_reused(tmp_path: Path) -> None:
    server_context, cluster, user = tls_material(tmp_path)
    async with api_server(ok, server_context) as served:
        config = kubeconfig(tmp_path / "config", served.url, user, **cluster)
        api = ApiClient.from_kubeconfig(config, qps=0)
        for _ in range(20):
            await api.get(CONFIGMAPS, "a", "ns")
        await api.close()
    assert len(served.requests) == 20
    assert served.connections == 1  # one TLS handshake, not one per request


async def test_an_unknown_server_certificate_is_refused(tmp_path: Path) -> None:
    server_context, _, user = tls_material(tmp_path)
    other_ca = {"certificate-authority-data": base64.b64encode(make_ca("x").cert_pem).decode()}
    async with api_server(ok, server_context) as served:
        api = ApiClient.from_kubeconfig(
            kubeconfig(tmp_path / "config", served.url, user, **other_ca), qps=0
        )
        with pytest.raises(TRANSPORT_ERRORS):
            await api.get(CONFIGMAPS, "a", "ns")
        await api.close()
    assert served.requests == []


async def test_concurrent_requests_share_a_bounded_pool() -> None:
    async with api_server(ok) as served:
        api = ApiClient(served.url, qps=0)
        for _ in range(3):
            await asyncio.gather(*(api.get(CONFIGMAPS, "a", "ns") for _ in range(20)))
        await api.close()
    assert len(served.requests) == 60 and served.connections <= 20


def test_built_outside_a_running_loop(tmp_path: Path) -> None:
    api = ApiClient.from_kubeconfig(
        kubeconfig(tmp_path / "config", "https://127.0.0.1:1", {"token": "t"}), qps=0
    )
    asyncio.run(api.close())


async def test_closed_cleanly() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with api_server(ok) as served:
            api = ApiClient(served.url, qps=0)
            await api.get(CONFIGMAPS, "a", "ns")
            await api.close()
            del api
            gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
