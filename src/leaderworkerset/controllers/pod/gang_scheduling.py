"""Gang scheduling with Volcano: one PodGroup per group and revision.

Only with `gangSchedulingManagement.schedulerProvider: volcano`. The pod webhook
names each pod's PodGroup in the `scheduling.k8s.io/group-name` annotation; the
pod reconciler creates that PodGroup for each leader, so Volcano schedules the
group's pods all together or not at all. The name contains the revision key, so
a rollout brings fresh PodGroups.
"""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.go.quantity import format_quantity, sum_resources
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import VOLCANO_PODGROUPS
from leaderworkerset.group.ownership import pod_reference
from leaderworkerset.runtime.client import ApiClient, ApiError


def pod_requests(template: JSON) -> dict[str, Any]:
    """What one pod of `template` requests: the sum over its containers."""
    containers = (template.get("spec") or {}).get("containers") or []
    requests = [(ct.get("resources") or {}).get("requests") or {} for ct in containers]
    return dict(sum_resources(*requests))


def pod_group(view: LwsView, leader: JSON) -> JSON | None:
    """The PodGroup of a leader's group, or None when the leader names none."""
    meta = meta_of(leader)
    name = (meta.get("annotations") or {}).get(c.ANNOTATION_POD_GROUP_NAME)
    if not name:
        return None
    labels = meta.get("labels") or {}
    leader_requests = pod_requests(view.leader_template())
    worker_requests = pod_requests(view.worker_template())
    total = sum_resources(leader_requests, *[worker_requests] * (view.size - 1))
    spec: JSON = {
        # With LeaderReady the workers only exist once the leader runs, so the gang
        # can only be the leader at first.
        "minMember": 1 if view.startup_policy == c.STARTUP_POLICY_LEADER_READY else view.size,
        "minResources": {k: format_quantity(v) for k, v in sorted(total.items())},
    }
    queue = view.annotations.get(c.ANNOTATION_VOLCANO_QUEUE_NAME)
    if queue:
        spec["queue"] = queue
    copied = (c.LABEL_SET_NAME, c.LABEL_GROUP_INDEX, c.LABEL_TEMPLATE_REVISION_HASH)
    return {
        "apiVersion": VOLCANO_PODGROUPS.api_version,
        "kind": VOLCANO_PODGROUPS.kind,
        "metadata": {
            "name": str(name),
            "namespace": str(meta.get("namespace") or view.namespace),
            "labels": {k: str(labels[k]) for k in copied if k in labels},
            "annotations": {
                k: v
                for k, v in view.annotations.items()
                if k.startswith(c.VOLCANO_ANNOTATION_PREFIX)
            },
            "ownerReferences": [pod_reference(leader)],
        },
        "spec": spec,
    }


async def ensure_pod_group(client: ApiClient, view: LwsView, leader: JSON) -> None:
    body = pod_group(view, leader)
    if body is None:
        return
    meta = body["metadata"]
    # PodGroups are not cached (few, and only with Volcano installed): look them up.
    if await client.get_or_none(VOLCANO_PODGROUPS, meta["name"], meta["namespace"]) is not None:
        return
    try:
        await client.create(VOLCANO_PODGROUPS, body)
    except ApiError as exc:
        if not exc.already_exists:
            raise
