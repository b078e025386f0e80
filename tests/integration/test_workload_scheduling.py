"""Gang scheduling by Kubernetes itself: spec.scheduling with the kubernetes provider, on
the real control plane and the real kube-scheduler (Workload API on), simulated nodes.

The partial-placement deadlock users hit is reproduced without gangs and is gone with
them; the objects come in Kubernetes' order; rollouts, scaling, crashes and Hash mode
keep one PodGroup per group and revision and leave none behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.nodes import NodeSpec

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.resources import (
    CONFIGMAPS,
    CONTROLLER_REVISIONS,
    DISAGGREGATEDSETS,
    EVENTS,
    LEADERWORKERSETS,
    POD_GROUPS,
    PODS,
    WORKLOADS,
)
from leaderworkerset.controllers.revisions import snapshot_key
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.nodesim import (
    NodePool,
    SimulatorFactory,
    isolated,
    isolated_pod_spec,
    unique_node_name,
)
from tests.fixtures.pods import condition as pod_condition
from tests.fixtures.pods import is_ready
from tests.integration.test_kubectl_lws import groups_json, plugin
from tests.integration.test_kubectl_lws import table as kubectl_table
from tests.toolkit.cluster import (
    condition,
    get_lws,
    group_pods,
    is_leader,
    key_of,
    labels,
    leaders,
    live_pods,
    lws_pods,
    name_of,
    new_leader,
    node_labels_of,
    release_all,
    scheduling_gated,
    wait_ready,
)
from tests.toolkit.disaggregatedset import manifest as ds_manifest
from tests.toolkit.disaggregatedset import rolling_role, settled
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.pods import pod_manifest
from tests.toolkit.priority import priority_classes as priority_classes_made
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
GPU = "nvidia.com/gpu"
# The one condition kube-scheduler writes on a PodGroup.
POD_GROUP_SCHEDULED = "PodGroupInitiallyScheduled"


@pytest_asyncio.fixture(loop_scope="session")
async def gangs(lws_controller: RunningController) -> AsyncIterator[RunningController]:
    """The session's controller, serving spec.scheduling with the kubernetes provider."""
    assert lws_controller.controllers is not None
    support = lws_controller.controllers.options.scheduling
    assert support.kubernetes, f"the test controller does not serve spec.scheduling: {support}"
    yield lws_controller


def gang(body: JSON, scheduling: JSON | None = None) -> JSON:
    body["spec"]["scheduling"] = scheduling if scheduling is not None else {}
    return body


async def pod_groups(api: ApiClient, namespace: str, name: str) -> dict[str, JSON]:
    answer = await api.list(POD_GROUPS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}")
    return {name_of(g): g for g in answer.get("items", [])}


def scheduling_group(pod: JSON) -> str | None:
    return ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")


def bound(pod: JSON) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


class CreationOrder:
    """The etcd revision at which each pod and PodGroup of a namespace was created: one
    counter across kinds, so it orders a PodGroup against the pods that name it."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.created: dict[tuple[str, str], int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> CreationOrder:
        for resource in (PODS, POD_GROUPS):
            listed = await self.api.list(resource, self.namespace)
            version = listed["metadata"]["resourceVersion"]
            self._tasks.append(asyncio.create_task(self._watch(resource.kind, version)))
        return self

    async def _watch(self, kind: str, version: str) -> None:
        resource = PODS if kind == "Pod" else POD_GROUPS
        async for event in self.api.watch(resource, self.namespace, resource_version=version):
            obj = event.get("object") or {}
            if event.get("type") == "ADDED":
                meta = obj.get("metadata") or {}
                self.created.setdefault((kind, meta["name"]), int(meta["resourceVersion"]))

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def test_objects_come_in_kubernetes_order(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    """One Workload controlled by the LWS, then a PodGroup per group, then the group's
    pods, each naming it; the condition says the prerequisites are ready."""
    api = nodesim_api
    async with CreationOrder(api, namespace) as order:
        await api.create(LEADERWORKERSETS, gang(lws_manifest("ordered", namespace, size=3)))
        await wait_ready(api, namespace, "ordered", 2)
        pods = await live_pods(api, namespace, "ordered")
        await eventually(
            lambda: all(("Pod", name_of(p)) in order.created for p in pods), what="pods seen"
        )
    workload = await api.get(WORKLOADS, "ordered", namespace)
    lws = await get_lws(api, namespace, "ordered")
    assert workload["spec"]["controllerRef"] == {
        "apiGroup": c.GROUP,
        "kind": c.KIND,
        "name": "ordered",
    }
    assert workload["metadata"]["ownerReferences"][0]["uid"] == lws["metadata"]["uid"]
    template = workload["spec"]["podGroupTemplates"][0]
    assert template["name"] == "replica"
    assert template["schedulingPolicy"] == {"gang": {"minCount": 3}}
    groups = await pod_groups(api, namespace, "ordered")
    revision = labels(pods[0])[c.LABEL_TEMPLATE_REVISION_HASH]
    assert set(groups) == {f"ordered-0-{revision}", f"ordered-1-{revision}"}
    for group in groups.values():
        assert group["spec"]["workloadRef"] == {
            "workloadName": "ordered",
            "templateName": "replica",
        }
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert len(pods) == 6
    for pod in pods:
        expected = f"ordered-{labels(pod)[c.LABEL_GROUP_INDEX]}-{revision}"
        assert scheduling_group(pod) == expected, name_of(pod)
        assert order.created[("PodGroup", expected)] < order.created[("Pod", name_of(pod))]
    assert condition(lws, s.CONDITION_WORKLOAD_SCHEDULING_READY) == "True"
    assert scheduling_ready(lws) == ("True", s.REASON_READY)


# --- the deadlock ----------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def full_cluster(extra_nodes: NodePool) -> str:
    """Two nodes of 8 GPUs that only this test's pods use: room for four 4-GPU pods."""
    group = unique_node_name("gang")
    for _ in range(2):
        await extra_nodes.add_spec(isolated(NodeSpec(name=unique_node_name("gpu"), gpus=8), group))
    return group


