"""The pod cache's transform keeps every field the controllers read, and the
readers give the same answers on a trimmed pod as on the whole one."""

from __future__ import annotations

import copy

import orjson

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, condition_of
from leaderworkerset.caches import (
    pod_fields_read,
    statefulset_fields_read,
)
from leaderworkerset.controllers.group_metrics import loss_cause
from leaderworkerset.group import gates, readiness, tpu
from leaderworkerset.group.state import (
    group_ready,
    group_state,
    groups_of,
    leader_node,
    ready_pods,
    restarts,
)


def whole_pod() -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "lws-0",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {c.LABEL_SET_NAME: "lws", c.LABEL_WORKER_INDEX: "0"},
            "annotations": {c.ANNOTATION_SIZE: "4"},
            "ownerReferences": [{"kind": "StatefulSet", "name": "lws", "uid": "s1"}],
            "managedFields": [{"manager": "kubelet"}],
        },
        "spec": {
            "nodeName": "node-1",
            "schedulingGates": [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}],
            "readinessGates": [{"conditionType": c.CONDITION_GROUP_READY}],
            "containers": [
                {
                    "name": "main",
                    "image": "pause",
                    "env": [{"name": "X", "value": "1"}],
                    "volumeMounts": [{"name": "token", "mountPath": "/var/run"}],
                    "resources": {"limits": {c.TPU_RESOURCE_NAME: "4"}},
                }
            ],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "volumes": [{"name": "token", "projected": {}}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "status": {
            "phase": "Running",
            "podIP": "10.0.0.1",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": c.CONDITION_GROUP_READY, "status": "False"},
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "restartCount": 2,
                    "ready": True,
                    "image": "pause",
                    "state": {"running": {}},
                }
            ],
            "initContainerStatuses": [{"name": "init", "restartCount": 0, "ready": True}],
        },
    }


def test_keeps_metadata_and_what_is_read() -> None:
    pod = pod_fields_read(whole_pod())
    expected_meta = whole_pod()["metadata"]
    del expected_meta["managedFields"]
    assert pod["metadata"] == expected_meta
    assert set(pod["spec"]) == {
        "nodeName",
        "schedulingGates",
        "readinessGates",
        "containers",
        "initContainers",
    }
    assert pod["spec"]["containers"] == [
        {"name": "main", "resources": {"limits": {c.TPU_RESOURCE_NAME: "4"}}}
    ]
    assert set(pod["status"]) == {
        "phase",
        "conditions",
        "containerStatuses",
        "initContainerStatuses",
    }
    assert pod["status"]["containerStatuses"] == [
        {"name": "main", "restartCount": 2, "ready": True}
    ]


def test_readers_agree_on_the_trimmed_pod() -> None:
    whole = whole_pod()
    trimmed = pod_fields_read(copy.deepcopy(whole))
    for reader in (
        readiness.pod_running_and_ready,
        readiness.pod_terminating,
        readiness.pod_finished,
        readiness.container_restarted,
        gates.scheduling_gate_index,
        gates.is_scheduling_gated,
        gates.has_group_ready_gate,
        gates.group_ready_condition,
        tpu.pod_requests_tpus,
    ):
        assert reader(trimmed) == reader(whole), reader.__name__
    assert tpu.pod_requests_tpus(trimmed)


def test_a_pod_without_spec_or_status_is_left_alone() -> None:
    pod: JSON = {"metadata": {"name": "p", "namespace": "ns"}}
    assert pod_fields_read(pod) == {"metadata": {"name": "p", "namespace": "ns"}}


def test_drops_what_no_controller_reads_of_metadata_and_conditions() -> None:
    whole = whole_pod()
    meta = whole["metadata"]
    meta["generateName"] = "lws-"
    meta["labels"].update({"controller-revision-hash": "lws-abc", "app": "x"})
    meta["annotations"].update({"note": "y", c.ANNOTATION_POD_GROUP_NAME: "pg"})
    meta["ownerReferences"][0].update(
        {"apiVersion": "apps/v1", "controller": True, "blockOwnerDeletion": True}
    )
    whole["status"]["conditions"] = [
        {
            "type": kind,
            "status": "True",
            "reason": "R",
            "message": "m",
            "lastProbeTime": None,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready", "DisruptionTarget")
    ]
    pod = pod_fields_read(whole)
    meta = pod["metadata"]
    assert "generateName" not in meta
    assert meta["labels"] == {c.LABEL_SET_NAME: "lws", c.LABEL_WORKER_INDEX: "0"}
    assert meta["annotations"] == {c.ANNOTATION_SIZE: "4", c.ANNOTATION_POD_GROUP_NAME: "pg"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "lws",
            "uid": "s1",
            "controller": True,
        }
    ]
    assert pod["status"]["conditions"] == [
        {"type": "ContainersReady", "status": "True", "reason": "R"},
        {
            "type": "Ready",
            "status": "True",
            "reason": "R",
            "lastTransitionTime": "2026-01-01T00:00:00Z",  # when a group became Ready
        },
        {"type": "DisruptionTarget", "status": "True", "reason": "R"},
    ]
    assert pod["spec"]["initContainers"] == [{"name": "init"}]


