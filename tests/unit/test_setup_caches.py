"""The controllers start only once every cache their reconcilers read has synced.

Regression: a restarted manager's LWS reconciler ran before the ControllerRevision
cache had listed, found no revision for the leader StatefulSet's key, and created a
duplicate revision under that key that truncation never removes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from leaderworkerset.group.caches import LwsCaches
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.controller import Controller
from leaderworkerset.wiring import LwsControllers, setup_controllers


class FakeManager:
    """What setup_controllers needs of a Manager; nothing is started."""

    def __init__(self) -> None:
        self.client: Any = object()
        self.recorder = None
        self.caches: list[Informer] = []
        self.runnables: list[Any] = []

    def add_cache(self, cache: Informer, *, name: str = "") -> None:
        self.caches.append(cache)

    def add(self, runnable: Any, **_: Any) -> None:
        self.runnables.append(runnable)


def wired() -> LwsControllers:
    return setup_controllers(FakeManager(), enable_webhooks=False)  # type: ignore[arg-type]


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


def controller_named(wiring: LwsControllers, name: str) -> Controller:
    (found,) = [
        ctrl
        for ctrl in (wiring.leaderworkersets, wiring.pods, wiring.replacement)
        if ctrl.name == name
    ]
    return found


@pytest.mark.parametrize("controller", ["leaderworkerset", "pod", "group-replacement"])
async def test_controller_waits_for_every_cache_it_reads(controller: str) -> None:
    for position in range(len(read_caches(wired().caches)[controller])):
        wiring = wired()
        missing = read_caches(wiring.caches)[controller][position]
        for informer in wiring.caches.all():
            if informer is not missing:
                informer.synced.set()
        ctrl = controller_named(wiring, controller)
        ctrl.sync_timeout = 0.01
        with pytest.raises(TimeoutError, match=f"cache {re.escape(missing.name)} not synced"):
            await ctrl.start()


async def test_controllers_start_once_all_caches_synced() -> None:
    wiring = wired()
    for informer in wiring.caches.all():
        informer.synced.set()
    for name in ("leaderworkerset", "pod", "group-replacement"):
        ctrl = controller_named(wiring, name)
        await ctrl.start()
        await ctrl.stop()