def gpu_lws(name: str, namespace: str, group: str, *, with_gangs: bool) -> JSON:
    """One group of three 4-GPU pods on the isolated nodes: two such groups cannot both fit."""
    body = lws_manifest(name, namespace, replicas=1, size=3)
    spec = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    spec.update(isolated_pod_spec(group))
    spec["containers"][0]["resources"] = {"requests": {"cpu": "10m"}, "limits": {GPU: "4"}}
    return gang(body) if with_gangs else body


async def placement(api: ApiClient, namespace: str, names: list[str]) -> dict[str, tuple[int, int]]:
    """Per LWS: (pods bound, pods pending)."""
    out = {}
    for name in names:
        pods = await live_pods(api, namespace, name)
        out[name] = (sum(bound(p) for p in pods), sum(not bound(p) for p in pods))
    return out


def partial(counts: dict[str, tuple[int, int]]) -> list[str]:
    """The LWSs with part of their group bound and the rest pending."""
    return [name for name, (on, off) in counts.items() if on and off]


async def test_partial_placement_deadlock_without_gangs(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str, full_cluster: str
) -> None:
    api, names = nodesim_api, ["a", "b"]
    for name in names:
        await api.create(LEADERWORKERSETS, gpu_lws(name, namespace, full_cluster, with_gangs=False))

    async def stuck() -> dict[str, tuple[int, int]] | None:
        counts = await placement(api, namespace, names)
        total = [sum(v) for v in counts.values()]
        return counts if total == [3, 3] and sum(on for on, _ in counts.values()) == 4 else None

    counts = await eventually(stuck, what="four pods bound, two pending", within=60)
    # Four 4-GPU pods fit, in two groups of three: at least one group holds GPUs it
    # cannot use, waiting for pods that can never be placed.
    assert partial(counts), counts


async def test_gangs_place_a_group_whole_or_not_at_all(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str, full_cluster: str
) -> None:
    api, names = nodesim_api, ["a", "b"]
    for name in names:
        await api.create(LEADERWORKERSETS, gpu_lws(name, namespace, full_cluster, with_gangs=True))

    async def one_whole() -> dict[str, tuple[int, int]] | None:
        counts = await placement(api, namespace, names)
        return counts if sorted(counts.values()) == [(0, 3), (3, 0)] else None

    counts = await eventually(one_whole, what="one group whole, the other unplaced", within=60)

    async def never_partial() -> bool:
        counts = await placement(api, namespace, names)
        return not partial(counts) and sum(on for on, _ in counts.values()) == 3

    await stays(never_partial, seconds=8, what="no group partly placed")
    placed = next(name for name, (on, _) in counts.items() if on)
    waiting = next(name for name in names if name != placed)
    await api.delete(LEADERWORKERSETS, placed, namespace)

    async def waiting_placed_whole() -> bool:
        on, off = (await placement(api, namespace, [waiting]))[waiting]
        assert not (on and off) or on == 3, f"{waiting} partly placed: {on} bound, {off} pending"
        return on == 3

    await eventually(waiting_placed_whole, what=f"{waiting} placed whole", within=90)


