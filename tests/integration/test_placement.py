"""Placement against the real control plane: subgroups and exclusive placement in
both group identities (each test parametrized over Ordinal and Hash, the mode-specific
expectations being what keys a group: the leader's name in Ordinal mode, the random
group key in Hash mode), and volume claim templates (Ordinal only: Hash mode refuses
them).

Placement tests run on nodes of their own (`extra_nodes`, tainted and labelled for
one isolation group) so that the required anti-affinity terms of exclusive pods
neither block nor are blocked by pods of other tests on the shared nodes.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController
from lws_localcluster.nodesim.nodes import ZONE_LABEL

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS, STATEFULSETS, Resource
from leaderworkerset.group.names import ordinal_group_key, subgroup_key
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.nodesim import NodePool, isolated_pod_spec
from tests.fixtures.pods import is_ready
from tests.toolkit.cluster import (
    JSON,
    group_members,
    key_of,
    labels,
    leaders,
    live_pods,
    name_of,
    node_labels_of,
    statefulsets,
    wait_ready,
)
from tests.toolkit.lws import hash_lws, lws_manifest
from tests.toolkit.placement import (
    HOSTNAME,
    annotate,
    exclusive_terms,
    isolated_nodes,
    on_isolated_nodes,
    required_terms,
)
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
MODES = [c.GROUP_IDENTITY_ORDINAL, c.GROUP_IDENTITY_HASH]


def pod_name(lws: str, group: int, worker: int) -> str:
    return f"{lws}-{group}" if worker == 0 else f"{lws}-{group}-{worker}"


async def pods_by_name(api: ApiClient, namespace: str, name: str) -> dict[str, JSON]:
    return {name_of(p): p for p in await live_pods(api, namespace, name)}


def manifest_in(mode: str, name: str, namespace: str, **kwargs: Any) -> JSON:
    hashed = mode == c.GROUP_IDENTITY_HASH
    return (hash_lws if hashed else lws_manifest)(name, namespace, **kwargs)


async def groups_of(
    api: ApiClient, namespace: str, name: str, mode: str, replicas: int, size: int
) -> list[list[JSON]]:
    """Each group's pods, its leader first and then its workers in worker-index order.
    Ordinal groups are looked up by their pod names, in group-index order; Hash groups
    are read from the pods' labels, each group whole (no names to look up)."""
    if mode == c.GROUP_IDENTITY_ORDINAL:
        pods = await pods_by_name(api, namespace, name)
        return [[pods[pod_name(name, i, j)] for j in range(size)] for i in range(replicas)]
    groups = []
    for leader in await leaders(api, namespace, name):
        members = await group_members(api, namespace, name, leader)
        assert [labels(p)[c.LABEL_WORKER_INDEX] for p in members] == [
            str(j) for j in range(size)
        ], [name_of(p) for p in members]
        groups.append(members)
    assert len(groups) == replicas
    return groups


def group_key(mode: str, namespace: str, leader: JSON) -> str:
    """The group key the webhook gives a leader: sha1 of its namespace and name in Ordinal
    mode, the random key it drew in Hash mode."""
    if mode == c.GROUP_IDENTITY_ORDINAL:
        return ordinal_group_key(namespace, name_of(leader))
    return key_of(leader)


def subgroup_base(mode: str, leader: JSON) -> str:
    """What subgroup keys hash, with the subgroup index: the leader's name in Ordinal
    mode, the group key in Hash mode."""
    return name_of(leader) if mode == c.GROUP_IDENTITY_ORDINAL else key_of(leader)


