"""What wakes the group-replacement reconciler, as `setup_replacement_controller`
wires it: which events of pods, LeaderWorkerSets, worker StatefulSets and Nodes
queue which LeaderWorkerSet, and the cache handlers that tick off its gate removals."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import LwsCaches, build_caches
from leaderworkerset.controllers.replacement.reconciler import UNGATED, ReplacementReconciler
from leaderworkerset.controllers.replacement.triggers import (
    REPLACEMENT_CONTROLLER,
    setup_replacement_controller,
)
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.controller import Controller
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import hash_lws
from tests.toolkit.manager import new_manager
from tests.toolkit.pods import container, lws_labels
from tests.toolkit.pods import pod as a_pod
from tests.toolkit.statefulsets import controller_ref, statefulset
from tests.toolkit.waiting import eventually

JSON = dict[str, Any]
KEY = "default/lws"
_versions = itertools.count(1)


def deliver(informer: Informer, kind: str, obj: JSON) -> JSON:
    """A watch event of `informer`, with a fresh resourceVersion (as the server sends)."""
    obj = copy.deepcopy(obj)
    obj["metadata"]["resourceVersion"] = str(next(_versions))
    informer._handle_event({"type": kind, "object": obj})
    return obj


def pod(name: str, worker: str = "0", *, gated: bool = False, node: str = "") -> JSON:
    return a_pod(
        name,
        "default",
        kind="Pod",
        uid=f"uid-{name}",
        labels=lws_labels("lws", worker=worker, group_key="k" * 40),
        containers=[container("c", "pause")],
        gates=[c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        node=node or None,
        phase="Pending",
    )


def worker_set(*, owned: bool = True) -> JSON:
    return statefulset(
        "lws-kkkkkkkk",
        "default",
        kind="StatefulSet",
        uid="uid-sts",
        labels={c.LABEL_SET_NAME: "lws"},
        owners=[controller_ref("Pod", "leader", "uid-leader")] if owned else None,
        replicas=1,
        status={},
    )


def node(name: str, ready: str, since: str = "2026-01-01T00:00:00Z") -> JSON:
    condition = {"type": "Ready", "status": ready, "lastTransitionTime": since}
    return {"kind": "Node", "metadata": {"name": name}, "status": {"conditions": [condition]}}


class Wired:
    """The controller as `setup_replacement_controller` builds it, on caches that never
    list: the test delivers the watch events."""

    def __init__(self, tmp_path: Path, *, nodes: bool = True) -> None:
        self.client = FakeApiClient()
        self.caches: LwsCaches = build_caches(self.client)
        if not nodes:
            self.caches.nodes = None
        self.reconciler = ReplacementReconciler(self.client, self.caches)
        self.manager = new_manager(tmp_path)
        self.controller: Controller = setup_replacement_controller(
            self.manager, self.reconciler, workers=3
        )
        self.controller.connect()  # as start() does, without workers: the test takes the keys

    async def woken(self) -> list[str]:
        """The keys queued so far (taken off the queue)."""
        keys = []
        queue = self.controller.queue
        while len(queue):
            key = await queue.get()
            assert key is not None
            queue.done(key)
            keys.append(key)
        return keys


async def test_a_leader_created_gated_is_ungated_by_the_controller_it_wakes(
    tmp_path: Path,
) -> None:
    wired = Wired(tmp_path)
    assert (wired.controller.name, wired.controller.workers) == (REPLACEMENT_CONTROLLER, 3)
    deliver(wired.caches.leaderworkersets, "ADDED", hash_lws("lws", "default"))
    for informer in wired.caches.all():
        informer.synced.set()
    await wired.woken()
    await wired.controller.start()
    try:
        deliver(wired.caches.pods, "ADDED", pod("leader", gated=True))
        await eventually(lambda: [p.name for p in wired.client.calls_of("patch")] == ["leader"])
    finally:
        await wired.controller.stop()


async def test_pod_events_that_change_t_or_g_wake_their_leaderworkerset(tmp_path: Path) -> None:
    wired = Wired(tmp_path)
    pods = wired.caches.pods
    deliver(pods, "ADDED", pod("leader-w", "1"))
    assert await wired.woken() == [], "a worker's creation adds to T only: nobody is admitted"
    leader = deliver(pods, "ADDED", pod("leader", gated=True))
    assert await wired.woken() == [KEY]
    deliver(pods, "MODIFIED", {**leader, "status": {"phase": "Pending", "reason": "x"}})
    assert await wired.woken() == [], "nothing that counts changed"
    deliver(pods, "MODIFIED", {**leader, "spec": {"containers": []}})
    assert await wired.woken() == [KEY], "its gate was removed"


async def test_the_leaderworkerset_wakes_it_unless_only_its_status_changed(
    tmp_path: Path,
) -> None:
    wired = Wired(tmp_path)
    lws = deliver(wired.caches.leaderworkersets, "ADDED", hash_lws("lws", "default"))
    assert await wired.woken() == [KEY]
    deliver(wired.caches.leaderworkersets, "MODIFIED", {**lws, "status": {"replicas": 1}})
    assert await wired.woken() == []
    immediate = copy.deepcopy(lws)
    immediate["spec"]["groupReplacementPolicy"] = c.GROUP_REPLACEMENT_IMMEDIATE
    immediate["metadata"]["generation"] = 2
    deliver(wired.caches.leaderworkersets, "MODIFIED", immediate)
    assert await wired.woken() == [KEY]


async def test_a_worker_statefulset_wakes_it_when_orphaned_or_its_deletion_starts(
    tmp_path: Path,
) -> None:
    wired = Wired(tmp_path)
    sets = wired.caches.statefulsets
    owned = deliver(sets, "ADDED", worker_set())
    assert await wired.woken() == [], "a new worker set frees nothing"
    deliver(sets, "MODIFIED", {**owned, "status": {"availableReplicas": 1}})
    assert await wired.woken() == []
    orphaned = deliver(sets, "MODIFIED", worker_set(owned=False))
    assert await wired.woken() == [KEY]
    deleting = copy.deepcopy(orphaned)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    deliver(sets, "MODIFIED", deleting)
    assert await wired.woken() == [KEY]
    deliver(sets, "DELETED", deleting)
    assert await wired.woken() == []


async def test_a_node_changing_readiness_wakes_the_leaderworkersets_on_it(
    tmp_path: Path,
) -> None:
    wired = Wired(tmp_path)
    nodes = wired.caches.nodes
    assert nodes is not None
    deliver(wired.caches.pods, "ADDED", pod("leader", node="n1"))
    await wired.woken()
    deliver(nodes, "ADDED", node("n2", "True"))
    n1 = deliver(nodes, "ADDED", node("n1", "True"))
    assert await wired.woken() == [], "a new node frees nothing"
    deliver(nodes, "MODIFIED", n1)
    assert await wired.woken() == [], "its Ready condition is as it was"
    deliver(nodes, "MODIFIED", node("n1", "Unknown", "2026-01-01T00:01:00Z"))
    deliver(nodes, "MODIFIED", node("n2", "False", "2026-01-01T00:01:00Z"))
    assert await wired.woken() == [KEY], "only the LeaderWorkerSets with a pod on the node"


async def test_without_a_node_cache_nodes_are_not_watched(tmp_path: Path) -> None:
    wired = Wired(tmp_path, nodes=False)
    deliver(wired.caches.pods, "ADDED", pod("leader"))
    assert await wired.woken() == [KEY]


async def test_gate_removals_are_ticked_off_as_the_pod_cache_sees_them(tmp_path: Path) -> None:
    wired = Wired(tmp_path)
    pods, reconciler = wired.caches.pods, wired.reconciler
    first = deliver(pods, "ADDED", pod("first", gated=True))
    second = deliver(pods, "ADDED", pod("second", gated=True))
    reconciler.expectations.expect_deletions(KEY, UNGATED, ["first", "second"])
    assert reconciler.ungating(KEY) == {"first", "second"}
    deliver(pods, "MODIFIED", {**first, "spec": {"containers": []}})
    assert reconciler.ungating(KEY) == {"second"}
    deliver(pods, "DELETED", second)
    assert reconciler.ungating(KEY) == set()
