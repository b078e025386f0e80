"""What kube-scheduler v1.37.2 does with the Workload API (scheduling.k8s.io/v1beta1
PodGroup, pods' spec.schedulingGroup), asserted on the local control plane and
simulated nodes: the behaviour gang scheduling in this project relies on, so that a
Kubernetes upgrade that changes it fails here rather than in the controller's tests.
docs/gang-scheduling.md ("What kube-scheduler does (measured)") tells the same facts
with their timings.

Each test's pods run on nodes of its own (tainted and labelled for one isolation
group), so the session's shared nodes neither take nor free capacity for them.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from lws_localcluster.nodesim.api import JsonObj
from lws_localcluster.nodesim.nodes import NodeSpec

from leaderworkerset.api.resources import NODES, PODS, PRIORITY_CLASSES, Resource
from leaderworkerset.runtime.client import JSON_PATCH, ApiClient, ApiError
from tests.fixtures.nodesim import NodePool, isolated, isolated_pod_spec, unique_node_name
from tests.fixtures.pods import condition, get_pod, is_ready, wait_pod
from tests.toolkit.pods import pod_manifest
from tests.toolkit.waiting import eventually, stays

pytestmark = [pytest.mark.cluster, pytest.mark.asyncio(loop_scope="session")]

# Here rather than in leaderworkerset.api.resources: these tests read the API as
# Kubernetes serves it, whatever the controller's own model of it.
PODGROUPS = Resource("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup")
WORKLOADS = Resource("scheduling.k8s.io", "v1beta1", "workloads", "Workload")

PROTECTION_FINALIZER = "scheduling.k8s.io/podgroup-protection"
SCHEDULED = "PodGroupInitiallyScheduled"
RACK = "topology.kubernetes.io/rack"
# How long a test watches for something that must not happen (an observation window,
# not a wait): longer than the test cluster's 1 s scheduler back-off, so the scheduler
# retries within it.
WINDOW = 2.5


def pod_group(
    name: str,
    min_count: int,
    *,
    topology: Sequence[str] = (),
    priority_class: str | None = None,
    workload: tuple[str, str] | None = None,
) -> JsonObj:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": key} for key in topology]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if workload:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    return {
        "apiVersion": PODGROUPS.api_version,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def member(
    name: str,
    group: str | None,
    isolation: str,
    *,
    cpu: str = "1",
    gates: Sequence[str] = (),
    **spec: Any,
) -> JsonObj:
    """A pod of ``group`` (None: of none) asking for ``cpu``, on the isolated nodes."""
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return pod_manifest(
        name,
        requests={"cpu": cpu},
        terminationGracePeriodSeconds=0,
        **isolated_pod_spec(isolation),
        **spec,
    )


async def add_nodes(
    pool: NodePool,
    isolation: str,
    count: int,
    *,
    cpu: str = "1",
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    names = []
    for _ in range(count):
        spec = NodeSpec(
            unique_node_name("wl"), cpu=cpu, memory="4Gi", pods=10, labels=dict(labels or {})
        )
        await pool.add_spec(isolated(spec, isolation))
        names.append(spec.name)
    return names


async def nodes_of(api: ApiClient, namespace: str, names: Sequence[str]) -> dict[str, str | None]:
    """Each named pod's node (None while unbound; a missing pod is left out)."""
    found = {}
    for name in names:
        pod = await get_pod(api, namespace, name)
        if pod is not None:
            found[name] = pod["spec"].get("nodeName")
    return found


async def all_bound(api: ApiClient, namespace: str, names: Sequence[str]) -> dict[str, str]:
    nodes = await nodes_of(api, namespace, names)
    if len(nodes) == len(names) and all(nodes.values()):
        return {name: node for name, node in nodes.items() if node}
    return {}


async def none_bound(api: ApiClient, namespace: str, names: Sequence[str]) -> bool:
    return not any((await nodes_of(api, namespace, names)).values())


async def scheduled_condition(api: ApiClient, namespace: str, name: str) -> JsonObj | None:
    group = await api.get(PODGROUPS, name, namespace)
    return condition(group, SCHEDULED)


