"""Behaviour of the real Kubernetes components that the controller relies on, observed
with simulated kubelets. These prove the control plane parts are real, not mocked."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from lws_localcluster.nodesim.api import JsonObj, list_all
from lws_localcluster.nodesim.nodes import NodeSpec
from lws_localcluster.nodesim.simulator import (
    TERMINATION_DELAY_ANNOTATION,
    NodeSimulator,
)

from leaderworkerset.api.objects import format_time
from leaderworkerset.api.resources import DEPLOYMENTS, PODS, PRIORITY_CLASSES, REPLICASETS
from leaderworkerset.runtime.client import STRATEGIC_MERGE_PATCH, ApiClient
from tests.fixtures.nodesim import SimulatorFactory, isolated, isolated_pod_spec, unique_node_name
from tests.fixtures.pods import (
    PAUSE_IMAGE,
    condition,
    condition_is,
    get_pod,
    is_ready,
    wait_pod,
    wait_pod_gone,
)
from tests.toolkit.pods import pod_manifest
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.asyncio(loop_scope="session")]


def deployment(name: str, replicas: int) -> JsonObj:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": PAUSE_IMAGE}]},
            },
        },
    }


async def app_pods(api: ApiClient, namespace: str, app: str) -> list[JsonObj]:
    pods, _ = await list_all(api, PODS, namespace, label_selector=f"app={app}")
    return pods


def names(pods: list[JsonObj]) -> set[str]:
    return {p["metadata"]["name"] for p in pods}


async def test_replicaset_scale_down_removes_not_ready_pod_first(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    await nodesim_api.create(DEPLOYMENTS, deployment("web", 3), namespace)

    async def three_ready() -> list[JsonObj]:
        pods = await app_pods(nodesim_api, namespace, "web")
        return pods if len(pods) == 3 and all(is_ready(p) for p in pods) else []

    pods = await eventually(three_ready, what="3 ready replicas")
    victim = sorted(names(pods))[1]
    await node_simulator.set_container_ready(namespace, victim, False)

    # The ReplicaSet controller ranks pods from its own cache: only scale once its
    # status shows it has seen the pod turn unready.
    async def replicaset_saw_unready() -> bool:
        replicasets, _ = await list_all(nodesim_api, REPLICASETS, namespace)
        return len(replicasets) == 1 and replicasets[0]["status"].get("readyReplicas") == 2

    await eventually(replicaset_saw_unready, what="ReplicaSet readyReplicas == 2")
    await nodesim_api.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 2}}, namespace=namespace)

    async def scaled_down() -> list[JsonObj]:
        pods = await app_pods(nodesim_api, namespace, "web")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == 2 else []

    remaining = await eventually(scaled_down, what="2 live replicas")
    assert victim not in names(remaining)
    assert names(remaining) == names(pods) - {victim}
    await wait_pod_gone(nodesim_api, namespace, victim)


async def test_scheduling_gate_holds_pod_until_removed(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    manifest = pod_manifest("gated", schedulingGates=[{"name": "example.com/hold"}])
    await nodesim_api.create(PODS, manifest, namespace)

    def gated(pod: JsonObj) -> bool:
        found = condition(pod, "PodScheduled")
        return found is not None and found.get("reason") == "SchedulingGated"

    pod = await wait_pod(nodesim_api, namespace, "gated", gated)
    assert condition_is(pod, "PodScheduled", "False")
    assert pod["status"]["phase"] == "Pending"
    assert not pod["spec"].get("nodeName")

    # Gates can only be removed; null drops the whole list in a merge patch.
    await nodesim_api.patch(PODS, "gated", {"spec": {"schedulingGates": None}}, namespace=namespace)
    pod = await wait_pod(nodesim_api, namespace, "gated", is_ready)
    assert pod["spec"]["nodeName"] in node_simulator.node_names
    assert condition_is(pod, "PodScheduled")


async def test_readiness_gate_controls_pod_ready(
    nodesim_api: ApiClient, node_simulator: NodeSimulator, namespace: str
) -> None:
    gate = "example.com/group-ready"
    manifest = pod_manifest("gated-ready", readinessGates=[{"conditionType": gate}])
    await nodesim_api.create(PODS, manifest, namespace)

    def containers_up(pod: JsonObj) -> bool:
        return pod["status"].get("phase") == "Running" and condition_is(pod, "ContainersReady")

    pod = await wait_pod(nodesim_api, namespace, "gated-ready", containers_up)
    ready = condition(pod, "Ready")
    assert ready is not None and ready["status"] == "False"
    assert ready["reason"] == "ReadinessGatesNotReady"

    async def set_gate(status: str) -> None:
        body = {
            "status": {
                "conditions": [
                    {"type": gate, "status": status, "lastTransitionTime": format_time()}
                ]
            }
        }
        await nodesim_api.patch(
            PODS,
            "gated-ready",
            body,
            namespace=namespace,
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )

    await set_gate("True")
    pod = await wait_pod(nodesim_api, namespace, "gated-ready", is_ready)
    # The simulator recomputed Ready without touching the condition someone else owns.
    assert condition_is(pod, gate)

    await set_gate("False")
    pod = await wait_pod(
        nodesim_api, namespace, "gated-ready", lambda p: condition_is(p, "Ready", "False")
    )
    assert condition_is(pod, "ContainersReady")


async def test_high_priority_pod_preempts_on_full_node(
    nodesim_api: ApiClient,
    node_simulator_factory: SimulatorFactory,
    namespace: str,
) -> None:
    node = unique_node_name("full")
    await node_simulator_factory([isolated(NodeSpec(node, cpu="2", memory="4Gi", pods=10))])
    suffix = secrets.token_hex(3)
    low, high = f"nodesim-low-{suffix}", f"nodesim-high-{suffix}"
    for name, value in ((low, 100), (high, 1_000_000)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        await nodesim_api.create(PRIORITY_CLASSES, body)
    try:
        fill = {"cpu": "2", "memory": "1Gi"}
        victim = pod_manifest(
            "victim",
            requests=fill,
            priorityClassName=low,
            # Slow termination so the preemption is observable on the victim.
            annotations={TERMINATION_DELAY_ANNOTATION: "10"},
            **isolated_pod_spec(node),
        )
        await nodesim_api.create(PODS, victim, namespace)
        running = await wait_pod(nodesim_api, namespace, "victim", is_ready)
        assert running["spec"]["nodeName"] == node

        preemptor = pod_manifest(
            "preemptor", requests=fill, priorityClassName=high, **isolated_pod_spec(node)
        )
        await nodesim_api.create(PODS, preemptor, namespace)

        def preempted(pod: JsonObj) -> bool:
            disruption = condition(pod, "DisruptionTarget")
            return bool(pod["metadata"].get("deletionTimestamp")) and (
                disruption is not None and disruption.get("reason") == "PreemptionByScheduler"
            )

        await wait_pod(nodesim_api, namespace, "victim", preempted)
        nominated = await get_pod(nodesim_api, namespace, "preemptor")
        assert nominated is not None and not nominated["spec"].get("nodeName")

        await wait_pod_gone(nodesim_api, namespace, "victim")
        pod = await wait_pod(nodesim_api, namespace, "preemptor", is_ready)
        assert pod["spec"]["nodeName"] == node
    finally:
        await asyncio.gather(
            *(nodesim_api.delete(PRIORITY_CLASSES, name) for name in (low, high)),
            return_exceptions=True,
        )
