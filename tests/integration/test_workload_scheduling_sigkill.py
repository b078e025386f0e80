"""SIGKILL of the controller process while it makes a gang LWS's objects: right after
the Workload appears, and right after the first PodGroup does. The controller started
again finishes the work with one Workload and one PodGroup per group, and deleting the
LWS leaves neither behind (everything it made is the LWS's from its creation)."""

from __future__ import annotations

import pytest
from lws_localcluster.deploy import install

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, POD_GROUPS, WORKLOADS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import live_pods, wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.manager_process import (
    FAST_ELECTION,
    ManagerProcess,
    Managers,
    managers_fixture,  # noqa: F401  (fixtures, registered by import)
    no_inprocess_controller_fixture,  # noqa: F401
    operator_namespace_fixture,  # noqa: F401
)
from tests.toolkit.waiting import eventually

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(600)]

NAME = "killed"
GROUPS = 3


async def _pod_groups(api: ApiClient, namespace: str) -> list[str]:
    answer = await api.list(POD_GROUPS, namespace, label_selector=f"{c.LABEL_SET_NAME}={NAME}")
    return sorted(g["metadata"]["name"] for g in answer.get("items", []))


async def _kill_and_start_again(manager: ManagerProcess) -> None:
    manager.kill()
    manager.start()
    await manager.wait_ready()


async def test_sigkill_while_making_the_gang_objects_leaves_none_behind(
    namespace: str, managers: Managers, nodesim_api: ApiClient
) -> None:
    api = nodesim_api
    manager = managers.new("gang", election=FAST_ELECTION, workload_scheduling=True)
    await install(api, manager.webhook_port)
    manager.start()
    await manager.wait_ready()

    body = lws_manifest(NAME, namespace, replicas=GROUPS)
    body["spec"]["scheduling"] = {}
    await api.create(LEADERWORKERSETS, body)

    async def workload_made() -> bool:
        return await api.get_or_none(WORKLOADS, NAME, namespace) is not None

    await eventually(workload_made, what="the Workload", within=60, interval=0.01)
    await _kill_and_start_again(manager)

    async def some_pod_group() -> list[str]:
        return await _pod_groups(api, namespace)

    await eventually(some_pod_group, what="a PodGroup", within=60, interval=0.01)
    await _kill_and_start_again(manager)

    await wait_ready(api, namespace, NAME, GROUPS, within=180)
    groups = await _pod_groups(api, namespace)
    assert len(groups) == GROUPS
    pods = await live_pods(api, namespace, NAME)
    assert {(p["spec"].get("schedulingGroup") or {}).get("podGroupName") for p in pods} == set(
        groups
    )
    workloads = (await api.list(WORKLOADS, namespace)).get("items", [])
    assert [w["metadata"]["name"] for w in workloads] == [NAME]

    await api.delete(LEADERWORKERSETS, NAME, namespace)

    async def nothing_left() -> bool:
        left = (await api.list(WORKLOADS, namespace)).get("items", [])
        return not left and not await _pod_groups(api, namespace)

    await eventually(nothing_left, what="Workload and PodGroups collected", within=90)
