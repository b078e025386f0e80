"""Running the LeaderWorkerSet controller against a local control plane.

In a real cluster the webhooks are reached through the `lws-webhook-service`
Service. The local control plane routes nothing, so here the same webhook
configurations (`config/webhook/manifests.yaml`) are installed with `url`
client configs pointing at 127.0.0.1, and the manager runs in this process (or
as `lws controller` beside it) with its internal certificate management adding
127.0.0.1 to the serving certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from leaderworkerset.api.disaggregatedset.crd import build_disaggregatedset_crd, build_scaler_crd
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.crd import build_crd
from leaderworkerset.api.leaderworkerset.scheduling import PROVIDER_KUBERNETES, SchedulingSupport
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import (
    CRDS,
    DISAGGREGATEDSETS,
    LEADERWORKERSETS,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    POD_GROUPS,
    ROLE_SCALERS,
    VALIDATING_WEBHOOKS,
    WORKLOADS,
    Resource,
)
from leaderworkerset.runtime.certs import CertRotatorOptions
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.discovery import serves
from leaderworkerset.runtime.manager import Manager, ManagerOptions
from leaderworkerset.wiring import LwsControllers, setup_controllers

WEBHOOK_MANIFESTS = "config/webhook/manifests.yaml"
# A copy of WEBHOOK_MANIFESTS inside this package, so that an installed lws_localcluster
# needs no checkout; a unit test holds it equal to the original.
PACKAGED_WEBHOOK_MANIFESTS = "webhook_manifests.yaml"
FIELD_MANAGER = "lws-local"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def webhook_configurations(port: int, repo: Path | None = None) -> list[JSON]:
    """The shipped webhook configurations, rewritten to call https://127.0.0.1:<port>;
    ``repo``: another checkout's (an older release's), instead of this one's."""
    if repo is None:
        text = resources.files("lws_localcluster").joinpath(PACKAGED_WEBHOOK_MANIFESTS).read_text()
    else:
        text = (repo / WEBHOOK_MANIFESTS).read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        for webhook in doc["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}"}
        out.append(doc)
    return out


async def install(client: ApiClient, webhook_port: int) -> None:
    """The CRDs (the LeaderWorkerSet's and the DisaggregatedSet's two, which the manager
    watches too) and the webhook configurations (without CA bundles: the manager
    injects)."""
    crds = (build_crd(), build_disaggregatedset_crd(), build_scaler_crd())
    for crd in crds:
        await client.apply(CRDS, crd, field_manager=FIELD_MANAGER)
    for config in webhook_configurations(webhook_port):
        resource = (
            MUTATING_WEBHOOKS if config["kind"].startswith("Mutating") else VALIDATING_WEBHOOKS
        )
        await client.apply(resource, config, field_manager=FIELD_MANAGER)
    for crd in crds:
        await _wait_established(client, crd["metadata"]["name"])
    # Established is not enough: the API server's watch cache of a new resource starts
    # after it, and until it is ready a watch gets 429 "storage is (re)initializing"
    # (the controller retries, but a newcomer's `make run` showed every retry).
    await wait_watchable(client, [CRD_RESOURCES[crd["metadata"]["name"]] for crd in crds])


async def _wait_established(client: ApiClient, name: str, within: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        crd = await client.get(CRDS, name)
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(x["type"] == "Established" and x["status"] == "True" for x in conditions):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"CRD {name} not established after {within}s")


# The resources the CRDs of `install` serve, by CRD name.
CRD_RESOURCES = {
    f"{r.plural}.{r.group}": r for r in (LEADERWORKERSETS, DISAGGREGATEDSETS, ROLE_SCALERS)
}
# How long a watch must stay open, with nothing refused, to count as accepted: the API
# server answers a watch its storage cannot serve at once, with 429.
WATCH_ACCEPTED_AFTER = 0.3


async def wait_watchable(
    client: ApiClient, resources: list[Resource], within: float = 60.0
) -> None:
    """Until the API server accepts a watch of each resource (its storage is ready)."""
    await asyncio.gather(*(_wait_watchable(client, r, within) for r in resources))


