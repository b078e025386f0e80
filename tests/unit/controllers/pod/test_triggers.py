"""Which pod events reach the pod reconciler: all of a leader's, and of a worker's
only those its restart policy can act on."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api import constants as c
from leaderworkerset.controllers.pod.triggers import POD_RECONCILER_EVENTS


def pod(worker_index: str, *, restarts: int = 0, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"p-{worker_index}",
        "namespace": "ns",
        "labels": {c.LABEL_SET_NAME: "lws", c.LABEL_WORKER_INDEX: worker_index},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "a", "restartCount": restarts}],
        },
    }


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
