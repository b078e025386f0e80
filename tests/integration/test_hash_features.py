"""Hash mode with the rest of LeaderWorkerSet's features, against the real control
plane: `startupPolicy: LeaderReady` (waits on the leader's ContainersReady), the
per-group Service of `subdomainPolicy: UniquePerReplica`, and the restart policies
`None` and `RecreateGroupOnPodRestart`.

(Exclusive placement and subgroups, keyed on the random group key, are tested beside
Ordinal mode's in test_placement.py, parametrized by group identity.)
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import STARTUP_DELAY_ANNOTATION, NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS, SERVICES, STATEFULSETS
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import condition_is, is_ready
from tests.toolkit.cluster import (
    env_of,
    group_members,
    group_pods,
    is_leader,
    key_of,
    leaders,
    live_pods,
    lws_pods,
    name_of,
    wait_ready,
    workers_of,
)
from tests.toolkit.lws import hash_lws
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]


def uid_of(obj: JSON) -> str:
    return str(obj["metadata"]["uid"])


def restart_count(pod: JSON | None) -> int:
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount", 0)) for s in statuses)


# --- startupPolicy: LeaderReady --------------------------------------------------------------
async def test_leader_ready_waits_for_leader_containers(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """A leader's worker StatefulSet is created only once the leader's ContainersReady
    is True (Ready itself waits on the group gate, i.e. on the workers). Leaders start
    after a delay, so the test marks one leader's container not ready before it ever
    runs: that group gets nothing while the other group is built."""
    api, name = nodesim_api, "lready"
    body = hash_lws(
        name, namespace, replicas=2, size=2, startupPolicy=c.STARTUP_POLICY_LEADER_READY
    )
    template = body["spec"]["leaderWorkerTemplate"]
    leader_template = copy.deepcopy(template["workerTemplate"])
    leader_template["metadata"] = {"annotations": {STARTUP_DELAY_ANNOTATION: "10"}}
    template["leaderTemplate"] = leader_template
    await api.create(LEADERWORKERSETS, body)

    async def two_leaders() -> list[JSON] | None:
        found = await leaders(api, namespace, name)
        return found if len(found) == 2 else None

    held, other = await eventually(two_leaders, within=60, what="two leaders admitted")
    held_name = name_of(held)
    # Waits until the leader is bound to a simulated node; still in its startup delay.
    await node_simulator.set_container_ready(namespace, held_name, False)

    async def held_running_not_ready() -> JSON | None:
        pod = await api.get(PODS, held_name, namespace)
        running = (pod.get("status") or {}).get("phase") == "Running"
        return pod if running and condition_is(pod, "ContainersReady", "False") else None

    pod = await eventually(held_running_not_ready, within=60, what="held leader running")
    assert not condition_is(pod, "Ready")

    # The other group goes all the way: its leader's containers were ready.
    async def other_group_ready() -> bool:
        leader = await api.get(PODS, name_of(other), namespace)
        return is_ready(leader) and condition_is(leader, c.CONDITION_GROUP_READY)

    await eventually(other_group_ready, within=90, what="the other group ready")
    assert await api.get_or_none(STATEFULSETS, name_of(other), namespace) is not None

    async def nothing_for_held() -> bool:
        sts = await api.get_or_none(STATEFULSETS, held_name, namespace)
        return sts is None and await workers_of(api, namespace, name, key_of(held)) == []

    assert await nothing_for_held()
    await stays(nothing_for_held, seconds=3, what="no worker StatefulSet for the held leader")
    assert condition_is(await api.get(PODS, held_name, namespace), "ContainersReady", "False")

    await node_simulator.set_container_ready(namespace, held_name, True)

    async def held_sts() -> JSON | None:
        return await api.get_or_none(STATEFULSETS, held_name, namespace)

    sts = await eventually(held_sts, within=60, what="the held leader's worker StatefulSet")
    owner = sts["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", held_name, uid_of(held))
    await wait_ready(api, namespace, name, 2)
    # The same two groups throughout: holding the leader replaced nothing.
    assert {name_of(p) for p in await leaders(api, namespace, name)} == {
        held_name,
        name_of(other),
    }
    assert is_ready(await api.get(PODS, held_name, namespace))


# --- subdomainPolicy: UniquePerReplica -------------------------------------------------------
async def test_unique_per_replica_service_owned_by_leader(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    """(test_hash_replacement covers name, selector and addresses of a replacement's
    Service.) Each group's Service `<lws>-<key8>` is owned by its leader pod and
    selects exactly that group's pods."""
    api, name = nodesim_api, "hupr"
    network = {"subdomainPolicy": c.SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA}
    await api.create(
        LEADERWORKERSETS, hash_lws(name, namespace, replicas=2, size=2, networkConfig=network)
    )
    await wait_ready(api, namespace, name, 2)
    for leader in await leaders(api, namespace, name):
        key = key_of(leader)
        key8 = key[:8]
        service = await api.get(SERVICES, f"{name}-{key8}", namespace)
        owner = service["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == (
            "Pod",
            name_of(leader),
            uid_of(leader),
        )
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == {c.LABEL_SET_NAME: name, c.LABEL_GROUP_INDEX: key}
        members = await group_members(api, namespace, name, leader)
        assert len(members) == 2
        for member in members:
            assert member["spec"]["subdomain"] == f"{name}-{key8}"
            assert env_of(member)[c.ENV_LEADER_ADDRESS] == f"{key8}.{name}-{key8}.{namespace}"
        selected = await api.list(
            PODS,
            namespace,
            label_selector=",".join(f"{k}={v}" for k, v in service["spec"]["selector"].items()),
        )
        assert {name_of(p) for p in selected["items"]} == {name_of(p) for p in members}


