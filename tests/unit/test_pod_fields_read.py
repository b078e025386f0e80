"""The pod cache's transform keeps every field the controllers read, and the
readers give the same answers on a trimmed pod as on the whole one."""

from __future__ import annotations

import copy

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.group import gates, readiness, tpu
from leaderworkerset.group.caches import pod_fields_read


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
