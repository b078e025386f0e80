"""The order in which a ReplicaSet picks the pods to delete when it is scaled down,
applied to the leaders of a Hash-mode LeaderWorkerSet (each leader takes its group
with it).

The ReplicaSet controller (Kubernetes 1.37) sorts its active pods and deletes from
the front; a pod goes before another at the first of these rules that tells them
apart:

1. not yet on a node, before one on a node;
2. phase Pending, then Unknown, then Running;
3. not Ready before Ready;
4. lower `controller.kubernetes.io/pod-deletion-cost` first (PodDeletionCost, on by
   default);
5. more active pods of the Deployment's ReplicaSets on its node first;
6. both Ready: Ready for a shorter time first;
7. more restarts of its most-restarted container first, then of its most-restarted
   sidecar;
8. created more recently first.

Rules 6 and 8 compare times on a log2 scale of their distance from now (always on
since LogarithmicScaleDown went GA), so times of similar age tie and the tie goes to
the lower UID, a pseudo-random choice. What is left tied after rule 8 the ReplicaSet
leaves to its sort; here it goes to the lower UID as well.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from leaderworkerset.api.objects import JSON, annotations_of, meta_of, uid_of
from leaderworkerset.group.readiness import pod_condition_true, pod_finished, pod_terminating
from leaderworkerset.kubectl.ages import parse_time

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}
_INT32 = (-(2**31), 2**31 - 1)


def active(pod: JSON) -> bool:
    """What a ReplicaSet counts as its own: not finished and not being deleted."""
    return not pod_finished(pod) and not pod_terminating(pod)


def deletion_cost(pod: JSON) -> int:
    """The annotation as the API server reads it: a plain int32, else 0."""
    value = annotations_of(pod).get(DELETION_COST_ANNOTATION)
    if not isinstance(value, str) or not value:
        return 0
    if not (value[0] == "-" or value == "0" or "1" <= value[0] <= "9"):
        return 0
    try:
        cost = int(value, 10)
    except ValueError:
        return 0
    return cost if _INT32[0] <= cost <= _INT32[1] else 0


def _node(pod: JSON) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _phase(pod: JSON) -> int:
    # Any other phase reads as 0, as a missing key of the upstream map does.
    return _PHASE_ORDER.get(str((pod.get("status") or {}).get("phase") or ""), 0)


def _ready(pod: JSON) -> bool:
    return pod_condition_true(pod, "Ready")


def _ready_since(pod: JSON) -> datetime | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready" and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def _max_restarts(pod: JSON) -> tuple[int, int]:
    """(most restarts of a regular container, most restarts of a sidecar)."""
    status = pod.get("status") or {}
    regular = max(
        (int(s.get("restartCount") or 0) for s in status.get("containerStatuses") or []),
        default=0,
    )
    sidecars = {
        str(c.get("name"))
        for c in (pod.get("spec") or {}).get("initContainers") or []
        if c.get("restartPolicy") == "Always"
    }
    sidecar = max(
        (
            int(s.get("restartCount") or 0)
            for s in status.get("initContainerStatuses") or []
            if s.get("name") in sidecars
        ),
        default=0,
    )
    return regular, sidecar


def _log_rank(then: datetime, now: datetime) -> int:
    nanoseconds = (now - then).total_seconds() * 1e9
    return int(math.log2(nanoseconds)) if nanoseconds > 0 else -1


def _newer_first(a: datetime | None, b: datetime | None, now: datetime | None) -> int:
    """-1 when `a` goes first: a missing time first, else the more recent one; on the
    log scale when `now` is known, with 0 for a tie left to the UIDs."""
    if a is None or b is None:
        return -1 if a is None else 1
    if now is None:
        return -1 if a > b else 1
    diff = _log_rank(a, now) - _log_rank(b, now)
    return 0 if diff == 0 else (-1 if diff < 0 else 1)


def _sign(flag: bool) -> int:
    return -1 if flag else 1


def victim_order(pods: Iterable[JSON], related: Iterable[JSON], now: datetime | None) -> list[JSON]:
    """The active ones of `pods` in the order a scale-down deletes them. `related`
    are all pods of the Deployment's ReplicaSets (a superset of `pods`), counted per
    node for rule 5; `now` None compares times without the log scale."""
    per_node = Counter(_node(p) for p in related if active(p))
    candidates = [p for p in pods if active(p)]

    def compare(a: JSON, b: JSON) -> int:
        node_a, node_b = _node(a), _node(b)
        if node_a != node_b and (not node_a or not node_b):
            return _sign(not node_a)
        if _phase(a) != _phase(b):
            return _sign(_phase(a) < _phase(b))
        if _ready(a) != _ready(b):
            return _sign(not _ready(a))
        if deletion_cost(a) != deletion_cost(b):
            return _sign(deletion_cost(a) < deletion_cost(b))
        if per_node[node_a] != per_node[node_b]:
            return _sign(per_node[node_a] > per_node[node_b])
        if _ready(a) and _ready(b):
            since_a, since_b = _ready_since(a), _ready_since(b)
            if since_a != since_b:
                order = _newer_first(since_a, since_b, now)
                return order if order else _by_uid(a, b)
        if _max_restarts(a) != _max_restarts(b):
            (regular_a, sidecar_a), (regular_b, sidecar_b) = _max_restarts(a), _max_restarts(b)
            if regular_a != regular_b:
                return _sign(regular_a > regular_b)
            return _sign(sidecar_a > sidecar_b)
        created_a = parse_time(meta_of(a).get("creationTimestamp"))
        created_b = parse_time(meta_of(b).get("creationTimestamp"))
        if created_a != created_b:
            order = _newer_first(created_a, created_b, now)
            if order:
                return order
        return _by_uid(a, b)

    return sorted(candidates, key=functools.cmp_to_key(compare))


def _by_uid(a: JSON, b: JSON) -> int:
    ua, ub = uid_of(a), uid_of(b)
    return 0 if ua == ub else _sign(ua < ub)
