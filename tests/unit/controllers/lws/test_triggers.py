"""What wakes the LeaderWorkerSet reconciler (controllers/lws/triggers.py): its own
LeaderWorkerSet except for status writes, what it owns, the worker StatefulSets and
leader pods labelled with its name, each paced (but a group turning Ready mid-rollout);
and a new word on held replacements."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.held import HeldReplacements
from leaderworkerset.controllers.lws.reconciler import LeaderWorkerSetReconciler
from leaderworkerset.controllers.lws.rolling_update import rolling_in_progress
from leaderworkerset.controllers.lws.triggers import LWS_CONTROLLER, setup_lws_controller
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.controller import Controller
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.manager import new_manager
from tests.toolkit.pods import leader_pod
from tests.toolkit.statefulsets import leader_sts, worker_sts
from tests.toolkit.waiting import eventually

JSON = dict[str, Any]
KEY = "default/lws"
PACE = 60.0


@dataclass
class Wired:
    controller: Controller
    caches: LwsCaches
    reconciler: LeaderWorkerSetReconciler
    client: FakeApiClient

    def event(self, informer: Informer, obj: JSON, kind: str = "MODIFIED") -> None:
        informer._handle_event({"type": kind, "object": obj})

    async def queued(self) -> list[str]:
        """The keys ready to be reconciled now, handed out and marked done."""
        keys = []
        while len(self.controller.queue):
            key = await self.controller.queue.get()
            assert key is not None
            self.controller.queue.done(key)
            keys.append(key)
        return keys


@contextlib.asynccontextmanager
async def wired(tmp_path: Path, *objects: JSON, pace: float = PACE) -> AsyncIterator[Wired]:
    client = FakeApiClient()
    async with seeded_caches(*objects) as caches:
        reconciler = LeaderWorkerSetReconciler(
            client, caches, options=ControllerOptions(child_event_pace=pace)
        )
        controller = setup_lws_controller(new_manager(tmp_path), reconciler, workers=2)
        controller.connect()  # as start() does, without workers: the test takes the keys
        yield Wired(controller, caches, reconciler, client)


def owned_by_the_lws(kind: str, name: str = "lws", **labels: str) -> JSON:
    return {
        "apiVersion": "v1" if kind == "Service" else "apps/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": c.API_VERSION,
                    "kind": c.KIND,
                    "name": "lws",
                    "uid": "uid-lws",
                    "controller": True,
                }
            ],
        },
        "spec": {"replicas": 1},
    }


def changed(obj: JSON, version: str, **spec: Any) -> JSON:
    """`obj` after a write: a new resourceVersion (the caches pass on only those) and
    `spec` members changed."""
    return {
        **obj,
        "metadata": {**obj["metadata"], "resourceVersion": version},
        "spec": {**obj.get("spec", {}), **spec},
    }


def worker_pod() -> JSON:
    pod = leader_pod("lws", 0, "k", name="lws-0-1")
    pod["metadata"]["labels"][c.LABEL_WORKER_INDEX] = "1"
    return pod


async def test_the_controller_is_named_and_sized_as_asked(tmp_path: Path) -> None:
    async with wired(tmp_path) as w:
        assert (w.controller.name, w.controller.workers) == (LWS_CONTROLLER, 2)


async def test_a_queued_key_is_reconciled_by_the_lws_reconciler(tmp_path: Path) -> None:
    lws = lws_object()
    async with wired(tmp_path, lws) as w:
        w.client.put(LEADERWORKERSETS, lws)
        await w.controller.start()
        try:
            w.controller.enqueue(KEY)
            await eventually(lambda: w.client.calls_of("replace", "leaderworkersets"))
        finally:
            await w.controller.stop(5.0)


async def test_a_change_of_the_lws_wakes_it_but_its_status_write_does_not(
    tmp_path: Path,
) -> None:
    lws = lws_object()
    async with wired(tmp_path, lws) as w:
        assert await w.queued() == [KEY]  # what the cache holds at start, once
        w.event(w.caches.leaderworkersets, {**changed(lws, "9"), "status": {"replicas": 2}})
        assert await w.queued() == []
        w.event(w.caches.leaderworkersets, changed(lws, "10", replicas=3))
        assert await w.queued() == [KEY]
        # Its own events are not paced: a spec change right after a pass is seen at once.
        w.event(w.caches.leaderworkersets, changed(lws, "11", replicas=4))
        assert await w.queued() == [KEY]


@pytest.mark.parametrize("kind", ["StatefulSet", "Deployment", "Service"])
async def test_what_the_lws_owns_wakes_it(tmp_path: Path, kind: str) -> None:
    async with wired(tmp_path) as w:
        informer = {
            "StatefulSet": w.caches.statefulsets,
            "Deployment": w.caches.deployments,
            "Service": w.caches.services,
        }[kind]
        w.event(informer, owned_by_the_lws(kind), "ADDED")
        assert await w.queued() == [KEY]
        owned_by_another = owned_by_the_lws(kind, name="x")
        owned_by_another["metadata"]["ownerReferences"][0]["kind"] = "Other"
        w.event(informer, owned_by_another, "ADDED")
        assert await w.queued() == []


async def test_a_worker_statefulset_and_a_leader_pod_wake_their_lws(tmp_path: Path) -> None:
    async with wired(tmp_path) as w:
        w.event(w.caches.statefulsets, worker_sts("lws", 0, "k"), "ADDED")
        assert await w.queued() == [KEY]
    async with wired(tmp_path) as w:
        w.event(w.caches.pods, leader_pod("lws", 0, "k"), "ADDED")
        assert await w.queued() == [KEY]


async def test_a_worker_pod_does_not_wake_its_lws(tmp_path: Path) -> None:
    async with wired(tmp_path) as w:
        w.event(w.caches.pods, worker_pod(), "ADDED")
        assert await w.queued() == []


def sources(w: Wired) -> list[tuple[Informer, JSON]]:
    return [
        (w.caches.statefulsets, owned_by_the_lws("StatefulSet")),
        (w.caches.deployments, owned_by_the_lws("Deployment")),
        (w.caches.services, owned_by_the_lws("Service")),
        (w.caches.statefulsets, worker_sts("lws", 0, "k")),
        (w.caches.pods, leader_pod("lws", 0, "k")),
    ]


@pytest.mark.parametrize("source", range(5))
async def test_events_of_the_lws_children_are_paced(tmp_path: Path, source: int) -> None:
    """A lone event is reconciled at once; another within the pace waits for it."""
    async with wired(tmp_path) as w:
        informer, obj = sources(w)[source]
        w.event(informer, obj, "ADDED")
        assert await w.queued() == [KEY]
        w.event(informer, changed(obj, "9", replicas=7))
        assert await w.queued() == []
        assert w.controller.queue.waiting == 1


@pytest.mark.parametrize("source", range(5))
async def test_a_pace_of_zero_turns_pacing_off(tmp_path: Path, source: int) -> None:
    async with wired(tmp_path, pace=0) as w:
        informer, obj = sources(w)[source]
        w.event(informer, obj, "ADDED")
        assert await w.queued() == [KEY]
        w.event(informer, changed(obj, "9", replicas=7))
        assert await w.queued() == [KEY]


async def test_a_new_word_on_held_replacements_wakes_the_lws(tmp_path: Path) -> None:
    async with wired(tmp_path) as w:
        w.reconciler.held.publish(KEY, HeldReplacements(("lws-new",), ("group",)))
        assert await w.queued() == [KEY]
        w.reconciler.held.publish(KEY, HeldReplacements(("lws-new",), ("group",)))
        assert await w.queued() == []


def _newer(obj: JSON) -> JSON:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "9"}}


def _ready_transitions() -> list[tuple[str, JSON, JSON]]:
    """(which informer, before, after) of each half of a group's last step to Ready."""
    return [
        ("pods", leader_pod("lws", 3, "new", ready=False), _newer(leader_pod("lws", 3, "new"))),
        (
            "statefulsets",
            worker_sts("lws", 3, "new", ready=False),
            _newer(worker_sts("lws", 3, "new")),
        ),
    ]


