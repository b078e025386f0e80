"""The PostTermination admission rule of Hash mode, as a pure decision.

Per LeaderWorkerSet, with T groups tearing down and G gated leaders, the oldest
G - T gated leaders are released. A group is tearing down while any of its pods
exists but its leader is terminating, finished or gone; counting pods (not the
leader object, which a ReplicaSet deletes in the background seconds before its
workers free their capacity) is what makes a replacement land on the capacity
its predecessor frees instead of preempting other workloads.

The wait is bounded: a tearing-down group stops counting in T once every pod it
still has is either on a node that has not been Ready for `node_not_ready`
seconds (or whose Node is gone), or still present `termination_overrun` seconds
after its deletion timestamp (or after its worker StatefulSet's, for a set whose
deletion a finalizer holds up: its pods are not deleted until the set is gone).
Waiting longer would not bring that capacity back to the scheduler;
docs/hash-mode.md explains why this cannot preempt in the normal case. Pods of a
worker StatefulSet that was orphaned (its owner reference removed, as `kubectl
delete --cascade=orphan` does) are no longer the LeaderWorkerSet's and stop counting
at once: the user kept them on purpose, and nothing will ever delete them.

The decision is a function of (pods, nodes, now, thresholds) and of the leaders the
caller has already ungated but its cache still shows gated, so a lagging cache can
neither count a leader twice nor let a newer one take its slot.

It lives in group/ because two ask it: the group-replacement reconciler, which acts
on it, and `kubectl lws`, which shows it (which leader is admitted, which group each
held one waits for); asking the one function keeps the two from telling different
stories.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from leaderworkerset.api.objects import (
    JSON,
    condition_of,
    controller_ref,
    meta_of,
    name_of,
    timestamp_of,
)
from leaderworkerset.group.gates import is_scheduling_gated
from leaderworkerset.group.options import (
    NODE_NOT_READY,
    ORPHANED,
    TERMINATION_OVERRUN,
    ReleaseThresholds,
)
from leaderworkerset.group.readiness import leader_lost, pod_finished, pod_terminating
from leaderworkerset.group.roles import group_key, is_leader


def gated_leaders(pods: Iterable[JSON]) -> list[JSON]:
    """Oldest first (creation time, then name): the order in which Group Identity
    admits replacements (docs/hash-mode.md)."""
    # A dying leader waits for nothing; counting it would take a live one's slot.
    waiting = [
        p
        for p in pods
        if is_leader(p)
        and is_scheduling_gated(p)
        and not pod_terminating(p)
        and not pod_finished(p)
    ]
    return sorted(
        waiting,
        key=lambda p: (
            str(meta_of(p).get("creationTimestamp", "")),
            str(meta_of(p).get("name", "")),
        ),
    )


def _groups_tearing_down(pods: Iterable[JSON]) -> dict[str, list[JSON]]:
    groups: dict[str, list[JSON]] = {}
    for pod in pods:
        key = group_key(pod)
        if key:
            groups.setdefault(key, []).append(pod)
    tearing = {}
    for key, members in groups.items():
        if all(is_scheduling_gated(p) for p in members):
            continue  # never admitted, so it holds no capacity to wait for
        leaders = [p for p in members if is_leader(p)]
        if not leaders or all(leader_lost(p) for p in leaders):
            tearing[key] = members
    return tearing


def tearing_down_groups(pods: Iterable[JSON]) -> set[str]:
    """Group keys with a pod still present whose leader is terminating, finished or
    gone."""
    return set(_groups_tearing_down(pods))


# --- when a pod stops holding its group's replacement back ------------------------------


def node_not_ready_since(node: JSON) -> float | None:
    """When the node stopped being Ready (its Ready condition False or Unknown, or
    missing: then since the node was created); None while it is Ready."""
    ready = condition_of(node, "Ready")
    if ready is None:
        return timestamp_of(meta_of(node).get("creationTimestamp")) or 0.0
    if ready.get("status") == "True":
        return None
    since = timestamp_of(ready.get("lastTransitionTime"))
    return since if since is not None else 0.0


@dataclass(frozen=True)
class PodRelease:
    at: float  # when the pod stops counting
    reason: str
    node: str


def pod_release(
    pod: JSON,
    nodes: Mapping[str, JSON] | None,
    thresholds: ReleaseThresholds,
    worker_sets: Mapping[str, JSON] | None = None,
) -> PodRelease | None:
    """When a pod of a tearing-down group stops holding its replacement back, and why;
    None if only its removal will. `nodes` None means they are not known (a node
    cache not synced yet): then no node releases anything. `worker_sets` are the
    LeaderWorkerSet's StatefulSets by name, to find the pod's own."""
    node_name = str((pod.get("spec") or {}).get("nodeName") or "")
    owner_set = _worker_set_of(pod, worker_sets)
    if owner_set is not None and controller_ref(owner_set) is None:
        return PodRelease(0.0, ORPHANED, node_name)
    candidates: list[PodRelease] = []
    if thresholds.node_not_ready > 0 and node_name and nodes is not None:
        node = nodes.get(node_name)
        # A Node that is gone has no capacity left for the scheduler to hand out.
        since = 0.0 if node is None else node_not_ready_since(node)
        if since is not None:
            candidates.append(
                PodRelease(since + thresholds.node_not_ready, NODE_NOT_READY, node_name)
            )
    if thresholds.termination_overrun > 0:
        deadline = _deletion_deadline(pod, owner_set)
        if deadline is not None:
            at = deadline + thresholds.termination_overrun
            candidates.append(PodRelease(at, TERMINATION_OVERRUN, node_name))
    return min(candidates, key=lambda r: r.at, default=None)


def _worker_set_of(pod: JSON, worker_sets: Mapping[str, JSON] | None) -> JSON | None:
    owner = controller_ref(pod)
    if worker_sets is None or owner is None or owner.get("kind") != "StatefulSet":
        return None
    return worker_sets.get(str(owner.get("name", "")))


def _deletion_deadline(pod: JSON, owner_set: JSON | None) -> float | None:
    """When the pod should have been gone. The API server sets a pod's deletionTimestamp
    to the end of its grace period, and that is the moment while the pod has one: a
    foreground deletion of the worker StatefulSet (the restart policy's) marks the set
    at once and its pods with their grace period, and the pods' deadline is theirs. A
    pod with none belongs, at most, to a set whose deletion a finalizer holds up (its
    pods are deleted only once it is gone): then the set's deletionTimestamp, the moment
    its deletion began, starts the clock."""
    own = timestamp_of(meta_of(pod).get("deletionTimestamp"))
    if own is not None or owner_set is None:
        return own
    return timestamp_of(meta_of(owner_set).get("deletionTimestamp"))


@dataclass(frozen=True)
class GroupRelease:
    """A tearing-down group that no longer holds its replacement back."""

    group: str
    at: float  # when its last pod stopped counting
    reason: str  # NODE_NOT_READY when every remaining pod is on a lost node
    pods: tuple[str, ...]
    nodes: tuple[str, ...]


def group_release(
    group: str,
    members: list[JSON],
    nodes: Mapping[str, JSON] | None,
    thresholds: ReleaseThresholds,
    worker_sets: Mapping[str, JSON] | None = None,
) -> GroupRelease | None:
    """When the whole group stops counting (its last pod's release); None if never."""
    # A finished pod that a foreground deletion keeps until its dependents are gone (a
    # leader whose worker sits on a lost node) goes with them: its release is theirs,
    # not its own overrun bound.
    kept = [p for p in members if not _kept_for_dependents(p)]
    releases = [pod_release(p, nodes, thresholds, worker_sets) for p in kept or members]
    known = [r for r in releases if r is not None]
    if len(known) < len(releases):
        return None
    at = max(r.at for r in known)
    reason = _group_reason({r.reason for r in known})
    return GroupRelease(
        group=group,
        at=at,
        reason=reason,
        pods=tuple(sorted(name_of(p) for p in members)),
        nodes=tuple(sorted({r.node for r in known if r.node})),
    )


def _kept_for_dependents(pod: JSON) -> bool:
    finalizers = meta_of(pod).get("finalizers") or []
    return pod_finished(pod) and pod_terminating(pod) and finalizers == ["foregroundDeletion"]


def _group_reason(reasons: set[str]) -> str:
    """One reason for the group: orphaned only if every pod was; the node only if every
    other pod is on a lost node; else the overrun."""
    if reasons == {ORPHANED}:
        return ORPHANED
    if reasons <= {NODE_NOT_READY, ORPHANED}:
        return NODE_NOT_READY
    return TERMINATION_OVERRUN


# --- the decision ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    admit: list[JSON]  # gated leaders to ungate now, oldest first
    held: list[JSON]  # gated leaders left waiting, oldest first
    holding: list[str]  # tearing-down groups that still count in T, sorted
    released: list[GroupRelease] = field(default_factory=list)  # no longer counted
    # The earliest moment a group still counted will stop counting, if any does.
    next_release_at: float | None = None
    # The group each held leader waits for (by leader name): see `_pair`.
    waits_for: dict[str, str] = field(default_factory=dict)


def decide(
    pods: list[JSON],
    nodes: Mapping[str, JSON] | None,
    now: float,
    thresholds: ReleaseThresholds,
    *,
    immediate: bool = False,
    ungating: Collection[str] = (),
    worker_sets: Mapping[str, JSON] | None = None,
) -> Decision:
    """Which gated leaders to release now.

    `ungating` names leaders the caller has already ungated but `pods` may still show
    gated: they are admitted, so they are neither waiting nor candidates again, and
    G - T is counted over the leaders truly waiting. `worker_sets` are the
    LeaderWorkerSet's StatefulSets by name (None: not known, nothing is orphaned).
    """
    waiting = [p for p in gated_leaders(pods) if name_of(p) not in ungating]
    if immediate:
        return Decision(admit=waiting, held=[], holding=[])
    holding: list[str] = []
    released: list[GroupRelease] = []
    due: dict[str, float | None] = {}
    for group, members in sorted(_groups_tearing_down(pods).items()):
        release = group_release(group, members, nodes, thresholds, worker_sets)
        if release is not None and release.at <= now:
            released.append(release)
            continue
        holding.append(group)
        due[group] = release.at if release is not None else None
    count = max(0, len(waiting) - len(holding))
    held = waiting[count:]
    upcoming = [at for at in due.values() if at is not None]
    return Decision(
        admit=waiting[:count],
        held=held,
        holding=holding,
        released=released,
        next_release_at=min(upcoming, default=None),
        waits_for=_pair(held, due),
    )


def _pair(held: list[JSON], due: Mapping[str, float | None]) -> dict[str, str]:
    """Which group each held leader waits for. T/G counting admits the oldest held
    leader whenever any group goes, so the oldest is paired with the group expected to
    go first (a bounded release soonest, then unbounded ones by key), the next with the
    next: what a user reads is the one group whose end lets that leader in, not every
    group tearing down. There are never more held leaders than counted groups."""
    order = sorted(due, key=lambda g: (due[g] is None, due[g] or 0.0, g))
    return {name_of(leader): group for leader, group in zip(held, order, strict=False)}
