"""When a group's recovery and a LeaderWorkerSet's rollout begin, for the recovery and
rollout histograms of :mod:`group_metrics`: what a pod says about the moment its group
was lost, and the pending recoveries waiting for a replacement group to be Ready."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from leaderworkerset.api.objects import JSON, meta_of, timestamp_of


class Cause(enum.StrEnum):
    """Why a group was taken down (and, except for a scale-down, created again)."""

    CONTAINER_RESTART = "container_restart"
    POD_FAILED = "pod_failed"
    LEADER_DELETED = "leader_deleted"
    NODE_LOST = "node_lost"
    ROLLOUT = "rollout"
    SCALE_DOWN = "scale_down"


# Causes after which the group is expected back as it was: a rollout replaces a group
# on purpose (timed by the rollout histogram), a scale-down does not replace it at all.
RECOVERED_CAUSES = frozenset(Cause) - {Cause.ROLLOUT, Cause.SCALE_DOWN}


def failure_time(pod: JSON, now: float) -> float:
    """When what took the pod's group down happened, as the pod says: the start of its
    deletion (the deletionTimestamp less the grace period), else the end of the last of
    its containers that terminated; `now` when it says nothing. Those stamps have whole
    seconds: the end of that second is taken, never later than `now`, so that a failure
    seen at once is timed from when it was seen."""
    meta = meta_of(pod)
    deleted = timestamp_of(meta.get("deletionTimestamp"))
    if deleted is not None:
        grace = meta.get("deletionGracePeriodSeconds")
        at: float | None = deleted - (grace if isinstance(grace, int) else 0)
    else:
        status = pod.get("status") or {}
        statuses = (status.get("initContainerStatuses") or []) + (
            status.get("containerStatuses") or []
        )
        ends = [
            end
            for s in statuses
            if isinstance(s, dict)
            for state in (s.get("lastState") or {}, s.get("state") or {})
            if (end := timestamp_of((state.get("terminated") or {}).get("finishedAt"))) is not None
        ]
        at = max(ends) if ends else None
    return now if at is None else min(now, at + 1.0)


@dataclass(frozen=True)
class Recovering:
    """A group lost at `started` for `cause`, waiting for its replacement to be Ready;
    `lost` is the UID of the leader that went (its return is no recovery)."""

    started: float
    cause: Cause
    lost: str


def match_recovery(
    pending: dict[str, Recovering],
    index: str,
    leader_uid: str,
    leader_created: float | None,
    *,
    same_index: bool,
) -> str | None:
    """The key in `pending` of the loss a group that just became Ready recovers from.

    An Ordinal group comes back under its index (`same_index`); a Hash replacement has a
    key of its own, so it answers for the oldest loss before its leader was created
    (creation stamps have whole seconds, hence the second of slack)."""
    mine = pending.get(index)
    if mine is not None:
        return index if mine.lost != leader_uid else None
    if same_index:
        return None
    candidates = [
        (p.started, key)
        for key, p in pending.items()
        if p.lost != leader_uid and (leader_created is None or p.started <= leader_created + 1.0)
    ]
    return min(candidates)[1] if candidates else None
