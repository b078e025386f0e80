"""Ordinal mode, the life of a LeaderWorkerSet on a real control plane: scaling,
resize and subdomain-policy rollouts, startup policy, the scale subresource,
deletion and controller restarts.

Pods are run by the node simulator, which marks them Ready almost at once; every
wait is a poll with a deadline (`eventually`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    CONTROLLER_REVISIONS,
    LEADERWORKERSETS,
    PODS,
    SERVICES,
    STATEFULSETS,
)
from leaderworkerset.runtime.client import STRATEGIC_MERGE_PATCH, ApiClient
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import (
    condition,
    env_of,
    get_lws,
    labels,
    live_pods,
    lws_pods,
    name_of,
    statefulsets,
    wait_ready,
)
from tests.toolkit.lws import lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
HOLD_GATE = "lws.test/hold"


# --- helpers -------------------------------------------------------------------------
def uid_of(obj: JSON) -> str:
    return str(obj["metadata"]["uid"])


def annotations_of(obj: JSON) -> dict[str, str]:
    result: dict[str, str] = (obj.get("metadata") or {}).get("annotations") or {}
    return result


def controller_owner(obj: JSON) -> JSON:
    owners = [o for o in obj["metadata"].get("ownerReferences") or [] if o.get("controller")]
    assert len(owners) == 1, obj["metadata"]
    return dict(owners[0])


async def pod_uids(api: ApiClient, namespace: str, name: str) -> dict[str, str]:
    """Name -> UID of every pod of the LWS, terminating ones included."""
    return {name_of(p): uid_of(p) for p in await lws_pods(api, namespace, name)}


async def sts_by_name(api: ApiClient, namespace: str, name: str) -> dict[str, JSON]:
    return {name_of(s): s for s in await statefulsets(api, namespace, name)}


async def revisions(api: ApiClient, namespace: str, name: str) -> list[JSON]:
    answer = await api.list(
        CONTROLLER_REVISIONS, namespace, label_selector=f"{c.LABEL_SET_NAME}={name}"
    )
    # StatefulSets keep their own ControllerRevisions, labelled from their pod
    # templates (so with the LWS name): only those the LWS controls are its revisions.
    return [r for r in answer.get("items", []) if controller_owner(r)["kind"] == c.KIND]


async def patch_lws(api: ApiClient, namespace: str, name: str, patch: JSON) -> JSON:
    return await api.patch(LEADERWORKERSETS, name, patch, namespace=namespace)


def group_names(name: str, groups: range | list[int], size: int) -> set[str]:
    """Expected pod names of `groups` (leader `<lws>-<i>`, workers `<lws>-<i>-<j>`)."""
    out = set()
    for i in groups:
        out.add(f"{name}-{i}")
        out |= {f"{name}-{i}-{j}" for j in range(1, size)}
    return out


def partition_of(sts: JSON) -> int:
    return int(
        ((sts["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition", 0)
    )


class History:
    """Every version of one object, from a watch: states too brief to poll for."""

    def __init__(self, api: ApiClient, resource: Any, namespace: str, name: str) -> None:
        self.api, self.resource, self.namespace, self.name = api, resource, namespace, name
        self.versions: list[JSON] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> History:
        current = await self.api.get(self.resource, self.name, self.namespace)
        self.versions.append(current)
        self._task = asyncio.create_task(self._record(current["metadata"]["resourceVersion"]))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _record(self, version: str) -> None:
        async for event in self.api.watch(
            self.resource,
            self.namespace,
            resource_version=version,
            field_selector=f"metadata.name={self.name}",
            bookmarks=False,
        ):
            if event.get("type") in ("ADDED", "MODIFIED"):
                self.versions.append(event["object"])


async def assert_worker_sts_owned_by_leaders(
    api: ApiClient, namespace: str, name: str, groups: range
) -> None:
    sets = await sts_by_name(api, namespace, name)
    for i in groups:
        leader = await api.get(PODS, f"{name}-{i}", namespace)
        owner = controller_owner(sets[f"{name}-{i}"])
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "Pod",
            f"{name}-{i}",
            uid_of(leader),
        )


# --- 1. scale up and down --------------------------------------------------------------
async def test_scale_up_then_down_keeps_lower_groups(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "scale"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2)
    before = await pod_uids(api, namespace, name)
    assert set(before) == group_names(name, range(2), 2)
    leader_sts = await api.get(STATEFULSETS, name, namespace)
    assert partition_of(leader_sts) == 0
    [revision] = await revisions(api, namespace, name)

    # Scale up 2 -> 4: groups 2 and 3 appear with their worker StatefulSets.
    async with History(api, STATEFULSETS, namespace, name) as leader_sts_history:
        await patch_lws(api, namespace, name, {"spec": {"replicas": 4}})
        lws = await wait_ready(api, namespace, name, 4)

        async def watched_scale_up() -> bool:
            return any(v["spec"]["replicas"] == 4 for v in leader_sts_history.versions)

        await eventually(watched_scale_up, what="the scale-up in the watch")
    # A scale-up is no rollout: the partition was never moved, not even for a moment.
    assert {partition_of(v) for v in leader_sts_history.versions} == {0}
    assert lws["status"]["updatedReplicas"] == 4
    assert condition(lws, c.CONDITION_PROGRESSING) != "True"
    sets = await sts_by_name(api, namespace, name)
    assert set(sets) == {name, *(f"{name}-{i}" for i in range(4))}
    assert sets[name]["spec"]["replicas"] == 4
    assert [name_of(r) for r in await revisions(api, namespace, name)] == [name_of(revision)]
    await assert_worker_sts_owned_by_leaders(api, namespace, name, range(4))
    pods = {name_of(p): p for p in await live_pods(api, namespace, name)}
    assert set(pods) == group_names(name, range(4), 2)
    key = labels(revision)[c.LABEL_TEMPLATE_REVISION_HASH]
    assert {labels(p)[c.LABEL_TEMPLATE_REVISION_HASH] for p in pods.values()} == {key}
    for i in (2, 3):
        assert labels(pods[f"{name}-{i}"])[c.LABEL_GROUP_INDEX] == str(i)
        assert sets[f"{name}-{i}"]["spec"]["replicas"] == 1
    # Groups 0 and 1 were not touched by the scale-up.
    assert {n: uid_of(pods[n]) for n in before} == before

    # Scale down 4 -> 2: the highest ordinals go, with their worker StatefulSets.
    await patch_lws(api, namespace, name, {"spec": {"replicas": 2}})

    async def shrunk() -> bool:
        sets = await sts_by_name(api, namespace, name)
        pods = await pod_uids(api, namespace, name)
        return set(sets) == {name, f"{name}-0", f"{name}-1"} and set(pods) == set(before)

    await eventually(shrunk, within=60, what="groups 2 and 3 removed")
    lws = await wait_ready(api, namespace, name, 2)
    assert lws["status"]["updatedReplicas"] == 2
    assert (await api.get(STATEFULSETS, name, namespace))["spec"]["replicas"] == 2
    assert await pod_uids(api, namespace, name) == before


# --- 2. scale to zero and back ---------------------------------------------------------
async def test_scale_to_zero_and_back(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "zero"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=3))
    await wait_ready(api, namespace, name, 2)

    await patch_lws(api, namespace, name, {"spec": {"replicas": 0}})

    async def empty() -> JSON | None:
        sets = await sts_by_name(api, namespace, name)
        pods = await lws_pods(api, namespace, name)
        lws = await get_lws(api, namespace, name)
        status = lws.get("status") or {}
        settled = (
            set(sets) == {name}
            and not pods
            and status.get("replicas", 0) == 0
            and status.get("readyReplicas", 0) == 0
            and condition(lws, c.CONDITION_AVAILABLE) == "True"
        )
        return lws if settled else None

    lws = await eventually(empty, within=60, what="no groups left")
    assert (await api.get(STATEFULSETS, name, namespace))["spec"]["replicas"] == 0
    assert condition(lws, c.CONDITION_PROGRESSING) != "True"
    # The shared headless Service outlives the groups.
    service = await api.get(SERVICES, name, namespace)
    assert controller_owner(service)["kind"] == c.KIND

    await patch_lws(api, namespace, name, {"spec": {"replicas": 2}})
    await wait_ready(api, namespace, name, 2)
    sets = await sts_by_name(api, namespace, name)
    assert set(sets) == {name, f"{name}-0", f"{name}-1"}
    assert all(sets[f"{name}-{i}"]["spec"]["replicas"] == 2 for i in range(2))
    await assert_worker_sts_owned_by_leaders(api, namespace, name, range(2))
    pods = await live_pods(api, namespace, name)
    assert {name_of(p) for p in pods} == group_names(name, range(2), 3)
    assert all(is_ready(p) for p in pods)


# --- 6. size change rolls every group --------------------------------------------------
async def test_size_change_rolls_all_groups(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "resize"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2)
    old_leaders = {
        n: u for n, u in (await pod_uids(api, namespace, name)).items() if n.count("-") == 1
    }

    await patch_lws(api, namespace, name, {"spec": {"leaderWorkerTemplate": {"size": 3}}})

    async def resized() -> list[JSON] | None:
        pods = await lws_pods(api, namespace, name)
        if {name_of(p) for p in pods} != group_names(name, range(2), 3):
            return None
        if any(
            annotations_of(p).get(c.ANNOTATION_SIZE) != "3"
            or env_of(p).get(c.ENV_GROUP_SIZE) != "3"
            or not is_ready(p)
            or p["metadata"].get("deletionTimestamp")
            for p in pods
        ):
            return None
        lws = await get_lws(api, namespace, name)
        status = lws.get("status") or {}
        done = status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 2
        return pods if done and condition(lws, c.CONDITION_AVAILABLE) == "True" else None

    pods = await eventually(resized, within=120, what="every group resized to 3")
    assert len(pods) == 2 * 3
    # Every leader was replaced (a resize is a rollout, not an in-place change).
    assert not set(old_leaders.values()) & {uid_of(p) for p in pods}
    sets = await sts_by_name(api, namespace, name)
    assert all(sets[f"{name}-{i}"]["spec"]["replicas"] == 2 for i in range(2))
    await assert_worker_sts_owned_by_leaders(api, namespace, name, range(2))

    async def truncated() -> bool:
        return len(await revisions(api, namespace, name)) == 1

    await eventually(truncated, what="old revision truncated")


# --- 7. subdomain policy Shared -> UniquePerReplica ------------------------------------
async def test_subdomain_policy_unique_per_replica(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "subdom"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2)

    patch = {"spec": {"networkConfig": {"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA}}}
    await patch_lws(api, namespace, name, patch)

    def address(i: int) -> str:
        return f"{name}-{i}.{name}-{i}.{namespace}"

    async def rolled() -> list[JSON] | None:
        pods = await lws_pods(api, namespace, name)
        if {name_of(p) for p in pods} != group_names(name, range(2), 2):
            return None
        for p in pods:
            group = int(labels(p)[c.LABEL_GROUP_INDEX])
            if env_of(p).get(c.ENV_LEADER_ADDRESS) != address(group) or not is_ready(p):
                return None
        lws = await get_lws(api, namespace, name)
        status = lws.get("status") or {}
        done = status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 2
        return pods if done and condition(lws, c.CONDITION_AVAILABLE) == "True" else None

    pods = {name_of(p): p for p in await eventually(rolled, within=120, what="unique subdomains")}
    sets = await sts_by_name(api, namespace, name)
    for i in range(2):
        leader = pods[f"{name}-{i}"]
        assert leader["spec"]["subdomain"] == f"{name}-{i}"
        assert pods[f"{name}-{i}-1"]["spec"]["subdomain"] == f"{name}-{i}"
        assert sets[f"{name}-{i}"]["spec"]["serviceName"] == f"{name}-{i}"
        service = await api.get(SERVICES, f"{name}-{i}", namespace)
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["publishNotReadyAddresses"] is True
        assert service["spec"]["selector"] == {
            c.LABEL_SET_NAME: name,
            c.LABEL_GROUP_INDEX: str(i),
        }
        owner = controller_owner(service)
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "Pod",
            f"{name}-{i}",
            uid_of(leader),
        )
    # The leader StatefulSet keeps the shared Service name, and that Service is kept.
    assert sets[name]["spec"]["serviceName"] == name
    assert await api.get_or_none(SERVICES, name, namespace) is not None


# --- 8. startup policy LeaderReady -----------------------------------------------------
async def set_gate(api: ApiClient, namespace: str, pod: str, status: str) -> None:
    """Set the readiness-gate condition the leader template waits for; the node
    simulator then derives the pod's Ready condition from it, as the kubelet does."""
    patch = {"status": {"conditions": [{"type": HOLD_GATE, "status": status}]}}
    await api.patch(
        PODS,
        pod,
        patch,
        namespace=namespace,
        subresource="status",
        content_type=STRATEGIC_MERGE_PATCH,
    )


