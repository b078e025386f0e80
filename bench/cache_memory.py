"""Memory per cached pod in the controller's caches, and the transforms' CPU per event.

    PYTHONPATH=src:. python -m bench.cache_memory [--groups 1000] [--size 8]
    PYTHONPATH=/other/tree/src:. python -m bench.cache_memory   # the same, for another tree

No cluster: the objects are built in-process, in the shape the node simulator and the
StatefulSet controller give them at the scale benchmark's workload (a pod of a
LeaderWorkerSet group as the API server returns it after the webhook, the scheduler
and the simulated kubelet have written it; a worker StatefulSet; the StatefulSet
controller's ControllerRevision), each serialised to JSON and decoded with orjson as
the watch stream decodes it, so no string is shared that would not be shared in the
controller. They are fed as watch events (an ADDED and the status updates a pod goes
through) into the informers of `build_caches`, and tracemalloc counts what the
caches hold at the end, per pod of the workload. It measures the caches, not the
process: the controller's resident growth per pod is larger (allocator slack, the
queue, the controllers' own state); see `bench.scale` for that.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import time
import tracemalloc
from typing import Any

import orjson

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import build_caches

JSON = dict[str, Any]
NAMESPACE = "default"
LWS = "bench"
LWS_UID = "a688cb7e-c26e-4959-b2a9-e505019850b4"
NODES = 80
STAMP = "2026-12-01T12:43:35Z"


def _uid(*parts: object) -> str:
    h = hashlib.sha1(repr(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _hash(*parts: object, n: int = 10) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:n]


def _managed(manager: str, fields: JSON) -> JSON:
    return {
        "manager": manager,
        "operation": "Update",
        "apiVersion": "v1",
        "time": STAMP,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def _condition(kind: str, status: bool) -> JSON:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": STAMP,
    }


def pod(group: int, worker: int, stage: int, version: int) -> JSON:
    """A pod of group `group` at `stage`: 0 created, 1 scheduled, 2 running, 3 ready."""
    leader = f"{LWS}-{group}"
    name = leader if worker == 0 else f"{leader}-{worker}"
    owner = LWS if worker == 0 else leader
    owner_uid = _uid("sts", owner)
    labels = {
        "apps.kubernetes.io/pod-index": str(group if worker == 0 else worker),
        "controller-revision-hash": f"{owner}-{_hash('rev', owner)}",
        c.LABEL_GROUP_INDEX: str(group),
        c.LABEL_GROUP_KEY: _hash("group", group, n=40),
        c.LABEL_SET_NAME: LWS,
        c.LABEL_TEMPLATE_REVISION_HASH: "6d8497899d",
        c.LABEL_WORKER_INDEX: str(worker),
        "scale-bench": "1",
        "statefulset.kubernetes.io/pod-name": name,
    }
    annotations = {c.ANNOTATION_SIZE: "8"}
    if worker:
        annotations[c.ANNOTATION_LEADER_NAME] = leader
    node = f"sim-node-{(group * 8 + worker) % NODES}"
    if stage >= 1:
        labels["topology.kubernetes.io/region"] = "sim-region"
        labels["topology.kubernetes.io/zone"] = f"zone-{'abc'[group % 3]}"
    spec: JSON = {
        "volumes": [
            {
                "name": f"kube-api-access-{_hash('vol', name, n=5)}",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {
                                            "apiVersion": "v1",
                                            "fieldPath": "metadata.namespace",
                                        },
                                    }
                                ]
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            }
        ],
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "env": [
                    {"name": c.ENV_LEADER_ADDRESS, "value": f"{leader}.{LWS}.{NAMESPACE}"},
                    {"name": c.ENV_GROUP_SIZE, "value": "8"},
                    {"name": c.ENV_WORKER_INDEX, "value": str(worker)},
                ],
                "resources": {"requests": {"cpu": "10m"}},
                "volumeMounts": [
                    {
                        "name": "kube-api-access",
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "hostname": name,
        "subdomain": LWS,
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": f"node.kubernetes.io/{key}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for key in ("not-ready", "unreachable")
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    status: JSON = {"phase": "Pending", "qosClass": "Burstable"}
    if stage >= 1:
        spec["nodeName"] = node
        status["conditions"] = [_condition("PodScheduled", True)]
    if stage >= 2:
        ip = f"10.244.{group % 250}.{worker + 2}"
        status.update(
            phase="Running",
            hostIP="172.20.0.3",
            hostIPs=[{"ip": "172.20.0.3"}],
            podIP=ip,
            podIPs=[{"ip": ip}],
            startTime=STAMP,
        )
        ready = stage >= 3
        status["conditions"] = [
            _condition("PodReadyToStartContainers", True),
            _condition("Initialized", True),
            _condition("ContainersReady", ready),
            _condition("Ready", ready),
            _condition("PodScheduled", True),
        ]
        status["containerStatuses"] = [
            {
                "name": "main",
                "state": {"running": {"startedAt": STAMP}},
                "lastState": {},
                "ready": ready,
                "restartCount": 0,
                "image": "registry.k8s.io/pause:3.10",
                "imageID": "registry.k8s.io/pause@sha256:" + _hash("image", n=64),
                "containerID": "containerd://" + _hash("ctr", name, n=64),
                "started": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{owner}-",
            "namespace": NAMESPACE,
            "uid": _uid("pod", name),
            "resourceVersion": str(version),
            "generation": 1,
            "creationTimestamp": STAMP,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": owner,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                _managed("kube-controller-manager", {"f:metadata": {"f:labels": {".": {}}}}),
                _managed("kube-scheduler", {"f:status": {"f:conditions": {".": {}}}}),
                _managed("lws-nodesim", {"f:status": {"f:phase": {}, "f:podIP": {}}}),
            ],
        },
        "spec": spec,
        "status": status,
    }


def _template_labels(group: int) -> JSON:
    return {
        c.LABEL_GROUP_INDEX: str(group),
        c.LABEL_GROUP_KEY: _hash("group", group, n=40),
        c.LABEL_SET_NAME: LWS,
        c.LABEL_TEMPLATE_REVISION_HASH: "6d8497899d",
    }


def _pod_template(group: int) -> JSON:
    return {
        "metadata": {
            "labels": {**_template_labels(group), "scale-bench": "1"},
            "annotations": {
                c.ANNOTATION_LEADER_NAME: f"{LWS}-{group}",
                c.ANNOTATION_SIZE: "8",
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler",
        },
    }


def worker_statefulset(group: int, size: int, version: int) -> JSON:
    name = f"{LWS}-{group}"
    revision = f"{name}-{_hash('rev', name)}"
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": _uid("sts", name),
            "resourceVersion": str(version),
            "generation": 1,
            "creationTimestamp": STAMP,
            "labels": _template_labels(group),
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": name,
                    "uid": _uid("pod", name),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [_managed("lws", {"f:spec": {"f:replicas": {}}})],
        },
        "spec": {
            "replicas": size - 1,
            "selector": {
                "matchLabels": {
                    k: v
                    for k, v in _template_labels(group).items()
                    if k != c.LABEL_TEMPLATE_REVISION_HASH
                }
            },
            "template": _pod_template(group),
            "serviceName": LWS,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"partition": 0, "maxUnavailable": 1},
            },
            "revisionHistoryLimit": 10,
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain",
                "whenScaled": "Retain",
            },
            "ordinals": {"start": 1},
        },
        "status": {
            "observedGeneration": 1,
            "replicas": size - 1,
            "readyReplicas": size - 1,
            "currentReplicas": size - 1,
            "updatedReplicas": size - 1,
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
            "availableReplicas": size - 1,
        },
    }


def statefulset_revision(group: int, version: int) -> JSON:
    """The ControllerRevision the StatefulSet controller writes for a worker
    StatefulSet: it copies the template's labels, so the LWS-name selector matches it."""
    name = f"{LWS}-{group}"
    template = _pod_template(group)
    template["$patch"] = "replace"
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"{name}-{_hash('rev', name)}",
            "namespace": NAMESPACE,
            "uid": _uid("crev", name),
            "resourceVersion": str(version),
            "creationTimestamp": STAMP,
            "labels": {
                "controller.kubernetes.io/hash": _hash("rev", name),
                **_template_labels(group),
                "scale-bench": "1",
            },
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": name,
                    "uid": _uid("sts", name),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [_managed("kube-controller-manager", {"f:data": {}})],
        },
        "data": {"spec": {"template": template}},
        "revision": 1,
    }


