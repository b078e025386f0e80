"""A node lost under a Hash-mode group, against the real control plane: the group's
worker on the dead node can never finish terminating, so PostTermination alone would
hold the replacement forever. With a small `nodeNotReadyRelease` the replacement is
admitted once the node has been NotReady that long, not before; the LeaderWorkerSet
says what it waits for (Event, GroupReplacementHeld condition) and why it stopped
waiting (Event), and the condition clears."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.nodes import NodeSpec

from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.lws.status import CONDITION_REPLACEMENT_HELD
from leaderworkerset.group.options import ReleaseThresholds
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.nodesim import SimulatorFactory, isolated, isolated_pod_spec
from tests.toolkit.cluster import (
    condition,
    gated_pod,
    get_lws,
    group_pods,
    is_leader,
    key_of,
    leaders,
    lws_event_notes,
    name_of,
    new_leader,
    replacement_bounds,
    scheduling_gated,
    still_gated,
    wait_ready,
)
from tests.toolkit.lws import hash_lws
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]
NODE_BOUND = 12.0  # room on a loaded machine to delete, see and catch the replacement held
# The node's lastTransitionTime has whole seconds: the bound may start up to 1 s
# before the moment the test took the node down.
TIMESTAMP_SLACK = 1.0
# Reacting to the release (requeue, patch, watch) on a shared 2-core machine.
REACTION_SLACK = 5.0


@pytest.fixture
def short_node_bound(lws_controller: RunningController) -> Iterator[None]:
    """No overrun bound: only the node's loss may release the replacement."""
    with replacement_bounds(
        lws_controller, ReleaseThresholds(node_not_ready=NODE_BOUND, termination_overrun=0)
    ):
        yield


async def held_condition(api: ApiClient, namespace: str, name: str) -> str | None:
    return condition(await get_lws(api, namespace, name), CONDITION_REPLACEMENT_HELD)


async def test_node_loss_releases_the_replacement_after_the_bound(
    lws_controller: RunningController,
    short_node_bound: None,
    node_simulator_factory: SimulatorFactory,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api = nodesim_api
    early_before = early_releases(lws_controller, namespace, "loss")
    # Three one-cpu nodes of our own, one-cpu pods: leader and worker never share a
    # node, and the replacement group fits on the two that stay healthy.
    group = f"loss-{secrets.token_hex(3)}"
    nodes = [
        isolated(NodeSpec(name=f"{group}-{i}", cpu="1", memory="4Gi"), group) for i in range(3)
    ]
    sim = await node_simulator_factory(nodes)
    body = hash_lws("loss", namespace, replicas=1, size=2, cpu="1")
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(isolated_pod_spec(group))
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "loss", 1)
    assert await held_condition(api, namespace, "loss") is None, "never held, never shown"

    (victim,) = await leaders(api, namespace, "loss")
    old_key = key_of(victim)
    (worker,) = [p for p in await group_pods(api, namespace, "loss", old_key) if not is_leader(p)]
    dead = worker["spec"]["nodeName"]
    assert dead != victim["spec"]["nodeName"]

    # The worker's node stops heartbeating: nothing it runs is reported or removed.
    went_down = time.time()
    await sim.set_node_ready(dead, False, status="Unknown")
    # The group is torn down (as a restart or an eviction would): its leader goes
    # from a healthy node, its worker is left Terminating on the dead one for good.
    await api.delete(PODS, name_of(victim), namespace)
    replacement = name_of(await new_leader(api, namespace, "loss", {old_key}))

    async def held() -> bool:
        pod = await api.get(PODS, replacement, namespace)
        return scheduling_gated(pod) and await held_condition(api, namespace, "loss") == "True"

    await eventually(held, within=30, what="the replacement held, GroupReplacementHeld True")
    notes = await eventually(
        lambda: lws_event_notes(api, namespace, "loss", ev.REASON_REPLACEMENT_HELD),
        within=30,
        what="a ReplacementHeld event",
    )
    assert any(replacement in n and old_key[:8] in n for n in notes), notes

    # Not before the bound: gated until the node has been NotReady that long.
    not_before = went_down + NODE_BOUND - TIMESTAMP_SLACK
    await stays(
        lambda: still_gated(api, namespace, replacement),
        seconds=max(0.0, not_before - 0.3 - time.time()),
        what="the replacement gated before the bound",
    )

    async def admitted() -> float | None:
        pod = await api.get(PODS, replacement, namespace)
        return None if gated_pod(pod) else time.time()

    admitted_at = await eventually(admitted, within=60, what="the replacement admitted")
    waited = admitted_at - went_down
    print(f"\n[hash] node lost: replacement admitted {waited:.2f}s after (bound {NODE_BOUND}s)")
    assert not_before - 0.3 <= admitted_at
    assert waited <= NODE_BOUND + REACTION_SLACK
    # Admitted on the bound, not because the old group went: its worker is still there.
    stuck = await api.get_or_none(PODS, name_of(worker), namespace)
    assert stuck is not None and stuck["spec"]["nodeName"] == dead

    await wait_ready(api, namespace, "loss", 1)
    new_group = await group_pods(
        api, namespace, "loss", key_of(await get_pod(api, namespace, replacement))
    )
    assert all(p["spec"]["nodeName"] != dead for p in new_group)

    async def cleared() -> bool:
        return await held_condition(api, namespace, "loss") == "False"

    await eventually(cleared, within=30, what="GroupReplacementHeld False")
    released = await eventually(
        lambda: lws_event_notes(api, namespace, "loss", ev.REASON_REPLACEMENT_RELEASED),
        within=30,
        what="a ReplacementReleasedEarly event",
    )
    assert any(old_key[:8] in n and dead in n and "not Ready" in n for n in released), released
    assert len(await lws_event_notes(api, namespace, "loss", ev.REASON_REPLACEMENT_HELD)) == 1
    assert early_releases(lws_controller, namespace, "loss") == early_before + 1


def early_releases(running: RunningController, namespace: str, name: str) -> float:
    """The in-process controller's early-release counter for this LeaderWorkerSet."""
    assert running.manager is not None
    value = running.manager.metrics.registry.get_sample_value(
        "lws_scheduling_gate_early_releases_total",
        {
            "namespace": namespace,
            "leaderworkerset": name,
            "group_identity": "Hash",
            "reason": "node_not_ready",
        },
    )
    return value or 0.0


async def get_pod(api: ApiClient, namespace: str, name: str) -> JSON:
    return await api.get(PODS, name, namespace)
