"""What a scale benchmark creates: one LeaderWorkerSet of `replicas` groups of `size`,
or, for the floor, the StatefulSets such a LeaderWorkerSet ends up with (a leader
StatefulSet of `replicas` pods and one worker StatefulSet of `size - 1` per group,
with the same pod template and a headless Service), created directly.
"""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c

NAME = "bench"
NAMESPACE = "default"
# On every pod of every configuration: the driver watches pods by this label.
POD_LABEL = "scale-bench"
SET_LABEL = "scale-bench/set"


def pod_spec() -> dict[str, Any]:
    return {
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m"}},
            }
        ]
    }


def leaderworkerset(replicas: int, size: int, identity: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "groupIdentity": identity,
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {
                    "metadata": {"labels": {POD_LABEL: "1"}},
                    "spec": pod_spec(),
                },
            },
        },
    }


def headless_service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "clusterIP": "None",
            "selector": {POD_LABEL: "1"},
            "publishNotReadyAddresses": True,
        },
    }


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    labels = {POD_LABEL: "1", SET_LABEL: name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "serviceName": NAME,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {SET_LABEL: name}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec()},
        },
    }


def floor_statefulsets(replicas: int, size: int) -> list[dict[str, Any]]:
    """The leader StatefulSet first, then one worker StatefulSet per group."""
    sets = [statefulset(NAME, replicas)]
    if size > 1:
        sets += [statefulset(f"{NAME}-{i}", size - 1) for i in range(replicas)]
    return sets