# --- what kubectl lws shows ---------------------------------------------------------------


async def test_kubectl_lws_shows_the_placed_gang_scheduled_and_the_other_waiting(
    gangs: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    full_cluster: str,
    kubeconfig: Path,
) -> None:
    """The plugin (its own process, reads only) names each group's PodGroup: the placed
    group's gang is Scheduled, the one that cannot fit WaitingForCapacity with the
    scheduler's reason."""
    api, names = nodesim_api, ["a", "b"]
    for name in names:
        await api.create(LEADERWORKERSETS, gpu_lws(name, namespace, full_cluster, with_gangs=True))

    async def one_scheduled_one_waiting() -> dict[str, JSON] | None:
        shown = {name: (await groups_json(kubeconfig, name, namespace))[0] for name in names}
        states = sorted(str(group["gang"]) for group in shown.values())
        reasons = [g["gangReason"] for g in shown.values() if g["gang"] == "WaitingForCapacity"]
        if states != ["Scheduled", "WaitingForCapacity"] or reasons in ([None], ["pending"]):
            return None
        return shown

    shown = await eventually(
        one_scheduled_one_waiting, what="one gang Scheduled, one waiting", within=60, interval=0.5
    )
    placed = next(name for name, group in shown.items() if group["gang"] == "Scheduled")
    waiting = next(name for name in names if name != placed)
    for name, group in shown.items():
        pods = await live_pods(api, namespace, name)
        assert {scheduling_group(p) for p in pods} == {group["podGroup"]}
        assert group["podGroup"] in await pod_groups(api, namespace, name)
    assert shown[placed]["gangReason"] is None and shown[placed]["readyPods"] == 3
    assert shown[waiting]["leaderNode"] is None
    assert "pod group is unschedulable" in shown[waiting]["gangMessage"]

    for name in (placed, waiting):
        text = await kubectl_table(kubeconfig, name, namespace)
        print(f"\n$ kubectl lws groups {name}\n{text}")
        header, row = text.splitlines()
        assert header.split()[-2:] == ["PODGROUP", "GANG"]
        assert shown[name]["podGroup"] in row
    assert row.endswith(f"WaitingForCapacity ({shown[waiting]['gangReason']})")
    code, out, err = await plugin(kubeconfig, "describe", waiting, "0", "-n", namespace)
    assert code == 0, err
    print(f"\n$ kubectl lws describe {waiting} 0\n{out}")
    assert f"PodGroup:        {shown[waiting]['podGroup']}, gang of 3, 0/3" in out
    assert "Gang:            WaitingForCapacity: pod group is unschedulable" in out


# --- rollouts and scaling ---------------------------------------------------------------


async def test_a_rollout_gets_fresh_pod_groups_and_the_old_ones_go_with_their_pods(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, gang(lws_manifest("roll", namespace, size=2)))
    await wait_ready(api, namespace, "roll", 2)
    old = set(await pod_groups(api, namespace, "roll"))
    old_revisions = {
        labels(p)[c.LABEL_TEMPLATE_REVISION_HASH] for p in await live_pods(api, namespace, "roll")
    }
    lws = await get_lws(api, namespace, "roll")
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {"labels": {"v": "2"}}
    await api.replace(LEADERWORKERSETS, lws)

    async def rolled() -> set[str] | None:
        pods = await live_pods(api, namespace, "roll")
        revisions = {labels(p)[c.LABEL_TEMPLATE_REVISION_HASH] for p in pods}
        if len(pods) != 4 or len(revisions) != 1 or revisions == old_revisions:
            return None
        if not all(bound(p) for p in pods):
            return None
        return {scheduling_group(p) or "" for p in pods}

    named = await eventually(rolled, what="every pod on the new revision", within=90)
    assert not named & old
    assert len(named) == 2

    async def only_new() -> bool:
        return set(await pod_groups(api, namespace, "roll")) == named

    await eventually(only_new, what="old PodGroups deleted once their pods are gone", within=60)


