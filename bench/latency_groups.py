"""Groups as the user-facing latency benchmark's pod watch sees them: which groups are
whole (a leader and `size - 1` workers, none of them going) and Ready, and since when.

A pod is reduced to a `PodSeen` by the watch's transform; the time it turned Ready is
kept apart (`ReadySince`), since the transform only ever sees the newest state. Both
managers label every pod with its group key, so a group is its pods that share one, and
a recreated Ordinal group (same key) is told from its predecessor by pod UIDs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c

JSON = dict[str, Any]
# A pod template annotation the rollout changes: its value is the revision a pod runs.
MARKER = "latency-bench/revision"


@dataclass(frozen=True)
class PodSeen:
    uid: str
    name: str
    key: str
    leader: bool
    ready: bool
    deleting: bool
    marker: str = ""
    # The group index label: an ordinal in Ordinal mode, the group key in Hash mode.
    index: str = ""


def pod_seen(pod: JSON) -> PodSeen:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    ready = any(
        x.get("type") == "Ready" and x.get("status") == "True"
        for x in (pod.get("status") or {}).get("conditions") or ()
    )
    return PodSeen(
        uid=str(meta.get("uid", "")),
        name=str(meta.get("name", "")),
        key=str(labels.get(c.LABEL_GROUP_KEY, "")),
        leader=labels.get(c.LABEL_WORKER_INDEX) == c.LEADER_WORKER_INDEX,
        ready=ready,
        deleting=bool(meta.get("deletionTimestamp")),
        marker=str((meta.get("annotations") or {}).get(MARKER, "")),
        index=str(labels.get(c.LABEL_GROUP_INDEX, "")),
    )


@dataclass
class ReadySince:
    """When each pod (by UID) last turned Ready, as the watch saw it."""

    at: dict[str, float] = field(default_factory=dict)

    def observe(self, pod: PodSeen, now: float) -> None:
        if pod.ready and not pod.deleting:
            self.at.setdefault(pod.uid, now)
        else:
            self.at.pop(pod.uid, None)


@dataclass(frozen=True)
class WholeGroup:
    key: str
    index: str
    leader_uid: str
    uids: frozenset[str]
    # The last of its pods' Ready times: when the group became whole and Ready.
    ready_at: float
    marker: str


def whole_groups(
    pods: Iterable[PodSeen],
    size: int,
    since: ReadySince,
    *,
    exclude: Collection[str] = (),
    marker: str | None = None,
) -> list[WholeGroup]:
    """Groups whose leader and `size - 1` workers are all Ready and not going, none of
    them in `exclude` (the UIDs of an earlier generation) and, with `marker`, all of
    them running that revision."""
    by_key: dict[str, list[PodSeen]] = {}
    for pod in pods:
        if pod.deleting or pod.uid in exclude or not pod.key:
            continue
        if marker is not None and pod.marker != marker:
            continue
        by_key.setdefault(pod.key, []).append(pod)
    groups = []
    for key, members in by_key.items():
        leaders = [p for p in members if p.leader]
        if len(leaders) != 1 or len(members) != size:
            continue
        if not all(p.ready and p.uid in since.at for p in members):
            continue
        groups.append(
            WholeGroup(
                key=key,
                index=leaders[0].index,
                leader_uid=leaders[0].uid,
                uids=frozenset(p.uid for p in members),
                ready_at=max(since.at[p.uid] for p in members),
                marker=leaders[0].marker,
            )
        )
    return groups