async def test_a_pod_waits_for_its_pod_group_to_exist(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    api, isolation = nodesim_api, f"wl-{secrets.token_hex(3)}"
    await add_nodes(extra_nodes, isolation, 1, cpu="2")
    await api.create(PODS, member("early", "late-group", isolation), namespace)

    async def waiting_unseen() -> bool:
        pod = await get_pod(api, namespace, "early")
        # Held before the scheduling queue: no attempt, so no PodScheduled condition.
        return (
            pod is not None
            and not pod["spec"].get("nodeName")
            and not pod["status"].get("conditions")
        )

    await stays(waiting_unseen, seconds=WINDOW, what="a pod of a missing PodGroup unscheduled")
    await api.create(PODGROUPS, pod_group("late-group", 1), namespace)
    await eventually(lambda: all_bound(api, namespace, ["early"]), what="bound", within=10)
    scheduled = await scheduled_condition(api, namespace, "late-group")
    assert scheduled is not None and scheduled["status"] == "True"
    assert scheduled["reason"] == "Scheduled"


async def test_a_gang_waits_for_its_gated_member_then_binds_whole(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    api, isolation = nodesim_api, f"wl-{secrets.token_hex(3)}"
    await add_nodes(extra_nodes, isolation, 1, cpu="4")
    await api.create(PODGROUPS, pod_group("gang", 3), namespace)
    names = ["m0", "m1", "m2"]
    await api.create(PODS, member("m0", "gang", isolation), namespace)
    await api.create(PODS, member("m1", "gang", isolation), namespace)
    await api.create(PODS, member("m2", "gang", isolation, gates=["example.com/hold"]), namespace)

    async def gang_held() -> bool:
        group = await api.get(PODGROUPS, "gang", namespace)
        # Fewer than minCount pods can be scheduled: the PodGroup has no condition yet.
        return await none_bound(api, namespace, names) and not group.get("status", {}).get(
            "conditions"
        )

    await stays(gang_held, seconds=WINDOW, what="2 of 3 ungated pods unbound")
    gated = condition(await get_pod(api, namespace, "m2"), "PodScheduled")
    assert gated is not None and gated["reason"] == "SchedulingGated"

    await api.patch(
        PODS,
        "m2",
        [{"op": "remove", "path": "/spec/schedulingGates"}],
        namespace=namespace,
        content_type=JSON_PATCH,
    )
    await eventually(lambda: all_bound(api, namespace, names), what="the gang bound", within=10)
    scheduled = await scheduled_condition(api, namespace, "gang")
    assert scheduled is not None and (scheduled["status"], scheduled["reason"]) == (
        "True",
        "Scheduled",
    )


async def test_a_deleted_pod_group_is_kept_while_pods_use_it(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    api, isolation = nodesim_api, f"wl-{secrets.token_hex(3)}"
    await add_nodes(extra_nodes, isolation, 1, cpu="2")
    created = await api.create(PODGROUPS, pod_group("kept", 2), namespace)
    assert created["metadata"]["finalizers"] == [PROTECTION_FINALIZER]
    for name in ("k0", "k1"):
        await api.create(PODS, member(name, "kept", isolation), namespace)
    for name in ("k0", "k1"):
        await wait_pod(api, namespace, name, is_ready)

    await api.delete(PODGROUPS, "kept", namespace)

    async def held_and_running() -> bool:
        group = await api.get_or_none(PODGROUPS, "kept", namespace)
        pods = [await get_pod(api, namespace, name) for name in ("k0", "k1")]
        return (
            group is not None
            and bool(group["metadata"].get("deletionTimestamp"))
            and group["metadata"].get("finalizers") == [PROTECTION_FINALIZER]
            # Its pods are left alone: running, not evicted.
            and all(p is not None and is_ready(p) for p in pods)
            and not any(p and p["metadata"].get("deletionTimestamp") for p in pods)
        )

    await stays(held_and_running, seconds=WINDOW, what="the PodGroup held by its running pods")
    await api.delete(PODS, "k0", namespace)
    await api.delete(PODS, "k1", namespace)

    async def gone() -> bool:
        return await api.get_or_none(PODGROUPS, "kept", namespace) is None

    await eventually(gone, what="the PodGroup gone with its last pod", within=15)


async def test_a_topology_constrained_gang_is_never_split_across_racks(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    api, isolation = nodesim_api, f"wl-{secrets.token_hex(3)}"
    # Room for 3 pods in each rack, 6 in all; the gang needs 4 in one rack.
    for rack in ("rack-a", "rack-b"):
        await add_nodes(extra_nodes, isolation, 3, labels={RACK: rack})
    await api.create(PODGROUPS, pod_group("racked", 4, topology=[RACK]), namespace)
    names = [f"r{i}" for i in range(4)]
    for name in names:
        await api.create(PODS, member(name, "racked", isolation), namespace)

    async def unschedulable() -> JsonObj | None:
        scheduled = await scheduled_condition(api, namespace, "racked")
        return scheduled if scheduled and scheduled["status"] == "False" else None

    scheduled = await eventually(unschedulable, what="the gang found unschedulable", within=15)
    assert scheduled["reason"] == "Unschedulable"
    assert "0/2 placements are available" in scheduled["message"]
    assert "minCount (4) cannot be satisfied" in scheduled["message"]
    await stays(
        lambda: none_bound(api, namespace, names), seconds=WINDOW, what="no pod of the gang bound"
    )

    (fourth,) = await add_nodes(extra_nodes, isolation, 1, labels={RACK: "rack-a"})
    bound = await eventually(
        lambda: all_bound(api, namespace, names), what="the gang bound in rack-a", within=30
    )
    racks = {(await api.get(NODES, node))["metadata"]["labels"][RACK] for node in bound.values()}
    assert racks == {"rack-a"}
    assert fourth in bound.values()
    now = await scheduled_condition(api, namespace, "racked")
    assert now is not None and now["status"] == "True"


async def gang_beside_filler(
    api: ApiClient, pool: NodePool, namespace: str, low: str, gang_class: str
) -> tuple[str, str, list[str]]:
    """A node that a running pod of PriorityClass ``low`` fills, and a gang of two
    ``gang_class`` pods that fits there only without it: the filler's name, the group's
    and its pods'."""
    isolation = f"wl-{secrets.token_hex(3)}"
    await add_nodes(pool, isolation, 1, cpu="4")
    filler = f"filler-{isolation}"
    await api.create(
        PODS, member(filler, None, isolation, cpu="4", priorityClassName=low), namespace
    )
    await wait_pod(api, namespace, filler, is_ready)
    group = f"gang-{isolation}"
    created = await api.create(PODGROUPS, pod_group(group, 2, priority_class=gang_class), namespace)
    # Admission resolves the PodGroup's priority from its PriorityClass.
    assert created["spec"]["priority"] == 1000
    names = [f"{group}-{i}" for i in range(2)]
    for name in names:
        pod = member(name, group, isolation, cpu="2", priorityClassName=gang_class)
        await api.create(PODS, pod, namespace)
    return filler, group, names


async def test_a_gang_of_higher_priority_preempts_a_filler_unless_it_never_preempts(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    api, suffix = nodesim_api, secrets.token_hex(3)
    low, high, never = (f"wl-{kind}-{suffix}" for kind in ("low", "high", "never"))
    classes: list[JsonObj] = [
        {"metadata": {"name": low}, "value": 0},
        {"metadata": {"name": high}, "value": 1000},
        {"metadata": {"name": never}, "value": 1000, "preemptionPolicy": "Never"},
    ]
    for body in classes:
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **body}
        await api.create(PRIORITY_CLASSES, body)
    try:
        filler, group, names = await gang_beside_filler(api, extra_nodes, namespace, low, never)

        async def refused() -> JsonObj | None:
            scheduled = await scheduled_condition(api, namespace, group)
            return scheduled if scheduled and scheduled["status"] == "False" else None

        scheduled = await eventually(refused, what="the gang unschedulable", within=15)
        assert scheduled["reason"] == "Unschedulable"
        assert "preemptionPolicy=Never" in scheduled["message"]
        assert is_ready(await get_pod(api, namespace, filler))
        assert await none_bound(api, namespace, names)

        filler, group, names = await gang_beside_filler(api, extra_nodes, namespace, low, high)
        await eventually(lambda: all_bound(api, namespace, names), what="the gang bound", within=15)
        preempted = await get_pod(api, namespace, filler)
        assert preempted is None or preempted["metadata"].get("deletionTimestamp")
    finally:
        await asyncio.gather(
            *(api.delete(PRIORITY_CLASSES, body["metadata"]["name"]) for body in classes),
            return_exceptions=True,
        )


async def test_pods_whose_priority_differs_from_their_groups_are_not_scheduled(
    nodesim_api: ApiClient, extra_nodes: NodePool, namespace: str
) -> None:
    api, isolation = nodesim_api, f"wl-{secrets.token_hex(3)}"
    high = f"wl-high-{secrets.token_hex(3)}"
    await api.create(
        PRIORITY_CLASSES,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": high},
            "value": 1000,
        },
    )
    try:
        await add_nodes(extra_nodes, isolation, 1, cpu="2")
        # The PodGroup names no PriorityClass: priority 0, its pods' 1000.
        created = await api.create(PODGROUPS, pod_group("mixed", 1), namespace)
        assert created["spec"]["priority"] == 0
        await api.create(PODS, member("x0", "mixed", isolation, priorityClassName=high), namespace)

        async def error() -> JsonObj | None:
            scheduled = await scheduled_condition(api, namespace, "mixed")
            return scheduled if scheduled and scheduled["status"] == "False" else None

        scheduled = await eventually(error, what="a scheduler error", within=15)
        assert scheduled["reason"] == "SchedulerError"
        assert "same priority as the pod group's priority, got 1000 and 0" in scheduled["message"]
        assert await none_bound(api, namespace, ["x0"])
    finally:
        await api.delete(PRIORITY_CLASSES, high)


async def test_what_the_api_server_lets_change(nodesim_api: ApiClient, namespace: str) -> None:
    api = nodesim_api
    for name in ("one", "two"):
        await api.create(PODGROUPS, pod_group(name, 2), namespace)
    pod = member("fixed", "one", "nowhere", gates=["example.com/hold"])
    await api.create(PODS, pod, namespace)

    async def refused(resource: Resource, name: str, patch: JsonObj) -> ApiError:
        with pytest.raises(ApiError) as caught:
            await api.patch(resource, name, patch, namespace=namespace)
        return caught.value

    # A pod's group is fixed at creation, even while the pod is gated.
    error = await refused(PODS, "fixed", {"spec": {"schedulingGroup": {"podGroupName": "two"}}})
    assert error.status == 422
    # Of a PodGroup's spec only the gang's minCount may change.
    await api.patch(
        PODGROUPS,
        "one",
        {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}},
        namespace=namespace,
    )
    immutable: list[JsonObj] = [
        {"spec": {"schedulingConstraints": {"topology": [{"key": RACK}]}}},
        {"spec": {"workloadRef": {"workloadName": "w", "templateName": "t"}}},
        {"spec": {"disruptionMode": {"all": {}}}},
    ]
    for patch in immutable:
        assert (await refused(PODGROUPS, "one", patch)).status == 422, patch

    # A PodGroup may name a Workload that does not exist; a Workload needs no controllerRef.
    await api.create(PODGROUPS, pod_group("orphan", 1, workload=("missing", "replica")), namespace)
    workload = {
        "apiVersion": WORKLOADS.api_version,
        "kind": "Workload",
        "metadata": {"name": "bare"},
        "spec": {
            "podGroupTemplates": [
                {"name": "replica", "schedulingPolicy": {"gang": {"minCount": 2}}}
            ]
        },
    }
    await api.create(WORKLOADS, workload, namespace)
    # Its templates can be neither renamed nor added to.
    with pytest.raises(ApiError) as caught:
        await api.patch(
            WORKLOADS,
            "bare",
            [{"op": "replace", "path": "/spec/podGroupTemplates/0/name", "value": "renamed"}],
            namespace=namespace,
            content_type=JSON_PATCH,
        )
    assert caught.value.status == 422
