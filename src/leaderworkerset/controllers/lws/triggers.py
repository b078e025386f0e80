"""What wakes the LeaderWorkerSet reconciler, and the controller that runs it.

As upstream's `SetupWithManager` for this reconciler: its LeaderWorkerSet, the
objects it owns, anything labelled with its name, and a new word from the
replacement reconciler on what PostTermination holds back. `wiring.py` builds the
reconciler and calls `setup_lws_controller`; nothing else registers this
controller's watches.
"""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, namespace_of
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.lws.rolling_update import rolling_in_progress
from leaderworkerset.group.readiness import pod_running_and_ready, statefulset_ready
from leaderworkerset.group.roles import is_leader, lws_name
from leaderworkerset.group.workload_objects import pod_group_of_pod
from leaderworkerset.runtime.controller import NOT_STATUS_ONLY, Controller, Predicate, own_key
from leaderworkerset.runtime.manager import Manager

LWS_CONTROLLER = "leaderworkerset"
LWS_WORKERS = 4

LEADER_PODS = Predicate.for_objects(is_leader)

# A worker pod naming a PodGroup has gone: that PodGroup may now be unused.
GROUP_MEMBER_GONE = Predicate(
    create=lambda pod: False,
    update=lambda old, new: False,
    delete=lambda pod: not is_leader(pod) and pod_group_of_pod(pod) is not None,
)


def _rolling(caches: LwsCaches, obj: JSON) -> bool:
    """The object's LeaderWorkerSet steps its leader StatefulSet's partition down (or its
    surge back) as groups become Ready."""
    name = lws_name(obj)
    sts = caches.statefulsets.get(namespace_of(obj), name) if name else None
    return sts is not None and rolling_in_progress(sts)


def rollout_steps(caches: LwsCaches) -> tuple[Predicate, Predicate]:
    """(leader pods, StatefulSets): the events a rollout's next partition step waits on,
    while the LeaderWorkerSet is mid-rollout: an Ordinal group's last step to Ready (its
    leader Running and Ready, or its worker StatefulSet ready), and a change of the
    leader StatefulSet's spec (the pass that made a new revision only raises the
    partition to `replicas`; the next pass takes the first step down). These are not
    paced: a paced one comes up to a pace after the pass before it, and every step of
    a rollout would wait that long."""

    def leader_ready(old: JSON, new: JSON) -> bool:
        return (
            is_leader(new)
            and pod_running_and_ready(new)
            and not pod_running_and_ready(old)
            and _rolling(caches, new)
        )

    def step_or_workers_ready(old: JSON, new: JSON) -> bool:
        meta = new["metadata"]
        labels = meta.get("labels") or {}
        if c.LABEL_GROUP_INDEX in labels:
            changed = statefulset_ready(new) and not statefulset_ready(old)
        else:
            # The leader StatefulSet (named like its LeaderWorkerSet): only the
            # controller's own writes change its spec.
            leader = meta.get("name") == labels.get(c.LABEL_SET_NAME)
            changed = leader and old.get("spec") != new.get("spec")
        return changed and _rolling(caches, new)

    def never(obj: JSON) -> bool:
        return False

    return Predicate(never, leader_ready, never), Predicate(never, step_or_workers_ready, never)


def _watch_for_lws(controller: Controller, caches: LwsCaches, pace: float) -> None:
    """The LWS reconciler's sources."""
    # Its own status writes do not wake it: a pass that wrote the status has nothing
    # left to do until something else changes.
    controller.watch(caches.leaderworkersets, own_key, NOT_STATUS_ONLY)
    if pace:
        # Before the paced sources of the same informers: an event both pass is then
        # queued at once, and the paced handler, finding it queued, adds no later pass.
        leaders_ready, sets_changed = rollout_steps(caches)
        controller.watch_labelled(caches.pods, c.LABEL_SET_NAME, leaders_ready)
        controller.watch_labelled(caches.statefulsets, c.LABEL_SET_NAME, sets_changed)
    # Events of what the LWS owns are paced: during a scale-up of a thousand groups
    # they arrive many times a second, and each pass reads every group.
    for informer in (caches.statefulsets, caches.deployments, caches.services):
        controller.watch_owned(informer, c.KIND, c.API_VERSION, pace=pace)
    # Worker StatefulSets (readiness) and leader pods (a Hash-mode leader carries its
    # group's readiness) reach the status through the LWS name label. Worker pods
    # reach it through their StatefulSet's status, so they are left out.
    controller.watch_labelled(caches.statefulsets, c.LABEL_SET_NAME, pace=pace)
    controller.watch_labelled(caches.pods, c.LABEL_SET_NAME, LEADER_PODS, pace=pace)
    # With Workload scheduling: its Workload and PodGroups (one deleted is made
    # again), and the last members of a group leaving its PodGroup unused.
    for scheduling_informer in (caches.workloads, caches.pod_groups):
        if scheduling_informer is not None:
            controller.watch_owned(scheduling_informer, c.KIND, c.API_VERSION, pace=pace)
    if caches.pod_groups is not None:
        controller.watch_labelled(caches.pods, c.LABEL_SET_NAME, GROUP_MEMBER_GONE, pace=pace)


def setup_lws_controller(
    manager: Manager, reconciler: LeaderWorkerSetReconciler, *, workers: int = LWS_WORKERS
) -> Controller:
    """The LeaderWorkerSet controller, watching its sources, added to `manager`."""
    controller = Controller(LWS_CONTROLLER, reconciler, workers=workers, metrics=manager.metrics)
    _watch_for_lws(controller, reconciler.caches, reconciler.options.child_event_pace)
    controller.on_delete(reconciler.caches.leaderworkersets, reconciler.teardown.remember)
    # The GroupReplacementHeld condition reports the replacement reconciler's last
    # decision, which no watched object carries.
    reconciler.held.on_change = controller.enqueue
    manager.add(controller)
    return controller
