"""Rolling-update arithmetic of the leader StatefulSet: which partition
and how many replicas (surge included) to write on each reconcile.

The StatefulSet updates every ordinal at or above its partition, highest first,
so the rollout is steered by lowering the partition `step` groups past the
finished tail each reconcile and by raising `replicas` above R for surge.

Deviations from upstream wording only (see `events`): the event for a rising
partition and the events for ordinary scale-downs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from leaderworkerset.api.go.ints import go_atoi_or_none
from leaderworkerset.api.go.intstr import scaled_value
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, annotations_of, labels_of, meta_of
from leaderworkerset.api.reconcile_errors import ReconcileError
from leaderworkerset.controllers import events
from leaderworkerset.group.names import leader_pod_name
from leaderworkerset.group.readiness import ordinal_group_ready, ordinal_group_updated


class RollingUpdateError(ReconcileError, ValueError):
    """The leader StatefulSet carries a value the arithmetic cannot use (a reconcile
    error, retried with backoff)."""


@dataclass(frozen=True)
class ReplicaState:
    ready: bool
    updated: bool


@dataclass(frozen=True)
class Budget:
    """The surge and unavailable budgets, scaled against the desired replicas R, never
    the current S."""

    replicas: int
    surge: int
    unavailable: int

    @property
    def burst(self) -> int:
        return self.replicas + self.surge

    def rolling_replicas(self, unready: int) -> int:
        """Replicas to run while `unready` desired groups are unready or outdated."""
        if unready <= self.surge:
            return self.replicas + max(0, unready - self.unavailable)
        return self.burst


@dataclass(frozen=True)
class RollingUpdatePlan:
    """What to write to the leader StatefulSet, and the events to record."""

    partition: int
    replicas: int
    events: tuple[events.Event, ...] = ()


def rolling_budget(view: LwsView) -> Budget:
    r = view.replicas
    surge = min(scaled_value(view.max_surge, r, round_up=True), r)
    unavailable = scaled_value(view.max_unavailable, r, round_up=False)
    return Budget(replicas=r, surge=surge, unavailable=unavailable)


def leader_max_unavailable(view: LwsView) -> int:
    """The StatefulSet may replace the surge and unavailable budgets at once,
    but at least one pod (the StatefulSet API rejects 0)."""
    budget = rolling_budget(view)
    return max(1, budget.unavailable + budget.surge)


# --- Replica states ---------------------------------------------------------------
def replica_states(
    view: LwsView,
    sts_replicas: int,
    key: str,
    leader_pods: Iterable[JSON],
    statefulsets: Iterable[JSON],
) -> list[ReplicaState]:
    """ready/updated of groups 0..S-1 from the leader pods and worker StatefulSets of
    the LWS (the leader StatefulSet may be among them: it has no group index)."""
    pods = _by_index(leader_pods, sts_replicas)
    worker_sets = _by_index(statefulsets, sts_replicas)
    no_workers = view.size == 1
    states = []
    for i in range(sts_replicas):
        expected = leader_pod_name(view.name, i)
        pod, sts = pods.get(i), worker_sets.get(i)
        if _name(pod) != expected or (not no_workers and _name(sts) != expected):
            states.append(ReplicaState(ready=False, updated=False))
            continue
        assert pod is not None
        workers = None if no_workers else sts
        states.append(
            ReplicaState(
                ready=ordinal_group_ready(pod, workers),
                updated=ordinal_group_updated(pod, workers, key),
            )
        )
    return states


def _by_index(objects: Iterable[JSON], limit: int) -> dict[int, JSON]:
    slots: dict[int, JSON] = {}
    for obj in objects:
        index = go_atoi_or_none(labels_of(obj).get(c.LABEL_GROUP_INDEX))
        if index is not None and 0 <= index < limit:
            slots[index] = obj  # a later object for the same slot wins, as upstream
    return slots


# --- The partition walk ---------------------------------------------------------------------
def rolling_partition(
    states: Sequence[ReplicaState], sts_replicas: int, step: int, current: int
) -> int:
    """The next partition: `step` groups below the ready-and-updated tail, moved up past
    groups below it that are unready (they already eat into maxUnavailable), then
    down through groups that cost no availability to update. Never above `current`."""
    s = sts_replicas
    tail = 0
    for i in range(s - 1, -1, -1):
        if not (i < len(states) and states[i].ready and states[i].updated):
            break
        tail += 1
    base = max(0, s - tail - step)
    partition = base + sum(1 for i in range(base) if not _ready(states, i))
    i = min(partition, s - 1)
    while i >= base:
        if not _ready(states, i) or _updated(states, i):
            partition = i
            i -= 1
        else:
            break
    return min(partition, current)


def _ready(states: Sequence[ReplicaState], i: int) -> bool:
    return i < len(states) and states[i].ready


def _updated(states: Sequence[ReplicaState], i: int) -> bool:
    return i < len(states) and states[i].updated


# --- The main decision --------------------------------------------------------------
def rolling_update_parameters(
    view: LwsView,
    sts: JSON | None,
    key: str,
    lws_updated: bool,
    leader_pods: Iterable[JSON] = (),
    statefulsets: Iterable[JSON] = (),
) -> RollingUpdatePlan:
    """(partition, replicas) for the leader StatefulSet, with the events for a moved
    partition and for removed replicas.

    `sts` is the leader StatefulSet as stored (None before creation); `lws_updated`
    says this reconcile created a new revision. `leader_pods` and `statefulsets` are
    the LWS's leader pods and StatefulSets, read only mid-rollout."""
    partition, replicas, deleted = _decide(view, sts, key, lws_updated, leader_pods, statefulsets)
    partition = max(partition, view.partition)
    emitted: list[events.Event] = list(deleted)
    if sts is not None and not lws_updated:
        old = sts_partition(sts)
        if partition != old:
            emitted.append(events.partition_moved(old, partition))
    return RollingUpdatePlan(partition=partition, replicas=replicas, events=tuple(emitted))


