"""PostTermination group replacement in Hash mode: releasing gated leaders.

The pod webhook admits every Hash leader behind the `group-replacement`
scheduling gate; `post_termination.to_admit` decides which ones may schedule
now and this reconciler removes their gates.

Everything is computed from the pod cache on each reconcile, so a restarted
controller neither admits early nor leaves a gate behind.
"""

from __future__ import annotations

from dataclasses import dataclass

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.controllers.group_metrics import GROUP_METRICS
from leaderworkerset.controllers.replacement.post_termination import gated_leaders, to_admit
from leaderworkerset.group.caches import LwsCaches
from leaderworkerset.group.gates import remove_scheduling_gate_patch, scheduling_gate_index
from leaderworkerset.group.readiness import pod_finished, pod_terminating
from leaderworkerset.group.view import view_of
from leaderworkerset.runtime.client import JSON_PATCH, PODS, ApiClient, ApiError
from leaderworkerset.runtime.controller import Predicate, Result

# While leaders wait, look again now and then even without a pod event.
WAITING_REQUEUE = 2.0


def replacement_events() -> Predicate:
    """Pod events that can change T or G: creations, deletions, a leader starting to
    terminate or finishing, a gate removed."""

    def changed(old: JSON, new: JSON) -> bool:
        return bool(
            pod_terminating(old) != pod_terminating(new)
            or pod_finished(old) != pod_finished(new)
            or scheduling_gate_index(old) != scheduling_gate_index(new)
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
        index = scheduling_gate_index(pod)
        if index is None:
            return True
        meta = meta_of(pod)
        try:
            await self.client.patch(
                PODS,
                str(meta["name"]),
                remove_scheduling_gate_patch(index),
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
        GROUP_METRICS.gate_released(pod)
        return True
