"""Ordinal mode, group restarts on a real control plane:
a deleted leader pod, a deleted worker pod and a restarted container, under each
restart policy.

"Recreated" means: a new leader pod (same name, new UID), a new worker StatefulSet
owned by that new leader, new worker pods; the other group keeps its pods.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import STARTUP_DELAY_ANNOTATION, NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import EVENTS, LEADERWORKERSETS, PODS, STATEFULSETS
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import lws_pods, name_of, wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
ON_POD_RESTART = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
AFTER_START = c.RESTART_POLICY_RECREATE_GROUP_AFTER_START
NONE = c.RESTART_POLICY_NONE


# --- helpers -------------------------------------------------------------------------
def uid_of(obj: JSON) -> str:
    return str(obj["metadata"]["uid"])


def manifest(name: str, namespace: str, policy: str, *, replicas: int = 2, size: int = 3) -> JSON:
    body = lws_manifest(name, namespace, replicas=replicas, size=size)
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = policy
    return body


async def create_ready(api: ApiClient, body: JSON) -> None:
    await api.create(LEADERWORKERSETS, body)
    meta = body["metadata"]
    await wait_ready(api, meta["namespace"], meta["name"], body["spec"]["replicas"])


async def group_uids(api: ApiClient, namespace: str, name: str, group: int) -> dict[str, str]:
    """Name -> UID of the group's pods and (under key `sts`) of its worker StatefulSet."""
    out = {
        name_of(p): uid_of(p)
        for p in await lws_pods(api, namespace, name)
        if (p["metadata"].get("labels") or {}).get(c.LABEL_GROUP_INDEX) == str(group)
    }
    sts = await api.get_or_none(STATEFULSETS, f"{name}-{group}", namespace)
    if sts is not None:
        out["sts"] = uid_of(sts)
    return out


async def wait_recreated(
    api: ApiClient, namespace: str, name: str, group: int, old: dict[str, str], size: int
) -> dict[str, str]:
    """Until every pod of the group and its worker StatefulSet were replaced, the new
    worker StatefulSet is owned by the new leader, and all the new pods are Ready."""
    leader_name = f"{name}-{group}"

    async def probe() -> dict[str, str] | None:
        pods = {
            name_of(p): p
            for p in await lws_pods(api, namespace, name)
            if name_of(p) == leader_name or name_of(p).startswith(f"{leader_name}-")
        }
        expected = {leader_name, *(f"{leader_name}-{j}" for j in range(1, size))}
        if set(pods) != expected:
            return None
        if any(uid_of(p) == old.get(n) or not is_ready(p) for n, p in pods.items()):
            return None
        if any(p["metadata"].get("deletionTimestamp") for p in pods.values()):
            return None
        sts = await api.get_or_none(STATEFULSETS, leader_name, namespace)
        if sts is None or uid_of(sts) == old["sts"]:
            return None
        [owner] = sts["metadata"]["ownerReferences"]
        leader_uid = uid_of(pods[leader_name])
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", leader_name, leader_uid)
        return {**{n: uid_of(p) for n, p in pods.items()}, "sts": uid_of(sts)}

    return await eventually(probe, within=60, what=f"group {group} of {name} recreated")


async def recreate_events(api: ApiClient, namespace: str) -> list[str]:
    """Notes of the RecreateGroup events in the namespace, one per occurrence."""
    items = (await api.list(EVENTS, namespace)).get("items", [])
    notes = []
    for event in items:
        if event.get("reason") == c.EVENT_REASON_RECREATE_GROUP:
            count = int((event.get("series") or {}).get("count", 1))
            notes += [str(event.get("note"))] * count
    return notes


async def wait_events(api: ApiClient, namespace: str, expected: list[str]) -> None:
    async def probe() -> bool:
        return await recreate_events(api, namespace) == expected

    # The recorder writes events asynchronously; a wrong or extra event fails here.
    try:
        await eventually(probe, what=f"events {expected}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; seen: {await recreate_events(api, namespace)}") from None