# --- 8. subgroups ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
async def test_subgroups_leader_worker_exclusive(
    lws_controller: RunningController,
    extra_nodes: NodePool,
    nodesim_api: ApiClient,
    namespace: str,
    mode: str,
) -> None:
    """size 4, subGroupSize 2, LeaderWorker: {L,1} = 0, {2,3} = 1, keys hashed from the
    leader name (Ordinal) or the group key (Hash), the same on leader and workers; with
    subgroup-exclusive-topology on hostname every subgroup gets the affinity pair on its
    subgroup-key and so a node of its own."""
    hashed = mode == c.GROUP_IDENTITY_HASH
    api, name, r, size = nodesim_api, "hsg" if hashed else "sg", 2, 4
    group = f"{name}-{secrets.token_hex(3)}"
    await isolated_nodes(extra_nodes, group, [{} for _ in range(r * 2)])
    manifest = manifest_in(mode, name, namespace, replicas=r, size=size)
    manifest["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {
        "subGroupPolicyType": c.SUBGROUP_POLICY_LEADER_WORKER,
        "subGroupSize": 2,
    }
    annotate(
        on_isolated_nodes(manifest, group), **{c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY: HOSTNAME}
    )
    await api.create(LEADERWORKERSETS, manifest)
    await wait_ready(api, namespace, name, r)

    assert len(await live_pods(api, namespace, name)) == r * size
    layout = ["0", "0", "1", "1"]
    nodes_of_subgroup: dict[str, set[str]] = {}
    for members in await groups_of(api, namespace, name, mode, r, size):
        base = subgroup_base(mode, members[0])
        for pod, index in zip(members, layout, strict=True):
            key = subgroup_key(base, index)
            assert labels(pod)[c.LABEL_SUBGROUP_INDEX] == index, name_of(pod)
            assert labels(pod)[c.LABEL_SUBGROUP_KEY] == key, name_of(pod)
            same, others = exclusive_terms(c.LABEL_SUBGROUP_KEY, key, HOSTNAME)
            # Exactly the subgroup pair: no group-level terms without exclusive-topology.
            assert required_terms(pod, "podAffinity") == [same], name_of(pod)
            assert required_terms(pod, "podAntiAffinity") == [others], name_of(pod)
            nodes_of_subgroup.setdefault(key, set()).add(pod["spec"]["nodeName"])
    # Each subgroup on one node, no two subgroups sharing a node.
    assert len(nodes_of_subgroup) == r * 2
    assert all(len(nodes) == 1 for nodes in nodes_of_subgroup.values()), nodes_of_subgroup
    assert len(set().union(*nodes_of_subgroup.values())) == r * 2, nodes_of_subgroup

    if not hashed:  # (a Hash leader comes from a Deployment)
        leader_sts = next(s for s in await statefulsets(api, namespace, name) if name_of(s) == name)
        template_annotations = leader_sts["spec"]["template"]["metadata"]["annotations"]
        assert template_annotations[c.ANNOTATION_SUBGROUP_SIZE] == "2"
        assert template_annotations[c.ANNOTATION_SUBGROUP_POLICY_TYPE] == "LeaderWorker"
        assert template_annotations[c.ANNOTATION_SUBGROUP_EXCLUSIVE_TOPOLOGY] == HOSTNAME


@pytest.mark.parametrize("mode", MODES)
async def test_subgroups_leader_excluded(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str, mode: str
) -> None:
    """size 5, subGroupSize 2, LeaderExcluded: the leader is in no subgroup, workers
    {1,2} = 0 and {3,4} = 1, keyed on the leader name (Ordinal) or the group key (Hash)."""
    hashed = mode == c.GROUP_IDENTITY_HASH
    api, name, size = nodesim_api, "hlx" if hashed else "lx", 5
    manifest = manifest_in(mode, name, namespace, replicas=1, size=size)
    manifest["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {
        "subGroupPolicyType": c.SUBGROUP_POLICY_LEADER_EXCLUDED,
        "subGroupSize": 2,
    }
    await api.create(LEADERWORKERSETS, manifest)
    await wait_ready(api, namespace, name, 1)

    ((leader, *workers),) = await groups_of(api, namespace, name, mode, 1, size)
    assert c.LABEL_SUBGROUP_INDEX not in labels(leader)
    assert c.LABEL_SUBGROUP_KEY not in labels(leader)
    annotations = leader["metadata"]["annotations"]
    assert annotations[c.ANNOTATION_SUBGROUP_POLICY_TYPE] == "LeaderExcluded"
    for worker, index in zip(workers, ["0", "0", "1", "1"], strict=True):
        assert labels(worker)[c.LABEL_SUBGROUP_INDEX] == index, name_of(worker)
        assert labels(worker)[c.LABEL_SUBGROUP_KEY] == subgroup_key(
            subgroup_base(mode, leader), index
        )
        assert not required_terms(worker, "podAffinity")  # no exclusive annotation


