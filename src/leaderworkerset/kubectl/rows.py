"""One row per group: what `kubectl lws groups` prints, as plain data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from leaderworkerset.api.objects import meta_of, name_of
from leaderworkerset.group.gang_state import Gang, gang_of
from leaderworkerset.group.names import HASH_HOSTNAME_LENGTH
from leaderworkerset.group.recreations import GroupRecords, read_records_leniently
from leaderworkerset.group.roles import group_size, is_leader
from leaderworkerset.group.state import (
    Group,
    GroupState,
    group_state,
    leader_node,
    ready_pods,
    recovery_state,
    restarts,
)
from leaderworkerset.kubectl.ages import age_since
from leaderworkerset.kubectl.pairing import Pairing, pair
from leaderworkerset.kubectl.ranking import victim_order
from leaderworkerset.kubectl.snapshot import Snapshot

# WAITING FOR of a gated leader that the PostTermination rule releases now.
ADMITTING = "<admitting>"


@dataclass
class GroupRow:
    group: str  # the ordinal, or the key's first characters
    index: str  # the full group-index label
    state: GroupState
    ready: int
    size: int
    revision: str | None
    current: bool | None  # None when the current revision is unknown
    leader_node: str
    restarts: int
    age: str
    leader: str
    worker_statefulset: str
    scale_down_rank: int | None = None
    waiting_for: str | None = None
    # An LWS with spec.scheduling: the group's PodGroup and where its gang stands;
    # None for a group whose pods name no PodGroup.
    gang: Gang | None = None
    # Recreations by the restart policy: the budget's count when maxGroupRestarts is
    # set, else the recent ones the back-off counts; None when never recreated.
    recreations: int | None = None
    # Seconds the group back-off still holds the group's recreation (state BackOff).
    backoff_left: float | None = None

    @property
    def state_text(self) -> str:
        if self.backoff_left is not None:
            return f"{self.state.value} ({self.backoff_left:.0f}s)"
        return self.state.value

    def as_dict(self, hash_mode: bool, gangs: bool = False) -> dict[str, object]:
        data: dict[str, object] = {
            "group": self.group,
            "groupIndex": self.index,
            "state": self.state.value,
            "readyPods": self.ready,
            "size": self.size,
            "revision": self.revision,
            "currentRevision": self.current,
            "leaderNode": self.leader_node or None,
            "restarts": self.restarts,
            "recreations": self.recreations,
            "backOffSeconds": None if self.backoff_left is None else round(self.backoff_left),
            "age": self.age,
            "leaderPod": self.leader or None,
            "workerStatefulSet": self.worker_statefulset or None,
        }
        if hash_mode:
            data["scaleDownRank"] = self.scale_down_rank
            data["waitingFor"] = self.waiting_for
        if gangs:
            gang = self.gang
            data["podGroup"] = gang.pod_group if gang else None
            data["gang"] = gang.state.value if gang else None
            data["gangReason"] = (gang.reason or None) if gang else None
            data["gangMessage"] = (gang.message or None) if gang else None
        return data


def short(index: str) -> str:
    """How a group is named on screen: the ordinal, or the key's first characters
    (the same prefix its hostnames and per-group Service use)."""
    return index if index.isdigit() else index[:HASH_HOSTNAME_LENGTH]


def _age(group: Group, now: datetime) -> str:
    source = group.leader
    if source is None:
        stamps = sorted(str(meta_of(p).get("creationTimestamp") or "") for p in group.pods)
        return age_since(stamps[0] if stamps else None, now)
    return age_since(meta_of(source).get("creationTimestamp"), now)


def _group_size(group: Group, snapshot: Snapshot) -> int:
    return group_size(group.leader, snapshot.view) or 1


def scale_down_ranks(snapshot: Snapshot, now: datetime | None) -> dict[str, int]:
    """Leader pod name -> 1-based place in the scale-down order (Hash mode)."""
    leaders = [p for p in snapshot.pods if is_leader(p)]
    order = victim_order(leaders, leaders, now)
    return {name_of(p): i for i, p in enumerate(order, start=1)}


def pairing_of(snapshot: Snapshot, now: datetime) -> Pairing:
    return pair(
        snapshot.pods,
        now=now.timestamp(),
        immediate=snapshot.view.replaces_immediately,
        statefulsets=snapshot.statefulsets,
    )


def rows_of(snapshot: Snapshot, now: datetime) -> list[GroupRow]:
    current = snapshot.current_revision
    ranks = scale_down_ranks(snapshot, now) if snapshot.hash_mode else {}
    pairing = pairing_of(snapshot, now) if snapshot.hash_mode else Pairing()
    records = _records(snapshot)
    budget = snapshot.view.template.max_group_restarts
    rows = []
    for group in snapshot.groups():
        recovering = recovery_state(group, records, budget, now.timestamp())
        state = recovering[0] if recovering else group_state(group, current)
        leader = name_of(group.leader)
        revision = group.revision
        row = GroupRow(
            group=short(group.index),
            index=group.index,
            state=state,
            ready=ready_pods(group),
            size=_group_size(group, snapshot),
            revision=revision,
            current=None if current is None else revision == current,
            leader_node=leader_node(group),
            restarts=restarts(group),
            age=_age(group, now),
            leader=leader,
            worker_statefulset=name_of(group.worker_statefulset),
        )
        if recovering and recovering[0] is GroupState.BACK_OFF:
            row.backoff_left = recovering[1]
        row.recreations = _recreations(records, group.index, budget)
        read = snapshot.pod_groups
        if read is not None:
            row.gang = gang_of(group, name_of(snapshot.lws), row.size, read.by_name, read.problem)
        if snapshot.hash_mode:
            row.scale_down_rank = ranks.get(leader)
            if state is GroupState.GATED:
                waited = pairing.waits_for.get(leader)
                row.waiting_for = short(waited) if waited else ADMITTING
        rows.append(row)
    return rows


def _records(snapshot: Snapshot) -> GroupRecords:
    return read_records_leniently(snapshot.view.annotations)[0]


def _recreations(records: GroupRecords, index: str, budget: int | None) -> int | None:
    if budget is not None and index in records.counts:
        return records.count(index)
    record = records.recreations.get(index)
    return record.recent if record is not None else None
