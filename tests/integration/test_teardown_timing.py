"""Where the time of a group restart and of an LWS deletion goes, on the real control
plane with pods that take TERMINATION_DELAY seconds to terminate: when each old pod
and worker StatefulSet was marked for deletion and gone, when the replacement leader
was created and Ready (docs/group-recovery.md, "Faster teardown", quotes these
figures). Each test asserts only the guarantees (nothing of the old group is left, no
Ordinal replacement beside a predecessor's pod); the figures are printed."""

from __future__ import annotations

import time
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import TERMINATION_DELAY_ANNOTATION, NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import DEPLOYMENTS, LEADERWORKERSETS, PODS, STATEFULSETS
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import is_leader, key_of, leaders, lws_pods, name_of, wait_ready
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.pods import pod_manifest
from tests.toolkit.teardown_timeline import CREATED, GONE, MARKED, READY, Seen, recording, spread
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
TERMINATION_DELAY = 3.0
ORDINAL, HASH_POST, HASH_IMMEDIATE = "ordinal", "hash-post", "hash-immediate"


def slow_to_terminate(body: JSON, policy: str | None = None) -> JSON:
    template = body["spec"]["leaderWorkerTemplate"]
    template["restartPolicy"] = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    template["workerTemplate"]["metadata"] = {
        "annotations": {TERMINATION_DELAY_ANNOTATION: str(TERMINATION_DELAY)}
    }
    template["workerTemplate"]["spec"]["terminationGracePeriodSeconds"] = 30
    return body


def offsets(seen: list[Seen], step: str, t0: float) -> list[float]:
    return [s.steps[step] - t0 for s in seen if step in s.steps]


BULK = 200


def bulk_deployment(namespace: str) -> JSON:
    """BULK pause pods that terminate at once: deleting them keeps the garbage
    collector busy (a look-up of the owner and a DELETE per pod)."""
    labels = {"app": "bulk"}
    template = pod_manifest("", labels=labels, terminationGracePeriodSeconds=0)
    template["metadata"].pop("name", None)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bulk", "namespace": namespace},
        "spec": {"replicas": BULK, "selector": {"matchLabels": labels}, "template": template},
    }


async def busy_collector(api: ApiClient, namespace: str) -> None:
    await api.create(DEPLOYMENTS, bulk_deployment(namespace))

    async def all_running() -> bool:
        pods = await api.list(PODS, namespace, label_selector="app=bulk")
        return sum(is_ready(p) for p in pods.get("items", [])) == BULK

    await eventually(all_running, within=180, what=f"{BULK} bulk pods running")