async def test_leader_ready_startup_waits_for_each_leader(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "ready"
    body = lws_manifest(
        name, namespace, replicas=2, size=2, startupPolicy=c.STARTUP_POLICY_LEADER_READY
    )
    # Leaders carry a readiness gate nobody but this test sets: they run but stay
    # not Ready until the test says so, without racing the simulator.
    template = body["spec"]["leaderWorkerTemplate"]
    leader = {"spec": {**template["workerTemplate"]["spec"]}}
    leader["spec"]["readinessGates"] = [{"conditionType": HOLD_GATE}]
    template["leaderTemplate"] = leader
    await api.create(LEADERWORKERSETS, body)

    async def leaders_running() -> list[JSON] | None:
        pods = await live_pods(api, namespace, name)
        running = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
            and any(
                cond.get("type") == "ContainersReady" and cond.get("status") == "True"
                for cond in p["status"].get("conditions") or []
            )
        ]
        return running if len(running) == 2 else None

    leaders = await eventually(leaders_running, within=60, what="leaders running")
    assert sorted(name_of(p) for p in leaders) == [f"{name}-0", f"{name}-1"]
    assert not any(is_ready(p) for p in leaders)
    assert set(await sts_by_name(api, namespace, name)) == {name}

    # Group 1's leader becomes Ready: its worker StatefulSet follows. Group 0's leader
    # has been running (containers ready) since before, and still gets none.
    await set_gate(api, namespace, f"{name}-1", "True")

    async def worker_sts_of_1() -> bool:
        return set(await sts_by_name(api, namespace, name)) == {name, f"{name}-1"}

    await eventually(worker_sts_of_1, what="worker sts of group 1 only")
    assert await api.get_or_none(STATEFULSETS, f"{name}-0", namespace) is None
    assert await api.get_or_none(PODS, f"{name}-0-1", namespace) is None

    await set_gate(api, namespace, f"{name}-0", "True")
    await wait_ready(api, namespace, name, 2)
    assert set(await sts_by_name(api, namespace, name)) == {name, f"{name}-0", f"{name}-1"}
    await assert_worker_sts_owned_by_leaders(api, namespace, name, range(2))


