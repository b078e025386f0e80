"""What wakes the LeaderWorkerSet reconciler, and the controller that runs it.

As upstream's `SetupWithManager` for this reconciler: its LeaderWorkerSet, the
objects it owns, anything labelled with its name, and a new word from the
replacement reconciler on what PostTermination holds back. `wiring.py` builds the
reconciler and calls `setup_lws_controller`; nothing else registers this
controller's watches.
"""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.group.roles import is_leader
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


def _watch_for_lws(controller: Controller, caches: LwsCaches, pace: float) -> None:
    """The LWS reconciler's sources."""
    # Its own status writes do not wake it: a pass that wrote the status has nothing
    # left to do until something else changes.
    controller.watch(caches.leaderworkersets, own_key, NOT_STATUS_ONLY)
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