@pytest.mark.parametrize("half", range(2))
async def test_a_group_becoming_ready_mid_rollout_is_not_paced(tmp_path: Path, half: int) -> None:
    """The next partition step waits on the group's last half to turn Ready: that event
    is reconciled at once even within the pace of the pass its first half caused, and
    leaves no paced pass behind."""
    leader = leader_sts("lws", "new", replicas=10, partition=3)
    which, before, after = _ready_transitions()[half]
    async with wired(tmp_path, leader) as w:
        informer = getattr(w.caches, which)
        w.event(informer, before, "ADDED")
        await w.queued()  # the seeded StatefulSet and the first event: a pass just ran
        w.event(informer, after)
        assert await w.queued() == [KEY]
        assert w.controller.queue.waiting == 0


@pytest.mark.parametrize("half", range(2))
async def test_a_group_becoming_ready_outside_a_rollout_stays_paced(
    tmp_path: Path, half: int
) -> None:
    """A scale-up's thousand groups turning Ready are what the pace is for."""
    leader = leader_sts("lws", "new", replicas=10, partition=0)
    which, before, after = _ready_transitions()[half]
    async with wired(tmp_path, leader) as w:
        informer = getattr(w.caches, which)
        w.event(informer, before, "ADDED")
        await w.queued()
        w.event(informer, after)
        assert await w.queued() == []
        assert w.controller.queue.waiting == 1


async def test_the_leader_statefulset_stepped_mid_rollout_is_not_paced(tmp_path: Path) -> None:
    """The pass that made a new revision raised the partition to `replicas`; its write
    coming back takes the first step down at once, not a pace later."""
    before = leader_sts("lws", "old", replicas=10, partition=0)
    raised = _newer(leader_sts("lws", "new", replicas=10, partition=10))
    async with wired(tmp_path, before) as w:
        await w.queued()  # the pass that raised it just ran
        w.event(w.caches.statefulsets, raised)
        assert await w.queued() == [KEY]
        assert w.controller.queue.waiting == 0
        # A status-only change of the leader StatefulSet stays paced.
        status = {**raised, "metadata": {**raised["metadata"], "resourceVersion": "10"},
                  "status": {"replicas": 10, "readyReplicas": 3}}  # fmt: skip
        w.event(w.caches.statefulsets, status)
        assert await w.queued() == []
        assert w.controller.queue.waiting == 1


async def test_surge_replicas_still_to_take_back_count_as_mid_rollout() -> None:
    assert rolling_in_progress(leader_sts("lws", "k", replicas=12, partition=0, recorded=10))
    assert not rolling_in_progress(leader_sts("lws", "k", replicas=10, partition=0))
    assert rolling_in_progress(leader_sts("lws", "k", replicas=10, partition=1))
