"""Faults where users have them: the controller installed by Helm (two replicas) on the
real node, running rendezvous groups, while its leading pod is deleted during a
rollout, containerd and the kubelet are restarted, the API server is restarted, and
both webhook replicas are out of reach for 30 s while LeaderWorkerSets are applied.

Each ends with the chaos suite's invariants (`tests/chaos/invariants.converged`: no
group lost or duplicated, the status true) and with the pods the fault did not touch
still the same pods (same UIDs, no container started again). The times (takeover,
recovery) are printed with -s, as `make e2e-real` runs it (docs/real-node.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from lws_localcluster.realnode.credentials import KUBELET
from lws_localcluster.realnode.images import ctr
from lws_localcluster.realnode.node import CONTAINERD

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import LEADERWORKERSETS, LEASES, PODS
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.chaos.invariants import converged
from tests.fixtures.realnode import NAMESPACE, RealCluster, install_local_chart
from tests.toolkit.cluster import lws_pods, wait_ready
from tests.toolkit.installs import no_lws_pods_left, remove_any_controller
from tests.toolkit.rendezvous import controller_pods, groups_met, pod_ready, rendezvous_lws
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1500)]

WEBHOOK_PORT = 9443  # charts/lws service.port: the port the manager pods serve webhooks on
UNREACHABLE_SECONDS = 30.0
SIZE = 3


@pytest.fixture(scope="module")
async def installed(real_cluster: RealCluster) -> AsyncIterator[ApiClient]:
    """A Helm install of its own: a test before this module may have removed the
    session's (the kustomize install removes any controller it finds)."""
    tools = real_cluster.tools
    api = ApiClient.from_kubeconfig(real_cluster.kubeconfig)
    try:
        remove_any_controller(tools)
        await no_lws_pods_left(api)
        install_local_chart(real_cluster)
        yield api
        remove_any_controller(tools)
    finally:
        await api.close()


