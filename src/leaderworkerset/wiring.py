"""Wiring: the caches, the four controllers (LeaderWorkerSet, pod, group replacement,
DisaggregatedSet) and the admission webhooks, on a runtime Manager.

Composition only. What wakes each reconciler is declared in its own package
(`controllers/<name>/triggers.py`, as controller-runtime's builder sits beside a
reconciler); this module builds the caches and the reconcilers, hands them what
they share (the caches, the options, the replacement reconciler's board of held
groups) and calls each package's setup.
"""

from __future__ import annotations

from dataclasses import dataclass

from leaderworkerset.admission_dryrun import dry_run_check
from leaderworkerset.api.leaderworkerset.limits import SizeLimits
from leaderworkerset.api.leaderworkerset.scheduling import SchedulingSupport
from leaderworkerset.api.objects import name_of, namespace_of
from leaderworkerset.caches import LwsCaches, build_caches
from leaderworkerset.controllers.disaggregatedset.caches import DsCaches, build_ds_caches
from leaderworkerset.controllers.disaggregatedset.metrics import DisaggregatedSetMetrics
from leaderworkerset.controllers.disaggregatedset.reconciler import DisaggregatedSetReconciler
from leaderworkerset.controllers.disaggregatedset.triggers import (
    setup_disaggregatedset_controller,
)
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.held import HeldBoard
from leaderworkerset.controllers.lws.pod_refusals import (
    failed_create_events,
    setup_pod_refusals_controller,
)
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.lws.triggers import LWS_WORKERS, setup_lws_controller
from leaderworkerset.controllers.lws.workload_scheduling import WorkloadScheduler
from leaderworkerset.controllers.pod.group_recovery import GroupRecovery, RecoveryMetrics
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.controllers.pod.triggers import POD_WORKERS, setup_pod_controller
from leaderworkerset.controllers.replacement.reconciler import ReplacementReconciler
from leaderworkerset.controllers.replacement.triggers import setup_replacement_controller
from leaderworkerset.group.options import ControllerOptions, ReleaseThresholds, TeardownModes
from leaderworkerset.group.recreations import BackoffPolicy
from leaderworkerset.runtime.controller import Controller
from leaderworkerset.runtime.manager import Manager
from leaderworkerset.webhooks.admission import register_webhooks
from leaderworkerset.webhooks.disaggregatedset import VALIDATING_PATH as DS_VALIDATING_PATH
from leaderworkerset.webhooks.disaggregatedset import disaggregatedset_validator


@dataclass
class LwsControllers:
    caches: LwsCaches
    leaderworkersets: Controller
    pods: Controller
    replacement: Controller
    options: ControllerOptions
    # The restart budget and group back-off of the pod controller (its policy can be
    # changed at run time, e.g. by tests).
    recovery: GroupRecovery | None = None
    # None when the DisaggregatedSet controller is switched off.
    disaggregatedsets: Controller | None = None
    ds_caches: DsCaches | None = None


