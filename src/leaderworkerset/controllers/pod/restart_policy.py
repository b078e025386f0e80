"""Group restart policies: when one pod of a group fails, recreate the
whole group by deleting its leader in the foreground.

Deleting the leader is enough: the worker StatefulSet and per-group Service are
owned by the leader pod, so they go first (group_teardown.py deletes them beside the
garbage collector), and the leader workload then recreates the leader (Ordinal: same
name and key; Hash: a new group with a new key).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import (
    JSON,
    controller_ref,
    labels_of,
    meta_of,
    revision_key_of,
    uid_of,
)
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.pod.group_recovery import GroupRecovery
from leaderworkerset.controllers.pod.group_teardown import GroupTeardown
from leaderworkerset.group.names import parse_ordinal
from leaderworkerset.group.readiness import container_restarted, pod_terminating
from leaderworkerset.group.roles import group_size, is_leader
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.events import object_reference
from leaderworkerset.runtime.indexes import object_key

# How long a leader deletion is remembered (client-go's ExpectationsTimeout): far longer
# than the pod cache takes to show the deletionTimestamp it caused.
DELETED_LEADER_MEMORY = 300.0

RECREATING_POLICIES = (
    c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART,
    c.RESTART_POLICY_RECREATE_GROUP_AFTER_START,
)


def restart_may_act(pod: JSON) -> bool:
    """Whether the restart policy can act on this live pod at all: one of its
    containers restarted, or it is being deleted. The pod reconciler does nothing else
    for a worker pod, so its other events (scheduled, running, ready: most of a
    scale-up's) need no reconcile; deletions always get one."""
    return container_restarted(pod) or pod_terminating(pod)


def waits_for_start(view: LwsView) -> bool:
    return (
        view.template.restart_policy == c.RESTART_POLICY_RECREATE_GROUP_AFTER_START
        or c.ANNOTATION_RECREATE_GROUP_AFTER_START in view.annotations
    )


@dataclass
class GroupRestarter:
    client: ApiClient
    caches: LwsCaches
    # UIDs of leaders this restarter has deleted, with when. Right after the DELETE the
    # pod cache may still show the leader alive while the next event of the same group
    # (the failed worker's own status update or final deletion, or another worker)
    # is reconciled; deleting again would be accepted by the API server (a DELETE of a
    # terminating pod succeeds) and report the group restart twice. A UID is never
    # reused, so a remembered one can only be a leader already on its way out.
    deleted_leaders: dict[str, float] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    metrics: GroupMetrics = field(default_factory=GroupMetrics)
    # Queues a pod key for a later reconcile (the pod controller's, set by wiring).
    wake: Callable[[str, float], None] = lambda key, after: None
    # Tear the group down beside the garbage collector (group_teardown.py).
    parallel_teardown: bool = True
    # The restart budget and the group back-off, asked before a group is recreated.
    recovery: GroupRecovery = field(init=False)

    def __post_init__(self) -> None:
        self.teardown = GroupTeardown(self.client, self.caches, parallel=self.parallel_teardown)
        self.recovery = GroupRecovery(self.client, self.caches)

    def pending_in_group(self, pod: JSON, view: LwsView) -> bool:
        """Some pod of the group is missing or still Pending."""
        labels = labels_of(pod)
        group = self.caches.group_pods(
            view.namespace, str(labels.get(c.LABEL_SET_NAME)), str(labels.get(c.LABEL_GROUP_INDEX))
        )
        if len(group) != group_size(pod, view):
            return True
        return any((p.get("status") or {}).get("phase") == "Pending" for p in group)

    def leader_of(self, pod: JSON, view: LwsView) -> JSON | None:
        """The live leader of a worker's group, if the worker belongs to it."""
        if view.hash_mode:
            annotations = meta_of(pod).get("annotations") or {}
            leader_name = str(annotations.get(c.ANNOTATION_LEADER_NAME, ""))
        else:
            leader_name, ordinal = parse_ordinal(str(meta_of(pod).get("name", "")))
            if ordinal < 0:
                raise ValueError(f"parsing pod name for pod {meta_of(pod).get('name')}")
        leader = self.caches.pods.get(view.namespace, leader_name) if leader_name else None
        if leader is None:
            return None
        if revision_key_of(leader) != revision_key_of(pod):
            return None
        return leader if self.belongs_to(pod, leader) else None

    def belongs_to(self, pod: JSON, leader: JSON) -> bool:
        """The worker was made by the worker StatefulSet of this very leader, not by a
        stale one of its predecessor still being garbage collected."""
        owner = controller_ref(pod)
        leader_meta = meta_of(leader)
        if owner is None:
            return False
        if owner.get("kind") == "Pod":
            return bool(
                owner.get("name") == leader_meta.get("name")
                and owner.get("uid") == leader_meta.get("uid")
            )
        if owner.get("kind") != "StatefulSet":
            return False
        sts = self.caches.statefulsets.get(meta_of(pod).get("namespace"), str(owner.get("name")))
        if sts is None or meta_of(sts).get("uid") != owner.get("uid"):
            return False
        sts_owner = controller_ref(sts)
        return bool(
            sts_owner is not None
            and sts_owner.get("kind") == "Pod"
            and sts_owner.get("name") == leader_meta.get("name")
            and sts_owner.get("uid") == leader_meta.get("uid")
        )

    async def handle(self, pod: JSON, view: LwsView) -> tuple[bool, ev.Event | None]:
        """(the group is being recreated, the event to record)."""
        if view.template.restart_policy not in RECREATING_POLICIES:
            self.recovery.release(pod)
            return False, None
        if not restart_may_act(pod) and not (is_leader(pod) and self.recovery.holding(pod, view)):
            return False, None
        if waits_for_start(view) and self.pending_in_group(pod, view):
            return False, None
        leader = pod if is_leader(pod) else self.leader_of(pod, view)
        if leader is None:
            return False, None
        if pod_terminating(leader):
            return True, None
        async with self.recovery.lock(leader):
            if self._recently_deleted(uid_of(leader)):
                return True, None
            verdict = await self.recovery.admit(view, leader)
            if not verdict.proceed:
                if verdict.wait is not None:
                    # Whichever pod brought us here, the leader is what is retried.
                    self.wake(object_key(leader), verdict.wait)
                return False, verdict.event
            if not await self.delete_leader(leader):
                return True, None
        self.metrics.group_restarted(leader, pod, view.group_identity)
        group = str(labels_of(leader).get(c.LABEL_GROUP_INDEX, ""))
        return True, ev.group_recreated(
            str(meta_of(pod).get("name")),
            str(meta_of(leader)["name"]),
            group,
            is_leader(pod),
            object_reference(leader),
        )

    async def delete_leader(self, leader: JSON) -> bool:
        """Delete a group's leader in the foreground (its worker StatefulSet and
        per-group Service go first; group_teardown.py); False when another reconcile
        already did, or the leader is already gone."""
        meta = meta_of(leader)
        uid = str(meta.get("uid", ""))
        if not self._first_deletion(uid):
            return False
        try:
            await self.teardown.tear_down(leader)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return False
            self.deleted_leaders.pop(uid, None)  # not deleted: the retry must try again
            raise
        except BaseException:
            self.deleted_leaders.pop(uid, None)
            raise
        return True

    def _recently_deleted(self, uid: str) -> bool:
        now = self.clock()
        expired = [u for u, at in self.deleted_leaders.items() if now - at > DELETED_LEADER_MEMORY]
        for old in expired:
            del self.deleted_leaders[old]
        return uid in self.deleted_leaders

    def _first_deletion(self, uid: str) -> bool:
        """Claim the deletion of leader `uid`; False if it was already deleted here.
        Claimed before the DELETE is awaited, so concurrent reconciles of two pods of
        the same group cannot both delete the leader."""
        now = self.clock()
        expired = [u for u, at in self.deleted_leaders.items() if now - at > DELETED_LEADER_MEMORY]
        for old in expired:
            del self.deleted_leaders[old]
        if uid in self.deleted_leaders:
            return False
        self.deleted_leaders[uid] = now
        return True
