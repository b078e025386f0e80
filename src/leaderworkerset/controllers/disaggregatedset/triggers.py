"""What wakes the DisaggregatedSet reconciler, and the controller that runs it.

As upstream's `SetupWithManager` (its set, the LeaderWorkerSets and RoleScalers it
owns), plus the Services it owns, so that a deleted Service is made again. `wiring.py`
builds the reconciler and calls `setup_disaggregatedset_controller`.
"""

from __future__ import annotations

from leaderworkerset.api.disaggregatedset import constants as c
from leaderworkerset.controllers.disaggregatedset.reconciler import DisaggregatedSetReconciler
from leaderworkerset.runtime.controller import NOT_STATUS_ONLY, Controller, own_key
from leaderworkerset.runtime.manager import Manager

DS_CONTROLLER = "disaggregatedset"
DS_WORKERS = 2


def setup_disaggregatedset_controller(
    manager: Manager, reconciler: DisaggregatedSetReconciler, *, workers: int = DS_WORKERS
) -> Controller:
    controller = Controller(DS_CONTROLLER, reconciler, workers=workers, metrics=manager.metrics)
    caches = reconciler.caches
    # Its own status writes do not wake it.
    controller.watch(caches.sets, own_key, NOT_STATUS_ONLY)
    # A LeaderWorkerSet's status (its ready groups) drives the rollout.
    controller.watch_owned(caches.leaderworkersets, c.KIND, c.API_VERSION)
    controller.watch_owned(caches.services, c.KIND, c.API_VERSION)
    # An autoscaler writes a RoleScaler's spec; its status is this controller's.
    controller.watch_owned(caches.scalers, c.KIND, c.API_VERSION, NOT_STATUS_ONLY)
    manager.add(controller)
    return controller