# --- 9. the scale subresource ----------------------------------------------------------
async def test_scale_subresource_drives_replicas(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "hpa"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2)
    path = LEADERWORKERSETS.path(namespace, name, "scale")
    selector = f"{c.LABEL_SET_NAME}={name},{c.LABEL_WORKER_INDEX}=0"

    scale = await api.request("GET", path)
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 2
    assert scale["status"] == {"replicas": 2, "selector": selector}

    scale["spec"]["replicas"] = 3
    await api.request("PUT", path, body=scale)
    lws = await wait_ready(api, namespace, name, 3)
    assert lws["spec"]["replicas"] == 3
    assert set(await sts_by_name(api, namespace, name)) == {
        name,
        *(f"{name}-{i}" for i in range(3)),
    }
    scale = await api.request("GET", path)
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 3, "selector": selector}
    # The selector is what an HPA uses to find the pods it averages over: the leaders.
    selected = await api.list(PODS, namespace, label_selector=selector)
    assert sorted(name_of(p) for p in selected["items"]) == [f"{name}-{i}" for i in range(3)]


# --- 10. deleting the LWS --------------------------------------------------------------
async def dependents(api: ApiClient, namespace: str, name: str) -> JSON:
    """Everything the LWS made, by kind (pods, StatefulSets, Services, revisions)."""
    selector = f"{c.LABEL_SET_NAME}={name}"
    found: JSON = {}
    for kind, resource in (
        ("pods", PODS),
        ("statefulsets", STATEFULSETS),
        ("services", SERVICES),
        ("revisions", CONTROLLER_REVISIONS),
    ):
        # The shared Service carries no labels: list Services unfiltered (the
        # namespace is this test's own).
        answer = await api.list(
            resource, namespace, label_selector=None if resource is SERVICES else selector
        )
        items = answer.get("items", [])
        if items:
            found[kind] = sorted(name_of(i) for i in items)
    return found


