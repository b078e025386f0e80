"""The Hash group-ready gate read from the worker pods, and the worker events that wake
the leader for it."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.controllers.pod.group_ready import GroupReadyWrites
from leaderworkerset.group.readiness import worker_pods_ready
from leaderworkerset.wiring import WORKER_READINESS_CHANGED, hash_leader_of_worker
from tests.unit.group_objects import NOW, leader_pod, lws_object, worker_sts
from tests.unit.seeded_caches import seeded_caches

KEY = "rev1"


def workers_set(size: int = 4) -> JSON:
    # Its status lags: the StatefulSet controller has not counted any pod Ready yet.
    sts = worker_sts("lws", 0, KEY, size=size, ready=False)
    sts["metadata"]["uid"] = "sts-uid"
    return sts


def worker(index: int, *, ready: bool = True, **meta: Any) -> JSON:
    pod = leader_pod("lws", 0, meta.pop("key", KEY), ready=ready, name=f"lws-0-{index}")
    pod["metadata"]["labels"][c.LABEL_WORKER_INDEX] = str(index)
    pod["metadata"]["annotations"] = {c.ANNOTATION_LEADER_NAME: "lws-0"}
    pod["metadata"]["ownerReferences"] = [
        {"kind": "StatefulSet", "uid": meta.pop("owner", "sts-uid")}
    ]
    pod["metadata"].update(meta)
    return pod


def group(*workers: JSON) -> list[JSON]:
    return [leader_pod("lws", 0, KEY), *workers]


def test_ready_when_every_worker_pod_is_though_the_statefulset_status_lags() -> None:
    assert worker_pods_ready(
        leader_pod("lws", 0, KEY), workers_set(), group(*map(worker, (1, 2, 3)))
    )


def test_not_ready_while_a_worker_is_missing_unready_or_going() -> None:
    leader, sts = leader_pod("lws", 0, KEY), workers_set()
    assert not worker_pods_ready(leader, sts, group(worker(1), worker(2)))
    assert not worker_pods_ready(leader, sts, group(worker(1), worker(2), worker(3, ready=False)))
    going = worker(3, deletionTimestamp=NOW)
    assert not worker_pods_ready(leader, sts, group(worker(1), worker(2), going))


def test_pods_of_another_revision_or_owner_do_not_count() -> None:
    leader, sts = leader_pod("lws", 0, KEY), workers_set()
    assert not worker_pods_ready(leader, sts, group(worker(1), worker(2), worker(3, key="rev0")))
    stranger = worker(3, owner="other-uid")
    assert not worker_pods_ready(leader, sts, group(worker(1), worker(2), stranger))
    # A worker StatefulSet of another revision than its leader's is never ready.
    old = worker_sts("lws", 0, "rev0", size=4, ready=False)
    assert not worker_pods_ready(leader, old, group(*map(worker, (1, 2, 3))))
    assert not worker_pods_ready(leader, None, group(*map(worker, (1, 2, 3))))


def test_a_worker_turning_ready_unready_or_going_wakes_its_leader() -> None:
    changed = WORKER_READINESS_CHANGED
    assert changed.update is not None and changed.delete is not None
    assert changed.create is not None and not changed.create(worker(1))
    assert changed.update(worker(1, ready=False), worker(1))
    assert changed.update(worker(1), worker(1, ready=False))
    assert not changed.update(worker(1), worker(1))
    assert changed.delete(worker(1))
    # A leader's own events reach the pod reconciler anyway.
    leader = leader_pod("lws", 0, KEY)
    assert not changed.update(leader_pod("lws", 0, KEY, ready=False), leader)
    assert not changed.delete(leader)


async def test_only_a_hash_leader_is_woken() -> None:
    hashed = lws_object("lws", groupIdentity=c.GROUP_IDENTITY_HASH)
    ordinal = lws_object("ord")
    async with seeded_caches(hashed, ordinal) as caches:
        keys = hash_leader_of_worker(caches)
        assert list(keys(worker(1))) == ["default/lws-0"]
        other = worker(1)
        other["metadata"]["labels"][c.LABEL_SET_NAME] = "ord"
        assert list(keys(other)) == []
        gone = worker(1)
        gone["metadata"]["labels"][c.LABEL_SET_NAME] = "deleted"
        assert list(keys(gone)) == []


def test_a_written_condition_is_not_written_again_before_the_cache_shows_it() -> None:
    writes = GroupReadyWrites()
    leader = leader_pod("lws", 0, KEY)
    leader["metadata"]["resourceVersion"] = "10"
    assert not writes.written(leader, "True")
    writes.wrote(leader, "True")
    # The cache still holds the pod as it was before the write.
    assert writes.written(leader, "True")
    assert not writes.written(leader, "False")
    # A newer pod in the cache speaks for itself, whatever it says.
    leader["metadata"]["resourceVersion"] = "11"
    assert not writes.written(leader, "True")
    assert writes.unseen == {}
    writes.wrote(leader, "False")
    writes.forget(leader)
    assert writes.unseen == {}