async def test_scale_up_makes_the_pod_group_first_and_scale_down_removes_it_after_its_pods(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, gang(lws_manifest("scale", namespace, replicas=1)))
    await wait_ready(api, namespace, "scale", 1)
    async with CreationOrder(api, namespace) as order:
        lws = await get_lws(api, namespace, "scale")
        lws["spec"]["replicas"] = 3
        await api.replace(LEADERWORKERSETS, lws)
        await wait_ready(api, namespace, "scale", 3)
        pods = await live_pods(api, namespace, "scale")
        new_pods = [p for p in pods if labels(p)[c.LABEL_GROUP_INDEX] in ("1", "2")]
        await eventually(
            lambda: all(("Pod", name_of(p)) in order.created for p in new_pods), what="pods seen"
        )
    assert len(new_pods) == 4
    for pod in new_pods:
        group = scheduling_group(pod)
        assert group is not None
        assert order.created[("PodGroup", group)] < order.created[("Pod", name_of(pod))]
    lws = await get_lws(api, namespace, "scale")
    lws["spec"]["replicas"] = 1
    await api.replace(LEADERWORKERSETS, lws)

    async def one_left() -> bool:
        groups = await pod_groups(api, namespace, "scale")
        return [labels(g)[c.LABEL_GROUP_INDEX] for g in groups.values()] == ["0"]

    await eventually(one_left, what="the PodGroups of groups 1 and 2 gone", within=60)
    assert not [
        p for p in await lws_pods(api, namespace, "scale") if labels(p)[c.LABEL_GROUP_INDEX] != "0"
    ]


# --- Hash mode --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policy", [c.GROUP_REPLACEMENT_POST_TERMINATION, c.GROUP_REPLACEMENT_IMMEDIATE]
)
async def test_hash_groups_are_gangs_and_a_replacement_gets_its_own(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str, policy: str
) -> None:
    """A Hash leader's PodGroup follows it (the key is drawn at admission); the
    PostTermination gate is lifted first and the gang then waits for the whole group."""
    api = nodesim_api
    body = gang(hash_lws("hashed", namespace, size=3, groupReplacementPolicy=policy))
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "hashed", 2)
    pods = await live_pods(api, namespace, "hashed")
    groups = await pod_groups(api, namespace, "hashed")
    assert {scheduling_group(p) for p in pods} == set(groups)
    assert len(groups) == 2
    leader = next(p for p in pods if labels(p)[c.LABEL_WORKER_INDEX] == "0")
    old_group = scheduling_group(leader)
    await api.delete(PODS, name_of(leader), namespace)

    async def replaced() -> set[str] | None:
        pods = await live_pods(api, namespace, "hashed")
        if len(pods) != 6 or not all(bound(p) for p in pods):
            return None
        named = {scheduling_group(p) or "" for p in pods}
        return named if old_group not in named else None

    named = await eventually(replaced, what="the group replaced, whole", within=90)
    assert len(named) == 2

    async def old_gone() -> bool:
        return set(await pod_groups(api, namespace, "hashed")) == named

    await eventually(old_gone, what="the replaced group's PodGroup deleted", within=60)


# --- crashes ----------------------------------------------------------------------------