class _NoClient:
    """The informers are fed events directly; nothing may reach a server."""

    async def list(self, *args: Any, **kwargs: Any) -> JSON:
        raise AssertionError("no server")

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no server")


def _events(groups: int, size: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Watch lines: per pod an ADDED and three MODIFIED; per group a StatefulSet and
    its revision."""
    version = 1000
    pods, sets, revisions = [], [], []
    for stage in range(4):
        for g in range(groups):
            for w in range(size):
                version += 1
                kind = "ADDED" if stage == 0 else "MODIFIED"
                event = {"type": kind, "object": pod(g, w, stage, version)}
                pods.append(orjson.dumps(event))
    for g in range(groups):
        version += 1
        event = {"type": "ADDED", "object": worker_statefulset(g, size, version)}
        sets.append(orjson.dumps(event))
        event = {"type": "ADDED", "object": statefulset_revision(g, version)}
        revisions.append(orjson.dumps(event))
    return pods, sets, revisions


def _selected(selector: str | None, labels: dict[str, str]) -> bool:
    """The existence requirements the caches' selectors use: `key`, `!key`."""
    for requirement in filter(None, (selector or "").split(",")):
        present = requirement.lstrip("!") in labels
        if present == requirement.startswith("!"):
            return False
    return True


def _held(feed: Any) -> int:
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    keep = feed()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    del keep
    return after - before


def measure(groups: int, size: int) -> dict[str, float]:
    pod_lines, sts_lines, rev_lines = _events(groups, size)
    pods = groups * size
    out: dict[str, float] = {}

    def feed(attr: str, lines: list[bytes]) -> Any:
        def run() -> Any:
            caches = build_caches(_NoClient())
            informer = getattr(caches, attr)
            for line in lines:
                event = orjson.loads(line)
                # What the API server would not send under the informer's selector.
                if _selected(informer.label_selector, event["object"]["metadata"]["labels"]):
                    informer._handle_event(event)
            return caches

        return run

    tracemalloc.start()
    out["pod cache, bytes per pod"] = _held(feed("pods", pod_lines)) / pods
    out["worker StatefulSets, bytes per pod"] = _held(feed("statefulsets", sts_lines)) / pods
    out["ControllerRevisions, bytes per pod"] = _held(feed("revisions", rev_lines)) / pods
    tracemalloc.stop()
    out["total, bytes per pod"] = sum(out.values())

    # The best of five passes over freshly decoded events: the machine is shared.
    transform = build_caches(_NoClient()).pods._transform
    assert transform is not None
    best = float("inf")
    for _ in range(5):
        objects = [orjson.loads(line)["object"] for line in pod_lines]
        started = time.perf_counter()
        for obj in objects:
            transform(obj)
        best = min(best, time.perf_counter() - started)
    out["pod transform, us per event"] = best / len(pod_lines) * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--size", type=int, default=8)
    args = parser.parse_args()
    for name, value in measure(args.groups, args.size).items():
        print(f"{name:40s} {value:10.1f}")


if __name__ == "__main__":
    main()
