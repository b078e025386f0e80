"""PostTermination group replacement in Hash mode: releasing gated leaders.

The pod webhook admits every Hash leader behind the `group-replacement`
scheduling gate; `post_termination.decide` says which ones may schedule now and
this reconciler removes their gates, says on the LeaderWorkerSet (Events) which
replacement waits for which group, and requeues itself for the moment a bounded
wait will end instead of polling.

Everything is computed from the caches on each reconcile, so a restarted
controller neither admits early nor leaves a gate behind. The one thing kept in
memory is which leaders this process ungated and its pod cache does not show
ungated yet (expectations): without it a lagging cache would count those
leaders as waiting and admit one leader too many.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from leaderworkerset.api.objects import JSON, meta_of, name_of, namespace_of
from leaderworkerset.api.resources import PODS
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.held import HeldBoard, HeldReplacements
from leaderworkerset.group.gates import remove_scheduling_gate_patch, scheduling_gate_index
from leaderworkerset.group.options import (
    NODE_NOT_READY,
    ORPHANED,
    TERMINATION_OVERRUN,
    ControllerOptions,
    ReleaseThresholds,
)
from leaderworkerset.group.post_termination import Decision, decide
from leaderworkerset.group.roles import is_leader, lws_name
from leaderworkerset.runtime.client import JSON_PATCH, ApiClient, ApiError
from leaderworkerset.runtime.controller import Result
from leaderworkerset.runtime.events import EventRecorder
from leaderworkerset.runtime.expectations import Expectations

log = logging.getLogger(__name__)

# Expectations kind: a scheduling gate this controller removed.
UNGATED = "scheduling-gate"
# Wake a little after a release moment, so that the clock has passed it.
RELEASE_SLACK = 0.05
# Gate removals in flight at once for one LWS; the client's token bucket bounds the
# rate, this only keeps one pass from queueing a thousand requests at once.
UNGATE_IN_FLIGHT = 32
# A gate removal refused (409/422: the pod changed under a stale cache, or a webhook
# refuses it) is tried again after 1 s, then 2, 4, ... up to a minute while it keeps
# being refused. Not the queue's own limiter: from 5 ms it would resend the same
# failing PATCH eight times in the first second, and after a dozen failures wait a
# quarter of an hour once the obstacle went without a pod event.
REFUSED_RETRY_FIRST = 1.0
REFUSED_RETRY_MAX = 60.0


def held_of(decision: Decision) -> HeldReplacements:
    """What `decision` holds back, as the LWS reconciler reports it."""
    leaders = tuple(name_of(p) for p in decision.held)
    return HeldReplacements(
        leaders=leaders, groups=tuple(decision.waits_for[name] for name in leaders)
    )


def lws_key_of(pod: JSON) -> str | None:
    name = lws_name(pod)
    return f"{namespace_of(pod)}/{name}" if name else None


@dataclass
class ReplacementReconciler:
    client: ApiClient
    caches: LwsCaches
    recorder: EventRecorder | None = None
    options: ControllerOptions = field(default_factory=ControllerOptions)
    clock: Callable[[], float] = time.time
    expectations: Expectations = field(default_factory=Expectations)
    # Where the LWS reconciler reads what is held back, for its status condition.
    held: HeldBoard = field(default_factory=HeldBoard)
    group_metrics: GroupMetrics = field(default_factory=GroupMetrics)
    # What the Events already said, per LeaderWorkerSet: held leaders, released groups.
    _told_held: dict[str, set[str]] = field(default_factory=dict)
    _told_released: dict[str, set[str]] = field(default_factory=dict)
    # Passes in a row, per LeaderWorkerSet, whose gate removals were refused.
    _refusals: dict[str, int] = field(default_factory=dict)

    # -- cache handlers: ticking off the gates this controller removed ------------------

    def observe(self, old: JSON, new: JSON) -> None:
        if is_leader(new) and scheduling_gate_index(new) is None:
            self._observed(new)

    def observe_deleted(self, pod: JSON) -> None:
        self._observed(pod)

    def _observed(self, pod: JSON) -> None:
        key = lws_key_of(pod)
        if key is not None:
            self.expectations.deletion_observed(key, UNGATED, name_of(pod))

    def ungating(self, key: str) -> set[str]:
        """Leaders ungated by this process that the cache still shows gated."""
        if self.expectations.satisfied(key):
            return set()
        deletions = self.expectations.pending(key)
        return set(deletions.get(UNGATED, set()))

    # -- reconcile --------------------------------------------------------------------

    async def __call__(self, key: str) -> Result | None:
        view = self.caches.lws_view_by_key(key)
        if view is None:
            self._forget(key)
            return None
        if not view.hash_mode:
            return None
        pods = LwsCaches.of_lws(self.caches.pods, view.namespace, view.name)
        # A policy switched to Immediate releases whoever still waits.
        immediate = view.replaces_immediately
        now = self.clock()
        thresholds = self.options.replacement_release
        worker_sets = LwsCaches.of_lws(self.caches.statefulsets, view.namespace, view.name)
        decision = decide(
            pods,
            self.caches.node_map(),
            now,
            thresholds,
            immediate=immediate,
            ungating=self.ungating(key),
            worker_sets={name_of(s): s for s in worker_sets},
        )
        self._tell(key, view.obj, decision, thresholds)
        self.held.publish(key, held_of(decision))
        if decision.admit:
            names = [name_of(p) for p in decision.admit]
            self.expectations.expect_deletions(key, UNGATED, names)
        if not await self._ungate_all(key, decision.admit):
            return Result(requeue_after=self._refused_again(key))
        self._refusals.pop(key, None)
        if decision.held and decision.next_release_at is not None:
            return Result(requeue_after=max(decision.next_release_at - now, 0.0) + RELEASE_SLACK)
        return None

    def _tell(self, key: str, lws: JSON, decision: Decision, thresholds: ReleaseThresholds) -> None:
        """One Event per hold (a leader starting to wait) and one per early release (a
        group that stopped counting while leaders were gated), not one per reconcile."""
        told = self._told_held.get(key, set())
        for leader in decision.held:
            if name_of(leader) not in told:
                group = decision.waits_for[name_of(leader)]
                event = ev.replacement_held(name_of(leader), group, related=leader)
                ev.record(self.recorder, lws, event)
        self._told_held[key] = {name_of(p) for p in decision.held}
        released = decision.released
        gone = self._told_released.setdefault(key, set())
        # A release matters, and is told, only when a leader was waiting for it.
        if decision.admit or decision.held:
            for release in released:
                if release.group in gone:
                    continue
                threshold = (
                    thresholds.node_not_ready
                    if release.reason == NODE_NOT_READY
                    else thresholds.termination_overrun
                )
                event = ev.replacement_released(
                    release.group, release.reason, release.pods, release.nodes, threshold
                )
                ev.record(self.recorder, lws, event)
                if decision.admit:  # a release counts when it lets a leader in
                    self.group_metrics.early_release(
                        decision.admit[0], _metric_reason(release.reason)
                    )
                gone.add(release.group)
        # Forget groups that have left the cache, so memory follows the cluster.
        self._told_released[key] = gone & {r.group for r in released}

    def _refused_again(self, key: str) -> float:
        """How long to wait before trying refused gate removals again."""
        refused = self._refusals.get(key, 0)
        self._refusals[key] = refused + 1
        return float(min(REFUSED_RETRY_MAX, REFUSED_RETRY_FIRST * 2**refused))

    def _forget(self, key: str) -> None:
        self._refusals.pop(key, None)
        self.held.forget(key)
        self.expectations.delete(key)
        self._told_held.pop(key, None)
        self._told_released.pop(key, None)

    async def _ungate_all(self, key: str, admitted: list[JSON]) -> bool:
        """Ungate the admitted leaders, UNGATE_IN_FLIGHT at a time; whether all gates
        are off. One at a time, a scale-up of a thousand groups waited on a thousand
        PATCHes in a row (a pass held the LWS for ~20 s while the leaders queued)."""
        slots = asyncio.Semaphore(UNGATE_IN_FLIGHT)

        async def ungate(pod: JSON) -> bool:
            async with slots:
                return await self._ungate(pod)

        try:
            results = await asyncio.gather(*(ungate(p) for p in admitted), return_exceptions=True)
        except BaseException:
            # Cancelled mid-way: which gates went is unknown, so none is waited for.
            for pod in admitted:
                self.expectations.deletion_observed(key, UNGATED, name_of(pod))
            raise
        failure: BaseException | None = None
        released = True
        for pod, result in zip(admitted, results, strict=True):
            if result is True:
                continue
            # Not ungated here (a conflict, or an error): its gate's removal will not be
            # seen, so it is not waited for.
            self.expectations.deletion_observed(key, UNGATED, name_of(pod))
            released = False
            if isinstance(result, BaseException) and failure is None:
                failure = result
        if failure is not None:
            raise failure
        return released

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
        self.group_metrics.gate_released(pod)
        return True


_METRIC_REASONS = {
    NODE_NOT_READY: "node_not_ready",
    TERMINATION_OVERRUN: "termination_overrun",
    ORPHANED: "orphaned",
}


def _metric_reason(reason: str) -> str:
    """Prometheus label values are snake_case: NodeNotReady -> node_not_ready."""
    return _METRIC_REASONS[reason]
