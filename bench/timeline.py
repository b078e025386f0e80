"""When each pod of a scale run reached each step, as the driver's pod watch saw it, and
what that says about where the wall time went.

The floor is bound by the cluster, mostly the scheduler's binding rate (its client's
QPS), so a configuration is slower than the floor either because the scheduler had
nothing to bind for a while (pods not created yet, or created gated) or because it had
more to do. The summary tells the two apart: seconds in which no pod was waiting to be
bound, and each group's steps (leader gated, workers created after their leader, the
leader's Ready after its workers').
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from bench import workload
from leaderworkerset.api.leaderworkerset import constants as c

JSON = dict[str, Any]
CREATED, SCHEDULABLE, BOUND, READY = "created", "schedulable", "bound", "ready"


def _group_and_role(meta: JSON) -> tuple[str, bool]:
    """(group, is leader) for an LWS pod or a floor pod."""
    labels = meta.get("labels") or {}
    if c.LABEL_WORKER_INDEX in labels:
        leader = labels[c.LABEL_WORKER_INDEX] == c.LEADER_WORKER_INDEX
        return labels.get(c.LABEL_GROUP_KEY, ""), leader
    owner = labels.get(workload.SET_LABEL, "")
    if workload.GANG_LABEL in labels:
        # The gang floor: StatefulSet `bench-<i>` is group i, its pod 0 the leader.
        return owner.rsplit("-", 1)[-1], meta.get("name", "").endswith("-0")
    if owner == workload.NAME:
        # The floor's leader StatefulSet: pod `bench-<i>` leads the group of `bench-<i>`.
        return meta.get("name", "").rsplit("-", 1)[-1], True
    return owner.rsplit("-", 1)[-1], False


@dataclass
class Timeline:
    start: float = 0.0
    steps: dict[str, dict[str, float]] = field(default_factory=dict)
    groups: dict[str, tuple[str, bool]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    # StatefulSets by name, when first seen: a worker StatefulSet is named after its leader.
    sets: dict[str, float] = field(default_factory=dict)
    # Pods that name a PodGroup (spec.schedulingGroup): gang-scheduled, if any.
    in_gangs: set[str] = field(default_factory=set)

    def observe_set(self, sts: JSON, now: float) -> JSON:
        self.sets.setdefault(str((sts.get("metadata") or {}).get("name", "")), now)
        return {"metadata": sts.get("metadata") or {}}

    def observe(self, pod: JSON, now: float, ready: bool) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        seen = self.steps.get(uid)
        if seen is None:
            seen = self.steps[uid] = {CREATED: now}
            self.groups[uid] = _group_and_role(meta)
            self.names[uid] = str(meta.get("name", ""))
        spec = pod.get("spec") or {}
        if (spec.get("schedulingGroup") or {}).get("podGroupName"):
            self.in_gangs.add(uid)
        if not spec.get("schedulingGates"):
            seen.setdefault(SCHEDULABLE, now)
        if spec.get("nodeName"):
            seen.setdefault(BOUND, now)
        if ready:
            seen.setdefault(READY, now)

    def ready_series(self) -> list[tuple[float, int]]:
        """Pods Ready over time: (seconds since the create, pods Ready by then), a point
        per pod in the order they turned Ready, from (0, 0)."""
        return [(0.0, 0), *((at, n) for n, at in enumerate(self._at(READY), start=1))]

    def _at(self, step: str) -> list[float]:
        return sorted(s[step] - self.start for s in self.steps.values() if step in s)

    def _idle_binding(self) -> float:
        """Seconds between the first pod becoming schedulable and the last bind in which
        none was waiting to be bound."""
        changes = [(s[SCHEDULABLE], 1) for s in self.steps.values() if SCHEDULABLE in s]
        changes += [(s[BOUND], -1) for s in self.steps.values() if BOUND in s]
        changes.sort()
        idle, waiting, since = 0.0, 0, None
        for when, delta in changes:
            if waiting == 0 and since is not None:
                idle += when - since
            waiting += delta
            since = when if waiting == 0 else None
        return idle

    def summary(self) -> str:
        if not self.steps:
            return "no pods seen"
        last = {step: self._at(step) for step in (CREATED, SCHEDULABLE, BOUND, READY)}
        bound = last[BOUND]
        rate = len(bound) / (bound[-1] - bound[0]) if len(bound) > 1 else 0.0
        made = sorted(at - self.start for at in self.sets.values())
        lines = [
            (f"last StatefulSet seen {made[-1]:.1f} s; " if made else "")
            + "last pod "
            + ", ".join(f"{step} {at[-1]:.1f} s" for step, at in last.items() if at)
            + f"; {rate:.0f} binds/s; nothing to bind for {self._idle_binding():.1f} s"
            + (f"; {len(self.in_gangs)} pods in PodGroups" if self.in_gangs else ""),
            self._groups_summary(),
            self._ready_lag(),
        ]
        return "\n".join(line for line in lines if line)

    def _ready_lag(self) -> str:
        """Bound to Ready, which is the node simulator's part (and, for a Hash leader,
        the group-ready condition's): the slowest pod names where a run's tail went."""
        lags = sorted(
            (seen[READY] - seen[BOUND], uid)
            for uid, seen in self.steps.items()
            if BOUND in seen and READY in seen
        )
        if not lags:
            return ""
        worst, uid = lags[-1]
        slow = sum(1 for lag, _ in lags if lag > 5.0)
        middle = lags[len(lags) // 2][0]
        return (
            f"bound to Ready: p50 {middle:.1f} s, {slow} pods over 5 s, slowest {worst:.1f} s "
            f"({self.names[uid]}, bound at {self.steps[uid][BOUND] - self.start:.1f} s)"
        )

    def _groups_summary(self) -> str:
        leaders: dict[str, dict[str, float]] = {}
        workers: dict[str, list[dict[str, float]]] = {}
        for uid, seen in self.steps.items():
            group, is_leader = self.groups[uid]
            if is_leader:
                leaders[group] = seen
            else:
                workers.setdefault(group, []).append(seen)
        leader_names = {
            self.groups[uid][0]: self.names[uid] for uid in self.steps if self.groups[uid][1]
        }
        gated, set_made, first_worker, after_workers = [], [], [], []
        for group, leader in leaders.items():
            if SCHEDULABLE in leader:
                gated.append(leader[SCHEDULABLE] - leader[CREATED])
            mine = workers.get(group, [])
            made = self.sets.get(leader_names.get(group, ""))
            if made is not None:
                set_made.append(made - leader[CREATED])
            if mine:
                first = min(w[CREATED] for w in mine)
                first_worker.append(first - (leader[CREATED] if made is None else made))
            if mine and READY in leader and all(READY in w for w in mine):
                after_workers.append(leader[READY] - max(w[READY] for w in mine))
        return "per group, p50/p90 s: " + "; ".join(
            f"{name} {_p(values, 0.5)}/{_p(values, 0.9)}"
            for name, values in (
                ("leader gated", gated),
                ("worker StatefulSet after leader", set_made),
                ("first worker after its StatefulSet", first_worker),
                ("leader Ready after last worker", after_workers),
            )
        )


def thin(points: list[tuple[float, int]], most: int) -> list[tuple[float, int]]:
    """At most `most` of `points`, evenly spaced, keeping the first and the last: a
    curve's shape for a JSON line without a point per pod."""
    if len(points) <= most:
        return list(points)
    step = (len(points) - 1) / (most - 1)
    return [points[round(i * step)] for i in range(most)]


def _p(values: list[float], q: float) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.quantiles(values, n=100, method='inclusive')[round(q * 100) - 1]:.1f}"
