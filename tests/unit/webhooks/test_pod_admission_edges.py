"""The pod webhook's mutation at the edges no other test reaches: the group-ready gate
only for groups of more than one pod, the gates it adds to a pod's own lists in the
patch, a worker's hostname only in Hash mode, a leader's subgroup kept when it came
with one; and the cache indexes that file a pod or StatefulSet under its group or
LeaderWorkerSet ignore an empty name label."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.runtime.webhook import json_patch
from leaderworkerset.webhooks.pods import (
    PodAdmissionContext,
    mutate_pod,
    mutate_pod_in_place,
    snapshot_for_patch,
)
from tests.toolkit.caches import seeded_caches
from tests.toolkit.pods import container, pod

JSON = dict[str, Any]
KEY = "0123456789abcdef0123456789abcdef01234567"
HASH = PodAdmissionContext(group_identity=c.GROUP_IDENTITY_HASH, new_group_key=lambda ns: KEY)


def a_pod(name: str, size: int, labels: dict[str, str], **annotations: str) -> JSON:
    return pod(
        name,
        "default",
        labels={c.LABEL_SET_NAME: "lws", **labels},
        annotations={c.ANNOTATION_SIZE: str(size), **annotations},
        containers=[container("c", "img")],
    )


def leader(size: int, **labels: str) -> JSON:
    return a_pod("lws-5d8f9c7b4-x7k2p", size, {c.LABEL_WORKER_INDEX: "0", **labels})


def worker(**labels: str) -> JSON:
    labels = {c.LABEL_GROUP_INDEX: "0", **labels}
    return a_pod("lws-5d8f9c7b4-x7k2p-2", 3, labels, **{c.ANNOTATION_LEADER_NAME: "lws-0"})


def gates(pod: JSON) -> list[str]:
    return [g["conditionType"] for g in pod["spec"].get("readinessGates", [])]


def test_only_a_group_of_more_than_one_pod_waits_for_its_workers() -> None:
    assert gates(mutate_pod(leader(2), HASH)) == [c.CONDITION_GROUP_READY]
    assert gates(mutate_pod(leader(1), HASH)) == []


def test_a_gate_added_to_the_pods_own_gates_is_in_the_patch() -> None:
    """The mutation appends to the pod's own gate lists: the snapshot the patch is
    computed against must not share them."""
    pod = leader(2)
    pod["spec"]["readinessGates"] = [{"conditionType": "example.com/mine"}]
    pod["spec"]["schedulingGates"] = [{"name": "example.com/mine"}]
    snapshot = snapshot_for_patch(pod)
    mutate_pod_in_place(pod, HASH)
    patch = json_patch(snapshot, pod)
    assert snapshot["spec"]["readinessGates"] == [{"conditionType": "example.com/mine"}]
    assert snapshot["spec"]["schedulingGates"] == [{"name": "example.com/mine"}]
    written = {op["path"]: op["value"] for op in patch if op["op"] in ("add", "replace")}
    assert written["/spec/readinessGates"] == [
        {"conditionType": "example.com/mine"},
        {"conditionType": c.CONDITION_GROUP_READY},
    ]
    assert written["/spec/schedulingGates"] == [
        {"name": "example.com/mine"},
        {"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT},
    ]


def test_a_worker_gets_a_group_hostname_only_in_hash_mode() -> None:
    hashed = mutate_pod(worker(**{c.LABEL_GROUP_KEY: KEY}), HASH)
    assert hashed["spec"]["hostname"] == f"{KEY[:8]}-2"
    ordinal = mutate_pod(worker(**{c.LABEL_GROUP_KEY: KEY}), PodAdmissionContext())
    assert "hostname" not in ordinal["spec"]


def test_a_leader_that_comes_with_a_subgroup_keeps_it() -> None:
    subgroups = {c.ANNOTATION_SUBGROUP_SIZE: "2"}
    fresh = mutate_pod(a_pod("lws-0", 4, {c.LABEL_WORKER_INDEX: "0"}, **subgroups))
    assert fresh["metadata"]["labels"][c.LABEL_SUBGROUP_INDEX] == "0"
    given = a_pod("lws-0", 4, {c.LABEL_WORKER_INDEX: "0", c.LABEL_SUBGROUP_INDEX: "1"})
    given["metadata"]["annotations"].update(subgroups)
    kept = mutate_pod(given)["metadata"]["labels"]
    assert kept[c.LABEL_SUBGROUP_INDEX] == "1" and c.LABEL_SUBGROUP_KEY not in kept


# --- the cache indexes -----------------------------------------------------------------------
def labelled(kind: str, name: str, lws: str, **labels: str) -> JSON:
    api = "v1" if kind == "Pod" else "apps/v1"
    meta = {"name": name, "namespace": "ns", "labels": {c.LABEL_SET_NAME: lws, **labels}}
    return {"apiVersion": api, "kind": kind, "metadata": meta}


async def test_an_empty_name_label_files_nothing_under_a_group_or_lws() -> None:
    group = {c.LABEL_GROUP_INDEX: "0", c.LABEL_WORKER_INDEX: "0"}
    async with seeded_caches(
        labelled("Pod", "nameless-0", "", **group),
        labelled("StatefulSet", "nameless-0", "", **group),
        labelled("Pod", "lws-0", "lws", **group),
    ) as caches:
        assert caches.group_pods("ns", "", "0") == []
        assert caches.leaders_of("ns", "") == []
        assert [p["metadata"]["name"] for p in caches.group_pods("ns", "lws", "0")] == ["lws-0"]
        assert [p["metadata"]["name"] for p in caches.leaders_of("ns", "lws")] == ["lws-0"]


async def test_a_worker_is_not_a_leader_of_its_lws() -> None:
    worker_labels = {c.LABEL_GROUP_INDEX: "0", c.LABEL_WORKER_INDEX: "1"}
    async with seeded_caches(labelled("Pod", "lws-0-1", "lws", **worker_labels)) as caches:
        assert caches.leaders_of("ns", "lws") == []
        assert len(caches.group_pods("ns", "lws", "0")) == 1
