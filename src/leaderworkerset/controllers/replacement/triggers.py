"""What wakes the group-replacement reconciler, and the controller that runs it.

As upstream's `SetupWithManager` would hold it: pod events that can change how
many groups tear down (T) or how many leaders wait (G), the LeaderWorkerSet
itself (its policy), a worker StatefulSet losing its owner or starting its
deletion, and a Node's readiness for the LeaderWorkerSets with pods on it.
`wiring.py` builds the reconciler and calls `setup_replacement_controller`; nothing
else registers this controller's watches.
"""

from __future__ import annotations

from collections.abc import Callable

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, condition_of, controller_ref, meta_of
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.replacement.reconciler import ReplacementReconciler
from leaderworkerset.group.gates import scheduling_gate_index
from leaderworkerset.group.readiness import pod_finished, pod_terminating
from leaderworkerset.group.roles import is_leader
from leaderworkerset.runtime.controller import NOT_STATUS_ONLY, Controller, Predicate, own_key
from leaderworkerset.runtime.manager import Manager

REPLACEMENT_CONTROLLER = "group-replacement"
REPLACEMENT_WORKERS = 2


def replacement_events() -> Predicate:
    """Pod events that can change T or G: leader creations, deletions, a leader starting
    to terminate or finishing, a gate removed. A worker's creation can only add to T,
    which never admits anyone, so the thousands of them in a scale-up wake nobody."""

    def changed(old: JSON, new: JSON) -> bool:
        return bool(
            pod_terminating(old) != pod_terminating(new)
            or pod_finished(old) != pod_finished(new)
            or scheduling_gate_index(old) != scheduling_gate_index(new)
        )

    return Predicate(create=is_leader, update=changed)


def _owner_and_deletion(sts: JSON) -> tuple[object, object]:
    return controller_ref(sts), meta_of(sts).get("deletionTimestamp")


# A worker StatefulSet orphaned (its pods leave the group's teardown) or starting a
# deletion a finalizer may hold up (its pods' overrun clock starts): either can admit
# a waiting leader, and neither comes with a pod event.
WORKER_SET_LEFT_ITS_LEADER = Predicate(
    create=lambda sts: False,
    update=lambda old, new: _owner_and_deletion(old) != _owner_and_deletion(new),
    delete=lambda sts: False,
)


def _ready_status(node: JSON) -> tuple[str, str]:
    ready = condition_of(node, "Ready")
    if ready is None:
        return "", ""
    return str(ready.get("status")), str(ready.get("lastTransitionTime"))


def node_events() -> Predicate:
    """Node events that move a release moment: Ready changing, a node removed."""
    return Predicate(
        create=lambda node: False,
        update=lambda old, new: _ready_status(old) != _ready_status(new),
    )


def _lws_on_node(caches: LwsCaches) -> Callable[[JSON], list[str]]:
    def keys(node: JSON) -> list[str]:
        return caches.lws_keys_on_node(str(meta_of(node).get("name", "")))

    return keys


def setup_replacement_controller(
    manager: Manager, reconciler: ReplacementReconciler, *, workers: int = REPLACEMENT_WORKERS
) -> Controller:
    """The group-replacement controller, watching its sources, added to `manager`."""
    caches = reconciler.caches
    controller = Controller(
        REPLACEMENT_CONTROLLER, reconciler, workers=workers, metrics=manager.metrics
    )
    # Not a source: ticks off the gate removals this process expects to see.
    controller.add_side_handler(
        caches.pods, on_update=reconciler.observe, on_delete=reconciler.observe_deleted
    )
    controller.watch_labelled(caches.pods, c.LABEL_SET_NAME, replacement_events())
    controller.watch(caches.leaderworkersets, own_key, NOT_STATUS_ONLY)
    controller.watch_labelled(caches.statefulsets, c.LABEL_SET_NAME, WORKER_SET_LEFT_ITS_LEADER)
    if caches.nodes is not None:
        # A node turning NotReady starts the clock of a bounded wait on its pods' groups.
        controller.watch(caches.nodes, _lws_on_node(caches), node_events())
    manager.add(controller)
    return controller