async def test_background_deletion_removes_everything(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "bg"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2)
    assert set(await dependents(api, namespace, name)) == {
        "pods",
        "statefulsets",
        "services",
        "revisions",
    }

    await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Background")

    async def lws_gone() -> bool:
        return await api.get_or_none(LEADERWORKERSETS, name, namespace) is None

    await eventually(lws_gone, what="LWS deleted")

    async def all_gone() -> bool:
        return not await dependents(api, namespace, name)

    # Generous: the garbage collector only acts on a kind it monitors, and it picks up
    # a new CRD (LeaderWorkerSet) on its discovery resync, every 30 s.
    await eventually(all_gone, within=90, what="dependents garbage collected")


async def test_foreground_deletion_waits_for_dependents(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    node_simulator: Any,
) -> None:
    api, name = nodesim_api, "fg"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2)
    # One worker pod will not finish terminating until released: the whole chain of
    # blocking owners (worker sts -> leader pod -> leader sts -> LWS) waits for it.
    held = f"{name}-1-1"
    await node_simulator.stall_termination(namespace, held)

    await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Foreground")

    async def held_terminating() -> bool:
        pod = await api.get_or_none(PODS, held, namespace)
        return bool(pod and pod["metadata"].get("deletionTimestamp"))

    # Generous for the same reason as above (garbage-collector discovery resync).
    await eventually(held_terminating, within=90, what=f"{held} terminating")
    lws = await api.get(LEADERWORKERSETS, name, namespace)
    assert lws["metadata"].get("deletionTimestamp")
    assert "foregroundDeletion" in lws["metadata"].get("finalizers", [])
    left = await dependents(api, namespace, name)
    assert held in left["pods"]
    assert name in left["statefulsets"]

    await node_simulator.release_termination(namespace, held)

    async def lws_gone() -> bool:
        return await api.get_or_none(LEADERWORKERSETS, name, namespace) is None

    await eventually(lws_gone, within=60, what="LWS deleted")
    # Foreground: once the LWS is gone, so is every dependent that blocked it.
    assert await dependents(api, namespace, name) == {}


