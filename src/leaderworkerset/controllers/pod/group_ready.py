"""The Hash-mode `group-ready` readiness gate.

Every Hash leader of a group of size > 1 carries the readiness gate; the
controller sets the matching pod condition True exactly while the group's
worker StatefulSet is ready and built from the leader's revision. The kubelet
then reports the leader Ready only when its whole group is, which is what makes
the Deployment roll out, and its ReplicaSet pick scale-down victims, by group
health.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, format_time, meta_of
from leaderworkerset.api.resources import PODS
from leaderworkerset.group.gates import group_ready_condition, has_group_ready_gate
from leaderworkerset.group.readiness import worker_pods_ready, workers_ready_for_leader
from leaderworkerset.runtime.client import STRATEGIC_MERGE_PATCH, ApiClient, ApiError
from leaderworkerset.runtime.indexes import resource_version

REASON_WORKERS_READY = "WorkersReady"
REASON_WORKERS_NOT_READY = "WorkersNotReady"


def group_ready_patch(ready: bool, now: datetime.datetime | None = None) -> JSON:
    return {
        "status": {
            "conditions": [
                {
                    "type": c.CONDITION_GROUP_READY,
                    "status": "True" if ready else "False",
                    "reason": REASON_WORKERS_READY if ready else REASON_WORKERS_NOT_READY,
                    "lastTransitionTime": format_time(now),
                }
            ]
        }
    }


@dataclass
class GroupReadyWrites:
    """Conditions written to leaders the cache has not shown since. The leader is
    reconciled for each of its workers' events and for its worker StatefulSet's, and
    one of those can come before the watch brings back the pod as written: without
    this, it would write the same condition again."""

    # leader uid -> (the value written, the resourceVersion it was written over)
    unseen: dict[str, tuple[str, str]] = field(default_factory=dict)

    def written(self, leader: JSON, value: str) -> bool:
        uid = str(meta_of(leader).get("uid", ""))
        entry = self.unseen.get(uid)
        if entry is None:
            return False
        if entry[1] == resource_version(leader):
            return entry[0] == value
        # The cache has a newer pod than the one written over: it speaks for itself.
        del self.unseen[uid]
        return False

    def wrote(self, leader: JSON, value: str) -> None:
        self.unseen[str(meta_of(leader).get("uid", ""))] = (value, resource_version(leader))

    def forget(self, leader: JSON) -> None:
        self.unseen.pop(str(meta_of(leader).get("uid", "")), None)


async def sync_group_ready(
    client: ApiClient,
    leader: JSON,
    worker_sts: JSON | None,
    worker_pods: Iterable[JSON] = (),
    writes: GroupReadyWrites | None = None,
) -> bool:
    """Write the leader's group-ready condition when it differs; True if written.

    Ready when either the worker StatefulSet's status or its pods (`worker_pods`, the
    cached pods it controls) say so: the pods say it first."""
    if not has_group_ready_gate(leader):
        return False
    ready = workers_ready_for_leader(leader, worker_sts) or worker_pods_ready(
        leader, worker_sts, worker_pods
    )
    value = "True" if ready else "False"
    current = group_ready_condition(leader)
    # An absent condition already keeps the leader unready (the kubelet treats a
    # missing gate condition as False), so only a True needs writing at first.
    if current == value or (current is None and not ready):
        return False
    if writes is not None and writes.written(leader, value):
        return False
    meta = meta_of(leader)
    try:
        # Pod conditions merge by type, so this leaves the kubelet's conditions alone.
        await client.patch(
            PODS,
            str(meta["name"]),
            group_ready_patch(ready),
            namespace=str(meta["namespace"]),
            subresource="status",
            content_type=STRATEGIC_MERGE_PATCH,
        )
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    if writes is not None:
        writes.wrote(leader, value)
    return True
