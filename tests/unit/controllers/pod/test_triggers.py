"""What wakes the pod reconciler: all of a leader's pod events, of a worker's only those
its restart policy can act on, a Hash worker's readiness (its leader), a worker
StatefulSet (its leader), an LWS's start-up settings (its leaders); and the controller
that runs it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import revision_key_of
from leaderworkerset.controllers.pod.reconciler import PodReconciler
from leaderworkerset.controllers.pod.triggers import (
    POD_RECONCILER_EVENTS,
    hash_leader_of_worker,
    setup_pod_controller,
)
from leaderworkerset.controllers.revisions import new_revision
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.controller import Controller
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.manager import new_manager
from tests.toolkit.pods import leader_pod, lws_labels
from tests.toolkit.pods import pod as a_pod
from tests.toolkit.statefulsets import worker_sts
from tests.toolkit.waiting import eventually


def pod(worker_index: str, *, restarts: int = 0, deleting: bool = False) -> dict[str, Any]:
    return a_pod(
        f"p-{worker_index}",
        "ns",
        deleted="2026-12-01T00:00:00Z" if deleting else None,
        labels=lws_labels("lws", worker=worker_index),
        phase="Running",
        container_statuses=[{"name": "a", "restartCount": restarts}],
    )


def test_every_leader_event_passes() -> None:
    assert POD_RECONCILER_EVENTS.create is not None and POD_RECONCILER_EVENTS.update is not None
    assert POD_RECONCILER_EVENTS.create(pod("0"))
    assert POD_RECONCILER_EVENTS.update(pod("0"), pod("0"))


def test_a_worker_coming_up_is_left_out() -> None:
    assert POD_RECONCILER_EVENTS.create is not None and POD_RECONCILER_EVENTS.update is not None
    assert not POD_RECONCILER_EVENTS.create(pod("3"))
    assert not POD_RECONCILER_EVENTS.update(pod("3"), pod("3"))


def test_a_worker_the_restart_policy_acts_on_passes() -> None:
    assert POD_RECONCILER_EVENTS.update is not None
    assert POD_RECONCILER_EVENTS.update(pod("3"), pod("3", restarts=1))
    assert POD_RECONCILER_EVENTS.update(pod("3"), pod("3", deleting=True))
    # Deletions are never filtered: a vanished worker is the restart policy's too.
    assert POD_RECONCILER_EVENTS.delete is None


# --- what wakes the pod controller, end to end through its sources ----------------------------
KEY = "0123456789abcdef0123456789abcdef01234567"


def controller_ref(kind: str, api_version: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}


def hash_group() -> list[dict[str, Any]]:
    """Hash LWS "hash" with one group (leader, worker StatefulSet, one unready worker) and
    Ordinal LWS "ord" with one leader."""
    lws = lws_object("hash", replicas=1, size=2, groupIdentity=c.GROUP_IDENTITY_HASH)
    leader = leader_pod("hash", KEY, "rev", name="hash-abc-x1")
    sts = worker_sts("hash", 0, "rev")
    sts["metadata"].update(name="hash-abc-x1", uid="uid-sts")
    sts["metadata"]["ownerReferences"] = [controller_ref("Pod", "v1", "hash-abc-x1", "uid-l")]
    worker = leader_pod("hash", KEY, "rev", ready=False, name="hash-abc-x1-1")
    worker["metadata"]["labels"][c.LABEL_WORKER_INDEX] = "1"
    worker["metadata"]["annotations"] = {c.ANNOTATION_LEADER_NAME: "hash-abc-x1"}
    ordinal = lws_object("ord", replicas=1, size=2)
    return [lws, leader, sts, worker, ordinal, leader_pod("ord", 0, "rev")]


async def queued(controller: Controller) -> set[str]:
    """Take every key the controller's queue holds now."""
    keys = set()
    while len(controller.queue):
        key = await controller.queue.get()
        assert key is not None
        controller.queue.done(key)
        keys.add(key)
    return keys


def modified(informer: Informer, obj: dict[str, Any], version: str) -> None:
    """Deliver an update of `obj` as its watch would (a new resourceVersion)."""
    changed = copy.deepcopy(obj)
    changed["metadata"]["resourceVersion"] = version
    informer._handle_event({"type": "MODIFIED", "object": changed})


