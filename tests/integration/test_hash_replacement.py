"""Hash mode group replacement against the real control plane: PostTermination holds a
replacement leader behind its scheduling gate until the group it replaces is gone
(T/G rule), Immediate does not; on a full cluster that decides whether an unrelated
low-priority pod is preempted. Also: a crashed controller neither admits early nor
leaks a gate, and the time a replacement takes to be Ready under each policy."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.nodes import NodeSpec
from lws_localcluster.nodesim.simulator import (
    TERMINATION_DELAY_ANNOTATION,
    NodeSimulator,
)

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import (
    LEADERWORKERSETS,
    PODS,
    SERVICES,
    STATEFULSETS,
)
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.nodesim import SimulatorFactory, isolated, isolated_pod_spec
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import (
    gated_pod,
    get_lws,
    group_pods,
    is_leader,
    key_of,
    leaders,
    lws_pods,
    name_of,
    new_leader,
    release_all,
    scheduling_gated,
    terminating,
    wait_ready,
)
from tests.toolkit.lws import hash_lws
from tests.toolkit.pods import pod_manifest
from tests.toolkit.priority import priority_classes as priority_classes_made
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]


# --- helpers ---------------------------------------------------------------------------


async def nothing_built(api: ApiClient, namespace: str, lws: str, leader: JSON) -> bool:
    """No worker StatefulSet, no per-group Service, no worker pods for a gated leader."""
    key = key_of(leader)
    sts = await api.get_or_none(STATEFULSETS, name_of(leader), namespace)
    service = await api.get_or_none(SERVICES, f"{lws}-{key[:8]}", namespace)
    workers = [p for p in await group_pods(api, namespace, lws, key) if not is_leader(p)]
    return sts is None and service is None and workers == []


async def status_counts(api: ApiClient, namespace: str, name: str) -> tuple[int, int]:
    status = (await get_lws(api, namespace, name)).get("status") or {}
    return int(status.get("replicas", 0)), int(status.get("readyReplicas", 0))


# --- PostTermination --------------------------------------------------------------------


async def restart_group_held(
    api: ApiClient, sim: NodeSimulator, namespace: str, name: str
) -> tuple[JSON, list[JSON], JSON]:
    """Hold the first group's pods in termination and delete its leader:
    (old leader, old group's pods, the replacement leader)."""
    before = await leaders(api, namespace, name)
    victim = before[0]
    old_group = await group_pods(api, namespace, name, key_of(victim))
    for pod in old_group:
        await sim.stall_termination(namespace, name_of(pod))
    await api.delete(PODS, name_of(victim), namespace)
    replacement = await new_leader(api, namespace, name, {key_of(p) for p in before})
    return victim, old_group, replacement


async def test_replacement_waits_for_the_old_group(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api, sim = nodesim_api, node_simulator
    network = {"subdomainPolicy": "UniquePerReplica"}
    await api.create(
        LEADERWORKERSETS, hash_lws("rep", namespace, replicas=2, size=3, networkConfig=network)
    )
    await wait_ready(api, namespace, "rep", 2)
    before = await leaders(api, namespace, "rep")
    old_keys = {key_of(p) for p in before}
    victim = before[0]
    old_group = await group_pods(api, namespace, "rep", key_of(victim))
    assert len(old_group) == 3
    # Admitted groups get their per-group Service (named from the key).
    assert await api.get_or_none(SERVICES, f"rep-{key_of(victim)[:8]}", namespace)
    for pod in old_group:
        await sim.stall_termination(namespace, name_of(pod))

    await api.delete(PODS, name_of(victim), namespace)
    replacement = await new_leader(api, namespace, "rep", old_keys)
    replacement_name = name_of(replacement)

    async def gated_and_empty() -> JSON | None:
        pod = await api.get(PODS, replacement_name, namespace)
        if not scheduling_gated(pod) or not await nothing_built(api, namespace, "rep", pod):
            return None
        return pod

    pod = await eventually(gated_and_empty, within=60, what="the replacement gated, nothing built")
    assert pod["spec"]["subdomain"] == f"rep-{key_of(pod)[:8]}"

    async def counted_not_ready() -> bool:
        return await status_counts(api, namespace, "rep") == (2, 1)

    await eventually(counted_not_ready, within=60, what="status: 2 groups, 1 ready")

    # Remove the old pods one at a time; the replacement waits for the very last.
    leader_first = sorted(old_group, key=lambda p: not is_leader(p))
    for pod in leader_first[:-1]:
        await sim.release_termination(namespace, name_of(pod))

        async def gone(pod_name: str = name_of(pod)) -> bool:
            return await api.get_or_none(PODS, pod_name, namespace) is None

        await eventually(gone, within=60, what=f"{name_of(pod)} gone")
        await stays(gated_and_empty, seconds=3, what="the replacement waiting")
        assert await status_counts(api, namespace, "rep") == (2, 1)

    await sim.release_termination(namespace, name_of(leader_first[-1]))
    await wait_ready(api, namespace, "rep", 2)
    admitted = await api.get(PODS, replacement_name, namespace)
    assert not gated_pod(admitted) and is_ready(admitted)
    assert await api.get_or_none(STATEFULSETS, replacement_name, namespace)
    key8 = key_of(admitted)[:8]
    service = await api.get_or_none(SERVICES, f"rep-{key8}", namespace)
    assert service is not None and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"][c.LABEL_GROUP_INDEX] == key_of(admitted)
    # UniquePerReplica: every member resolves the leader under the group's own Service.
    members = await group_pods(api, namespace, "rep", key_of(admitted))
    assert len(members) == 3
    for member in members:
        env = {e["name"]: e.get("value") for e in member["spec"]["containers"][0]["env"]}
        assert env[c.ENV_LEADER_ADDRESS] == f"{key8}.rep-{key8}.{namespace}"
        assert member["spec"]["subdomain"] == f"rep-{key8}"
    assert await group_pods(api, namespace, "rep", key_of(victim)) == []


async def test_failed_leader_takes_its_group_down(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """A ReplicaSet never deletes a failed pod, it only creates another beside it: the
    controller deletes the failed leader so that its workers go, and the replacement
    waits for them under PostTermination."""
    api, sim = nodesim_api, node_simulator
    await api.create(LEADERWORKERSETS, hash_lws("lost", namespace, replicas=2, size=3))
    await wait_ready(api, namespace, "lost", 2)
    before = await leaders(api, namespace, "lost")
    victim = before[0]
    old_group = await group_pods(api, namespace, "lost", key_of(victim))
    old_workers = [p for p in old_group if not is_leader(p)]
    for pod in old_workers:
        await sim.stall_termination(namespace, name_of(pod))

    await sim.fail_pod(namespace, name_of(victim))
    replacement = name_of(await new_leader(api, namespace, "lost", {key_of(p) for p in before}))

    async def waiting() -> bool:
        pod = await api.get(PODS, replacement, namespace)
        old_leader = await api.get_or_none(PODS, name_of(victim), namespace)
        return (
            scheduling_gated(pod)
            and await nothing_built(api, namespace, "lost", pod)
            and (old_leader is None or terminating(old_leader))
            and await status_counts(api, namespace, "lost") == (2, 1)
        )

    await eventually(waiting, within=60, what="failed leader deleted, replacement gated")
    await stays(waiting, seconds=3, what="the replacement waiting for the old workers")

    await release_all(sim, old_workers)
    await wait_ready(api, namespace, "lost", 2)
    assert await group_pods(api, namespace, "lost", key_of(victim)) == []
    assert not gated_pod(await api.get(PODS, replacement, namespace))


async def test_scale_up_during_teardown_is_admitted_at_once(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """T = 1 tearing down, G = 1 gated; scaling up makes G = 2 and the oldest gated
    leader is released at once, while the old group still holds its capacity."""
    api, sim = nodesim_api, node_simulator
    await api.create(LEADERWORKERSETS, hash_lws("grow", namespace, replicas=2, size=2))
    await wait_ready(api, namespace, "grow", 2)
    victim, old_group, replacement = await restart_group_held(api, sim, namespace, "grow")

    async def admitted_and_gated() -> tuple[set[str], set[str]]:
        live = await leaders(api, namespace, "grow")
        return (
            {name_of(p) for p in live if not gated_pod(p)},
            {name_of(p) for p in live if gated_pod(p)},
        )

    async def one_waiting() -> bool:
        admitted, gated = await admitted_and_gated()
        return len(admitted) == 1 and gated == {name_of(replacement)}

    await eventually(one_waiting, within=60, what="the replacement gated")
    t0 = time.monotonic()
    await api.patch(LEADERWORKERSETS, "grow", {"spec": {"replicas": 3}}, namespace=namespace)

    async def grew() -> tuple[set[str], set[str]] | None:
        admitted, gated = await admitted_and_gated()
        return (admitted, gated) if len(admitted) == 2 and len(gated) == 1 else None

    admitted, gated = await eventually(grew, within=30, what="one more leader admitted")
    elapsed = time.monotonic() - t0
    # The oldest gated leader goes first. creationTimestamp has whole seconds, and
    # within one second the tie is broken by name, so only a strictly older
    # replacement is sure to be the one admitted.
    (waiting,) = gated
    scaled_up = await api.get(PODS, waiting, namespace)
    if scaled_up["metadata"]["creationTimestamp"] > replacement["metadata"]["creationTimestamp"]:
        assert name_of(replacement) in admitted
    # The old group still holds its capacity: nothing was waiting on it.
    assert len(await group_pods(api, namespace, "grow", key_of(victim))) == 2
    print(f"\n[hash] scale-up admitted {elapsed:.2f}s after the patch (old group still held)")

    await release_all(sim, old_group)
    await wait_ready(api, namespace, "grow", 3)


async def test_controller_crash_while_gated(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api, sim = nodesim_api, node_simulator
    await api.create(LEADERWORKERSETS, hash_lws("crash", namespace, replicas=2, size=3))
    await wait_ready(api, namespace, "crash", 2)
    _, old_group, replaced = await restart_group_held(api, sim, namespace, "crash")
    replacement = name_of(replaced)

    async def gated() -> JSON | None:
        pod = await api.get(PODS, replacement, namespace)
        if not scheduling_gated(pod) or not await nothing_built(api, namespace, "crash", pod):
            return None
        return pod

    await eventually(gated, within=60, what="the replacement gated")

    await lws_controller.restart(crash=True)
    # A fresh controller, fresh caches: it must see the old group still there.
    await stays(gated, seconds=3, what="the replacement gated after the restart")
    old_leader = next(p for p in old_group if is_leader(p))
    await sim.release_termination(namespace, name_of(old_leader))

    async def leader_gone() -> bool:
        return await api.get_or_none(PODS, name_of(old_leader), namespace) is None

    await eventually(leader_gone, within=60, what="the old leader gone")
    await stays(gated, seconds=3, what="the replacement gated while old workers remain")

    await release_all(sim, [p for p in old_group if not is_leader(p)])
    await wait_ready(api, namespace, "crash", 2)
    assert not gated_pod(await api.get(PODS, replacement, namespace))
    assert all(not gated_pod(p) for p in await lws_pods(api, namespace, "crash"))


# --- a full cluster: preemption or not ------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def priority_classes(nodesim_api: ApiClient) -> AsyncIterator[tuple[str, str]]:
    """(high, low): the LWS runs high, the filler that takes the spare capacity low."""
    async with priority_classes_made(
        nodesim_api, ("lws-test-high", 1000), ("lws-test-low", 10)
    ) as names:
        yield (names[0], names[1])


async def full_cluster(
    factory: SimulatorFactory, api: ApiClient, namespace: str, classes: tuple[str, str], policy: str
) -> tuple[NodeSimulator, list[JSON]]:
    """Two 4-cpu nodes of our own: 2 groups of 2 one-cpu pods, then 4 one-cpu low-priority
    fillers take the rest, so the cluster has no cpu left at all."""
    group = f"full-{secrets.token_hex(3)}"
    nodes = [isolated(NodeSpec(name=f"{group}-{i}", cpu="4", memory="16Gi"), group) for i in (0, 1)]
    sim = await factory(nodes)
    high, low = classes
    body = hash_lws("full", namespace, replicas=2, size=2, cpu="1", groupReplacementPolicy=policy)
    spec = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    spec.update(isolated_pod_spec(group), priorityClassName=high)
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "full", 2)
    for i in range(4):
        filler = pod_manifest(
            f"filler-{i}",
            requests={"cpu": "1"},
            priorityClassName=low,
            terminationGracePeriodSeconds=0,
            **isolated_pod_spec(group),
        )
        await api.create(PODS, filler, namespace)

    async def fillers_running() -> list[JSON] | None:
        pods = [await api.get(PODS, f"filler-{i}", namespace) for i in range(4)]
        return pods if all(is_ready(p) for p in pods) else None

    fillers = await eventually(fillers_running, within=60, what="the fillers running")
    return sim, fillers


async def fillers_untouched(api: ApiClient, namespace: str, fillers: list[JSON]) -> bool:
    for old in fillers:
        pod = await api.get_or_none(PODS, name_of(old), namespace)
        if pod is None or pod["metadata"]["uid"] != old["metadata"]["uid"] or terminating(pod):
            return False
    return True


async def test_full_cluster_immediate_preempts(
    lws_controller: RunningController,
    node_simulator_factory: SimulatorFactory,
    nodesim_api: ApiClient,
    namespace: str,
    priority_classes: tuple[str, str],
) -> None:
    api = nodesim_api
    sim, fillers = await full_cluster(
        node_simulator_factory, api, namespace, priority_classes, c.GROUP_REPLACEMENT_IMMEDIATE
    )
    _, old_group, replaced = await restart_group_held(api, sim, namespace, "full")
    replacement = name_of(replaced)
    assert not gated_pod(await api.get(PODS, replacement, namespace))

    async def preempted() -> bool:
        return not await fillers_untouched(api, namespace, fillers)

    # The old group still holds its 2 cpu: the only way in is to evict a filler.
    await eventually(preempted, within=60, what="a low-priority filler preempted")

    async def replacement_running() -> bool:
        pod = await api.get(PODS, replacement, namespace)
        return bool(pod["spec"].get("nodeName"))

    await eventually(replacement_running, within=60, what="the replacement scheduled")
    assert len(await group_pods(api, namespace, "full", key_of(old_group[0]))) == 2
    await release_all(sim, old_group)
    await wait_ready(api, namespace, "full", 2)


async def test_full_cluster_post_termination_takes_the_freed_capacity(
    lws_controller: RunningController,
    node_simulator_factory: SimulatorFactory,
    nodesim_api: ApiClient,
    namespace: str,
    priority_classes: tuple[str, str],
) -> None:
    api = nodesim_api
    sim, fillers = await full_cluster(
        node_simulator_factory,
        api,
        namespace,
        priority_classes,
        c.GROUP_REPLACEMENT_POST_TERMINATION,
    )
    _, old_group, replaced = await restart_group_held(api, sim, namespace, "full")
    replacement = name_of(replaced)

    async def waiting_quietly() -> bool:
        pod = await api.get(PODS, replacement, namespace)
        return scheduling_gated(pod) and await fillers_untouched(api, namespace, fillers)

    await eventually(waiting_quietly, within=60, what="the replacement gated")
    await stays(waiting_quietly, seconds=3, what="gated, no filler preempted")

    await release_all(sim, old_group)
    await wait_ready(api, namespace, "full", 2)
    assert await fillers_untouched(api, namespace, fillers)
    group = await group_pods(
        api, namespace, "full", key_of(await api.get(PODS, replacement, namespace))
    )
    assert len(group) == 2 and all(is_ready(p) for p in group)
    assert {p["spec"]["nodeName"] for p in group} <= set(sim.fleet.nodes)


# --- how long a restarted group takes to be Ready again ------------------------------------

TERMINATION_DELAY = 4.0


@pytest.mark.parametrize("trigger", ["container-restart", "leader-delete"])
@pytest.mark.parametrize(
    "policy", [c.GROUP_REPLACEMENT_POST_TERMINATION, c.GROUP_REPLACEMENT_IMMEDIATE]
)
async def test_time_to_replacement_ready(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    policy: str,
    trigger: str,
) -> None:
    """Every pod takes TERMINATION_DELAY seconds to terminate. A group is restarted
    either by a worker's container restarting under RecreateGroupOnPodRestart (the
    controller deletes the leader in the foreground: workers and leader terminate
    together) or by deleting the leader as kubectl or a ReplicaSet does (background:
    the workers only start terminating once the leader is gone). Prints the time from
    the restart to the replacement leader Ready."""
    api = nodesim_api
    body = hash_lws("timed", namespace, replicas=2, size=3, groupReplacementPolicy=policy)
    template = body["spec"]["leaderWorkerTemplate"]
    template["restartPolicy"] = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    template["workerTemplate"]["metadata"] = {
        "annotations": {TERMINATION_DELAY_ANNOTATION: str(TERMINATION_DELAY)}
    }
    template["workerTemplate"]["spec"]["terminationGracePeriodSeconds"] = 30
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "timed", 2)
    before = await leaders(api, namespace, "timed")
    victim = before[0]
    old_group = await group_pods(api, namespace, "timed", key_of(victim))
    worker = next(p for p in old_group if not is_leader(p))

    t0 = time.monotonic()
    if trigger == "container-restart":
        await node_simulator.restart_container(namespace, name_of(worker))
    else:
        await api.delete(PODS, name_of(victim), namespace)
    created = await new_leader(api, namespace, "timed", {key_of(p) for p in before})
    t_created = time.monotonic() - t0
    replacement = name_of(created)
    assert gated_pod(created) == (policy == c.GROUP_REPLACEMENT_POST_TERMINATION)

    async def old_gone() -> bool:
        return await group_pods(api, namespace, "timed", key_of(victim)) == []

    async def replacement_ready() -> bool:
        return is_ready(await api.get(PODS, replacement, namespace))

    async def elapsed_until(probe: Callable[[], Awaitable[bool]], what: str) -> float:
        await eventually(probe, within=120, interval=0.05, what=what)
        return time.monotonic() - t0

    t_gone, t_ready = await asyncio.gather(
        elapsed_until(old_gone, "the old group gone"),
        elapsed_until(replacement_ready, "the replacement Ready"),
    )
    print(
        f"\n[hash] {policy:15} {trigger:17} termination delay {TERMINATION_DELAY:.0f}s, "
        f"group of 3: replacement created {t_created:.2f}s, old group gone {t_gone:.2f}s, "
        f"replacement Ready {t_ready:.2f}s"
    )
    if policy == c.GROUP_REPLACEMENT_POST_TERMINATION:
        assert t_ready >= t_gone >= TERMINATION_DELAY
    else:
        assert t_ready < t_gone
    await wait_ready(api, namespace, "timed", 2)