async def test_a_controller_crash_at_any_step_leaves_nothing_behind(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    """Crash the controller as soon as each kind of object appears; the restarted one
    finishes the work without duplicates, and deleting the LWS leaves nothing."""
    api = nodesim_api
    await api.create(LEADERWORKERSETS, gang(lws_manifest("crashy", namespace, replicas=3)))

    async def workload_made() -> bool:
        return await api.get_or_none(WORKLOADS, "crashy", namespace) is not None

    await eventually(workload_made, what="the Workload", within=30, interval=0.01)
    await gangs.restart(crash=True)

    async def some_groups() -> bool:
        return bool(await pod_groups(api, namespace, "crashy"))

    await eventually(some_groups, what="a PodGroup", within=30, interval=0.01)
    await gangs.restart(crash=True)
    await wait_ready(api, namespace, "crashy", 3)
    groups = await pod_groups(api, namespace, "crashy")
    pods = await live_pods(api, namespace, "crashy")
    assert len(groups) == 3
    assert {scheduling_group(p) for p in pods} == set(groups)
    workloads = (await api.list(WORKLOADS, namespace)).get("items", [])
    assert [name_of(w) for w in workloads] == ["crashy"]

    await api.delete(LEADERWORKERSETS, "crashy", namespace)

    async def nothing_left() -> bool:
        left = (await api.list(WORKLOADS, namespace)).get("items", [])
        return not left and not await pod_groups(api, namespace, "crashy")

    await eventually(nothing_left, what="Workload and PodGroups collected", within=60)


# --- a name already taken -----------------------------------------------------------------


async def test_a_pod_group_of_another_owner_under_group_0s_name_holds_the_group(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    """A PodGroup someone else made under the name group 0 will need (no set-name label,
    so the controller's cache never shows it; controlled by a ConfigMap) is neither used
    nor touched: the LWS waits with WorkloadSchedulingReady False naming it and its
    owner, and makes no pod. Once it is deleted, the next retry makes the LWS's own."""
    api = nodesim_api
    body = gang(lws_manifest("taken", namespace, replicas=1, size=2))
    # The revision key is the hash of the spec as stored: a dry run gives that spec.
    stored = await api.request(
        "POST", LEADERWORKERSETS.path(namespace), params={"dryRun": "All"}, body=body
    )
    key = snapshot_key(stored)
    group_0 = f"taken-0-{key}"
    keeper = await api.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keeper"}},
        namespace,
    )
    keeper_ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "keeper",
        "uid": keeper["metadata"]["uid"],
        "controller": True,
    }
    stray = {
        "apiVersion": POD_GROUPS.api_version,
        "kind": POD_GROUPS.kind,
        "metadata": {"name": group_0, "ownerReferences": [keeper_ref]},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    await api.create(POD_GROUPS, stray, namespace)
    await api.create(LEADERWORKERSETS, body)

    async def held() -> JSON | None:
        lws = await get_lws(api, namespace, "taken")
        for cond in (lws.get("status") or {}).get("conditions") or []:
            if cond["type"] == s.CONDITION_WORKLOAD_SCHEDULING_READY and cond["status"] == "False":
                return dict(cond)
        return None

    cond = await eventually(held, what="WorkloadSchedulingReady False", within=30)
    assert cond["reason"] == s.REASON_INVALID_SCHEDULING_CONFIGURATION, cond
    assert f"PodGroup {namespace}/{group_0} exists and is not controlled" in cond["message"]
    assert f"ConfigMap keeper (uid {keeper_ref['uid']})" in cond["message"], cond["message"]
    revisions = await api.list(
        CONTROLLER_REVISIONS, namespace, label_selector=f"{c.LABEL_SET_NAME}=taken"
    )
    assert [labels(r)[c.LABEL_TEMPLATE_REVISION_HASH] for r in revisions["items"]] == [key]

    async def nothing_made() -> bool:
        no_pods = not await lws_pods(api, namespace, "taken")
        return no_pods and not await pod_groups(api, namespace, "taken")

    # Longer than two of the controller's 5 s retries.
    await stays(nothing_made, seconds=12, what="no pod and no PodGroup of the held LWS")
    kept = await api.get(POD_GROUPS, group_0, namespace)
    assert kept["metadata"]["ownerReferences"] == [keeper_ref]
    assert kept["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}

    await api.delete(POD_GROUPS, group_0, namespace)
    lws = await wait_ready(api, namespace, "taken", 1, within=90)
    assert scheduling_ready(lws) == ("True", s.REASON_READY)
    groups = await pod_groups(api, namespace, "taken")
    assert set(groups) == {group_0}
    owners = groups[group_0]["metadata"]["ownerReferences"]
    assert [o["uid"] for o in owners] == [lws["metadata"]["uid"]]
    pods = await live_pods(api, namespace, "taken")
    assert len(pods) == 2
    assert {scheduling_group(p) for p in pods} == {group_0}


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda b: b["spec"].update(startupPolicy=c.STARTUP_POLICY_LEADER_READY),
            "spec.scheduling.schedulingPolicy.gang",
        ),
        (
            lambda b: b["spec"]["scheduling"].update(schedulingPolicy={"gang": {"minCount": 1}}),
            "spec.scheduling.schedulingPolicy.gang.minCount",
        ),
        (
            lambda b: b["spec"]["scheduling"].update(schedulingPolicy={}),
            "spec.scheduling.schedulingPolicy",
        ),
    ],
    ids=["leader-ready", "min-count", "empty-policy"],
)
async def test_refusals_name_the_field_and_create_nothing(
    gangs: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    change: Callable[[JSON], None],
    field: str,
) -> None:
    api = nodesim_api
    body = gang(lws_manifest("refused", namespace, size=3))
    change(body)
    with pytest.raises(ApiError) as refused:
        await api.create(LEADERWORKERSETS, body)
    assert refused.value.status in (400, 422), refused.value
    assert field in refused.value.message, refused.value.message
    assert await api.get_or_none(LEADERWORKERSETS, "refused", namespace) is None
    assert not (await api.list(WORKLOADS, namespace)).get("items")


def scheduling_ready(lws: JSON) -> tuple[str, str] | None:
    """(status, reason) of the WorkloadSchedulingReady condition, None without one."""
    for cond in (lws.get("status") or {}).get("conditions") or []:
        if cond.get("type") == s.CONDITION_WORKLOAD_SCHEDULING_READY:
            return str(cond.get("status")), str(cond.get("reason"))
    return None


