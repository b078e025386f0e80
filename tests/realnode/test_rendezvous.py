"""Groups that work as distributed programs on the real node: each worker finds its
leader through cluster DNS and connects, and only then do the readiness probes pass.
A lost worker restarts its group and the group meets again; a rolling update replaces
every group, and each new group meets again."""

from __future__ import annotations

import time

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.realnode import RealCluster
from tests.toolkit.cluster import key_of, leaders, lws_pods, wait_ready, workers_of
from tests.toolkit.rendezvous import groups_met, kill_container, rendezvous_lws
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.cluster

SIZE = 3
REPLICAS = 2


async def _meet(api: ApiClient, name: str) -> dict[str, object]:
    """Every group Ready and met; prints how long that took (shown with -s)."""
    started = time.monotonic()
    await wait_ready(api, "default", name, REPLICAS, within=180)
    met = await eventually(
        lambda: groups_met(api, "default", name, SIZE),
        f"every group of {name} met",
        within=60,
        ignoring=(AssertionError, OSError),
    )
    print(f"\n[time] {name}: {REPLICAS} groups of {SIZE} met in {time.monotonic() - started:.1f}s")
    return met


@pytest.mark.parametrize("identity", ["Ordinal", "Hash"])
async def test_groups_meet_through_cluster_dns(
    identity: str, helm_installed: float, real_cluster: RealCluster, real_api: ApiClient
) -> None:
    name = f"meet-{identity.lower()}"
    lws = rendezvous_lws(name, real_cluster.images["rendezvous"], groupIdentity=identity)
    await real_api.create(LEADERWORKERSETS, lws, namespace="default")
    met = await _meet(real_api, name)
    assert len(met) == REPLICAS
    for leader in await leaders(real_api, "default", name):
        address = next(
            e["value"]
            for e in leader["spec"]["containers"][0]["env"]
            if e["name"] == c.ENV_LEADER_ADDRESS
        )
        # Ordinal: <lws>-<group>.<lws>.<ns>; Hash: the 8-character hostname.
        assert address.startswith(leader["spec"]["hostname"] + "."), address
    await real_api.delete(LEADERWORKERSETS, name, namespace="default")


async def test_a_killed_worker_restarts_its_group_which_meets_again(
    helm_installed: float, real_cluster: RealCluster, real_api: ApiClient
) -> None:
    name = "meet-after-restart"
    lws = rendezvous_lws(name, real_cluster.images["rendezvous"])
    await real_api.create(LEADERWORKERSETS, lws, namespace="default")
    await _meet(real_api, name)
    victim_leader = (await leaders(real_api, "default", name))[0]
    key = key_of(victim_leader)
    worker = next(
        p for p in await workers_of(real_api, "default", name, key) if p is not victim_leader
    )
    before = {p["metadata"]["uid"] for p in await lws_pods(real_api, "default", name)}
    kill_container(worker)

    async def group_replaced() -> bool:
        pods = await lws_pods(real_api, "default", name)
        group = [p for p in pods if key_of(p) == key]
        fresh = [p for p in group if p["metadata"]["uid"] not in before]
        # RecreateGroupOnPodRestart: the whole group, leader included, is new.
        return len(group) == SIZE and len(fresh) == SIZE

    await eventually(group_replaced, "the killed worker's group recreated", within=120)
    met = await _meet(real_api, name)
    assert len(met) == REPLICAS
    others = {
        p["metadata"]["uid"] for p in await lws_pods(real_api, "default", name) if key_of(p) != key
    }
    # The other group was left alone.
    assert others <= before
    await real_api.delete(LEADERWORKERSETS, name, namespace="default")


async def test_a_rolling_update_replaces_every_group_and_each_meets_again(
    helm_installed: float, real_cluster: RealCluster, real_api: ApiClient
) -> None:
    name = "meet-after-update"
    lws = rendezvous_lws(name, real_cluster.images["rendezvous"], groupIdentity="Hash")
    await real_api.create(LEADERWORKERSETS, lws, namespace="default")
    await _meet(real_api, name)
    before = {p["metadata"]["uid"] for p in await lws_pods(real_api, "default", name)}
    patch = {
        "op": "add",
        "path": "/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/env",
        "value": [{"name": "ROLLOUT", "value": "2"}],
    }
    await real_api.patch(
        LEADERWORKERSETS,
        name,
        [patch],
        namespace="default",
        content_type="application/json-patch+json",
    )

    async def all_new() -> bool:
        pods = await lws_pods(real_api, "default", name)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return len(live) == REPLICAS * SIZE and not ({p["metadata"]["uid"] for p in live} & before)

    await eventually(all_new, "every group replaced by the update", within=240)
    met = await _meet(real_api, name)
    assert len(met) == REPLICAS
    for pod in await lws_pods(real_api, "default", name):
        env = pod["spec"]["containers"][0].get("env") or []
        assert {"name": "ROLLOUT", "value": "2"} in env
    await real_api.delete(LEADERWORKERSETS, name, namespace="default")
