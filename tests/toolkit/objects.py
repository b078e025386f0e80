"""Builders of the cluster objects the controllers observe: leader pods and worker
StatefulSets, as the StatefulSet controller and the pod webhook would leave them."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c

JSON = dict[str, Any]
NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:01:00Z"


def leader_pod(
    lws_name: str,
    index: int | str,
    key: str,
    ready: bool = True,
    name: str | None = None,
    terminating: bool = False,
    phase: str | None = None,
) -> JSON:
    pod_name = name if name is not None else f"{lws_name}-{index}"
    meta: JSON = {
        "name": pod_name,
        "namespace": "default",
        "uid": f"uid-{pod_name}",
        "labels": {
            c.LABEL_SET_NAME: lws_name,
            c.LABEL_WORKER_INDEX: "0",
            c.LABEL_GROUP_INDEX: str(index),
            c.LABEL_GROUP_KEY: f"gk-{pod_name}",
            c.LABEL_TEMPLATE_REVISION_HASH: key,
        },
    }
    if terminating:
        meta["deletionTimestamp"] = NOW
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "pause:1"}]},
        "status": {
            "phase": phase or ("Running" if ready else "Pending"),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def worker_sts(lws_name: str, index: int, key: str, size: int = 2, ready: bool = True) -> JSON:
    name = f"{lws_name}-{index}"
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {
                c.LABEL_SET_NAME: lws_name,
                c.LABEL_GROUP_INDEX: str(index),
                c.LABEL_GROUP_KEY: f"gk-{name}",
                c.LABEL_TEMPLATE_REVISION_HASH: key,
            },
        },
        "spec": {"replicas": size - 1},
        "status": {
            "replicas": size - 1,
            "readyReplicas": size - 1 if ready else 0,
            "availableReplicas": size - 1 if ready else 0,
            "currentRevision": "",
            "updateRevision": "",
        },
    }


def leader_sts(
    lws_name: str, key: str, replicas: int, partition: int = 0, recorded: int | None = None
) -> JSON:
    """The leader StatefulSet as the controller last applied it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": lws_name,
            "namespace": "default",
            "labels": {c.LABEL_SET_NAME: lws_name, c.LABEL_TEMPLATE_REVISION_HASH: key},
            "annotations": {c.ANNOTATION_REPLICAS: str(replicas if recorded is None else recorded)},
        },
        "spec": {
            "replicas": replicas,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}},
        },
        "status": {"replicas": replicas},
    }


def unadmitted_leader() -> JSON:
    """A leader of LeaderWorkerSet "lws" (2 pods a group) as its ReplicaSet makes it,
    before the webhook has admitted it."""
    return {
        "metadata": {
            "generateName": "lws-abc-",
            "labels": {c.LABEL_SET_NAME: "lws", c.LABEL_WORKER_INDEX: "0"},
            "annotations": {c.ANNOTATION_SIZE: "2"},
        },
        "spec": {"containers": [{"name": "c"}]},
    }
