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

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.group.gates import group_ready_condition, has_group_ready_gate
from leaderworkerset.group.readiness import workers_ready_for_leader
from leaderworkerset.runtime.client import PODS, STRATEGIC_MERGE_PATCH, ApiClient, ApiError

REASON_WORKERS_READY = "WorkersReady"
REASON_WORKERS_NOT_READY = "WorkersNotReady"


def group_ready_patch(ready: bool, now: datetime.datetime | None = None) -> JSON:
    moment = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "status": {
            "conditions": [
                {
                    "type": c.CONDITION_GROUP_READY,
                    "status": "True" if ready else "False",
                    "reason": REASON_WORKERS_READY if ready else REASON_WORKERS_NOT_READY,
                    "lastTransitionTime": moment,
                }
            ]
        }
    }


async def sync_group_ready(client: ApiClient, leader: JSON, worker_sts: JSON | None) -> bool:
    """Write the leader's group-ready condition when it differs; True if written."""
    if not has_group_ready_gate(leader):
        return False
    ready = workers_ready_for_leader(leader, worker_sts)
    current = group_ready_condition(leader)
    # An absent condition already keeps the leader unready (the kubelet treats a
    # missing gate condition as False), so only a True needs writing at first.
    if current == ("True" if ready else "False") or (current is None and not ready):
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
    return True
