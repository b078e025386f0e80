"""What wakes the pod reconciler, and the controller that runs it.

The pod reconciler's own builder, as controller-runtime's `For`/`Owns`/`Watches`
sit beside a reconciler: the LWS pods (its key), a Hash worker's readiness for
its leader, the worker StatefulSets a leader pod owns, and an LWS's start-up
settings for its leaders. `wiring.py` builds the reconciler and calls
`setup_pod_controller`; nothing else registers this controller's watches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.controllers.pod.restart_policy import restart_may_act
from leaderworkerset.group.readiness import pod_running_and_ready
from leaderworkerset.group.roles import is_leader, lws_name
from leaderworkerset.runtime.controller import Controller, Predicate, own_key
from leaderworkerset.runtime.indexes import object_key
from leaderworkerset.runtime.manager import Manager

POD_CONTROLLER = "pod"

# Pod reconciles are cheap, but creating a worker StatefulSet waits on the API server
# (a third of a second and more while a thousand groups come up). With few workers a
# run of such creates holds them all, and every pod event behind them waits: at 1,000
# groups x 8 and 8 workers, 1,500 pod events waited over 10 s in the queue, among them
# the leaders whose worker StatefulSets were still to be made. Workers are tasks on
# one event loop, so more of them add no CPU, only requests in flight.
POD_WORKERS = 64


def _pod_reconciler_acts(pod: JSON) -> bool:
    return is_leader(pod) or restart_may_act(pod)


# The pod reconciler's pod events: every one of a leader's; of a worker's, only those
# the restart policy can act on (it reads the live pod, so the new side decides). At
# 1,000 groups x 8 this leaves out ~20,000 no-op reconciles of worker pods coming up.
POD_RECONCILER_EVENTS = Predicate(
    create=_pod_reconciler_acts, update=lambda old, new: _pod_reconciler_acts(new)
)


# A worker turning Ready or unready, or going: its Hash leader's group-ready gate reads
# the worker pods, so the leader is reconciled now rather than when the worker
# StatefulSet's status catches up (seconds later while a thousand groups come up).
WORKER_READINESS_CHANGED = Predicate(
    create=lambda pod: False,
    update=lambda old, new: (
        not is_leader(new) and pod_running_and_ready(old) != pod_running_and_ready(new)
    ),
    delete=lambda pod: not is_leader(pod),
)


def hash_leader_of_worker(caches: LwsCaches) -> Callable[[JSON], Iterable[str]]:
    def keys(pod: JSON) -> Iterable[str]:
        meta = meta_of(pod)
        leader = (meta.get("annotations") or {}).get(c.ANNOTATION_LEADER_NAME)
        name = lws_name(pod)
        namespace = str(meta.get("namespace", ""))
        if not leader or not name:
            return ()
        view = caches.lws_view(namespace, name)
        if view is None or not view.hash_mode:
            return ()
        return (f"{namespace}/{leader}",)

    return keys


# Written by the pod controller itself, per group: no leader needs waking for them.
_RECORDS = frozenset({c.ANNOTATION_GROUP_RESTART_COUNTS, c.ANNOTATION_GROUP_RECREATIONS})


def _leader_settings(lws: JSON) -> tuple[Any, Any]:
    annotations = meta_of(lws).get("annotations") or {}
    kept = {k: v for k, v in annotations.items() if k not in _RECORDS}
    return (lws.get("spec") or {}).get("startupPolicy"), kept


LEADER_SETTINGS_CHANGED = Predicate(
    create=lambda obj: False,
    update=lambda old, new: _leader_settings(old) != _leader_settings(new),
    delete=lambda obj: False,
)


def leader_keys_of(caches: LwsCaches) -> Callable[[JSON], list[str]]:
    def keys(lws: JSON) -> list[str]:
        meta = meta_of(lws)
        pods = caches.leaders_of(str(meta.get("namespace")), str(meta.get("name")))
        return [object_key(p) for p in pods]

    return keys


def setup_pod_controller(
    manager: Manager, reconciler: PodReconciler, *, workers: int = POD_WORKERS
) -> Controller:
    """The pod controller, watching its sources, added to `manager`."""
    caches = reconciler.caches
    controller = Controller(POD_CONTROLLER, reconciler, workers=workers, metrics=manager.metrics)
    controller.on_delete(caches.pods, reconciler.remember_deleted)
    controller.on_delete(caches.statefulsets, reconciler.worker_creates.statefulset_deleted)
    controller.watch(caches.pods, own_key, POD_RECONCILER_EVENTS)
    controller.watch(caches.pods, hash_leader_of_worker(caches), WORKER_READINESS_CHANGED)
    controller.watch_owned(caches.statefulsets, "Pod", "v1")
    # startupPolicy and the LWS annotations are not in the revision, yet decide what a
    # leader gets (e.g. LeaderReady -> LeaderCreated releases waiting groups).
    controller.watch(caches.leaderworkersets, leader_keys_of(caches), LEADER_SETTINGS_CHANGED)
    manager.add(controller)
    return controller