# --- 11. controller restarts -----------------------------------------------------------
Versions = tuple[str, dict[str, str]]


async def versions(api: ApiClient, namespace: str, name: str) -> Versions:
    """resourceVersions of the LWS and of every StatefulSet of it: any write shows."""
    lws = await get_lws(api, namespace, name)
    sets = await sts_by_name(api, namespace, name)
    return lws["metadata"]["resourceVersion"], {
        n: s["metadata"]["resourceVersion"] for n, s in sets.items()
    }


async def unchanged_for(api: ApiClient, namespace: str, name: str, seconds: float) -> Versions:
    """Fail if any of `versions` changes within `seconds`; return them.

    A fixed observation window, on purpose: this asserts that nothing happens, which no
    poll for a condition can show. The window spans many reconcile round trips (a
    reconcile of a steady LWS takes milliseconds).
    """
    loop = asyncio.get_running_loop()
    first = await versions(api, namespace, name)
    end = loop.time() + seconds
    while loop.time() < end:
        await asyncio.sleep(0.2)
        now = await versions(api, namespace, name)
        assert now == first, f"{namespace}/{name} was written: {first} -> {now}"
    return first


@pytest.mark.parametrize("crash", [False, True], ids=["graceful", "crash"])
async def test_controller_restart_is_quiet(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str, crash: bool
) -> None:
    api, name = nodesim_api, "quiet"
    await api.create(LEADERWORKERSETS, lws_manifest(name, namespace, replicas=2, size=2))
    await wait_ready(api, namespace, name, 2)
    pods_before = await pod_uids(api, namespace, name)
    sets_before = {n: uid_of(s) for n, s in (await sts_by_name(api, namespace, name)).items()}

    # The baseline: the first 3 s stretch in which nothing is written (the StatefulSet
    # controller may still be finishing status updates when the LWS reports ready, and
    # on a loaded machine they can come more than a second apart).
    async def quiet() -> Versions | None:
        try:
            return await unchanged_for(api, namespace, name, 3.0)
        except AssertionError:
            return None

    baseline = await eventually(quiet, within=60, what="a steady LWS before the restart")

    await lws_controller.restart(crash=crash)

    # The new manager resyncs every object once, asynchronously, after start. Nothing
    # about this LWS is out of date, so neither the resync nor anything after it may
    # write: not the status (LWS resourceVersion), not the leader StatefulSet (a no-op
    # server-side apply keeps its resourceVersion), not a worker StatefulSet. Watched
    # for 5 s from the moment the new manager is ready (see `unchanged_for`).
    assert await unchanged_for(api, namespace, name, 5.0) == baseline
    lws = await wait_ready(api, namespace, name, 2)
    assert lws["status"]["observedGeneration"] == lws["metadata"]["generation"]
    assert await pod_uids(api, namespace, name) == pods_before
    assert {n: uid_of(s) for n, s in (await sts_by_name(api, namespace, name)).items()} == (
        sets_before
    )