# One piece: the controllers are built in the order they share things (options, caches,
# the held board, the group metrics), which reads best top to bottom.
def setup_controllers(
    manager: Manager,
    *,
    namespace: str | None = None,
    enable_webhooks: bool = True,
    gang_scheduling: bool = False,
    lws_workers: int = LWS_WORKERS,
    pod_workers: int = POD_WORKERS,
    replacement_release: ReleaseThresholds | None = None,
    limits: SizeLimits | None = None,
    enable_disaggregatedset: bool = True,
    scheduling: SchedulingSupport | None = None,
    group_backoff: BackoffPolicy | None = None,
    teardown: TeardownModes | None = None,
) -> LwsControllers:
    client, recorder = manager.client, manager.recorder
    options = ControllerOptions(
        gang_scheduling=gang_scheduling,
        replacement_release=replacement_release or ReleaseThresholds(),
        limits=limits or SizeLimits(),
        scheduling=scheduling or SchedulingSupport(),
        group_backoff=group_backoff or BackoffPolicy(),
        teardown=teardown or TeardownModes(),
    )
    workload_api = options.scheduling.kubernetes
    caches = build_caches(client, namespace, metrics=manager.metrics, workload_api=workload_api)
    for informer in caches.all():
        manager.add_cache(informer, name=informer.name)

    # The replacement reconciler publishes what PostTermination holds back; the LWS
    # reconciler reports it in its status.
    held = HeldBoard()
    # On the registry /metrics serves; the three reconcilers report to the one set.
    group_metrics = GroupMetrics(manager.metrics.registry)
    lws = LeaderWorkerSetReconciler(
        client, caches, recorder, options=options, held=held, group_metrics=group_metrics
    )
    if workload_api:
        lws.scheduler = WorkloadScheduler(client, caches, options.scheduling)
    lws_controller = setup_lws_controller(manager, lws, workers=lws_workers)
    if recorder is not None:
        # Pods the API server refuses to the LWS's workloads, reported on the LWS.
        refusals = failed_create_events(client, namespace, manager.metrics)
        manager.add_cache(refusals, name="events[FailedCreate]")
        setup_pod_refusals_controller(manager, caches, refusals, recorder)

    pods, pod_controller = _setup_pods(manager, caches, options, group_metrics, pod_workers)
    # The LWS reconciler refreshes the group counts; the pod reconciler deletes leaders
    # and so tells the losses it caused from the others'.
    group_metrics.track_changes(lws_controller, caches)
    group_metrics.count_losses(pod_controller, caches, pods.restarter.deleted_leaders.__contains__)

    replacement = ReplacementReconciler(
        client, caches, recorder, options=options, held=held, group_metrics=group_metrics
    )
    replacement_controller = setup_replacement_controller(manager, replacement)

    if enable_webhooks:
        # Templates the workload APIs would refuse are refused at admission, by a
        # dry-run of what the controllers build (they may not be imported by the webhooks).
        register_webhooks(
            manager.webhook_server, caches, options, client, template_check=dry_run_check(client)
        )
    built = LwsControllers(
        caches,
        lws_controller,
        pod_controller,
        replacement_controller,
        options,
        recovery=pods.restarter.recovery,
    )
    if enable_disaggregatedset:
        _setup_disaggregatedsets(manager, built, namespace, enable_webhooks)
    return built


def _setup_pods(
    manager: Manager,
    caches: LwsCaches,
    options: ControllerOptions,
    group_metrics: GroupMetrics,
    workers: int,
) -> tuple[PodReconciler, Controller]:
    """The pod controller, with the group back-off's wake-ups and its metrics."""
    recovery_metrics = RecoveryMetrics(manager.metrics.registry)
    pods = PodReconciler(
        manager.client,
        caches,
        manager.recorder,
        options=options,
        group_metrics=group_metrics,
        recovery_metrics=recovery_metrics,
    )
    controller = setup_pod_controller(manager, pods, workers=workers)
    controller.on_delete(
        caches.leaderworkersets,
        lambda lws: recovery_metrics.forget(namespace_of(lws), name_of(lws)),
    )
    # The group back-off wakes a held group's leader when its wait ends.
    pods.restarter.wake = lambda key, after: controller.enqueue(key, after=after)
    return pods, controller


def _setup_disaggregatedsets(
    manager: Manager, built: LwsControllers, namespace: str | None, enable_webhooks: bool
) -> None:
    """The DisaggregatedSet controller, its caches and (with webhooks) its validator.
    Switched off, none of it exists: no watch of its kinds, no webhook path."""
    ds_caches = build_ds_caches(manager.client, namespace, metrics=manager.metrics)
    for informer in ds_caches.all():
        manager.add_cache(informer, name=informer.name)
    reconciler = DisaggregatedSetReconciler(
        manager.client,
        ds_caches,
        manager.recorder,
        metrics=DisaggregatedSetMetrics(manager.metrics.registry),
    )
    built.disaggregatedsets = setup_disaggregatedset_controller(manager, reconciler)
    built.ds_caches = ds_caches
    if enable_webhooks:
        # Each role is judged as the LeaderWorkerSets the set makes of it will be: for
        # what the controller serves, under the cluster's limits, and by the same dry
        # run of their workloads (on the manager's loop, as the LWS webhook's).
        check = manager.webhook_server.on_manager_loop(dry_run_check(manager.client))
        options = built.options
        validator = disaggregatedset_validator(options.scheduling, options.limits, check)
        manager.webhook_server.register(DS_VALIDATING_PATH, validator)
