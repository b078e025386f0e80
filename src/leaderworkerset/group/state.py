"""What state each group of a LeaderWorkerSet is in, from its pods and worker
StatefulSet: the one answer that the lifecycle metrics and `kubectl lws groups`
both give, so that a dashboard and the plugin never disagree.

A group is keyed by its group-index label (the ordinal in Ordinal mode, the group
key in Hash mode). The states, in the order they take precedence:

- TearingDown: some of its pods are still present but its leader is terminating,
  finished or gone; in Hash mode under PostTermination this group's capacity is
  what a gated replacement waits for.
- Gated: its leader still carries the group-replacement scheduling gate (also
  when that leader is being deleted: a group never admitted holds no capacity).
- Ready: its leader and workers are all Running, Ready and not terminating, and
  its workers are on the leader's revision.
- Updating: not Ready, and some part of it is being moved to another revision
  (the group is on an old revision, or its workers are not on the leader's, or
  the worker StatefulSet has a rollout pending).
- NotReady: anything else.

Two more come from the LeaderWorkerSet's recreation records, not from the pods, and
only `recovery_state` gives them (the lifecycle metrics, which count pods, do not):

- Failed: the group used up `maxGroupRestarts`; the restart policy leaves it as it is.
- BackOff: one of its pods restarted and the restart policy waits out the group
  back-off before recreating it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.objects import (
    JSON,
    meta_of,
    revision_key_of,
)
from leaderworkerset.group.gates import is_scheduling_gated
from leaderworkerset.group.readiness import (
    container_restarted,
    leader_lost,
    pod_counts_as_ready,
    workers_ready_for_leader,
)
from leaderworkerset.group.recreations import GroupRecords, failed_groups, leader_count
from leaderworkerset.group.roles import group_index, group_size, is_leader


class GroupState(enum.Enum):
    READY = "Ready"
    NOT_READY = "NotReady"
    GATED = "Gated"
    TEARING_DOWN = "TearingDown"
    UPDATING = "Updating"
    FAILED = "Failed"
    BACK_OFF = "BackOff"


# What `group_state` answers from the pods alone (the lifecycle metrics' states).
POD_STATES = (
    GroupState.READY,
    GroupState.NOT_READY,
    GroupState.GATED,
    GroupState.TEARING_DOWN,
    GroupState.UPDATING,
)


@dataclass
class Group:
    """The objects of one group, as the caches or a LIST hold them."""

    index: str
    leader: JSON | None = None
    workers: list[JSON] = field(default_factory=list)
    worker_statefulset: JSON | None = None

    @property
    def pods(self) -> list[JSON]:
        return ([self.leader] if self.leader is not None else []) + self.workers

    @property
    def revision(self) -> str | None:
        """The template revision the group was built from (its leader's label)."""
        source = self.leader if self.leader is not None else next(iter(self.workers), None)
        return revision_key_of(source) or None

    @property
    def size(self) -> int | None:
        """The group's own size (its leader's annotation), which during a size-changing
        rollout may differ from the LeaderWorkerSet's."""
        return group_size(self.leader)


def groups_of(pods: Iterable[JSON], worker_statefulsets: Iterable[JSON] = ()) -> list[Group]:
    """Pods grouped by group index, with the worker StatefulSet owned by each leader.

    When a group holds two leaders (a replacement created before its predecessor is
    gone, which Ordinal mode never does), the live one is the group's leader.
    """
    groups: dict[str, Group] = {}
    for pod in pods:
        index = group_index(pod)
        if index is None:
            continue
        group = groups.setdefault(index, Group(index))
        if not is_leader(pod):
            group.workers.append(pod)
        elif group.leader is None or leader_lost(group.leader):
            group.leader = pod
    by_owner: dict[str, JSON] = {}
    for sts in worker_statefulsets:
        for ref in meta_of(sts).get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("controller") is True and ref.get("kind") == "Pod":
                by_owner[str(ref.get("uid", ""))] = sts
    for group in groups.values():
        if group.leader is not None:
            group.worker_statefulset = by_owner.get(str(meta_of(group.leader).get("uid", "")))
    return sorted(groups.values(), key=_order)


def _order(group: Group) -> tuple[int, int, str]:
    """Ordinal groups by number, Hash groups by their leader's age then key."""
    if group.index.isdigit():
        return (0, int(group.index), "")
    created = str(meta_of(group.leader).get("creationTimestamp", "")) if group.leader else ""
    return (1, 0, f"{created}/{group.index}")


def group_ready(group: Group) -> bool:
    """Every pod of the group counts as ready and the worker StatefulSet is ready on
    the leader's revision. Its status counts a terminating worker as available, so
    the pods are asked too: a Ready group always shows all its pods READY."""
    leader = group.leader
    if leader is None or not pod_counts_as_ready(leader):
        return False
    if (group.size or 1) <= 1:
        return True
    return workers_ready_for_leader(leader, group.worker_statefulset) and all(
        pod_counts_as_ready(worker) for worker in group.workers
    )


def group_state(group: Group, current_revision: str | None) -> GroupState:
    """The state of `group` when the LeaderWorkerSet's current revision is
    `current_revision` (None when unknown: no group counts as old)."""
    leader = group.leader
    if leader is None or leader_lost(leader):
        # A group never admitted holds no capacity: the replacement rule does not
        # wait for it, so it is not what TearingDown means.
        if group.pods and all(is_scheduling_gated(p) for p in group.pods):
            return GroupState.GATED
        return GroupState.TEARING_DOWN
    if is_scheduling_gated(leader):
        return GroupState.GATED
    if group_ready(group):
        return GroupState.READY
    if _moving(group, current_revision):
        return GroupState.UPDATING
    return GroupState.NOT_READY


def recovery_state(
    group: Group, records: GroupRecords, budget: int | None, now: float
) -> tuple[GroupState, float] | None:
    """Failed or BackOff (with the seconds the back-off has left), or None: the
    group's state is then `group_state`'s."""
    leader = group.leader
    if leader is None or leader_lost(leader):
        return None
    if failed_groups(records, budget, {group.index: leader_count(leader)}):
        return GroupState.FAILED, 0.0
    record = records.recreations.get(group.index)
    not_before = record.not_before if record is not None else None
    if not_before is not None and not_before > now and any(map(container_restarted, group.pods)):
        return GroupState.BACK_OFF, not_before - now
    return None


def _moving(group: Group, current_revision: str | None) -> bool:
    revision = group.revision
    if current_revision is not None and revision != current_revision:
        return True
    sts = group.worker_statefulset
    if sts is None:
        return False
    if (revision_key_of(sts) or None) != revision:
        return True
    status = sts.get("status") or {}
    return bool(status.get("currentRevision", "") != status.get("updateRevision", ""))


def ready_pods(group: Group) -> int:
    """The READY of `kubectl lws` and the demo tables: pods that count as ready, so a
    group going away (its pods Ready until their grace period ends) shows none."""
    return sum(1 for pod in group.pods if pod_counts_as_ready(pod))


def restarts(group: Group) -> int:
    """Container restarts over the group's live pods, init containers included."""
    total = 0
    for pod in group.pods:
        status = pod.get("status") or {}
        for s in (status.get("initContainerStatuses") or []) + (
            status.get("containerStatuses") or []
        ):
            if isinstance(s, dict):
                total += int(s.get("restartCount") or 0)
    return total


def leader_node(group: Group) -> str:
    return str((group.leader or {}).get("spec", {}).get("nodeName") or "")
