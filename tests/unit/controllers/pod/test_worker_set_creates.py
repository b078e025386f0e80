"""What the pod reconciler remembers of worker StatefulSets it created that the cache
has not shown yet: how long it waits for each, and what ends a wait."""

from __future__ import annotations

from leaderworkerset.controllers.pod.worker_statefulset import CREATE_UNSEEN_FOR, WorkerSetCreates
from tests.toolkit.pods import pod
from tests.toolkit.statefulsets import controller_ref, statefulset

LEADER = pod("web-0", "default", uid="leader-uid")


def _created_at_zero() -> tuple[WorkerSetCreates, list[float]]:
    now = [0.0]
    creates = WorkerSetCreates(clock=lambda: now[0])
    creates.created(LEADER)
    return creates, now


def test_the_wait_is_what_is_left_of_the_bound() -> None:
    creates, now = _created_at_zero()
    now[0] = CREATE_UNSEEN_FOR - 0.5
    assert creates.wait_left(LEADER) == 0.5
    assert creates.wait_left(LEADER) == 0.5  # still waited for


def test_the_wait_ends_exactly_at_the_bound() -> None:
    creates, now = _created_at_zero()
    now[0] = CREATE_UNSEEN_FOR
    assert creates.wait_left(LEADER) == 0.0
    assert creates.unseen == {}  # the create is tried again, not waited for again


def test_a_deleted_statefulset_ends_its_leaders_wait() -> None:
    creates, _ = _created_at_zero()
    owned = statefulset("web-0", "default", owners=[controller_ref("Pod", "web-0", "leader-uid")])
    creates.statefulset_deleted(owned)
    assert creates.wait_left(LEADER) == 0.0


def test_a_deleted_statefulset_of_a_leader_not_waited_for_changes_nothing() -> None:
    creates, _ = _created_at_zero()
    creates.statefulset_deleted(
        statefulset("web-1", "default", owners=[controller_ref("Pod", "web-1", "other-uid")])
    )
    creates.statefulset_deleted(statefulset("orphan", "default"))
    assert creates.unseen == {"leader-uid": 0.0}
