"""Questions about the health of pods and StatefulSets, one function each.

Shared by the rolling-update arithmetic, the status counters, the restart
policies and the Hash-mode group-ready gate, so that "ready" means the same
thing everywhere. (Whether a pod requests TPUs is `group.tpu.pod_requests_tpus`.)
"""

from __future__ import annotations

from collections.abc import Iterable

from leaderworkerset.api.objects import (
    JSON,
    condition_of,
    marked_for_deletion,
    revision_key_of,
)


def pod_condition_true(pod: JSON, condition_type: str) -> bool:
    condition = condition_of(pod, condition_type)
    return condition is not None and condition.get("status") == "True"


def pod_running_and_ready(pod: JSON) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and pod_condition_true(pod, "Ready")


# A pod terminates from the moment its deletion is asked for.
pod_terminating = marked_for_deletion


def pod_counts_as_ready(pod: JSON) -> bool:
    """Running, Ready and not terminating: a pod that serves and will go on serving.
    What every count of ready pods shown to a user counts (`kubectl lws`, the demo
    tables) and what a Ready group is made of. A terminating pod keeps its Ready
    condition through its grace period, but its group is going or losing it."""
    return pod_running_and_ready(pod) and not pod_terminating(pod)


def pod_finished(pod: JSON) -> bool:
    """Failed or Succeeded: its containers will not run again. A StatefulSet replaces
    such a pod itself; a ReplicaSet only creates another beside it and leaves it."""
    return (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded")


def leader_lost(leader: JSON) -> bool:
    """Terminating, or finished: a failed (or evicted) leader is never restarted in
    place; a ReplicaSet creates another beside it, and the pod controller deletes it
    to take its group down."""
    return pod_terminating(leader) or pod_finished(leader)


def _desired_replicas(sts: JSON) -> object:
    # The API server defaults an absent spec.replicas to 1.
    return (sts.get("spec") or {}).get("replicas", 1)


def statefulset_ready(sts: JSON) -> bool:
    """All replicas available and no StatefulSet rollout pending."""
    status = sts.get("status") or {}
    return bool(
        _desired_replicas(sts) == status.get("availableReplicas", 0)
        and status.get("currentRevision", "") == status.get("updateRevision", "")
    )


def ordinal_group_ready(leader_pod: JSON, worker_sts: JSON | None) -> bool:
    """An Ordinal group as the status counters and the rolling update count it, as
    upstream does: its leader Running and Ready and its worker StatefulSet ready
    (`worker_sts` None: a group of size 1, which has none). Its revision is a separate
    question (`ordinal_group_updated`); the lifecycle state's `group.state.group_ready`,
    the same for both modes, asks for the workers on the leader's revision too."""
    return pod_running_and_ready(leader_pod) and (
        worker_sts is None or statefulset_ready(worker_sts)
    )


def ordinal_group_updated(leader_pod: JSON, worker_sts: JSON | None, key: str) -> bool:
    """An Ordinal group on revision `key`: its leader and (size > 1) its worker
    StatefulSet were built from it."""
    return revision_key_of(leader_pod) == key and (
        worker_sts is None or revision_key_of(worker_sts) == key
    )


def workers_ready_for_leader(leader_pod: JSON, worker_sts: JSON | None) -> bool:
    """Hash-mode group-ready gate: the group's workers are all ready and were built
    from the leader's revision (a stale worker StatefulSet does not count)."""
    if worker_sts is None:
        return False
    return statefulset_ready(worker_sts) and (
        revision_key_of(worker_sts) == revision_key_of(leader_pod)
    )


def worker_pods_ready(
    leader_pod: JSON, worker_sts: JSON | None, worker_pods: Iterable[JSON]
) -> bool:
    """The group-ready gate read from the worker pods themselves (`worker_pods`: those
    the worker StatefulSet controls): every pod it wants is there, Ready and of the
    leader's revision. The StatefulSet's status says the same one sync of its
    controller later, which while a thousand groups come up is seconds after the last
    worker turned Ready."""
    if worker_sts is None:
        return False
    leader_key = revision_key_of(leader_pod)
    if revision_key_of(worker_sts) != leader_key:
        return False
    ready = 0
    for pod in worker_pods:
        if revision_key_of(pod) != leader_key or not pod_counts_as_ready(pod):
            return False
        ready += 1
    return ready == _desired_replicas(worker_sts)


def container_restarted(pod: JSON) -> bool:
    """A live pod (Running or Pending) with any restarted (init) container."""
    status = pod.get("status") or {}
    if status.get("phase") not in ("Running", "Pending"):
        return False
    statuses = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    return any(isinstance(s, dict) and (s.get("restartCount") or 0) > 0 for s in statuses)
