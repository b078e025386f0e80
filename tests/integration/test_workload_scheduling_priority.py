"""Gang scheduling and priority: a group has one priority, fixed in its Workload's
template; a rollout that changes the pod templates' priorityClassName gets a Workload
made again and PodGroups of the new priority (on the real scheduler)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.resources import LEADERWORKERSETS, WORKLOADS
from leaderworkerset.runtime.client import ApiClient
from tests.integration.test_workload_scheduling import (
    bound,
    gang,
    pod_groups,
    scheduling_group,
)
from tests.toolkit.cluster import condition, get_lws, live_pods, wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.priority import priority_classes as priority_classes_made
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]


@pytest_asyncio.fixture(loop_scope="session")
async def priority_classes(nodesim_api: ApiClient) -> AsyncIterator[tuple[str, str]]:
    """(low, high): PriorityClasses of value 10 and 11."""
    async with priority_classes_made(nodesim_api, ("gang-low", 10), ("gang-high", 11)) as names:
        yield (names[0], names[1])


async def test_a_priority_class_change_rolls_out_with_a_workload_made_again(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    priority_classes: tuple[str, str],
) -> None:
    """A group has one priority, fixed in the Workload's template: a rollout that
    changes it gets a new Workload, and its groups PodGroups of the new priority."""
    assert lws_controller.controllers is not None
    assert lws_controller.controllers.options.scheduling.kubernetes
    api, (low, high) = nodesim_api, priority_classes
    body = gang(lws_manifest("prio", namespace, size=2))
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["priorityClassName"] = low
    await api.create(LEADERWORKERSETS, body)
    await wait_ready(api, namespace, "prio", 2)
    before = await api.get(WORKLOADS, "prio", namespace)
    assert before["spec"]["podGroupTemplates"][0]["priorityClassName"] == low
    lws = await get_lws(api, namespace, "prio")
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["priorityClassName"] = high
    await api.replace(LEADERWORKERSETS, lws)

    async def rolled() -> list[JSON] | None:
        pods = await live_pods(api, namespace, "prio")
        on_high = [p for p in pods if p["spec"].get("priorityClassName") == high and bound(p)]
        return pods if len(pods) == 4 and len(on_high) == 4 else None

    pods = await eventually(rolled, what="every pod on the new priority, bound", within=90)
    after = await api.get(WORKLOADS, "prio", namespace)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["spec"]["podGroupTemplates"][0]["priorityClassName"] == high
    groups = await pod_groups(api, namespace, "prio")
    for pod in pods:
        group = groups[scheduling_group(pod) or ""]
        assert group["spec"]["priorityClassName"] == high
        assert group["spec"]["priority"] == pod["spec"]["priority"] == 11
    lws = await get_lws(api, namespace, "prio")
    assert condition(lws, s.CONDITION_WORKLOAD_SCHEDULING_READY) == "True"
