"""The controllers start only once every cache their reconcilers read has synced.

A reconciler reads caches its controller does not watch, so waiting for a
controller's own sources is not enough: the wiring gives every cache to the
manager, which starts no controller before all of them have synced.

Regression: a restarted manager's LWS reconciler ran before the ControllerRevision
cache had listed, found no revision for the leader StatefulSet's key, and created a
duplicate revision under that key that truncation never removes.
"""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from leaderworkerset.api.disaggregatedset.constants import LABEL_SET_NAME as DS_LABEL
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.disaggregatedset.metrics import DisaggregatedSetMetrics
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.group.options import TeardownModes
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.controller import Controller
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.webhooks.disaggregatedset import VALIDATING_PATH as DS_VALIDATING_PATH
from leaderworkerset.wiring import LwsControllers, setup_controllers
from tests.toolkit.manager import new_manager
from tests.toolkit.paths import REPO
from tests.toolkit.waiting import eventually

CONTROLLERS = ("leaderworkerset", "pod", "group-replacement")


def read_caches(caches: LwsCaches) -> dict[str, list[Informer]]:
    """Per controller, the caches its reconciler reads (see the reconcilers)."""
    return {
        "leaderworkerset": caches.all(),
        "pod": [
            caches.pods,
            caches.statefulsets,
            caches.leaderworkersets,
            caches.revisions,
            caches.services,
        ],
        "group-replacement": [caches.pods, caches.leaderworkersets],
    }


class Wired:
    """setup_controllers on a real manager whose caches never list: the test syncs them.

    Each controller's start notes which of the caches its reconciler reads had synced.
    """

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.manager = new_manager(tmp_path, cache_sync_timeout=0.05)
        # The DisaggregatedSet controller's caches are its own (test below).
        self.wiring: LwsControllers = setup_controllers(
            self.manager, enable_webhooks=False, enable_disaggregatedset=False
        )
        for informer in self.wiring.caches.all():
            monkeypatch.setattr(informer, "start", lambda: None)
        self.unsynced_at_start: dict[str, list[str]] = {}
        reads = read_caches(self.wiring.caches)
        for ctrl in self.controllers():
            monkeypatch.setattr(ctrl, "start", self._noting(ctrl, reads[ctrl.name]))

    def controllers(self) -> list[Controller]:
        return [self.wiring.leaderworkersets, self.wiring.pods, self.wiring.replacement]

    def _noting(self, ctrl: Controller, reads: list[Informer]) -> Callable[[], Awaitable[None]]:
        start = ctrl.start

        async def noting_start() -> None:
            unsynced = [informer.name for informer in reads if not informer.has_synced]
            self.unsynced_at_start[ctrl.name] = unsynced
            await start()

        return noting_start