async def lease_identity(api: ApiClient) -> str:
    """The election lease's holder identity: the pod's name, "_", a per-process id
    ("" while none holds it)."""
    lease = await api.get_or_none(LEASES, c.LEADER_ELECTION_LEASE_NAME, NAMESPACE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def holder_pod(api: ApiClient) -> tuple[JSON, str]:
    """The controller pod holding the lease, and the identity it holds it by."""

    async def probe() -> tuple[JSON, str] | None:
        identity = await lease_identity(api)
        pods = {p["metadata"]["name"]: p for p in await controller_pods(api)}
        pod = pods.get(identity.split("_", 1)[0])
        return (pod, identity) if pod else None

    return await eventually(probe, "a controller pod holds the lease", within=120)


def kill_manager_container(pod: JSON) -> None:
    """SIGKILL the pod's manager process through containerd, as the OOM killer would:
    no lease released, the kubelet starts the container again."""
    statuses = pod["status"]["containerStatuses"]
    container_id = statuses[0]["containerID"].split("://", 1)[1]
    ctr("tasks", "kill", "--signal", "SIGKILL", container_id)


def identities(pods: list[JSON]) -> dict[str, tuple[str, int]]:
    """Each pod's UID and its containers' restarts: what a fault must not change."""
    out = {}
    for pod in pods:
        restarts = sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", []))
        out[pod["metadata"]["name"]] = (pod["metadata"]["uid"], restarts)
    return out


async def running_group(api: ApiClient, real_cluster: RealCluster, name: str) -> JSON:
    lws = rendezvous_lws(name, real_cluster.images["rendezvous"], replicas=2, size=SIZE)
    created = await api.create(LEADERWORKERSETS, lws, "default")
    await wait_ready(api, "default", name, 2, within=240)
    await eventually(
        lambda: _all_met(api, name), f"both groups of {name} met", within=120,
        ignoring=(AssertionError, OSError),
    )  # fmt: skip
    return created


async def _all_met(api: ApiClient, name: str) -> bool:
    return len(await groups_met(api, "default", name, SIZE)) == 2


async def untouched(api: ApiClient, name: str, before: dict[str, tuple[str, int]]) -> None:
    """The workload whole again, with the very pods it had before the fault."""
    verdict = await converged(api, "default", name, within=180)
    assert not verdict.violations, verdict.report()
    await wait_ready(api, "default", name, 2, within=180)
    after = identities(await lws_pods(api, "default", name))
    assert after == before


@pytest.mark.parametrize("fault", ["deleted", "killed"])
async def test_the_leading_controller_lost_during_a_rollout(
    fault: str, installed: ApiClient, real_cluster: RealCluster
) -> None:
    """The leading pod deleted (it releases the lease as it stops) or its process killed
    (nothing released: the other replica waits out the lease)."""
    api, name = installed, f"takeover-{fault}"
    await running_group(api, real_cluster, name)
    leader, identity = await holder_pod(api)
    lws = await api.get(LEADERWORKERSETS, name, "default")
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template.setdefault("metadata", {}).setdefault("annotations", {})["rollout"] = "2"
    await api.replace(LEADERWORKERSETS, lws)

    async def rolling() -> bool:
        current = await api.get(LEADERWORKERSETS, name, "default")
        return int((current.get("status") or {}).get("updatedReplicas", 0)) < 2

    await eventually(rolling, "the rollout under way", within=60)
    lost = time.monotonic()
    if fault == "deleted":
        await api.delete(PODS, leader["metadata"]["name"], namespace=NAMESPACE)
    else:
        await asyncio.to_thread(kill_manager_container, leader)

    async def taken_over() -> str | None:
        holder = await lease_identity(api)
        return holder if holder and holder != identity else None

    new_holder = await eventually(taken_over, "another manager leads", within=120)
    takeover = time.monotonic() - lost

    async def rolled() -> bool:
        current = await api.get(LEADERWORKERSETS, name, "default")
        status = current.get("status") or {}
        return status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 2

    await eventually(rolled, "the rollout finished", within=300)
    done = time.monotonic() - lost
    verdict = await converged(api, "default", name, within=180)
    assert not verdict.violations, verdict.report()
    pods = await lws_pods(api, "default", name)
    assert len(pods) == 2 * SIZE
    assert all(p["metadata"].get("annotations", {}).get("rollout") == "2" for p in pods)
    await eventually(lambda: _controllers_ready(api), "both controller pods Ready", within=180)
    print(
        f"\n[time] leading controller pod {fault} mid-rollout: {new_holder.split('_')[0]} "
        f"leads after {takeover:.1f}s, the rollout done {done:.1f}s after the fault"
    )
    await api.delete(LEADERWORKERSETS, name, namespace="default")


@pytest.mark.parametrize("component", [CONTAINERD, KUBELET])
async def test_a_node_component_restarted_under_running_groups(
    component: str, installed: ApiClient, real_cluster: RealCluster
) -> None:
    api, name = installed, f"restart-{component}"
    await running_group(api, real_cluster, name)
    before = identities(await lws_pods(api, "default", name))
    managers = identities(await controller_pods(api))
    seconds = await asyncio.to_thread(
        real_cluster.node.restart, component, real_cluster.control_plane
    )
    started = time.monotonic()
    await untouched(api, name, before)
    assert identities(await controller_pods(api)) == managers
    print(
        f"\n[time] {component} restarted in {seconds:.1f}s; the groups whole and Ready "
        f"{time.monotonic() - started:.1f}s after, no pod replaced or restarted"
    )
    await api.delete(LEADERWORKERSETS, name, namespace="default")


async def test_the_api_server_restarted_under_running_groups(
    installed: ApiClient, real_cluster: RealCluster
) -> None:
    api, name = installed, "restart-apiserver"
    await running_group(api, real_cluster, name)
    before = identities(await lws_pods(api, "default", name))
    started = time.monotonic()
    await asyncio.to_thread(real_cluster.control_plane.restart_apiserver)
    await untouched(api, name, before)
    # Both replicas serve again (a leader that lost its lease while the API server was
    # away exits and is started again by the kubelet, as upstream's does).
    await eventually(lambda: _controllers_ready(api), "both controller pods Ready", within=180)
    restarts = sum(r for _, r in identities(await controller_pods(api)).values())
    print(
        f"\n[time] kube-apiserver restarted: the groups whole and Ready, both controller "
        f"pods Ready {time.monotonic() - started:.1f}s after; controller restarts: {restarts}"
    )
    await api.delete(LEADERWORKERSETS, name, namespace="default")


async def _controllers_ready(api: ApiClient) -> bool:
    pods = await controller_pods(api)
    return len(pods) == 2 and all(pod_ready(p) for p in pods)


@contextlib.contextmanager
def cut_off(addresses: list[str], port: int) -> Iterator[None]:
    """Reset every TCP packet the host sends to ``addresses:port`` (the API server runs
    on the host): open connections fail too, as in a network partition. Changing the
    Service would not do: the API server's kept-alive connections outlive kube-proxy's
    rules."""
    rules = [
        ["OUTPUT", "-p", "tcp", "-d", address, "--dport", str(port),
         "-m", "comment", "--comment", "lws-e2e-cut-off", "-j", "REJECT",
         "--reject-with", "tcp-reset"]
        for address in addresses
    ]  # fmt: skip
    added: list[list[str]] = []
    try:
        for rule in rules:
            subprocess.run(["iptables", "-I", *rule], check=True)
            added.append(rule)
        yield
    finally:
        for rule in added:
            subprocess.run(["iptables", "-D", *rule], check=False)


async def test_both_webhook_replicas_out_of_reach_while_users_apply(
    installed: ApiClient, real_cluster: RealCluster
) -> None:
    """Both controller pods out of the API server's reach for 30 s: every create in that
    time is refused with the webhook named, and none is stored, half-defaulted or
    otherwise; then creates are admitted again."""
    api, image = installed, real_cluster.images["rendezvous"]
    addresses = [p["status"]["podIP"] for p in await controller_pods(api)]
    assert len(addresses) == 2
    refused: list[str] = []
    with cut_off(addresses, WEBHOOK_PORT):
        until = time.monotonic() + UNREACHABLE_SECONDS
        attempt = 0
        while time.monotonic() < until:
            attempt += 1
            name = f"unreachable-{attempt}"
            try:
                await api.create(LEADERWORKERSETS, rendezvous_lws(name, image), "default")
            except ApiError as exc:
                refused.append(str(exc))
                assert await api.get_or_none(LEADERWORKERSETS, name, "default") is None
            else:
                pytest.fail(f"{name} was stored while no webhook could be reached")
            await asyncio.sleep(2)
    assert refused
    assert all("failed calling webhook" in message for message in refused), refused[0]
    started = time.monotonic()

    async def admitted() -> JSON | None:
        try:
            return await api.create(LEADERWORKERSETS, rendezvous_lws("reachable", image), "default")
        except ApiError as exc:
            if "failed calling webhook" in str(exc):
                return None
            raise

    created = await eventually(admitted, "a create admitted again", within=60)
    assert created["spec"]["leaderWorkerTemplate"]["size"] == SIZE
    await wait_ready(api, "default", "reachable", 2, within=240)
    listed = (await api.list(LEADERWORKERSETS, "default"))["items"]
    assert [o["metadata"]["name"] for o in listed] == ["reachable"]
    print(
        f"\n[time] webhooks out of reach {UNREACHABLE_SECONDS:.0f}s: {len(refused)} creates "
        f"refused ('{refused[0][:160]}'), admitted again {time.monotonic() - started:.1f}s "
        "after the network let them through again"
    )
    await api.delete(LEADERWORKERSETS, "reachable", namespace="default")
