"""Group recovery on a real control plane: the restart budget (maxGroupRestarts, upstream
#877) in both identities, and the group back-off between recreations of one group.

A group "fails" by a worker's container restart under RecreateGroupOnPodRestart, as a
crash-looping worker makes it fail.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import annotations_of, timestamp_of
from leaderworkerset.api.resources import EVENTS, LEADERWORKERSETS, PODS
from leaderworkerset.controllers.pod.group_recovery import GroupRecovery
from leaderworkerset.group.recreations import BackoffPolicy
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import (
    condition,
    get_lws,
    is_leader,
    key_of,
    leaders,
    live_pods,
    name_of,
    new_leader,
    replacement_of,
    wait_ready,
)
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
ON_RESTART = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART


def recovery_of(controller: RunningController) -> GroupRecovery:
    assert controller.controllers is not None and controller.controllers.recovery is not None
    return controller.controllers.recovery


@contextlib.asynccontextmanager
async def backoff(controller: RunningController, policy: BackoffPolicy) -> AsyncIterator[None]:
    recovery = recovery_of(controller)
    before = recovery.policy
    recovery.policy = policy
    try:
        yield
    finally:
        recovery.policy = before


def budgeted(body: JSON, budget: int) -> JSON:
    template = body["spec"]["leaderWorkerTemplate"]
    template["restartPolicy"] = ON_RESTART
    template["maxGroupRestarts"] = budget
    return body


def counts(lws: JSON) -> dict[str, int]:
    return dict(json.loads(annotations_of(lws).get(c.ANNOTATION_GROUP_RESTART_COUNTS, "{}")))


async def events_with(api: ApiClient, namespace: str, reason: str) -> list[str]:
    items = (await api.list(EVENTS, namespace)).get("items", [])
    return [str(e.get("note")) for e in items if e.get("reason") == reason]


async def crash_a_worker(
    api: ApiClient, sim: NodeSimulator, namespace: str, leader: JSON, name: str
) -> None:

    async def running_workers() -> list[JSON]:
        # The LWS status can still say Ready for the group just replaced: wait for this
        # leader's own workers.
        return [
            p
            for p in await live_pods(api, namespace, name)
            if not is_leader(p) and key_of(p) == key_of(leader) and is_ready(p)
        ]

    workers = await eventually(running_workers, within=60, what="the group's workers Ready")
    await sim.restart_container(namespace, name_of(workers[0]))


async def failed(api: ApiClient, namespace: str, name: str) -> JSON | None:
    lws = await get_lws(api, namespace, name)
    return lws if condition(lws, c.CONDITION_FAILED) == "True" else None


async def test_ordinal_budget_stops_recreating_and_fails_until_raised(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
) -> None:
    api, name = nodesim_api, "budget"
    async with backoff(lws_controller, BackoffPolicy(initial=0)):
        await api.create(LEADERWORKERSETS, budgeted(lws_manifest(name, namespace), 1))
        await wait_ready(api, namespace, name, 2)
        other = (await api.get(PODS, f"{name}-1", namespace))["metadata"]["uid"]

        first = await api.get(PODS, f"{name}-0", namespace)
        await crash_a_worker(api, node_simulator, namespace, first, name)
        second = await replacement_of(api, namespace, first)
        await wait_ready(api, namespace, name, 2)
        lws = await get_lws(api, namespace, name)
        assert counts(lws) == {"0": 1}

        async def count_on_leader() -> bool:
            pod = await api.get(PODS, f"{name}-0", namespace)
            return annotations_of(pod).get(c.ANNOTATION_GROUP_RESTART_COUNT) == "1"

        await eventually(count_on_leader, what="the count on the new leader, as upstream")

        # The budget is used up: the group stays as it is, the set is Failed.
        await crash_a_worker(api, node_simulator, namespace, second, name)
        lws = await eventually(lambda: failed(api, namespace, name), what="Failed")
        cond = next(x for x in lws["status"]["conditions"] if x["type"] == c.CONDITION_FAILED)
        assert cond["reason"] == "MaxGroupRestartsExceeded"
        assert condition(lws, c.CONDITION_AVAILABLE) == "False"
        assert counts(lws) == {"0": 2}

        async def same_leader() -> bool:
            pod = await api.get_or_none(PODS, f"{name}-0", namespace)
            return pod is not None and pod["metadata"]["uid"] == second["metadata"]["uid"]

        await stays(same_leader, seconds=3, what="the failed group kept, not recreated")
        pod = await api.get(PODS, f"{name}-0", namespace)
        assert annotations_of(pod)[c.ANNOTATION_GROUP_RESTART_COUNT] == "2"
        assert (await api.get(PODS, f"{name}-1", namespace))["metadata"]["uid"] == other
        # Said once for the group (the conditions-changed event shares the reason).
        notes = await events_with(api, namespace, "MaxGroupRestartsExceeded")
        skipped = [n for n in notes if n.startswith("Skip")]
        assert skipped == ["Skip recreating group 0: reached maxGroupRestarts=1"]

        # Raising the budget (a template change: a rollout, as upstream) heals the set.
        await api.patch(
            LEADERWORKERSETS,
            name,
            {"spec": {"leaderWorkerTemplate": {"maxGroupRestarts": 3}}},
            namespace=namespace,
        )
        lws = await wait_ready(api, namespace, name, 2)
        assert condition(lws, c.CONDITION_FAILED) == "False"


async def test_hash_replacement_carries_the_count_and_the_budget_holds(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
) -> None:
    api, name = nodesim_api, "hbudget"
    async with backoff(lws_controller, BackoffPolicy(initial=0)):
        await api.create(LEADERWORKERSETS, budgeted(hash_lws(name, namespace, replicas=1), 1))
        await wait_ready(api, namespace, name, 1)
        (first,) = await leaders(api, namespace, name)
        await crash_a_worker(api, node_simulator, namespace, first, name)
        second = await new_leader(api, namespace, name, {key_of(first)})
        await wait_ready(api, namespace, name, 1)

        async def moved() -> bool:
            lws = await get_lws(api, namespace, name)
            return counts(lws) == {key_of(second): 1}

        # The replacement (a new key) took over the record of the group it replaced.
        await eventually(moved, what="the count moved to the replacement's key")
        recreations = json.loads(
            annotations_of(await get_lws(api, namespace, name))[c.ANNOTATION_GROUP_RECREATIONS]
        )
        assert set(recreations) == {key_of(second)}

        await crash_a_worker(api, node_simulator, namespace, second, name)
        lws = await eventually(lambda: failed(api, namespace, name), what="Failed")
        assert counts(lws) == {key_of(second): 2}

        async def kept() -> bool:
            return [key_of(p) for p in await leaders(api, namespace, name)] == [key_of(second)]

        await stays(kept, seconds=3, what="the failed Hash group kept, no new group")


async def test_repeated_recreations_of_a_group_wait_longer_each_time(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    node_simulator: NodeSimulator,
    namespace: str,
) -> None:
    """The first recreation is immediate, the next waits 2 s after it, the next 4 s."""
    api, name = nodesim_api, "backoff"
    policy = BackoffPolicy(initial=2, cap=60, reset_after=600)
    async with backoff(lws_controller, policy):
        body = lws_manifest(name, namespace, replicas=1)
        body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = ON_RESTART
        await api.create(LEADERWORKERSETS, body)
        await wait_ready(api, namespace, name, 1)
        leader_name = f"{name}-0"
        recreated_at: list[float] = []
        crashed_at: list[float] = []
        leader = await api.get(PODS, leader_name, namespace)
        for _ in range(3):
            await crash_a_worker(api, node_simulator, namespace, leader, name)
            crashed_at.append(time.time())
            leader = await replacement_of(api, namespace, leader)
            created = timestamp_of(leader["metadata"]["creationTimestamp"])
            assert created is not None
            recreated_at.append(created)
            await wait_ready(api, namespace, name, 1)
        # creationTimestamp has whole seconds: allow one either way.
        assert recreated_at[0] - crashed_at[0] < 2
        assert recreated_at[1] - recreated_at[0] >= 2 - 1
        assert recreated_at[2] - recreated_at[1] >= 4 - 1
        notes = await events_with(api, namespace, "GroupBackOff")
        assert any("waits 4s after the last" in n for n in notes), notes
        lws = await get_lws(api, namespace, name)
        record = json.loads(annotations_of(lws)[c.ANNOTATION_GROUP_RECREATIONS])["0"]
        assert record["recent"] == 3
