"""The worker StatefulSet of one group, in both modes.

Everything the revision decides (template, size, subgroups, network policy,
claims) comes from the revision the leader pod was created from, so a group
that is recreated below the partition gets its old workers back; only the
LWS's own labels and annotations (and the exclusive-topology keys) are live.
The group identity is copied from the leader's labels: in Hash mode the
group-index label carries the group key, and this code need not know.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import (
    JSON,
    controller_uid,
    meta_of,
    name_of,
    revision_key_of,
    uid_of,
)
from leaderworkerset.controllers.leader_template import (
    add_claims_and_retention,
    copied_metadata,
    exclusive_topology_annotations,
    merge_metadata,
    subgroup_annotations,
    workload_scheduling_annotations,
)
from leaderworkerset.controllers.pod.group_service import group_service_name
from leaderworkerset.group.ownership import pod_reference
from leaderworkerset.group.tpu import pod_requests_tpus


def build_worker_statefulset(
    leader_pod: JSON,
    live: LwsView,
    cur: LwsView,
    node_selector: dict[str, str] | None = None,
) -> JSON:
    """The CREATE body of the worker StatefulSet of `leader_pod`.

    `live` is the LeaderWorkerSet; `cur` the view of
    `revisions.apply_revision(live.obj, <the leader's revision>)`.
    `node_selector` pins the workers next to the leader under exclusive placement
    ({topology key: the leader node's value}); it is merged into the template's."""
    pod_meta = meta_of(leader_pod)
    pod_name = str(pod_meta.get("name", ""))
    pod_labels = pod_meta.get("labels") or {}
    identity = {
        c.LABEL_GROUP_INDEX: str(pod_labels.get(c.LABEL_GROUP_INDEX, "")),
        c.LABEL_SET_NAME: live.name,
        c.LABEL_GROUP_KEY: str(pod_labels.get(c.LABEL_GROUP_KEY, "")),
    }
    key = revision_key_of(leader_pod)
    group_labels = {**identity, c.LABEL_TEMPLATE_REVISION_HASH: key}
    labels, annotations = copied_metadata(live, group_labels)

    template = _worker_template(leader_pod, live, cur, group_labels, node_selector)

    spec: JSON = {
        "serviceName": group_service_name(cur, leader_pod) if cur.unique_per_replica else live.name,
        "replicas": cur.size - 1,
        "podManagementPolicy": "Parallel",
        "ordinals": {"start": 1},
        "selector": {"matchLabels": copy.deepcopy(identity)},
        "template": template,
    }
    namespace = str(pod_meta.get("namespace") or live.namespace)
    add_claims_and_retention(spec, cur.template, namespace)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": pod_name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [pod_reference(leader_pod)],
        },
        "spec": spec,
    }


def _worker_template(
    leader_pod: JSON,
    live: LwsView,
    cur: LwsView,
    group_labels: dict[str, str],
    node_selector: dict[str, str] | None,
) -> JSON:
    """The workers' pod template: the revision's, with the group's identity and what
    the pod webhook needs to admit a worker (size, leader name, subgroups, TPUs)."""
    template = cur.worker_template()
    template_annotations = {
        c.ANNOTATION_SIZE: str(cur.size),
        c.ANNOTATION_LEADER_NAME: name_of(leader_pod),
        **exclusive_topology_annotations(live),
        **subgroup_annotations(live, cur.template, leader=False),
        **workload_scheduling_annotations(live),
    }
    if pod_requests_tpus(leader_pod):
        template_annotations[c.ANNOTATION_LEADER_REQUESTS_TPUS] = "true"
    merge_metadata(template, group_labels, template_annotations)
    if node_selector:
        pod_spec = template.setdefault("spec", {})
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **node_selector}
    return template


# Longer than a watch event takes to arrive, even on a busy API server; shorter than
# anyone would wait for a StatefulSet deleted before this replica's cache saw it.
CREATE_UNSEEN_FOR = 30.0


@dataclass
class WorkerSetCreates:
    """Worker StatefulSets created that the cache has not shown yet, by leader uid.

    A leader is reconciled again for its own status changes, which can come before
    the watch brings the StatefulSet: without this it would be created twice (the
    second create answered 409). An entry ends when the cache shows the StatefulSet,
    the leader goes, or `CREATE_UNSEEN_FOR` passes (then the create is tried again)."""

    clock: Callable[[], float] = time.monotonic
    unseen: dict[str, float] = field(default_factory=dict)

    def wait_left(self, leader: JSON) -> float:
        """Seconds still to wait for the cache to show this leader's StatefulSet; 0 if
        none was created unseen, or it is overdue."""
        at = self.unseen.get(uid_of(leader))
        if at is None:
            return 0.0
        left = at + CREATE_UNSEEN_FOR - self.clock()
        if left <= 0:
            del self.unseen[uid_of(leader)]
            return 0.0
        return left

    def created(self, leader: JSON) -> None:
        self.unseen[uid_of(leader)] = self.clock()

    def already_exists(self, leader: JSON, found: JSON | None) -> None:
        """A create answered 409 with `found` under the name: waited for if it is this
        leader's (an earlier create whose answer was lost)."""
        if found is not None and controller_uid(found) == uid_of(leader):
            self.created(leader)

    def forget(self, leader: JSON) -> None:
        """The cache shows the StatefulSet, or the leader is gone."""
        self.unseen.pop(uid_of(leader), None)

    def statefulset_deleted(self, sts: JSON) -> None:
        """The statefulsets cache's delete handler: a worker StatefulSet created and
        deleted before its leader was reconciled again is not waited for."""
        owner = controller_uid(sts)
        if owner is not None:
            self.unseen.pop(owner, None)
