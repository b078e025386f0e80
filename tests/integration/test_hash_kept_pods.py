"""A Hash-mode group whose pods nobody will delete, against the real control plane
(docs/hash-mode.md, "Pods nobody deletes"). PostTermination waits for a group's pods
to be gone; two ways of keeping them must not hold the replacement for ever:

- `kubectl delete pod <leader> --cascade=orphan`: the garbage collector takes the
  worker StatefulSet's owner reference away and leaves it and its Running worker on a
  Ready node. They are no longer the LeaderWorkerSet's: the replacement is admitted
  at once, and the kept pods are left alone, as the user asked.
- a foreign finalizer on the worker StatefulSet: left to the garbage collector
  (teardown.groupRestart: GarbageCollector) its deletion never ends and its pods are
  never deleted, so the replacement waits `terminationOverrunRelease` from the set's
  deletion; with the default parallel teardown the controller deletes the pods beside
  the held set, and the replacement is admitted once they are gone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from lws_localcluster.deploy import RunningController

from leaderworkerset.api.resources import LEADERWORKERSETS, PODS, STATEFULSETS
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.group.options import ReleaseThresholds
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import (
    gated_pod,
    group_pods,
    is_leader,
    key_of,
    leaders,
    lws_event_notes,
    name_of,
    new_leader,
    replacement_bounds,
    still_gated,
    wait_ready,
)
from tests.toolkit.lws import hash_lws
from tests.toolkit.waiting import eventually, stays

pytestmark = pytest.mark.asyncio(loop_scope="session")

JSON = dict[str, Any]

OVERRUN_BOUND = 8.0  # room on a loaded machine to see the replacement held first
FINALIZER = "example.com/keep"


@pytest.fixture
def short_overrun_bound(lws_controller: RunningController) -> Iterator[None]:
    with replacement_bounds(
        lws_controller, ReleaseThresholds(node_not_ready=0, termination_overrun=OVERRUN_BOUND)
    ):
        yield


async def admitted(api: ApiClient, namespace: str, pod: str) -> float | None:
    return None if gated_pod(await api.get(PODS, pod, namespace)) else time.time()


async def test_an_orphaned_group_does_not_hold_its_replacement(
    lws_controller: RunningController, nodesim_api: ApiClient, namespace: str
) -> None:
    api = nodesim_api
    await api.create(LEADERWORKERSETS, hash_lws("orphan", namespace, replicas=1, size=2))
    await wait_ready(api, namespace, "orphan", 1)
    (victim,) = await leaders(api, namespace, "orphan")
    old_key = key_of(victim)
    (worker,) = [p for p in await group_pods(api, namespace, "orphan", old_key) if not is_leader(p)]

    await api.delete(PODS, name_of(victim), namespace, propagation_policy="Orphan")
    replacement = name_of(await new_leader(api, namespace, "orphan", {old_key}))
    await eventually(
        lambda: admitted(api, namespace, replacement), within=30, what="the replacement admitted"
    )
    await wait_ready(api, namespace, "orphan", 1)

    # What the user kept is still there, owned by nobody, untouched.
    kept = await api.get(PODS, name_of(worker), namespace)
    assert kept["metadata"].get("deletionTimestamp") is None
    (owner,) = kept["metadata"]["ownerReferences"]
    kept_set = await api.get(STATEFULSETS, owner["name"], namespace)
    assert not kept_set["metadata"].get("ownerReferences")
    notes = await eventually(
        lambda: lws_event_notes(api, namespace, "orphan", ev.REASON_REPLACEMENT_RELEASED),
        within=30,
        what="the release Event",
    )
    assert any(old_key[:8] in n and "orphaned" in n for n in notes), notes


@pytest.fixture
def teardown_by_the_collector(lws_controller: RunningController) -> Iterator[None]:
    """teardown.groupRestart: GarbageCollector in the session's controller: a leader's
    dependents are left to the garbage collector, as upstream leaves them."""
    assert lws_controller.controllers is not None
    pods = lws_controller.controllers.pods._reconcile
    assert isinstance(pods, PodReconciler)
    pods.restarter.teardown.parallel = False
    try:
        yield
    finally:
        pods.restarter.teardown.parallel = True


@dataclass(frozen=True)
class HeldGroup:
    worker: JSON
    worker_set: str
    deleted_at: float  # when its leader was deleted
    replacement: str  # the new leader's name


@contextlib.asynccontextmanager
async def leader_deleted_under_finalizer(
    api: ApiClient, namespace: str
) -> AsyncIterator[HeldGroup]:
    """A Hash group of 2 whose worker StatefulSet carries a foreign finalizer, its
    leader deleted (`kubectl delete pod`) and its replacement made; the finalizer is
    taken away at the end."""
    await api.create(LEADERWORKERSETS, hash_lws("kept", namespace, replicas=1, size=2))
    await wait_ready(api, namespace, "kept", 1)
    (victim,) = await leaders(api, namespace, "kept")
    (worker,) = [
        p for p in await group_pods(api, namespace, "kept", key_of(victim)) if not is_leader(p)
    ]
    worker_set = worker["metadata"]["ownerReferences"][0]["name"]
    await api.patch(
        STATEFULSETS, worker_set, {"metadata": {"finalizers": [FINALIZER]}}, namespace=namespace
    )
    try:
        deleted_at = time.time()
        await api.delete(PODS, name_of(victim), namespace)
        replacement = name_of(await new_leader(api, namespace, "kept", {key_of(victim)}))
        yield HeldGroup(worker, worker_set, deleted_at, replacement)
    finally:
        await api.patch(
            STATEFULSETS, worker_set, {"metadata": {"finalizers": None}}, namespace=namespace
        )


async def test_a_finalizer_on_the_worker_set_holds_the_replacement_only_for_the_bound(
    lws_controller: RunningController,
    short_overrun_bound: None,
    teardown_by_the_collector: None,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """Left to the collector, the set's deletion never ends and its pods are never
    deleted: the replacement waits terminationOverrunRelease from the set's deletion."""
    api = nodesim_api
    async with leader_deleted_under_finalizer(api, namespace) as held:

        async def set_deleting() -> bool:
            sts = await api.get(STATEFULSETS, held.worker_set, namespace)
            return bool(sts["metadata"].get("deletionTimestamp"))

        await eventually(set_deleting, within=30, what="the worker set's deletion begun")
        # Gated while the bound runs (deletionTimestamp has whole seconds: 1 s slack).
        await stays(
            lambda: still_gated(api, namespace, held.replacement),
            seconds=max(0.0, held.deleted_at + OVERRUN_BOUND - 1.5 - time.time()),
            what="the replacement gated before the bound",
        )
        at = await eventually(
            lambda: admitted(api, namespace, held.replacement),
            within=30,
            what="the replacement admitted after the bound",
        )
        waited = at - held.deleted_at
        print(f"\n[hash] finalizer-held set: replacement admitted {waited:.2f}s after")
        kept = await api.get(PODS, name_of(held.worker), namespace)
        assert kept["metadata"].get("deletionTimestamp") is None, "nobody deleted the worker"


async def test_a_finalizer_on_the_worker_set_holds_only_the_set_by_default(
    lws_controller: RunningController,
    short_overrun_bound: None,
    nodesim_api: ApiClient,
    namespace: str,
) -> None:
    """With the default parallel teardown, a leader deleted by someone else has its worker
    set deleted in the foreground and its workers beside it: the finalizer holds the set
    object, not the pods, and the replacement is admitted once they are gone, before the
    bound."""
    api = nodesim_api
    async with leader_deleted_under_finalizer(api, namespace) as held:

        async def worker_gone() -> bool:
            return await api.get_or_none(PODS, name_of(held.worker), namespace) is None

        await eventually(worker_gone, within=30, what="the worker deleted")
        at = await eventually(
            lambda: admitted(api, namespace, held.replacement),
            within=30,
            what="the replacement admitted",
        )
        assert at - held.deleted_at < OVERRUN_BOUND, "admitted only at the bound"
        sts = await api.get(STATEFULSETS, held.worker_set, namespace)
        assert sts["metadata"].get("deletionTimestamp"), "the set is held by its finalizer"