def pod_group_scheduled(group: JSON) -> tuple[str, str] | None:
    """(status, reason) of the scheduler's PodGroupInitiallyScheduled condition."""
    for cond in (group.get("status") or {}).get("conditions") or []:
        if cond.get("type") == POD_GROUP_SCHEDULED:
            return str(cond.get("status")), str(cond.get("reason"))
    return None


async def placed_as_a_gang(api: ApiClient, namespace: str, name: str) -> None:
    """Until the scheduler says the PodGroup was placed (it writes that after binding)."""

    async def scheduled() -> bool:
        group = await api.get(POD_GROUPS, name, namespace)
        return pod_group_scheduled(group) == ("True", "Scheduled")

    await eventually(scheduled, within=30, what=f"PodGroup {name} Scheduled")


# --- Hash PostTermination on a full cluster: the gang waits, nothing is preempted -------


@pytest_asyncio.fixture(loop_scope="session")
async def high_and_zero(nodesim_api: ApiClient) -> AsyncIterator[tuple[str, str]]:
    """(high, low): this test's PriorityClasses of value 1000 and 0."""
    async with priority_classes_made(nodesim_api, ("gang-high", 1000), ("gang-zero", 0)) as names:
        yield (names[0], names[1])


async def preemptions(api: ApiClient, namespace: str) -> list[str]:
    """Every `Preempted` event of the namespace, as "pod: note"."""
    answer = await api.list(EVENTS, namespace)
    return [
        f"{(e.get('regarding') or {}).get('name')}: {e.get('note')}"
        for e in answer.get("items", [])
        if e.get("reason") == "Preempted"
    ]


async def untouched(api: ApiClient, namespace: str, fillers: list[JSON]) -> bool:
    """Every filler pod still the same object, not terminating, not marked for disruption."""
    for old in fillers:
        pod = await api.get_or_none(PODS, name_of(old), namespace)
        if pod is None or pod["metadata"]["uid"] != old["metadata"]["uid"]:
            return False
        if pod["metadata"].get("deletionTimestamp") or pod_condition(pod, "DisruptionTarget"):
            return False
    return True


async def fill_the_rest(api: ApiClient, namespace: str, isolation: str, low: str) -> list[JSON]:
    """Four running one-cpu pods of PriorityClass `low` on the isolated nodes."""
    names = [f"filler-{i}" for i in range(4)]
    for name in names:
        pod = pod_manifest(
            name,
            requests={"cpu": "1"},
            priorityClassName=low,
            terminationGracePeriodSeconds=0,
            **isolated_pod_spec(isolation),
        )
        await api.create(PODS, pod, namespace)

    async def running() -> list[JSON] | None:
        pods = [await api.get(PODS, name, namespace) for name in names]
        return pods if all(is_ready(p) for p in pods) else None

    fillers: list[JSON] = await eventually(running, within=60, what="the fillers running")
    return fillers