async def _wait_watchable(client: ApiClient, resource: Resource, within: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        listed = await client.list(resource, limit=1)
        version = str(listed.get("metadata", {}).get("resourceVersion") or "") or None
        stream = client.watch(resource, resource_version=version, timeout_seconds=5)
        try:
            async with asyncio.timeout(WATCH_ACCEPTED_AFTER):
                await anext(stream, None)
            return  # an event (or the stream's end) came: the watch was served
        except TimeoutError:
            return  # open and quiet: served
        except ApiError as exc:
            if exc.status != 429 or loop.time() > deadline:
                raise
        finally:
            aclose = getattr(stream, "aclose", None)  # typed AsyncIterator: no aclose
            if aclose is not None:
                await aclose()
        await asyncio.sleep(0.2)


def local_manager_options(
    kubeconfig: Path,
    webhook_port: int,
    cert_dir: Path,
    *,
    namespace: str = c.DEFAULT_OPERATOR_NAMESPACE,
    health_port: int | None = None,
) -> ManagerOptions:
    return ManagerOptions(
        namespace=namespace,
        kubeconfig=kubeconfig,
        webhook_host="127.0.0.1",
        webhook_port=webhook_port,
        cert_dir=cert_dir,
        health_probe_bind_address=f"127.0.0.1:{health_port}" if health_port else "0",
        metrics_bind_address="0",
        event_reporting_controller=c.EVENT_REPORTING_CONTROLLER,
        handle_signals=False,
        graceful_shutdown_timeout=10.0,
        cert_rotator=CertRotatorOptions(
            namespace=namespace,
            secret_name=c.WEBHOOK_SECRET_NAME,
            service_name=c.WEBHOOK_SERVICE_NAME,
            cert_dir=cert_dir,
            ca_name="lws-ca",
            ca_organization="lws",
            mutating_webhook_configurations=(c.MUTATING_WEBHOOK_CONFIGURATION,),
            validating_webhook_configurations=(c.VALIDATING_WEBHOOK_CONFIGURATION,),
            extra_ip_addresses=("127.0.0.1",),
        ),
    )


@dataclass
class RunningController:
    """The manager running in this event loop; `restart` replaces it with a fresh one
    (new caches, no memory of the old), as a crashed or upgraded pod would be."""

    kubeconfig: Path
    namespace: str
    webhook_port: int
    cert_dir: Path
    manager: Manager | None = None
    controllers: LwsControllers | None = None
    task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        options = local_manager_options(
            self.kubeconfig, self.webhook_port, self.cert_dir, namespace=self.namespace
        )
        self.manager = Manager(options)
        # As `lws dev` configures it: spec.scheduling served by Kubernetes' Workload
        # API wherever the cluster serves it (the local control plane does).
        scheduling = SchedulingSupport(
            provider=PROVIDER_KUBERNETES,
            feature_gate=True,
            api_available=await serves(self.manager.client, WORKLOADS, POD_GROUPS),
        )
        self.controllers = setup_controllers(self.manager, scheduling=scheduling)
        self.task = asyncio.create_task(self.manager.run(), name="lws-manager")
        await _wait_ready(self)

    async def stop(self, *, crash: bool = False) -> None:
        """Graceful by default; `crash` cancels everything at once, nothing finishes."""
        if self.manager is None or self.task is None:
            return
        if crash:
            self.task.cancel()
        else:
            self.manager.request_stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(self.task, timeout=30)
        if crash:
            # A cancelled manager may leave its client open; a real crash frees it too.
            with contextlib.suppress(Exception):
                await self.manager.client.close()
        self.manager, self.controllers, self.task = None, None, None

    async def restart(self, *, crash: bool = False) -> None:
        await self.stop(crash=crash)
        await self.start()


async def prepare_cluster(
    kubeconfig: Path, webhook_port: int, *, namespace: str = c.DEFAULT_OPERATOR_NAMESPACE
) -> None:
    """What a controller on 127.0.0.1:``webhook_port`` needs: the CRD, the webhook
    configurations, and the operator namespace for its certificate Secret."""
    async with _client(kubeconfig) as client:
        await install(client, webhook_port)
        await _fresh_namespace(client, namespace)


async def _fresh_namespace(client: ApiClient, namespace: str, within: float = 120.0) -> None:
    """The namespace exists and is not being deleted: a Secret cannot be created in a
    terminating one, so a controller started then would never get its certificate."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        current = await client.get_or_none(NAMESPACES, namespace)
        if current is not None and not current["metadata"].get("deletionTimestamp"):
            return
        if current is None:
            try:
                await client.create(
                    NAMESPACES,
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                )
                return
            except ApiError as exc:
                if not exc.already_exists:
                    raise
        if loop.time() > deadline:
            raise TimeoutError(f"namespace {namespace} still terminating after {within}s")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def running_controller(
    kubeconfig: Path, *, namespace: str = c.DEFAULT_OPERATOR_NAMESPACE
) -> AsyncIterator[RunningController]:
    """Install the CRD and webhooks, run the whole manager in this event loop."""
    port = free_port()
    await prepare_cluster(kubeconfig, port, namespace=namespace)
    with tempfile.TemporaryDirectory(prefix="lws-certs-") as cert_dir:
        running = RunningController(kubeconfig, namespace, port, Path(cert_dir))
        await running.start()
        try:
            yield running
        finally:
            await running.stop()


async def _wait_ready(running: RunningController, within: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        assert running.task is not None and running.manager is not None
        assert running.controllers is not None
        if running.task.done():
            running.task.result()
            raise RuntimeError("the manager stopped while starting")
        controllers = running.controllers
        started = [controllers.leaderworkersets, controllers.pods]
        if controllers.disaggregatedsets is not None:
            started.append(controllers.disaggregatedsets)
        ready = running.manager.webhook_server.is_serving() and all(c.running for c in started)
        if ready:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the controller did not become ready within {within}s")


@contextlib.asynccontextmanager
async def _client(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    client = ApiClient.from_kubeconfig(kubeconfig)
    try:
        yield client
    finally:
        await client.close()
