"""The PostTermination admission rule of Hash mode, as a pure decision.

Per LeaderWorkerSet, with T groups tearing down and G gated leaders, the oldest
G - T gated leaders are released. A group is tearing down while any of its pods
exists but its leader is terminating, finished or gone; counting pods (not the
leader object, which a ReplicaSet deletes in the background seconds before its
workers free their capacity) is what makes a replacement land on the capacity
its predecessor frees instead of preempting other workloads.
"""

from __future__ import annotations

from collections.abc import Iterable

from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.group.gates import is_scheduling_gated
from leaderworkerset.group.readiness import pod_finished, pod_terminating
from leaderworkerset.group.roles import group_key, is_leader


def gated_leaders(pods: Iterable[JSON]) -> list[JSON]:
    """Oldest first (creation time, then name), as the seed orders them."""
    # A dying leader waits for nothing; counting it would take a live one's slot.
    waiting = [
        p
        for p in pods
        if is_leader(p)
        and is_scheduling_gated(p)
        and not pod_terminating(p)
        and not pod_finished(p)
    ]
    return sorted(
        waiting,
        key=lambda p: (
            str(meta_of(p).get("creationTimestamp", "")),
            str(meta_of(p).get("name", "")),
        ),
    )


def leader_lost(leader: JSON) -> bool:
    """Terminating, or finished: a failed (or evicted) leader is never restarted in
    place, its ReplicaSet has already created another, and the pod controller deletes
    it to take its group down."""
    return pod_terminating(leader) or pod_finished(leader)


def tearing_down_groups(pods: Iterable[JSON]) -> set[str]:
    """Group keys with a pod still present whose leader is terminating, finished or
    gone."""
    groups: dict[str, list[JSON]] = {}
    for pod in pods:
        key = group_key(pod)
        if key:
            groups.setdefault(key, []).append(pod)
    tearing = set()
    for key, members in groups.items():
        if all(is_scheduling_gated(p) for p in members):
            continue  # never admitted, so it holds no capacity to wait for
        leaders = [p for p in members if is_leader(p)]
        if not leaders or all(leader_lost(p) for p in leaders):
            tearing.add(key)
    return tearing


def to_admit(pods: list[JSON], immediate: bool = False) -> list[JSON]:
    """The gated leaders to release now; all of them under `immediate`."""
    waiting = gated_leaders(pods)
    if immediate:
        return waiting
    return waiting[: max(0, len(waiting) - len(tearing_down_groups(pods)))]
