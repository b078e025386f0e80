"""What a scale benchmark creates: one LeaderWorkerSet of `replicas` groups of `size`,
or, for the floor, the StatefulSets such a LeaderWorkerSet ends up with (a leader
StatefulSet of `replicas` pods and one worker StatefulSet of `size - 1` per group,
with the same pod template and a headless Service), created directly.

With gang scheduling the LeaderWorkerSet carries `spec.scheduling: {}`, and the gang
floor is what Kubernetes needs for the same gangs with no LWS controller: a Workload,
one PodGroup per group (a gang of `size`), then one StatefulSet of `size` pods per group
whose template names the group's PodGroup. A StatefulSet's pods share one template, so
one leader StatefulSet for every group (the plain floor's shape) could name one PodGroup
only: the gang floor has 1,000 StatefulSets for 1,000 groups where the plain floor has
1,001, and the same pods.
"""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c

NAME = "bench"
NAMESPACE = "default"
# On every pod of every configuration: the driver watches pods by this label.
POD_LABEL = "scale-bench"
SET_LABEL = "scale-bench/set"
# On the gang floor's pods: a group's StatefulSet holds its leader (ordinal 0) too.
GANG_LABEL = "scale-bench/gang"
SCHEDULING_API = "scheduling.k8s.io/v1beta1"
GANG_TEMPLATE = "group"


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


def leaderworkerset(
    replicas: int, size: int, identity: str, *, scheduling: bool = False
) -> dict[str, Any]:
    """The LeaderWorkerSet of every configuration of ours; `scheduling` asks for a gang
    of the whole group per group (`spec.scheduling: {}`, minCount = size)."""
    lws: dict[str, Any] = {
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
    if scheduling:
        lws["spec"]["scheduling"] = {}
    return lws


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


def gang_workload(size: int) -> dict[str, Any]:
    """The gang floor's Workload: one template, a gang of the whole group."""
    return {
        "apiVersion": SCHEDULING_API,
        "kind": "Workload",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "podGroupTemplates": [
                {"name": GANG_TEMPLATE, "schedulingPolicy": {"gang": {"minCount": size}}}
            ]
        },
    }


def gang_pod_group(group: int, size: int) -> dict[str, Any]:
    return {
        "apiVersion": SCHEDULING_API,
        "kind": "PodGroup",
        "metadata": {"name": f"{NAME}-{group}", "namespace": NAMESPACE},
        "spec": {
            "workloadRef": {"workloadName": NAME, "templateName": GANG_TEMPLATE},
            "schedulingPolicy": {"gang": {"minCount": size}},
        },
    }


def gang_statefulset(group: int, size: int) -> dict[str, Any]:
    """Group `group` as one StatefulSet of `size` pods (the leader is ordinal 0), every
    pod naming the group's PodGroup."""
    sts = statefulset(f"{NAME}-{group}", size)
    template = sts["spec"]["template"]
    template["metadata"]["labels"][GANG_LABEL] = "1"
    template["spec"]["schedulingGroup"] = {"podGroupName": f"{NAME}-{group}"}
    return sts


def gang_floor(replicas: int, size: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the PodGroups, the StatefulSets) of the gang floor, in group order; the
    PodGroups are created first, so that no pod waits for its group."""
    groups = range(replicas)
    return [gang_pod_group(i, size) for i in groups], [gang_statefulset(i, size) for i in groups]