@pytest.mark.parametrize("load", ["idle", "busy"])
@pytest.mark.parametrize("mode", [ORDINAL, HASH_POST, HASH_IMMEDIATE])
async def test_group_restart_timeline(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    mode: str,
    load: str,
) -> None:
    """`busy`: the restart comes as a Deployment of BULK pods is deleted, so the
    garbage collector has those to go through too."""
    api, name, size = nodesim_api, "tl", 4
    if mode == ORDINAL:
        body = lws_manifest(name, namespace, replicas=2, size=size)
    else:
        policy = c.GROUP_REPLACEMENT_POST_TERMINATION
        if mode == HASH_IMMEDIATE:
            policy = c.GROUP_REPLACEMENT_IMMEDIATE
        body = hash_lws(name, namespace, replicas=2, size=size, groupReplacementPolicy=policy)
    await api.create(LEADERWORKERSETS, slow_to_terminate(body))
    await wait_ready(api, namespace, name, 2)
    victim = min(await leaders(api, namespace, name), key=name_of)
    old = [p for p in await lws_pods(api, namespace, name) if key_of(p) == key_of(victim)]
    old_uids = {p["metadata"]["uid"] for p in old}
    before = {p["metadata"]["uid"] for p in await lws_pods(api, namespace, name)}
    worker = next(p for p in old if not is_leader(p))
    if load == "busy":
        await busy_collector(api, namespace)

    async with recording(api, namespace) as line:
        t0 = time.monotonic()
        if load == "busy":
            await api.delete(DEPLOYMENTS, "bulk", namespace, propagation_policy="Background")
        await node_simulator.restart_container(namespace, name_of(worker))

        async def replaced() -> bool:
            pods = await lws_pods(api, namespace, name)
            fresh = [p for p in pods if p["metadata"]["uid"] not in before]
            left = [p for p in pods if p["metadata"]["uid"] in old_uids]
            return len(fresh) == size and all(is_ready(p) for p in fresh) and not left

        await eventually(replaced, within=120, interval=0.05, what="the group replaced")
        t_done = time.monotonic() - t0
    pods = line.of("Pod")
    old_seen = [s for uid, s in line.objects.items() if uid in old_uids]
    new_group = [s for s in pods if s.group and s.steps[CREATED] > t0]
    new_leader = [s for s in new_group if s.leader]
    old_sets = [s for s in line.of("StatefulSet") if MARKED in s.steps or GONE in s.steps]
    old_leader = [s for s in old_seen if s.leader]
    old_workers = [s for s in old_seen if not s.leader]
    parts = [
        f"leader marked {spread(offsets(old_leader, MARKED, t0))}",
        f"gone {spread(offsets(old_leader, GONE, t0))}",
        f"workers marked {spread(offsets(old_workers, MARKED, t0))}",
        f"gone {spread(offsets(old_workers, GONE, t0))}",
        f"worker sts marked {spread(offsets(old_sets, MARKED, t0))}",
        f"gone {spread(offsets(old_sets, GONE, t0))}",
        f"new leader created {spread(offsets(new_leader, CREATED, t0))}",
        f"Ready {spread(offsets(new_leader, READY, t0))}",
        f"group Ready {spread(offsets(new_group, READY, t0))}",
        f"done {t_done:.2f}s",
    ]
    head = f"\n[teardown] {mode:14} {load} size {size}, termination {TERMINATION_DELAY:.0f}s:"
    print(head, *parts)
    if mode != HASH_IMMEDIATE:
        # No replacement before the last pod of the group it replaces is gone: an
        # Ordinal leader is only created then, a PostTermination one only scheduled.
        last_gone = max(offsets(old_seen, GONE, t0))
        first_ready = min(offsets(new_group, READY, t0))
        assert first_ready > last_gone
    if mode == ORDINAL:
        assert min(offsets(new_leader, CREATED, t0)) >= max(offsets(old_seen, GONE, t0))
    await wait_ready(api, namespace, name, 2)


@pytest.mark.parametrize(("teardown", "attempt"), [("gc", 1), ("gc", 2), ("parallel", 1)], ids=str)
async def test_lws_deletion_timeline(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
    teardown: str,
    attempt: int,
) -> None:
    """`kubectl delete lws` (background propagation) of 20 groups of 4, left to the
    garbage collector or with the controller's parallel deletion (lws_teardown.py). The
    collector's twice: that of a control plane that has just started only watches the
    LeaderWorkerSet resource after its next resync of discovered resources."""
    api, name, groups, size = nodesim_api, "many", 20, 4
    assert lws_controller.controllers is not None
    reconciler = lws_controller.controllers.leaderworkersets._reconcile
    assert isinstance(reconciler, LeaderWorkerSetReconciler)
    body = slow_to_terminate(lws_manifest(name, namespace, replicas=groups, size=size))
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, name, groups, within=240)

    async def nothing_left() -> bool:
        return not await lws_pods(api, namespace, name)

    reconciler.teardown.enabled = teardown == "parallel"
    try:
        async with recording(api, namespace) as line:
            t0 = time.monotonic()
            await api.delete(LEADERWORKERSETS, name, namespace, propagation_policy="Background")
            await eventually(nothing_left, within=240, interval=0.05, what="every pod gone")
            t_done = time.monotonic() - t0
    finally:
        reconciler.teardown.enabled = False
    pods = line.of("Pod")
    leaders_seen = [s for s in pods if s.leader]
    workers = [s for s in pods if not s.leader]
    sets = [s for s in line.of("StatefulSet") if s.name != name]
    print(
        f"\n[teardown] delete lws {groups}x{size} {teardown} #{attempt}, "
        f"termination {TERMINATION_DELAY:.0f}s: "
        f"leaders marked {spread(offsets(leaders_seen, MARKED, t0))} gone "
        f"{spread(offsets(leaders_seen, GONE, t0))}; worker sts gone "
        f"{spread(offsets(sets, GONE, t0))}; workers marked {spread(offsets(workers, MARKED, t0))} "
        f"gone {spread(offsets(workers, GONE, t0))}; last pod gone {t_done:.2f}s"
    )
    assert len(leaders_seen) == groups and len(workers) == groups * (size - 1)

    async def no_sets() -> bool:
        answer = await api.list(STATEFULSETS, namespace)
        return not answer.get("items")

    await eventually(no_sets, within=60, what="every StatefulSet gone")