@pytest.mark.parametrize("trigger", ["worker-crash", "leader-delete"])
async def test_hash_post_termination_replaces_a_gang_on_a_full_cluster_without_preempting(
    gangs: RunningController,
    node_simulator_factory: SimulatorFactory,
    nodesim_api: ApiClient,
    namespace: str,
    high_and_zero: tuple[str, str],
    trigger: str,
) -> None:
    """Two 4-cpu nodes: two gangs of two 1-cpu pods of priority 1000, and four 1-cpu
    fillers of priority 0 in the rest. While a restarted group's pods terminate, its
    replacement could only be placed by preempting two fillers: it waits behind its gate,
    and then takes the capacity the old group freed, whole."""
    api, (high, low) = nodesim_api, high_and_zero
    isolation = f"gangfull-{secrets.token_hex(3)}"
    sim = await node_simulator_factory(
        [isolated(NodeSpec(f"{isolation}-{i}", cpu="4", memory="16Gi"), isolation) for i in (0, 1)]
    )
    body = gang(
        hash_lws(
            "full",
            namespace,
            replicas=2,
            size=2,
            cpu="1",
            groupReplacementPolicy=c.GROUP_REPLACEMENT_POST_TERMINATION,
        )
    )
    template = body["spec"]["leaderWorkerTemplate"]
    template["restartPolicy"] = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    # No leaderTemplate: the leader runs the worker template, so both have the class.
    template["workerTemplate"]["spec"].update(isolated_pod_spec(isolation), priorityClassName=high)
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "full", 2)
    groups = await pod_groups(api, namespace, "full")
    assert len(groups) == 2
    for group in groups.values():
        assert (group["spec"]["priorityClassName"], group["spec"]["priority"]) == (high, 1000)
    assert {p["spec"]["priority"] for p in await live_pods(api, namespace, "full")} == {1000}
    fillers = await fill_the_rest(api, namespace, isolation, low)

    before = await leaders(api, namespace, "full")
    victim = before[0]
    old_group = await group_pods(api, namespace, "full", key_of(victim))
    for pod in old_group:
        await sim.stall_termination(namespace, name_of(pod))
    if trigger == "worker-crash":
        worker = next(p for p in old_group if not is_leader(p))
        await sim.restart_container(namespace, name_of(worker))
    else:
        await api.delete(PODS, name_of(victim), namespace)
    replacement = name_of(await new_leader(api, namespace, "full", {key_of(p) for p in before}))

    async def held_quietly() -> bool:
        pod = await api.get(PODS, replacement, namespace)
        own = scheduling_group(pod)
        return (
            scheduling_gated(pod)
            and own is not None
            and own in await pod_groups(api, namespace, "full")
            and await untouched(api, namespace, fillers)
            and not await preemptions(api, namespace)
        )

    await eventually(held_quietly, within=60, what="the replacement held, its PodGroup made")
    await stays(held_quietly, seconds=5, what="the replacement held, no filler preempted")
    assert len(await group_pods(api, namespace, "full", key_of(victim))) == 2

    await release_all(sim, old_group)

    async def whole() -> list[JSON] | None:
        pod = await api.get(PODS, replacement, namespace)
        members = await group_pods(api, namespace, "full", key_of(pod))
        # A gang: the leader is never placed while its worker does not exist yet.
        assert not bound(pod) or len(members) == 2, "the leader bound before its worker"
        return members if len(members) == 2 and all(bound(p) for p in members) else None

    members = await eventually(whole, within=60, what="the replacement group bound whole")
    await wait_ready(api, namespace, "full", 2)
    assert await group_pods(api, namespace, "full", key_of(victim)) == []
    assert await untouched(api, namespace, fillers)
    assert await preemptions(api, namespace) == []
    named = {scheduling_group(p) for p in members}
    assert len(named) == 1 and None not in named
    (own,) = named
    assert own is not None
    await placed_as_a_gang(api, namespace, own)
    assert {p["spec"]["nodeName"] for p in members} <= set(sim.fleet.nodes)


# --- DisaggregatedSet roles with spec.scheduling ---------------------------------------------


async def test_every_role_of_a_disaggregatedset_gets_its_workload_and_gangs(
    gangs: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    roles = (
        rolling_role("prefill", 2, size=2, scheduling={}),
        rolling_role("decode", 1, size=3, scheduling={}),
    )
    await api.create(DISAGGREGATEDSETS, ds_manifest("gangs", namespace, *roles))
    lwss = await settled(api, namespace, "gangs", {"prefill": 2, "decode": 1})
    assert len(lwss) == 2
    for name, lws in lwss.items():
        size = lws["spec"]["leaderWorkerTemplate"]["size"]
        replicas = lws["spec"]["replicas"]
        assert "scheduling" in lws["spec"]
        workload = await api.get(WORKLOADS, name, namespace)
        assert workload["spec"]["controllerRef"]["name"] == name
        assert workload["metadata"]["ownerReferences"][0]["uid"] == lws["metadata"]["uid"]
        template = workload["spec"]["podGroupTemplates"][0]
        assert template["schedulingPolicy"] == {"gang": {"minCount": size}}
        groups = await pod_groups(api, namespace, name)
        assert len(groups) == replicas, (name, sorted(groups))
        pods = await live_pods(api, namespace, name)
        assert len(pods) == replicas * size
        assert all(bound(p) for p in pods)
        assert {scheduling_group(p) for p in pods} == set(groups), name
        for group_name, group in groups.items():
            assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": size}}
            await placed_as_a_gang(api, namespace, group_name)
        assert scheduling_ready(lws) == ("True", s.REASON_READY)

    async def available() -> bool:
        status = (await api.get(DISAGGREGATEDSETS, "gangs", namespace)).get("status") or {}
        conditions = {x["type"]: x["status"] for x in status.get("conditions") or []}
        return conditions.get("Available") == "True"

    await eventually(available, within=60, what="the set Available")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"startupPolicy": c.STARTUP_POLICY_LEADER_READY},
            "spec.roles[0].spec.scheduling.schedulingPolicy.gang",
        ),
        (
            {"scheduling": {"schedulingPolicy": {"gang": {"minCount": 1}}}},
            "spec.roles[0].spec.scheduling.schedulingPolicy.gang.minCount",
        ),
    ],
    ids=["leader-ready", "min-count"],
)
async def test_a_disaggregatedset_role_whose_scheduling_an_lws_may_not_have_is_refused(
    gangs: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    change: JSON,
    field: str,
) -> None:
    api = nodesim_api
    refused_role = rolling_role("prefill", 1, size=2, scheduling={})
    refused_role["spec"].update(change)
    body = ds_manifest("bad", namespace, refused_role, rolling_role("decode", 1, scheduling={}))
    with pytest.raises(ApiError) as refused:
        await api.create(DISAGGREGATEDSETS, body)
    message = str(refused.value)
    assert "vdisaggregatedset.kb.io" in message
    assert f"{field}:" in message, message
    assert await api.get_or_none(DISAGGREGATEDSETS, "bad", namespace) is None
    assert not (await api.list(LEADERWORKERSETS, namespace)).get("items")


