"""Group Identity per role on the local cluster (simulated nodes): a DisaggregatedSet
with an Ordinal prefill role and a Hash decode role. Scaling decode down removes its
unhealthy group (the Hash LeaderWorkerSet's own ReplicaSet ranking, which the set's
controller leaves alone) and touches no prefill pod; changing decode's groupIdentity
is a new revision that rolls both roles and drains the Hash one; and a rollout drains
the old Hash revision's unhealthy group before its healthy one."""

from __future__ import annotations

from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as lws_c
from leaderworkerset.api.resources import DEPLOYMENTS, DISAGGREGATEDSETS, PODS
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import key_of, leaders, live_pods, name_of, workers_of
from tests.toolkit.disaggregatedset import manifest, revision_of, rolling_role, set_lwss, settled
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

HASH = {"groupIdentity": lws_c.GROUP_IDENTITY_HASH}


async def uids(api: ApiClient, namespace: str, lws: str) -> dict[str, str]:
    return {name_of(p): p["metadata"]["uid"] for p in await live_pods(api, namespace, lws)}


async def set_role(api: ApiClient, namespace: str, name: str, index: int, **spec: Any) -> None:
    """Change members of one role's spec, the rest of the stored set as it is."""
    stored = await api.get(DISAGGREGATEDSETS, name, namespace)
    stored["spec"]["roles"][index]["spec"].update(spec)
    await api.replace(DISAGGREGATEDSETS, stored)


async def test_a_hash_decode_role_sheds_its_unhealthy_group_and_leaves_prefill_alone(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api = nodesim_api
    body = manifest(
        "mix",
        namespace,
        rolling_role("prefill", 2, size=2),
        rolling_role("decode", 3, size=2, **HASH),
    )
    await api.create(DISAGGREGATEDSETS, body)
    lwss = await settled(api, namespace, "mix", {"prefill": 2, "decode": 3})
    first = await revision_of(api, namespace, "mix")
    prefill, decode = f"mix-0-{first}-prefill", f"mix-0-{first}-decode"
    assert lwss[decode]["spec"]["groupIdentity"] == lws_c.GROUP_IDENTITY_HASH
    assert lwss[prefill]["spec"]["groupIdentity"] == lws_c.GROUP_IDENTITY_ORDINAL
    await api.get(DEPLOYMENTS, decode, namespace)  # Hash: the leaders are a Deployment's
    prefill_pods = await uids(api, namespace, prefill)
    assert len(prefill_pods) == 4

    # Break a decode group that is neither the oldest nor the newest.
    before = sorted(
        await leaders(api, namespace, decode), key=lambda p: p["metadata"]["creationTimestamp"]
    )
    sick = before[1]
    worker = sorted(name_of(w) for w in await workers_of(api, namespace, decode, key_of(sick)))[0]
    await node_simulator.set_container_ready(namespace, worker, False)

    async def sick_not_ready() -> bool:
        return not is_ready(await api.get(PODS, name_of(sick), namespace))

    await eventually(sick_not_ready, within=60, what="the sick decode group's leader not ready")

    await set_role(api, namespace, "mix", 1, replicas=2)
    healthy = {key_of(p) for p in before} - {key_of(sick)}

    async def shed() -> set[str] | None:
        keys = {key_of(p) for p in await leaders(api, namespace, decode)}
        return keys if keys == healthy else None

    await eventually(shed, within=60, what="decode keeps only its healthy groups")
    lwss = await settled(api, namespace, "mix", {"prefill": 2, "decode": 2})
    assert set(lwss) == {prefill, decode}  # a scale, not a rollout
    assert {key_of(p) for p in await leaders(api, namespace, decode)} == healthy
    assert await uids(api, namespace, prefill) == prefill_pods

    # Back to Ordinal: a new revision for both roles; the Hash LeaderWorkerSet is drained.
    await set_role(api, namespace, "mix", 1, groupIdentity=lws_c.GROUP_IDENTITY_ORDINAL)
    second = await revision_of(api, namespace, "mix")
    assert second != first
    lwss = await settled(api, namespace, "mix", {"prefill": 2, "decode": 2}, within=240)
    assert lwss[f"mix-0-{second}-decode"]["spec"]["groupIdentity"] == lws_c.GROUP_IDENTITY_ORDINAL

    async def old_gone() -> bool:
        return not {x for x in await set_lwss(api, namespace, "mix") if first in x}

    await eventually(old_gone, within=60, what="the first revision deleted")


async def test_a_rollout_drains_the_old_hash_revisions_unhealthy_group_first(
    lws_controller: RunningController,
    node_simulator: NodeSimulator,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    api = nodesim_api
    body = manifest(
        "drain", namespace, rolling_role("prefill", 2), rolling_role("decode", 2, size=2, **HASH)
    )
    await api.create(DISAGGREGATEDSETS, body)
    await settled(api, namespace, "drain", {"prefill": 2, "decode": 2})
    first = await revision_of(api, namespace, "drain")
    decode = f"drain-0-{first}-decode"
    sick, healthy = await leaders(api, namespace, decode)
    worker = sorted(name_of(w) for w in await workers_of(api, namespace, decode, key_of(sick)))[0]
    await node_simulator.set_container_ready(namespace, worker, False)

    async def sick_not_ready() -> bool:
        return not is_ready(await api.get(PODS, name_of(sick), namespace))

    await eventually(sick_not_ready, within=60, what="the sick decode group's leader not ready")

    # A new image for both roles: maxSurge 1 drains the old revision one group at a time
    # (2 -> 1 -> 0), and the first group the Hash LeaderWorkerSet gives up is the sick one.
    stored = await api.get(DISAGGREGATEDSETS, "drain", namespace)
    for spec_role in stored["spec"]["roles"]:
        worker_template = spec_role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        worker_template["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.9"
    await api.replace(DISAGGREGATEDSETS, stored)

    async def first_to_go() -> str | None:
        live = {key_of(p) for p in await leaders(api, namespace, decode)}
        gone = {key_of(sick), key_of(healthy)} - live
        return gone.pop() if len(gone) == 1 else ("both" if gone else None)

    gone_first = await eventually(first_to_go, within=120, interval=0.1, what="a group drained")
    assert gone_first == key_of(sick)
    await settled(api, namespace, "drain", {"prefill": 2, "decode": 2}, within=240)
    assert not {x for x in await set_lwss(api, namespace, "drain") if first in x}