async def test_the_pod_controller_is_woken_by_what_its_reconciler_reads(tmp_path: Path) -> None:
    lws, leader, sts, worker, ordinal, ord_leader = hash_group()
    async with seeded_caches(lws, leader, sts, worker, ordinal, ord_leader) as caches:
        pods = PodReconciler(FakeApiClient(), caches)
        controller = setup_pod_controller(new_manager(tmp_path), pods, workers=3)
        controller.connect()  # as start() does, without workers: the test takes the keys
        assert controller.workers == 3
        # Every leader at once; a worker only when its restart policy could act.
        assert await queued(controller) == {"default/hash-abc-x1", "default/ord-0"}
        # A worker turning Ready: its Hash leader, for the group-ready gate.
        ready = copy.deepcopy(worker)
        ready["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        modified(caches.pods, ready, "2")
        assert await queued(controller) == {"default/hash-abc-x1"}
        # Any other change of a worker that its restart policy cannot act on: nobody.
        ready["metadata"]["labels"]["touched"] = "yes"
        modified(caches.pods, ready, "3")
        assert await queued(controller) == set()
        # The leader's worker StatefulSet: its owner.
        modified(caches.statefulsets, sts, "2")
        assert await queued(controller) == {"default/hash-abc-x1"}
        # An LWS's start-up settings: its leaders; any other change: nobody.
        changed = copy.deepcopy(ordinal)
        changed["spec"]["replicas"] = 3
        modified(caches.leaderworkersets, changed, "2")
        assert await queued(controller) == set()
        changed["spec"]["startupPolicy"] = c.STARTUP_POLICY_LEADER_READY
        modified(caches.leaderworkersets, changed, "3")
        assert await queued(controller) == {"default/ord-0"}
        changed["metadata"]["annotations"] = {c.ANNOTATION_EXCLUSIVE_TOPOLOGY: "zone"}
        modified(caches.leaderworkersets, changed, "4")
        assert await queued(controller) == {"default/ord-0"}
        # A pod's deletion is remembered for the restart policy before its reconcile.
        caches.pods._handle_event({"type": "DELETED", "object": worker})
        assert "default/hash-abc-x1-1" in pods.tombstones
        assert "default/hash-abc-x1-1" in await queued(controller)


async def test_the_pod_controller_runs_the_pod_reconciler(tmp_path: Path) -> None:
    ordinal = lws_object("ord", replicas=1, size=2)
    revision = new_revision(ordinal, 1)
    leader = leader_pod("ord", 0, revision_key_of(revision))
    client = FakeApiClient()
    async with seeded_caches(ordinal, revision, leader) as caches:
        controller = setup_pod_controller(new_manager(tmp_path), PodReconciler(client, caches))
        await controller.start()
        try:
            await eventually(lambda: client.calls_of("create", "statefulsets"), within=10)
        finally:
            await controller.stop()
    assert [call.name for call in client.calls_of("create", "statefulsets")] == ["ord-0"]


async def test_a_standby_keeps_nothing_of_what_is_deleted_until_it_connects(
    tmp_path: Path,
) -> None:
    lws, leader, sts, worker, ordinal, ord_leader = hash_group()
    async with seeded_caches(lws, leader, sts, worker, ordinal, ord_leader) as caches:
        pods = PodReconciler(FakeApiClient(), caches)
        controller = setup_pod_controller(new_manager(tmp_path), pods)
        owner = {"metadata": {"uid": "uid-l"}}
        pods.worker_creates.created(owner)
        # Not leading: no tombstone for a deleted pod (it would never be reconciled
        # away), no key queued, and what the leader waits for is left as it is.
        caches.pods._handle_event({"type": "DELETED", "object": ord_leader})
        caches.statefulsets._handle_event({"type": "DELETED", "object": sts})
        assert pods.tombstones == {} and len(controller.queue) == 0
        assert pods.worker_creates.wait_left(owner) > 0
        controller.connect()
        await queued(controller)
        caches.pods._handle_event({"type": "DELETED", "object": worker})
        assert set(pods.tombstones) == {"default/hash-abc-x1-1"}
        # A worker StatefulSet deleted: its leader no longer waits for it to appear.
        caches.statefulsets._handle_event({"type": "MODIFIED", "object": sts})
        caches.statefulsets._handle_event({"type": "DELETED", "object": sts})
        assert pods.worker_creates.wait_left(owner) == 0


async def test_a_hash_worker_wakes_only_its_named_leader() -> None:
    lws, _, _, worker, ordinal, ord_leader = hash_group()
    async with seeded_caches(lws, ordinal) as caches:
        keys = hash_leader_of_worker(caches)
        assert list(keys(worker)) == ["default/hash-abc-x1"]
        del worker["metadata"]["annotations"][c.ANNOTATION_LEADER_NAME]
        assert list(keys(worker)) == []
        # An Ordinal worker's leader has no group-ready gate to update.
        ord_worker = copy.deepcopy(ord_leader)
        ord_worker["metadata"]["labels"][c.LABEL_WORKER_INDEX] = "1"
        ord_worker["metadata"]["annotations"] = {c.ANNOTATION_LEADER_NAME: "ord-0"}
        assert list(keys(ord_worker)) == []
