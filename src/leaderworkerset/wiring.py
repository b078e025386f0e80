"""Wiring: the caches, the two reconcilers and the admission webhooks of the
LeaderWorkerSet controller, on a runtime Manager.

Event sources are upstream's: the LWS reconciler wakes for its
LeaderWorkerSet, the objects it owns and anything labelled with its name; the
pod reconciler wakes for each LWS pod and for worker StatefulSets owned by a
leader pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from leaderworkerset.admission_dryrun import dry_run_check
from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.caches import LwsCaches, build_caches
from leaderworkerset.controllers.group_metrics import GROUP_METRICS
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.controllers.pod.restart_policy import restart_may_act
from leaderworkerset.controllers.replacement.reconciler import (
    ReplacementReconciler,
    node_events,
    replacement_events,
)
from leaderworkerset.group.options import ControllerOptions, ReleaseThresholds
from leaderworkerset.group.readiness import pod_running_and_ready
from leaderworkerset.group.roles import is_leader, lws_name
from leaderworkerset.group.view import view_of
from leaderworkerset.runtime.controller import (
    NOT_STATUS_ONLY,
    Controller,
    Predicate,
    own_key,
)
from leaderworkerset.runtime.indexes import object_key
from leaderworkerset.runtime.manager import Manager
from leaderworkerset.webhooks.admission import register_webhooks

LWS_CONTROLLER = "leaderworkerset"
POD_CONTROLLER = "pod"
REPLACEMENT_CONTROLLER = "group-replacement"


@dataclass
class LwsControllers:
    caches: LwsCaches
    leaderworkersets: Controller
    pods: Controller
    replacement: Controller
    options: ControllerOptions


LEADER_PODS = Predicate.for_objects(is_leader)


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
        lws = caches.leaderworkersets.get(namespace, name)
        if lws is None or not view_of(lws).hash_mode:
            return ()
        return (f"{namespace}/{leader}",)

    return keys


def _leader_settings(lws: JSON) -> tuple[Any, Any]:
    return (lws.get("spec") or {}).get("startupPolicy"), meta_of(lws).get("annotations")


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


def _lws_on_node(caches: LwsCaches) -> Callable[[JSON], list[str]]:
    def keys(node: JSON) -> list[str]:
        return caches.lws_keys_on_node(str(meta_of(node).get("name", "")))

    return keys


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


# Pod reconciles are cheap, but creating a worker StatefulSet waits on the API server
# (a third of a second and more while a thousand groups come up). With few workers a
# run of such creates holds them all, and every pod event behind them waits: at 1,000
# groups x 8 and 8 workers, 1,500 pod events waited over 10 s in the queue, among them
# the leaders whose worker StatefulSets were still to be made. Workers are tasks on
# one event loop, so more of them add no CPU, only requests in flight.
POD_WORKERS = 64


def setup_controllers(
    manager: Manager,
    *,
    namespace: str | None = None,
    enable_webhooks: bool = True,
    gang_scheduling: bool = False,
    lws_workers: int = 4,
    pod_workers: int = POD_WORKERS,
    replacement_release: ReleaseThresholds | None = None,
) -> LwsControllers:
    client = manager.client
    options = ControllerOptions(
        gang_scheduling=gang_scheduling,
        replacement_release=replacement_release or ReleaseThresholds(),
    )
    caches = build_caches(client, namespace)
    for informer in caches.all():
        manager.add_cache(informer, name=informer.name)

    lws_reconciler = LeaderWorkerSetReconciler(client, caches, manager.recorder, options=options)
    lws_controller = Controller(LWS_CONTROLLER, lws_reconciler, workers=lws_workers)
    _watch_for_lws(lws_controller, caches, options.child_event_pace)

    pod_reconciler = PodReconciler(client, caches, manager.recorder, options=options)
    caches.pods.add_handler(on_delete=pod_reconciler.remember_deleted)
    GROUP_METRICS.watch(caches, pod_reconciler.restarter.deleted_leaders.__contains__)
    pod_controller = Controller(POD_CONTROLLER, pod_reconciler, workers=pod_workers)
    pod_controller.watch(caches.pods, own_key, POD_RECONCILER_EVENTS)
    pod_controller.watch(caches.pods, hash_leader_of_worker(caches), WORKER_READINESS_CHANGED)
    pod_controller.watch_owned(caches.statefulsets, "Pod", "v1")
    # startupPolicy and the LWS annotations are not in the revision, yet decide what a
    # leader gets (e.g. LeaderReady -> LeaderCreated releases waiting groups).
    pod_controller.watch(caches.leaderworkersets, leader_keys_of(caches), LEADER_SETTINGS_CHANGED)

    replacement = ReplacementReconciler(
        client, caches, manager.recorder, options=options, held=lws_reconciler.held
    )
    lws_reconciler.held.on_change = lws_controller.enqueue
    caches.pods.add_handler(on_update=replacement.observe, on_delete=replacement.observe_deleted)
    replacement_controller = Controller(REPLACEMENT_CONTROLLER, replacement, workers=2)
    replacement_controller.watch_labelled(caches.pods, c.LABEL_SET_NAME, replacement_events())
    replacement_controller.watch(caches.leaderworkersets, own_key, NOT_STATUS_ONLY)
    if caches.nodes is not None:
        # A node turning NotReady starts the clock of a bounded wait on its pods' groups.
        replacement_controller.watch(caches.nodes, _lws_on_node(caches), node_events())

    for controller in (lws_controller, pod_controller, replacement_controller):
        manager.add(controller)
    if enable_webhooks:
        # Templates the workload APIs would refuse are refused at admission, by a
        # dry-run of what the controllers build (they may not be imported by the webhooks).
        register_webhooks(
            manager.webhook_server, caches, options, client, template_check=dry_run_check(client)
        )
    return LwsControllers(caches, lws_controller, pod_controller, replacement_controller, options)
