"""PostTermination group replacement in Hash mode: when a gated leader may schedule.

The pod webhook admits every Hash leader behind the `group-replacement`
scheduling gate. Per LeaderWorkerSet, with T groups tearing down and G gated
leaders, the oldest G - T are released. A group is tearing down while any of
its pods exists but its leader is terminating or gone; counting pods (not the
leader object, which a ReplicaSet deletes in the background seconds before its
workers free their capacity) is what makes a replacement land on the capacity
its predecessor frees instead of preempting other workloads.

Everything is computed from the pod cache on each reconcile, so a restarted
controller neither admits early nor leaves a gate behind.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import labels_of, meta_of
from leaderworkerset.group.caches import LwsCaches
from leaderworkerset.group.readiness import pod_finished, pod_terminating
from leaderworkerset.group.view import view_of
from leaderworkerset.runtime.client import JSON_PATCH, PODS, ApiClient, ApiError
from leaderworkerset.runtime.controller import Predicate, Result

JSON = dict[str, Any]

# While leaders wait, look again now and then even without a pod event.
WAITING_REQUEUE = 2.0


def gate_index(pod: JSON) -> int | None:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    for i, gate in enumerate(gates):
        if gate.get("name") == c.SCHEDULING_GATE_GROUP_REPLACEMENT:
            return i
    return None


def is_leader(pod: JSON) -> bool:
    return labels_of(pod).get(c.LABEL_WORKER_INDEX) == c.LEADER_WORKER_INDEX


def gated_leaders(pods: Iterable[JSON]) -> list[JSON]:
    """Oldest first (creation time, then name), as the seed orders them."""
    # A dying leader waits for nothing; counting it would take a live one's slot.
    waiting = [
        p
        for p in pods
        if is_leader(p)
        and gate_index(p) is not None
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
        key = labels_of(pod).get(c.LABEL_GROUP_KEY)
        if key:
            groups.setdefault(str(key), []).append(pod)
    tearing = set()
    for key, members in groups.items():
        if all(gate_index(p) is not None for p in members):
            continue  # never admitted, so it holds no capacity to wait for
        leaders = [p for p in members if is_leader(p)]
        if not leaders or all(leader_lost(p) for p in leaders):
            tearing.add(key)
    return tearing


def to_admit(pods: list[JSON], immediate: bool = False) -> list[JSON]:
    """The gated leaders to release now."""
    waiting = gated_leaders(pods)
    if immediate:
        return waiting
    return waiting[: max(0, len(waiting) - len(tearing_down_groups(pods)))]


def ungate_patch(pod: JSON, index: int) -> list[JSON]:
    """Remove exactly our gate; the test fails the patch if the list moved meanwhile."""
    path = f"/spec/schedulingGates/{index}"
    return [
        {"op": "test", "path": f"{path}/name", "value": c.SCHEDULING_GATE_GROUP_REPLACEMENT},
        {"op": "remove", "path": path},
    ]


def replacement_events() -> Predicate:
    """Pod events that can change T or G: creations, deletions, a leader starting to
    terminate or finishing, a gate removed."""

    def changed(old: JSON, new: JSON) -> bool:
        return bool(
            pod_terminating(old) != pod_terminating(new)
            or pod_finished(old) != pod_finished(new)
            or gate_index(old) != gate_index(new)
        )

    return Predicate(update=changed)


@dataclass
class ReplacementReconciler:
    client: ApiClient
    caches: LwsCaches

    async def __call__(self, key: str) -> Result | None:
        lws = self.caches.leaderworkersets.get_by_key(key)
        if lws is None:
            return None
        view = view_of(lws)
        if not view.hash_mode:
            return None
        pods = LwsCaches.of_lws(self.caches.pods, view.namespace, view.name)
        spec = lws.get("spec") or {}
        # A policy switched to Immediate releases whoever still waits.
        immediate = spec.get("groupReplacementPolicy") == c.GROUP_REPLACEMENT_IMMEDIATE
        admitted = to_admit(pods, immediate)
        released = [await self._ungate(pod) for pod in admitted]
        if len(gated_leaders(pods)) > len(admitted) or not all(released):
            return Result(requeue_after=WAITING_REQUEUE)
        return None

    async def _ungate(self, pod: JSON) -> bool:
        """Whether the gate is off (removed now, or already gone with its pod)."""
        index = gate_index(pod)
        if index is None:
            return True
        meta = meta_of(pod)
        try:
            await self.client.patch(
                PODS,
                str(meta["name"]),
                ungate_patch(pod, index),
                namespace=str(meta["namespace"]),
                content_type=JSON_PATCH,
            )
        except ApiError as exc:
            if exc.not_found:
                return True
            # The gates changed under us: look again soon, whatever events come.
            if exc.status in (409, 422):
                return False
            raise
        return True