def _decide(
    view: LwsView,
    sts: JSON | None,
    key: str,
    lws_updated: bool,
    leader_pods: Iterable[JSON],
    statefulsets: Iterable[JSON],
) -> tuple[int, int, list[events.Event]]:
    r = view.replicas
    if sts is None:
        return 0, r, []
    s = sts_replicas(sts)
    budget = rolling_budget(view)
    recorded = _recorded_replicas(sts)
    if lws_updated:
        partition = min(r, s)
        if s < r:
            return partition, r, []
        # A new revision: every desired group is outdated, so all count as unready.
        return partition, *_shrink(view, budget, s, r, recorded)
    partition = sts_partition(sts)
    if partition == 0 and s == r:
        return 0, r, []
    if s < r:
        return partition, r, []
    states = replica_states(view, s, key, leader_pods, statefulsets)
    unready = sum(1 for i in range(r) if not (_ready(states, i) and _updated(states, i)))
    if recorded is None:
        raise RollingUpdateError(
            f"leader statefulset {view.name}: annotation {c.ANNOTATION_REPLICAS} "
            f"is not an integer: {_annotations(sts).get(c.ANNOTATION_REPLICAS)!r}"
        )
    if recorded != r:
        return min(partition, budget.burst), *_shrink(view, budget, s, unready, recorded)
    step = budget.unavailable + budget.surge - (budget.burst - s)
    partition = rolling_partition(states, s, step, partition)
    return partition, *_shrink(view, budget, s, unready, recorded)


def _shrink(
    view: LwsView, budget: Budget, s: int, unready: int, recorded: int | None
) -> tuple[int, list[events.Event]]:
    """The target replicas, and the replicas-deleted event when that removes some."""
    final = budget.rolling_replicas(unready)
    if final >= s:
        return final, []
    # Replicas at or above the previously desired count were surge replicas; below it,
    # lowering replicas is a scale-down.
    surge_only = recorded is not None and final >= recorded
    return final, [events.replicas_deleted(view.name, final, s - 1, surge_only)]


# --- Reading the stored leader StatefulSet --------------------------------------------------
def sts_replicas(sts: JSON) -> int:
    value = (sts.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) else 1


def sts_partition(sts: JSON) -> int:
    rolling = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
    value = rolling.get("partition", 0)
    return value if isinstance(value, int) else 0


def rolling_in_progress(sts: JSON) -> bool:
    """The leader StatefulSet is mid-rollout: a partition still to step down, or surge
    replicas still to take back, each step waiting for groups to become Ready."""
    recorded = _recorded_replicas(sts)
    return sts_partition(sts) > 0 or (recorded is not None and sts_replicas(sts) > recorded)


def _recorded_replicas(sts: JSON) -> int | None:
    return go_atoi_or_none(_annotations(sts).get(c.ANNOTATION_REPLICAS))


def _annotations(obj: JSON) -> dict[str, Any]:
    return annotations_of(obj)


def _name(obj: JSON | None) -> str | None:
    return None if obj is None else meta_of(obj).get("name")