def test_condition_readers_agree_on_the_trimmed_pod() -> None:
    whole = whole_pod()
    whole["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
    )
    trimmed = pod_fields_read(copy.deepcopy(whole))
    for kind in ("Ready", "ContainersReady", c.CONDITION_GROUP_READY, "DisruptionTarget"):
        assert condition_of(trimmed, kind) == condition_of(whole, kind), kind
        assert readiness.pod_condition_true(trimmed, kind) == readiness.pod_condition_true(
            whole, kind
        )
    assert loss_cause(trimmed) == loss_cause(whole)


def test_group_state_reads_the_same_groups_from_trimmed_objects() -> None:
    leader = whole_pod()
    leader["metadata"]["labels"][c.LABEL_GROUP_INDEX] = "0"
    leader["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "r1"
    worker = copy.deepcopy(leader)
    worker["metadata"].update(name="lws-0-1", uid="u2")
    worker["metadata"]["labels"][c.LABEL_WORKER_INDEX] = "1"
    sts = _statefulset("Pod")
    sts["metadata"]["ownerReferences"][0]["uid"] = "u1"
    sts["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH] = "r1"
    whole = groups_of([leader, worker], [sts])
    trimmed = groups_of(
        [pod_fields_read(copy.deepcopy(p)) for p in (leader, worker)],
        [statefulset_fields_read(copy.deepcopy(sts))],
    )
    assert len(trimmed) == len(whole) == 1
    for reader in (
        lambda g: g.index,
        lambda g: g.revision,
        lambda g: g.size,
        lambda g: g.worker_statefulset is not None,
        group_ready,
        lambda g: group_state(g, "r1"),
        lambda g: group_state(g, "r2"),
        ready_pods,
        restarts,
        leader_node,
        lambda g: (g.leader or {}).get("metadata", {}).get("name"),
    ):
        assert reader(trimmed[0]) == reader(whole[0])


def test_repeated_strings_are_shared_between_pods() -> None:
    def decoded() -> JSON:
        # Fresh strings for every value, as the watch stream's JSON decoder makes them.
        return pod_fields_read(orjson.loads(orjson.dumps(whole_pod())))

    a, b = decoded(), decoded()
    assert a["metadata"]["labels"][c.LABEL_SET_NAME] is b["metadata"]["labels"][c.LABEL_SET_NAME]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["metadata"]["ownerReferences"][0]["uid"] is b["metadata"]["ownerReferences"][0]["uid"]
    assert a["spec"]["nodeName"] is b["spec"]["nodeName"]
    assert a["status"]["conditions"][0]["status"] is b["status"]["conditions"][0]["status"]


def _statefulset(owner_kind: str) -> JSON:
    return {
        "metadata": {
            "name": "lws-0",
            "namespace": "ns",
            "labels": {c.LABEL_SET_NAME: "lws"},
            "ownerReferences": [
                {"kind": owner_kind, "name": "lws-0", "uid": "p", "controller": True}
            ],
            "managedFields": [{"manager": "x"}],
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {c.LABEL_SET_NAME: "lws"}},
            "template": {"spec": {"containers": [{"name": "main", "image": "pause"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
            "updateStrategy": {"rollingUpdate": {"partition": 1}},
        },
        "status": {
            "replicas": 3,
            "availableReplicas": 3,
            "currentRevision": "a",
            "updateRevision": "a",
        },
    }


def test_worker_statefulsets_lose_their_templates_and_leader_ones_keep_them() -> None:
    worker = statefulset_fields_read(_statefulset("Pod"))
    assert set(worker["spec"]) == {"replicas", "selector", "updateStrategy"}
    assert "managedFields" not in worker["metadata"]
    assert readiness.statefulset_ready(worker)
    leader = _statefulset(c.KIND)
    expected = copy.deepcopy(leader)
    del expected["metadata"]["managedFields"]
    assert statefulset_fields_read(leader) == expected


async def test_the_revision_cache_leaves_statefulset_revisions_out() -> None:
    """The StatefulSet controller's revisions carry the template's labels (the LWS
    name among them) and its own hash label; the LWS's never have that one."""
    from tests.toolkit.caches import seeded_caches

    def revision(name: str, **labels: str) -> JSON:
        meta = {"name": name, "namespace": "ns", "labels": {c.LABEL_SET_NAME: "lws", **labels}}
        return {"kind": "ControllerRevision", "metadata": meta, "revision": 1}

    ours = revision("lws-1", **{c.LABEL_TEMPLATE_REVISION_HASH: "h"})
    workers = revision("lws-0-abc", **{"controller.kubernetes.io/hash": "abc"})
    async with seeded_caches(ours, workers) as caches:
        assert [r["metadata"]["name"] for r in caches.revisions.list()] == ["lws-1"]
