"""Slices and placement on the local cluster: a set of two slices gets one
LeaderWorkerSet per slice and role, and ExclusiveSlice placement, turned into pod
affinity and honoured by the real scheduler, keeps each slice's pods in one zone and the
two slices in different zones (the simulated nodes are dealt over two zones)."""

from __future__ import annotations

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.nodes import ZONE_LABEL

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.api.resources import DISAGGREGATEDSETS, NODES, PODS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.disaggregatedset import (
    manifest,
    revision_of,
    rolling_role,
    set_lwss,
    set_services,
)
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_two_exclusive_slices_land_in_two_zones(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    placement = {"type": "ExclusiveSlice", "topology": ZONE_LABEL}
    body = manifest(
        "sliced",
        namespace,
        rolling_role("prefill", 1, size=2),
        rolling_role("decode", 1, size=2),
        slices=2,
        placementPolicy=placement,
    )
    await api.create(DISAGGREGATEDSETS, body)
    revision = await revision_of(api, namespace, "sliced")
    wanted = {f"sliced-{s}-{revision}-{r}" for s in (0, 1) for r in ("prefill", "decode")}

    async def all_ready() -> bool:
        lwss = await set_lwss(api, namespace, "sliced")
        ready = {n for n, x in lwss.items() if (x.get("status") or {}).get("readyReplicas") == 1}
        return set(lwss) == wanted and ready == wanted

    await eventually(all_ready, within=120, what="one ready LeaderWorkerSet per slice and role")

    async def services_made() -> bool:
        return await set_services(api, namespace, "sliced") == {f"{n}-prv" for n in wanted}

    # A slice's Services come from the set's pass that sees its LeaderWorkerSets ready,
    # a moment after their status says so.
    await eventually(services_made, within=30, what="a Service per slice and role")

    zone_of = {
        n["metadata"]["name"]: n["metadata"]["labels"][ZONE_LABEL]
        for n in (await api.list(NODES))["items"]
    }
    pods = (await api.list(PODS, namespace, label_selector=f"{c.LABEL_SET_NAME}=sliced"))["items"]
    assert len(pods) == 8
    zones: dict[str, set[str]] = {}
    for pod in pods:
        zones.setdefault(pod["metadata"]["labels"][c.LABEL_SLICE], set()).add(
            zone_of[pod["spec"]["nodeName"]]
        )
    # Each slice's four pods share a zone; the two slices do not.
    assert {s: len(z) for s, z in zones.items()} == {"0": 1, "1": 1}
    assert zones["0"] != zones["1"]