# --- restart policies ------------------------------------------------------------------------
def restart_manifest(name: str, namespace: str, policy: str) -> JSON:
    body = hash_lws(name, namespace, replicas=2, size=3)
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = policy
    return body


async def uids_by_key(api: ApiClient, namespace: str, name: str) -> dict[str, dict[str, str]]:
    """Group key -> {pod name -> uid} over live pods."""
    out: dict[str, dict[str, str]] = {}
    for pod in await live_pods(api, namespace, name):
        out.setdefault(key_of(pod), {})[name_of(pod)] = uid_of(pod)
    return out


async def test_restart_policy_none_keeps_the_group(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """Under restartPolicy None a worker's container restart replaces nothing: same
    leader (UID and key), same worker pods."""
    api, name = nodesim_api, "hnone"
    await api.create(LEADERWORKERSETS, restart_manifest(name, namespace, c.RESTART_POLICY_NONE))
    await wait_ready(api, namespace, name, 2)
    before = await uids_by_key(api, namespace, name)
    leader = (await leaders(api, namespace, name))[0]
    worker = (await workers_of(api, namespace, name, key_of(leader)))[0]

    await node_simulator.restart_container(namespace, name_of(worker))

    async def restarted() -> bool:
        pod = await api.get_or_none(PODS, name_of(worker), namespace)
        return restart_count(pod) == 1 and is_ready(pod)

    await eventually(restarted, within=60, what=f"{name_of(worker)} restarted")

    async def unchanged() -> bool:
        return await uids_by_key(api, namespace, name) == before

    await stays(unchanged, seconds=3, what="every group unchanged")
    after = await api.get(PODS, name_of(leader), namespace)
    assert (uid_of(after), key_of(after)) == (uid_of(leader), key_of(leader))
    await wait_ready(api, namespace, name, 2)


async def test_worker_deleted_recreates_the_group_with_a_new_key(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    """Under RecreateGroupOnPodRestart a deleted worker takes its whole group down: the
    leader is deleted, the Deployment makes a new leader (a new key) and the old
    group's pods all go; the other group is untouched."""
    api, name = nodesim_api, "hrecr"
    body = restart_manifest(name, namespace, c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART)
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, 2)
    before = await uids_by_key(api, namespace, name)
    victim, survivor = await leaders(api, namespace, name)
    worker = (await workers_of(api, namespace, name, key_of(victim)))[0]

    await api.delete(PODS, name_of(worker), namespace)

    async def replaced() -> str | None:
        keys = {key_of(p) for p in await leaders(api, namespace, name)}
        fresh = keys - set(before)
        return fresh.pop() if keys == {key_of(survivor), *fresh} and len(fresh) == 1 else None

    new_key = await eventually(replaced, within=90, what="a new group replacing the victim's")

    async def old_group_gone() -> bool:
        return await group_pods(api, namespace, name, key_of(victim)) == []

    await eventually(old_group_gone, within=90, what="every pod of the old group gone")
    await wait_ready(api, namespace, name, 2)
    after = await uids_by_key(api, namespace, name)
    assert set(after) == {key_of(survivor), new_key}
    assert after[key_of(survivor)] == before[key_of(survivor)]
    assert len(after[new_key]) == 3
    (new_leader,) = [p for p in await leaders(api, namespace, name) if key_of(p) == new_key]
    assert name_of(new_leader) != name_of(victim)
    assert all(key_of(p) != key_of(victim) for p in await lws_pods(api, namespace, name))
    assert {is_leader(p) for p in await group_pods(api, namespace, name, new_key)} == {
        True,
        False,
    }