# --- 9. exclusive placement ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "size"), [(c.GROUP_IDENTITY_ORDINAL, 2), (c.GROUP_IDENTITY_HASH, 3)], ids=MODES
)
async def test_exclusive_placement_one_group_per_zone(
    lws_controller: RunningController,
    extra_nodes: NodePool,
    nodesim_api: ApiClient,
    namespace: str,
    mode: str,
    size: int,
) -> None:
    """exclusive-topology on the zone label, two zones of two nodes each: a group's pods
    share a zone (workers pinned by nodeSelector to the leader's, with no group terms of
    their own), the groups take one zone each, the leaders' affinity pair is keyed on the
    group key (random in Hash mode), and a third group has no zone left: its leader stays
    unschedulable and no worker StatefulSet is made for it."""
    hashed = mode == c.GROUP_IDENTITY_HASH
    api, name = nodesim_api, "hex" if hashed else "ex"
    group = f"{name}-{secrets.token_hex(3)}"
    zones = [f"{group}-a", f"{group}-b"]
    await isolated_nodes(extra_nodes, group, [{ZONE_LABEL: z} for z in zones for _ in (0, 1)])
    manifest = manifest_in(mode, name, namespace, replicas=2, size=size)
    annotate(on_isolated_nodes(manifest, group), **{c.ANNOTATION_EXCLUSIVE_TOPOLOGY: ZONE_LABEL})
    await api.create(LEADERWORKERSETS, manifest)
    await wait_ready(api, namespace, name, 2)

    zone_of_group: dict[str, str] = {}
    for leader, *workers in await groups_of(api, namespace, name, mode, 2, size):
        zone = (await node_labels_of(api, leader))[ZONE_LABEL]
        for worker in workers:
            assert (await node_labels_of(api, worker))[ZONE_LABEL] == zone, name_of(worker)
            # Workers get no group terms, only the leader's zone as a nodeSelector.
            assert not required_terms(worker, "podAffinity")
            assert not required_terms(worker, "podAntiAffinity")
            assert worker["spec"]["nodeSelector"][ZONE_LABEL] == zone
        key = group_key(mode, namespace, leader)
        zone_of_group[key] = zone
        same, others = exclusive_terms(c.LABEL_GROUP_KEY, key, ZONE_LABEL)
        assert required_terms(leader, "podAffinity") == [same]
        assert required_terms(leader, "podAntiAffinity") == [others]
        worker_sts = await api.get(STATEFULSETS, name_of(leader), namespace)
        selector = worker_sts["spec"]["template"]["spec"]["nodeSelector"]
        assert selector == {**isolated_pod_spec(group)["nodeSelector"], ZONE_LABEL: zone}
    assert sorted(zone_of_group.values()) == zones

    await api.patch(LEADERWORKERSETS, name, {"spec": {"replicas": 3}}, namespace=namespace)

    async def third_leader() -> JSON | None:
        if not hashed:
            return await api.get_or_none(PODS, f"{name}-2", namespace)
        fresh = [p for p in await leaders(api, namespace, name) if key_of(p) not in zone_of_group]
        return fresh[0] if fresh else None

    async def unschedulable() -> JSON | None:
        pod = await third_leader()
        for cond in ((pod or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return pod
        return None

    stuck = await eventually(unschedulable, within=60, what="the third leader unschedulable")
    assert stuck["status"]["phase"] == "Pending" and not stuck["spec"].get("nodeName")
    assert await api.get_or_none(STATEFULSETS, name_of(stuck), namespace) is None
    lws = await api.get(LEADERWORKERSETS, name, namespace)
    assert lws["status"]["readyReplicas"] == 2
    running = [p for p in await live_pods(api, namespace, name) if key_of(p) in zone_of_group]
    assert len(running) == 2 * size and all(is_ready(p) for p in running)
    if not hashed:
        assert {name_of(p) for p in running} == {
            pod_name(name, i, j) for i in range(2) for j in range(size)
        }


# --- 10. volume claim templates --------------------------------------------------------------
@pytest.mark.parametrize("when_deleted", [c.PVC_RETENTION_DELETE, c.PVC_RETENTION_RETAIN])
async def test_volume_claim_templates_and_retention(
    lws_controller: RunningController,
    nodesim_api: ApiClient,
    namespace: str,
    when_deleted: str,
) -> None:
    """Claims per pod from both StatefulSets, bound to pre-made hostPath volumes of a
    class of this test's own (no provisioner runs here), so the pods really run.
    Deleting the LWS deletes the claims with whenDeleted Delete and keeps them with
    Retain."""
    api, name, r, size = nodesim_api, "vol", 2, 2
    token = secrets.token_hex(3)
    storage_class = f"lws-test-{token}"
    volumes = [f"lws-test-{token}-{k}" for k in range(r * size)]
    for volume in volumes:
        await api.create(PVS, persistent_volume(volume, storage_class))
    try:
        await _claims_scenario(api, namespace, name, r, size, storage_class, when_deleted)
    finally:
        for volume in volumes:
            await api.delete(PVS, volume)


def persistent_volume(name: str, storage_class: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "10Mi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": storage_class,
            "hostPath": {"path": f"/tmp/{name}"},
        },
    }


async def _claims_scenario(
    api: ApiClient,
    namespace: str,
    name: str,
    r: int,
    size: int,
    storage_class: str,
    when_deleted: str,
) -> None:
    claim_template = {
        "metadata": {"name": "data", "labels": {"dropped": "yes"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Mi"}},
        },
    }
    retention = {"whenDeleted": when_deleted, "whenScaled": c.PVC_RETENTION_RETAIN}
    manifest = lws_manifest(name, namespace, replicas=r, size=size)
    manifest["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = [claim_template]
    manifest["spec"]["leaderWorkerTemplate"]["persistentVolumeClaimRetentionPolicy"] = retention
    await api.create(LEADERWORKERSETS, manifest)
    await wait_ready(api, namespace, name, r)

    expected_claims = {f"data-{pod_name(name, i, j)}" for i in range(r) for j in range(size)}
    claims = {name_of(p): p for p in (await api.list(PVCS, namespace)).get("items", [])}
    assert set(claims) == expected_claims
    assert all(p["status"]["phase"] == "Bound" for p in claims.values())
    for sts in await statefulsets(api, namespace, name):
        (template,) = sts["spec"]["volumeClaimTemplates"]
        assert template["metadata"]["name"] == "data"
        assert "labels" not in template["metadata"]  # only the listed fields are kept
        assert template["spec"]["accessModes"] == ["ReadWriteOnce"]
        assert template["spec"]["storageClassName"] == storage_class
        assert template["spec"]["resources"] == {"requests": {"storage": "1Mi"}}
        assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == retention

    async def claim_owners() -> dict[str, list[str]] | None:
        """Claim -> the StatefulSets that own it, once every claim made by a set whose
        policy deletes claims has that set as owner (the StatefulSet controller adds it)."""
        items = (await api.list(PVCS, namespace)).get("items", [])
        owners = {
            name_of(p): [
                o["name"]
                for o in p["metadata"].get("ownerReferences") or []
                if o.get("kind") == "StatefulSet"
            ]
            for p in items
        }
        if when_deleted == c.PVC_RETENTION_DELETE and not all(owners.values()):
            return None
        return owners

    owners = await eventually(claim_owners, within=30, what="claim owner references")
    if when_deleted == c.PVC_RETENTION_DELETE:
        # Leader claims belong to the leader set, worker claims to their group's set.
        assert owners == {
            f"data-{pod_name(name, i, j)}": [name if j == 0 else f"{name}-{i}"]
            for i in range(r)
            for j in range(size)
        }
    else:
        assert owners == {claim: [] for claim in expected_claims}

    pods = await pods_by_name(api, namespace, name)
    for pod_key, pod in pods.items():
        claim_volumes = [
            v["persistentVolumeClaim"]["claimName"]
            for v in pod["spec"].get("volumes") or []
            if "persistentVolumeClaim" in v
        ]
        assert claim_volumes == [f"data-{pod_key}"]

    # (The garbage collector starts watching a new CRD's objects only at its next
    # discovery pass, up to 30 s after the CRD was installed: hence the long deadline
    # when this test runs first in a session.)
    await api.delete(LEADERWORKERSETS, name, namespace)

    async def workload_gone() -> bool:
        return not await statefulsets(api, namespace, name) and not await live_pods(
            api, namespace, name
        )

    await eventually(workload_gone, within=120, what=f"{name}'s StatefulSets and pods deleted")

    async def remaining_claims() -> dict[str, Any]:
        items = (await api.list(PVCS, namespace)).get("items", [])
        return {name_of(p): p for p in items}

    if when_deleted == c.PVC_RETENTION_DELETE:

        async def claims_gone() -> bool:
            return not await remaining_claims()

        await eventually(claims_gone, within=120, what="the claims deleted with the LWS")
    else:
        left = await remaining_claims()
        assert set(left) == expected_claims
        assert not any(p["metadata"].get("deletionTimestamp") for p in left.values())
