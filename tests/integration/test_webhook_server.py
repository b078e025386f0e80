"""Webhooks served through the real API server with certificates the runtime made."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import pytest_asyncio

from leaderworkerset.api.resources import (
    CONFIGMAPS,
    LEASES,
    MUTATING_WEBHOOKS,
    VALIDATING_WEBHOOKS,
    Resource,
)
from leaderworkerset.runtime.certs import CertRotator, CertRotatorOptions
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.election import LeaderElectionConfig
from leaderworkerset.runtime.manager import Manager, ManagerOptions
from leaderworkerset.runtime.webhook import AdmissionResponse, WebhookServer, deny, patched
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.cluster

T = TypeVar("T")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
# What a probe may meet while the server or its configuration is still coming up.
TRANSIENT = (ApiError, aiohttp.ClientError, OSError)


@pytest_asyncio.fixture
async def api(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    client = ApiClient.from_kubeconfig(kubeconfig)
    yield client
    await client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def webhook(name: str, url: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": url},
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["configmaps"],
            }
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **extra,
    }


@dataclass
class Configurations:
    mutating: str
    validating: str


@contextlib.asynccontextmanager
async def webhook_configurations(
    api: ApiClient, namespace: str, port: int
) -> AsyncIterator[Configurations]:
    """A mutating webhook for every ConfigMap of the namespace and a validating one for
    those labelled deny=true, both without a caBundle: the rotator must inject it."""
    base = f"https://127.0.0.1:{port}"
    name = f"{namespace}-runtime-test"
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            webhook("mutate.configmaps.test.x-k8s.io", f"{base}/mutate", namespace),
            webhook(
                "second.configmaps.test.x-k8s.io",
                f"{base}/mutate",
                namespace,
                objectSelector={"matchLabels": {"never": "matches"}},
            ),
        ],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            webhook(
                "deny.configmaps.test.x-k8s.io",
                f"{base}/deny",
                namespace,
                objectSelector={"matchLabels": {"deny": "true"}},
            )
        ],
    }
    await api.create(MUTATING_WEBHOOKS, mutating)
    await api.create(VALIDATING_WEBHOOKS, validating)
    try:
        yield Configurations(name, name)
    finally:
        for resource in (MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS):
            with contextlib.suppress(ApiError):
                await api.delete(resource, name)


async def mutate(request: dict[str, Any]) -> AdmissionResponse:
    obj = request["object"]
    mutated = {**obj, "data": {**(obj.get("data") or {}), "mutated-by": "lws-runtime"}}
    return patched(obj, mutated)


async def refuse(request: dict[str, Any]) -> AdmissionResponse:
    return deny(f"config map {request['name']} may not carry deny=true")


def configmap(namespace: str, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


class Names:
    def __init__(self, prefix: str) -> None:
        self.prefix, self.n = prefix, 0

    def __call__(self) -> str:
        self.n += 1
        return f"{self.prefix}-{self.n}"


async def wait_mutated(api: ApiClient, namespace: str, names: Names, within: float = 60) -> None:
    """Create ConfigMaps until one comes back patched: the API server picks up webhook
    configurations (and new caBundles) asynchronously, and until then calls fail or skip."""

    async def attempt() -> bool:
        cm = await api.create(CONFIGMAPS, configmap(namespace, names()))
        assert cm["data"]["k"] == "v"
        return bool(cm["data"].get("mutated-by") == "lws-runtime")

    await eventually(
        attempt,
        "a ConfigMap patched by the webhook",
        within=within,
        interval=0.3,
        ignoring=TRANSIENT,
    )


async def bundles(api: ApiClient, names: Configurations) -> set[str]:
    found = set()
    for resource, name in (
        (MUTATING_WEBHOOKS, names.mutating),
        (VALIDATING_WEBHOOKS, names.validating),
    ):
        obj = await api.get(resource, name)
        found |= {h["clientConfig"].get("caBundle", "") for h in obj["webhooks"]}
    return found


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_round_trip_rotation_and_reinjection(
    api: ApiClient, namespace: str, tmp_path: Path
) -> None:
    server = WebhookServer(cert_dir=tmp_path, host="127.0.0.1", port=0, reload_interval=0.2)
    server.register("/mutate", mutate)
    server.register("/deny", refuse)
    await server.start()
    async with webhook_configurations(api, namespace, server.port) as configs:
        options = CertRotatorOptions(
            namespace=namespace,
            secret_name="webhook-certs",
            service_name="lws-webhook-service",
            cert_dir=tmp_path,
            ca_name="lws-ca",
            ca_organization="lws",
            mutating_webhook_configurations=(configs.mutating,),
            validating_webhook_configurations=(configs.validating,),
            extra_ip_addresses=("127.0.0.1",),
        )
        rotator = CertRotator(api, options, on_written=server.reload_certificates_async)
        await rotator.start()
        try:
            await rotator.wait_ready(interval=0.2, within=60)
            first = rotator.current
            assert first is not None
            secret = await api.get(
                Resource("", "v1", "secrets", "Secret"), "webhook-certs", namespace
            )
            assert base64.b64decode(secret["data"]["ca.crt"]) == first.ca_cert
            assert await bundles(api, configs) == {b64(first.ca_cert)}
            assert server.is_serving() and server.certificate() == first.cert

            names = Names("cm")
            await wait_mutated(api, namespace, names)

            with pytest.raises(ApiError) as denied:
                await api.create(CONFIGMAPS, configmap(namespace, "refused", {"deny": "true"}))
            assert denied.value.status == 403
            assert "config map refused may not carry deny=true" in denied.value.message
            assert "deny.configmaps.test.x-k8s.io" in denied.value.message

            # Rotation: new CA and certificate, re-injected, hot-reloaded, same server.
            port = server.port
            await api.delete(Resource("", "v1", "secrets", "Secret"), "webhook-certs", namespace)
            await rotator.sync()
            second = rotator.current
            assert second is not None and second.ca_cert != first.ca_cert
            assert server.certificate() == second.cert
            assert await bundles(api, configs) == {b64(second.ca_cert)}
            await wait_mutated(api, namespace, names)
            assert server.port == port and server.is_serving()

            # Someone resets a caBundle (e.g. re-applied manifests): the watch re-injects.
            obj = await api.get(MUTATING_WEBHOOKS, configs.mutating)
            obj["webhooks"][0]["clientConfig"]["caBundle"] = b64(first.ca_cert)
            await api.replace(MUTATING_WEBHOOKS, obj)

            async def reinjected() -> bool:
                return await bundles(api, configs) == {b64(second.ca_cert)}

            await eventually(
                reinjected, "the CA bundle to be re-injected", within=30, ignoring=TRANSIENT
            )
        finally:
            await rotator.stop(5)
            await server.stop(5)


# --- the whole manager ------------------------------------------------------------------


class Recorder:
    """A runnable that notes when it was started and stopped."""

    def __init__(self, needs_leader_election: bool) -> None:
        self.needs_leader_election = needs_leader_election
        self.started = asyncio.Event()
        self.stopped: float | None = None

    async def start(self) -> None:
        self.started.set()

    async def stop(self, deadline: float) -> None:
        self.stopped = deadline


async def get_text(url: str, token: str | None = None) -> tuple[int, str]:
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, ssl=insecure if url.startswith("https") else True, headers=headers) as r,
    ):
        return r.status, await r.text()


async def service_account_token(api: ApiClient, namespace: str, name: str) -> str:
    await api.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    review = await api.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    return str(review["status"]["token"])


@contextlib.asynccontextmanager
async def metrics_reader(api: ApiClient, namespace: str, account: str) -> AsyncIterator[None]:
    name = f"{namespace}-metrics-reader"
    await api.create(
        CLUSTER_ROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
    )
    await api.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )
    try:
        yield
    finally:
        for resource in (CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES):
            with contextlib.suppress(ApiError):
                await api.delete(resource, name)


async def test_manager_serves_elects_and_shuts_down(
    api: ApiClient, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    webhook_port, health_port, metrics_port = free_port(), free_port(), free_port()
    async with webhook_configurations(api, namespace, webhook_port) as configs:
        options = ManagerOptions(
            namespace=namespace,
            kubeconfig=kubeconfig,
            leader_election=LeaderElectionConfig(
                namespace=namespace,
                name="manager-lease",
                identity="manager-under-test",
                # Patient: a slow renewal on a loaded machine must not end the manager.
                lease_duration=15,
                renew_deadline=10,
                retry_period=0.5,
            ),
            metrics_bind_address=f"127.0.0.1:{metrics_port}",
            metrics_secure=True,
            health_probe_bind_address=f"127.0.0.1:{health_port}",
            webhook_host="127.0.0.1",
            webhook_port=webhook_port,
            cert_dir=tmp_path,
            cert_rotator=CertRotatorOptions(
                namespace=namespace,
                secret_name="manager-certs",
                service_name="lws-webhook-service",
                cert_dir=tmp_path,
                ca_name="lws-ca",
                ca_organization="lws",
                mutating_webhook_configurations=(configs.mutating,),
                validating_webhook_configurations=(configs.validating,),
                extra_ip_addresses=("127.0.0.1",),
            ),
            event_reporting_controller="runtime-test",
            graceful_shutdown_timeout=10,
        )
        manager = Manager(options)
        manager.webhook_server.register("/mutate", mutate)
        manager.webhook_server.register("/deny", refuse)
        leader_work, everywhere = Recorder(True), Recorder(False)
        manager.add(leader_work)
        manager.add(everywhere)
        run = asyncio.create_task(manager.run())
        try:
            health = f"http://127.0.0.1:{health_port}"

            async def ready() -> bool:
                if run.done():
                    run.result()
                return (await get_text(f"{health}/readyz"))[0] == 200

            await eventually(ready, "the manager to be ready", within=60, ignoring=TRANSIENT)
            assert await get_text(f"{health}/healthz") == (200, "ok")
            status, verbose = await get_text(f"{health}/readyz?verbose")
            assert status == 200 and "[+]certs ok" in verbose and "[+]webhook ok" in verbose
            await asyncio.wait_for(leader_work.started.wait(), 10)
            await asyncio.wait_for(everywhere.started.wait(), 10)
            assert manager.is_leader()
            lease = await api.get(LEASES, "manager-lease", namespace)
            assert lease["spec"]["holderIdentity"] == "manager-under-test"

            await wait_mutated(api, namespace, Names("via-manager"))

            metrics_url = f"https://127.0.0.1:{metrics_port}/metrics"
            assert (await get_text(metrics_url))[0] == 401
            assert (await get_text(metrics_url, "not-a-token"))[0] == 401
            token = await service_account_token(api, namespace, "scraper")
            status, body = await get_text(metrics_url, token)
            assert status == 403, body
            async with metrics_reader(api, namespace, "scraper"):

                async def scraped() -> str | None:
                    # Denials are cached for 30 s, so ask as a second, fresh account.
                    code, text = await get_text(metrics_url, second_token)
                    return text if code == 200 else None

                await api.create(
                    CLUSTER_ROLE_BINDINGS,
                    {
                        "apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": "ClusterRoleBinding",
                        "metadata": {"name": f"{namespace}-second"},
                        "roleRef": {
                            "apiGroup": "rbac.authorization.k8s.io",
                            "kind": "ClusterRole",
                            "name": f"{namespace}-metrics-reader",
                        },
                        "subjects": [
                            {"kind": "ServiceAccount", "name": "second", "namespace": namespace}
                        ],
                    },
                )
                try:
                    second_token = await service_account_token(api, namespace, "second")
                    text = await eventually(
                        scraped, "an authorized scrape", within=30, ignoring=TRANSIENT
                    )
                finally:
                    await api.delete(CLUSTER_ROLE_BINDINGS, f"{namespace}-second")
            assert 'controller_runtime_webhook_requests_total{code="200",webhook="/mutate"}' in text
            assert 'leader_election_master_status{name="manager-lease"} 1.0' in text
            assert "rest_client_requests_total" in text

            manager.request_stop()
            await asyncio.wait_for(run, 20)
        finally:
            if not run.done():
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run
        assert leader_work.stopped is not None and everywhere.stopped is not None
        lease = await api.get(LEASES, "manager-lease", namespace)
        assert lease["spec"]["holderIdentity"] == ""
        with pytest.raises((aiohttp.ClientError, OSError)):
            await get_text(f"http://127.0.0.1:{health_port}/healthz")


async def test_manager_stops_on_sigterm(kubeconfig: Path, namespace: str, tmp_path: Path) -> None:
    health_port = free_port()
    options = ManagerOptions(
        namespace=namespace,
        kubeconfig=kubeconfig,
        leader_election=LeaderElectionConfig(
            namespace=namespace,
            name="sigterm-lease",
            # Patient: a slow renewal on a loaded machine must not end the manager.
            lease_duration=15,
            renew_deadline=10,
            retry_period=0.5,
        ),
        health_probe_bind_address=f"127.0.0.1:{health_port}",
        webhook_host="127.0.0.1",
        webhook_port=0,
        cert_dir=tmp_path,
    )
    manager = Manager(options)
    work = Recorder(True)
    manager.add(work)
    run = asyncio.create_task(manager.run())
    try:
        # Without cert management the certs are ready at once, but the server only
        # serves once files exist: the readiness probe says so.
        await asyncio.wait_for(work.started.wait(), 20)
        status, body = await get_text(f"http://127.0.0.1:{health_port}/readyz")
        assert status == 500 and "[-]webhook failed" in body
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(run, 20)
    finally:
        if not run.done():
            run.cancel()
    assert work.stopped is not None