async def stays_same(
    api: ApiClient, namespace: str, name: str, group: int, expected: dict[str, str]
) -> None:
    """Fail if the group changes within a few seconds.

    A fixed observation window, on purpose: it asserts that nothing happens, which no
    poll for a condition can show. Callers first wait for a sign that the controller
    has seen the fault (the pod's new state), so the window covers its reaction.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + 3.0
    while loop.time() < end:
        assert await group_uids(api, namespace, name, group) == expected
        await asyncio.sleep(0.2)


# --- 3. leader pod deleted -------------------------------------------------------------
@pytest.mark.parametrize("policy", [NONE, ON_POD_RESTART])
async def test_leader_deleted_recreates_group(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str, policy: str
) -> None:
    api, name = nodesim_api, "lead"
    await create_ready(api, manifest(name, namespace, policy))
    group0 = await group_uids(api, namespace, name, 0)
    group1 = await group_uids(api, namespace, name, 1)

    await api.delete(PODS, f"{name}-0", namespace)

    # Under every policy: the worker StatefulSet is owned by the leader pod.
    recreated = await wait_recreated(api, namespace, name, 0, group0, 3)
    await wait_ready(api, namespace, name, 2)
    assert await group_uids(api, namespace, name, 1) == group1
    # The stale workers of the old leader never restart the new group, and a leader
    # deleted by someone else is not reported as a group restart.
    assert await group_uids(api, namespace, name, 0) == recreated
    assert await recreate_events(api, namespace) == []


# --- 4. worker pod deleted -------------------------------------------------------------
@pytest.mark.parametrize("policy", [ON_POD_RESTART, AFTER_START])
async def test_worker_deleted_recreates_group(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
    policy: str,
) -> None:
    api, name = nodesim_api, "wdel"
    await create_ready(api, manifest(name, namespace, policy))
    group0 = await group_uids(api, namespace, name, 0)
    group1 = await group_uids(api, namespace, name, 1)
    worker = f"{name}-0-2"
    if policy == AFTER_START:
        # AfterStart counts a missing pod as "not started": the deleted pod must still
        # be there (terminating) when the controller looks, as it is with a real
        # kubelet. With policy OnPodRestart the simulator's instant delete is kept, so
        # a pod seen only as gone is covered too.
        await node_simulator.set_termination_delay(namespace, worker, 10.0)

    await api.delete(PODS, worker, namespace)

    recreated = await wait_recreated(api, namespace, name, 0, group0, 3)
    await wait_ready(api, namespace, name, 2)
    assert await group_uids(api, namespace, name, 1) == group1
    await wait_events(
        api,
        namespace,
        [f"Worker pod {worker} failed, deleted leader pod {name}-0 to recreate group 0"],
    )
    # Once: the other (stale) workers of the old group did not restart the new one.
    assert await group_uids(api, namespace, name, 0) == recreated


async def test_worker_deleted_policy_none_replaces_only_that_pod(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api, name = nodesim_api, "wnone"
    await create_ready(api, manifest(name, namespace, NONE))
    group0 = await group_uids(api, namespace, name, 0)
    group1 = await group_uids(api, namespace, name, 1)
    worker = f"{name}-0-2"

    await api.delete(PODS, worker, namespace)

    async def replaced() -> JSON | None:
        pod = await api.get_or_none(PODS, worker, namespace)
        fresh = pod is not None and uid_of(pod) != group0[worker] and is_ready(pod)
        return pod if fresh else None

    pod = await eventually(replaced, within=60, what=f"{worker} recreated")
    expected = {**group0, worker: uid_of(pod)}
    await stays_same(api, namespace, name, 0, expected)
    assert await group_uids(api, namespace, name, 1) == group1
    assert await recreate_events(api, namespace) == []
    await wait_ready(api, namespace, name, 2)


# --- 5. container restarted ------------------------------------------------------------
def restart_count(pod: JSON | None) -> int:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount") or 0) for s in statuses)


@pytest.mark.parametrize(
    ("policy", "pod"),
    [(ON_POD_RESTART, "-0-1"), (ON_POD_RESTART, "-0"), (AFTER_START, "-0-1")],
    ids=["on-pod-restart-worker", "on-pod-restart-leader", "after-start-worker"],
)
async def test_container_restart_recreates_group(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
    policy: str,
    pod: str,
) -> None:
    api, name = nodesim_api, "crash"
    await create_ready(api, manifest(name, namespace, policy))
    group0 = await group_uids(api, namespace, name, 0)
    group1 = await group_uids(api, namespace, name, 1)
    crashed = f"{name}{pod}"

    await node_simulator.restart_container(namespace, crashed)

    recreated = await wait_recreated(api, namespace, name, 0, group0, 3)
    await wait_ready(api, namespace, name, 2)
    assert await group_uids(api, namespace, name, 1) == group1
    who = "Leader" if pod == "-0" else "Worker"
    await wait_events(
        api,
        namespace,
        [f"{who} pod {crashed} failed, deleted leader pod {name}-0 to recreate group 0"],
    )
    assert await group_uids(api, namespace, name, 0) == recreated


async def test_container_restart_policy_none_changes_nothing(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
) -> None:
    api, name = nodesim_api, "cnone"
    await create_ready(api, manifest(name, namespace, NONE))
    group0 = await group_uids(api, namespace, name, 0)
    group1 = await group_uids(api, namespace, name, 1)

    for crashed in (f"{name}-0-1", f"{name}-0"):
        await node_simulator.restart_container(namespace, crashed)

        async def restarted(crashed: str = crashed) -> bool:
            pod = await api.get_or_none(PODS, crashed, namespace)
            return restart_count(pod) == 1 and is_ready(pod)

        await eventually(restarted, what=f"{crashed} restarted")
    await stays_same(api, namespace, name, 0, group0)
    assert await group_uids(api, namespace, name, 1) == group1
    assert await recreate_events(api, namespace) == []
    await wait_ready(api, namespace, name, 2)


class PodHistory:
    """Every watch event of the namespace's pods, in resourceVersion (etcd) order: the
    order in which things happened, which polling cannot tell for brief states."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.events: list[JSON] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PodHistory:
        listed = await self.api.list(PODS, self.namespace)
        version = listed["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._record(version))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _record(self, version: str) -> None:
        async for event in self.api.watch(
            PODS, self.namespace, resource_version=version, bookmarks=False
        ):
            if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                self.events.append(event["object"])

    def first(self, uid: str, what: str, predicate: Any) -> int:
        for i, pod in enumerate(self.events):
            if uid_of(pod) == uid and predicate(pod):
                return i
        raise AssertionError(f"never saw {what}")


async def test_after_start_waits_until_the_group_has_started(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
) -> None:
    """RecreateGroupAfterStart: a leader restart while a worker is still Pending does
    nothing until the worker has started; then the group is recreated."""
    api, name = nodesim_api, "late"
    body = manifest(name, namespace, AFTER_START, replicas=1, size=2)
    # The simulator holds each worker pod Pending (no status) this long.
    worker_template = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker_template["metadata"] = {"annotations": {STARTUP_DELAY_ANNOTATION: "6"}}
    body["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {
        "spec": worker_template["spec"]  # the leader starts at once
    }
    await api.create(LEADERWORKERSETS, body)
    leader, worker = f"{name}-0", f"{name}-0-1"

    async def leader_up_worker_pending() -> JSON | None:
        lead = await api.get_or_none(PODS, leader, namespace)
        work = await api.get_or_none(PODS, worker, namespace)
        pending = work is not None and (work.get("status") or {}).get("phase") == "Pending"
        return lead if is_ready(lead) and pending else None

    old_leader = await eventually(leader_up_worker_pending, within=60, what="leader up")
    old = {
        leader: uid_of(old_leader),
        worker: uid_of(await api.get(PODS, worker, namespace)),
        "sts": uid_of(await api.get(STATEFULSETS, leader, namespace)),
    }
    async with PodHistory(api, namespace) as history:
        await node_simulator.restart_container(namespace, leader)
        await wait_recreated(api, namespace, name, 0, old, 2)

    restarted = history.first(old[leader], "the leader restart", lambda p: restart_count(p) == 1)
    started = history.first(
        old[worker], "the worker start", lambda p: p["status"].get("phase") == "Running"
    )
    deleted = history.first(
        old[leader], "the leader deletion", lambda p: p["metadata"].get("deletionTimestamp")
    )
    assert restarted < started, "the worker started before the leader restart showed"
    # The restart happened while the worker was Pending; the group was recreated only
    # after the worker had started.
    assert started < deleted
    await wait_events(
        api,
        namespace,
        [f"Leader pod {leader} failed, deleted leader pod {leader} to recreate group 0"],
    )
    await wait_ready(api, namespace, name, 1)
