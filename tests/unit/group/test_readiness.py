"""The health questions of `group.readiness` where a StatefulSet leaves things out."""

from __future__ import annotations

from leaderworkerset.api.objects import JSON
from leaderworkerset.group.readiness import statefulset_ready


def test_a_statefulset_without_replicas_wants_one() -> None:
    # The API server defaults an absent spec.replicas to 1.
    def worker_set(available: int) -> JSON:
        return {"spec": {}, "status": {"availableReplicas": available}}

    assert statefulset_ready(worker_set(1))
    assert not statefulset_ready(worker_set(0)) and not statefulset_ready(worker_set(2))
    assert not statefulset_ready({"status": {}})
