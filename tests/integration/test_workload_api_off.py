"""A cluster that does not serve the Workload API: the session's API server restarted
without scheduling.k8s.io/v1beta1, the controller restarted (it asks at start).

A LeaderWorkerSet already stored with spec.scheduling gets WorkloadSchedulingReady
False / APINotAvailable and a Warning event, and nothing is created for it; a new one
is refused at admission naming the field; once the API is back (and the controller
restarted) the stored one comes up as gangs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.leaderworkerset import scheduling as s
from leaderworkerset.api.resources import LEADERWORKERSETS, STATEFULSETS
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.lws import paused_lws_controller
from tests.toolkit.cluster import get_lws, live_pods, lws_event_notes, wait_ready
from tests.toolkit.lws import lws_manifest
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _restart_apiserver(cp: ControlPlane, *, workload_api: bool) -> None:
    cp.workload_api = workload_api
    await asyncio.to_thread(cp.restart_apiserver)


# kube-scheduler may exit by design some time after an API server restart ("scheduler
# cache is corrupted"); a kubelet would start it again, and so does this, as the soak
# does, for the test and a while after it.
REVIVE_EVERY = 0.5
REVIVE_AFTER = 15.0


@pytest.fixture
def restores_the_api(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("needs the local control plane, to restart its API server")
    stop = threading.Event()

    def supervise() -> None:
        while not stop.wait(REVIVE_EVERY):
            control_plane.revive()

    supervisor = threading.Thread(target=supervise, daemon=True)
    supervisor.start()
    try:
        yield control_plane
    finally:
        if not control_plane.workload_api:
            control_plane.workload_api = True
            control_plane.restart_apiserver()
        deadline = time.monotonic() + REVIVE_AFTER
        while time.monotonic() < deadline:
            control_plane.revive()
            stop.wait(REVIVE_EVERY)
        stop.set()
        supervisor.join()


async def test_without_the_api_a_scheduling_lws_waits_with_a_reason_and_makes_nothing(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    restores_the_api: ControlPlane,
    request: pytest.FixtureRequest,
) -> None:
    api, cp = nodesim_api, restores_the_api
    body = lws_manifest("stored", namespace, size=2)
    body["spec"]["scheduling"] = {}
    async with paused_lws_controller(request.session, without_webhooks=True):
        # Stored while nothing serves it (as if admitted before the API went away).
        await api.create(LEADERWORKERSETS, body)
        await _restart_apiserver(cp, workload_api=False)
    assert lws_controller.controllers is not None
    assert not lws_controller.controllers.options.scheduling.api_available

    async def refused_with_reason() -> bool:
        lws = await get_lws(api, namespace, "stored")
        for cond in (lws.get("status") or {}).get("conditions") or []:
            if cond.get("type") == s.CONDITION_WORKLOAD_SCHEDULING_READY:
                return cond["status"] == "False" and cond["reason"] == s.REASON_API_NOT_AVAILABLE
        return False

    await eventually(refused_with_reason, what="WorkloadSchedulingReady False", within=60)
    notes = await eventually(
        lambda: lws_event_notes(api, namespace, "stored", s.REASON_API_NOT_AVAILABLE),
        what="an APINotAvailable event",
    )
    assert "scheduling.k8s.io/v1beta1" in notes[0]

    async def nothing_made() -> bool:
        sts = await api.get_or_none(STATEFULSETS, "stored", namespace)
        return sts is None and not await live_pods(api, namespace, "stored")

    await stays(nothing_made, seconds=3, what="no leader StatefulSet, no pod")

    new = lws_manifest("new", namespace, size=2)
    new["spec"]["scheduling"] = {}
    with pytest.raises(ApiError) as refused:
        await api.create(LEADERWORKERSETS, new)
    assert "spec.scheduling" in refused.value.message
    assert "not available" in refused.value.message

    await _restart_apiserver(cp, workload_api=True)
    await lws_controller.restart()
    await wait_ready(api, namespace, "stored", 2)
    pods = await live_pods(api, namespace, "stored")
    assert all((p["spec"].get("schedulingGroup") or {}).get("podGroupName") for p in pods)