@pytest.mark.parametrize("controller", CONTROLLERS)
async def test_no_controller_starts_before_a_cache_it_reads_synced(
    controller: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    positions = range(len(read_caches(Wired(tmp_path, monkeypatch).wiring.caches)[controller]))
    for position in positions:
        wired = Wired(tmp_path, monkeypatch)
        missing = read_caches(wired.wiring.caches)[controller][position]
        for informer in wired.wiring.caches.all():
            if informer is not missing:
                informer.synced.set()
        with pytest.raises(TimeoutError, match=f"cache {re.escape(missing.name)} not synced"):
            await asyncio.wait_for(wired.manager.run(), 10)
        assert wired.unsynced_at_start == {}


async def test_controllers_start_once_all_caches_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wired = Wired(tmp_path, monkeypatch)
    for informer in wired.wiring.caches.all():
        informer.synced.set()
    run = asyncio.create_task(wired.manager.run())
    try:
        await eventually(
            lambda: all(ctrl.running for ctrl in wired.controllers()) or run.done(),
            "every controller's workers to start",
        )
    finally:
        wired.manager.request_stop()
        await asyncio.wait_for(run, 10)
    assert wired.unsynced_at_start == {name: [] for name in CONTROLLERS}


@pytest.mark.parametrize("enabled", [True, False])
def test_the_disaggregatedset_switch(enabled: bool, tmp_path: Path) -> None:
    """Off: no DisaggregatedSet controller, no watch of its kinds, no webhook path."""
    manager = new_manager(tmp_path)
    wiring = setup_controllers(manager, enable_disaggregatedset=enabled)
    caches = [name for name, _ in manager._caches]
    watched = [name for name in caches if name.startswith("disaggregatedset")]
    served = DS_VALIDATING_PATH in manager.webhook_server._handlers
    if enabled:
        assert wiring.disaggregatedsets is not None and wiring.ds_caches is not None
        # RoleScalers whole, so one someone else made under a set's name is seen too.
        assert watched == ["disaggregatedsets", "disaggregatedsetrolescalers"]
        assert served
    else:
        assert wiring.disaggregatedsets is None and wiring.ds_caches is None
        assert not watched and not any(DS_LABEL in name for name in caches)
        assert not served


@pytest.mark.parametrize("modes", [TeardownModes(), TeardownModes(False, True)], ids=str)
def test_the_teardown_modes_reach_the_reconcilers(modes: TeardownModes, tmp_path: Path) -> None:
    wiring = setup_controllers(new_manager(tmp_path), teardown=modes)
    pods = wiring.pods._reconcile
    lws = wiring.leaderworkersets._reconcile
    assert isinstance(pods, PodReconciler) and isinstance(lws, LeaderWorkerSetReconciler)
    assert pods.restarter.teardown.parallel is modes.group_restart
    assert lws.teardown.enabled is modes.lws_deletion


def test_a_standby_hangs_only_the_webhooks_handlers_on_the_caches(tmp_path: Path) -> None:
    """Every handler that serves a controller joins the caches when that controller
    starts (on the elected replica); only the pod webhook's hostnames, which every
    replica serves, follow the pod cache before."""
    manager = new_manager(tmp_path)
    wiring = setup_controllers(manager)
    hanging = {informer.name: len(informer._handlers) for informer in wiring.caches.all()}
    assert {name: count for name, count in hanging.items() if count} == {wiring.caches.pods.name: 1}
    for ctrl in (wiring.leaderworkersets, wiring.pods, wiring.replacement):
        ctrl.connect()
    assert len(wiring.caches.pods._handlers) > 1 and wiring.caches.statefulsets._handlers


def test_only_the_controller_registration_calls_add_handler() -> None:
    """One owner: a handler hangs on a cache through a Controller (leader only) or,
    for what every replica serves, through add_replica_handler, never directly."""
    src = REPO / "src"
    callers = sorted(
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if ".add_handler(" in path.read_text()
    )
    assert callers == ["leaderworkerset/runtime/controller.py"]


def test_every_metric_family_is_on_the_registry_the_manager_serves(tmp_path: Path) -> None:
    """Built once (the manager's RuntimeMetrics) and handed to every cache, controller,
    queue and reconciler the wiring makes; /metrics serves that registry."""
    manager = new_manager(tmp_path)
    wiring = setup_controllers(manager)
    served = manager.metrics
    assert wiring.ds_caches is not None and wiring.disaggregatedsets is not None
    assert manager.metrics_server.registry is served.registry
    assert manager.webhook_server.metrics is served
    for informer in [*wiring.caches.all(), *wiring.ds_caches.all()]:
        assert informer.metrics is served, informer.name
    controllers = [
        wiring.leaderworkersets,
        wiring.pods,
        wiring.replacement,
        wiring.disaggregatedsets,
    ]
    for ctrl in controllers:
        assert ctrl.metrics is served and ctrl.queue.metrics is served, ctrl.name
    reconcilers = [ctrl._reconcile for ctrl in controllers]
    group_metrics = [getattr(r, "group_metrics", None) for r in reconcilers[:3]]
    assert all(m is group_metrics[0] and m.registry is served.registry for m in group_metrics)
    pods = reconcilers[1]
    assert isinstance(pods, PodReconciler) and pods.restarter.metrics is group_metrics[0]
    ds_metrics = getattr(reconcilers[3], "metrics", None)
    assert ds_metrics is not None and ds_metrics.registry is served.registry


METRIC_HOLDERS = (
    MetricWrapperBase,
    CollectorRegistry,
    RuntimeMetrics,
    GroupMetrics,
    DisaggregatedSetMetrics,
)


def test_no_module_holds_a_metric_family() -> None:
    """What updates a metric is handed its family; none is a module global that any
    test (or two managers in one process) would share."""
    package = importlib.import_module("leaderworkerset")
    held = []
    for module_info in pkgutil.walk_packages(package.__path__, "leaderworkerset."):
        if module_info.name.endswith(".__main__"):
            continue  # runs a command when imported
        module = importlib.import_module(module_info.name)
        held += [
            f"{module_info.name}.{name}"
            for name, value in vars(module).items()
            if isinstance(value, METRIC_HOLDERS)
        ]
    assert held == []