# --- topology: a gang in one rack ------------------------------------------------------------

RACK = "topology.kubernetes.io/rack"


async def test_a_topology_constraint_places_each_gang_in_one_rack_or_not_at_all(
    gangs: RunningController, extra_nodes: NodePool, nodesim_api: ApiClient, namespace: str
) -> None:
    """Two racks of 5 cpu (a 3-cpu and a 2-cpu node): a group of three 1-cpu pods fits in
    either rack, two groups take one rack each, and a third, for which 4 cpu remain but
    only 2 in each rack, is placed nowhere rather than split."""
    api = nodesim_api
    isolation = unique_node_name("racks")
    racks = [f"{isolation}-a", f"{isolation}-b"]
    for rack in racks:
        for cpu in ("3", "2"):
            node = NodeSpec(unique_node_name("rack"), cpu=cpu, memory="8Gi", labels={RACK: rack})
            await extra_nodes.add_spec(isolated(node, isolation))
    topology = {"schedulingConstraints": {"topology": [{"key": RACK}]}}
    body = gang(lws_manifest("racked", namespace, replicas=2, size=3, cpu="1"), topology)
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(
        isolated_pod_spec(isolation)
    )
    await api.create(LEADERWORKERSETS, body)
    lws = await wait_ready(api, namespace, "racked", 2)
    assert scheduling_ready(lws) == ("True", s.REASON_READY)
    workload = await api.get(WORKLOADS, "racked", namespace)
    assert workload["spec"]["podGroupTemplates"][0]["schedulingConstraints"] == {
        "topology": [{"key": RACK}]
    }
    groups = await pod_groups(api, namespace, "racked")
    assert len(groups) == 2
    for group in groups.values():
        assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}

    async def racks_of_groups() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for pod in await live_pods(api, namespace, "racked"):
            if bound(pod):
                rack = (await node_labels_of(api, pod)).get(RACK, "")
                out.setdefault(labels(pod)[c.LABEL_GROUP_INDEX], set()).add(rack)
        return out

    placed = await racks_of_groups()
    assert set(placed) == {"0", "1"}, placed
    assert all(len(rack) == 1 for rack in placed.values()), placed
    assert placed["0"] | placed["1"] == set(racks), placed
    for pod in await live_pods(api, namespace, "racked"):
        # The scheduler keeps the group together: no exclusive-topology affinity.
        affinity = pod["spec"].get("affinity") or {}
        assert "podAffinity" not in affinity and "podAntiAffinity" not in affinity, affinity
        assert c.ANNOTATION_EXCLUSIVE_TOPOLOGY not in (pod["metadata"].get("annotations") or {})

    await api.patch(LEADERWORKERSETS, "racked", {"spec": {"replicas": 3}}, namespace=namespace)

    async def third_unschedulable() -> JSON | None:
        pods = [
            p
            for p in await live_pods(api, namespace, "racked")
            if labels(p)[c.LABEL_GROUP_INDEX] == "2"
        ]
        if len(pods) != 3:
            return None
        group = await api.get_or_none(POD_GROUPS, scheduling_group(pods[0]) or "", namespace)
        if group is None or pod_group_scheduled(group) != ("False", "Unschedulable"):
            return None
        return group

    third = await eventually(third_unschedulable, within=60, what="the third gang unschedulable")
    message = next(
        x["message"] for x in third["status"]["conditions"] if x["type"] == POD_GROUP_SCHEDULED
    )
    assert "0/2 placements are available" in message, message

    async def never_split() -> bool:
        placed = await racks_of_groups()
        return "2" not in placed and all(len(rack) == 1 for rack in placed.values())

    await stays(never_split, seconds=5, what="the third gang unplaced, none split")
