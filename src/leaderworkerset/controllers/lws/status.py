"""LeaderWorkerSet status: counting groups, choosing and merging the
conditions, and telling whether anything changed.

Each mode turns what it observes into one `GroupObservation` per group; the
counting, the conditions, the conditions-changed event and the done flag are shared.

Deviation from upstream: a leader pod whose group-index label is not an integer is
skipped and reported in `StatusUpdate.skipped_leaders`, instead of failing every
status computation of the LWS (see
docs/upstream-deviations.md#unparseable-group-index-does-not-block-status).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from leaderworkerset.api.go.ints import go_atoi_or_none
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView
from leaderworkerset.api.objects import JSON, labels_of, revision_key_of
from leaderworkerset.controllers import events
from leaderworkerset.controllers.held import HeldReplacements
from leaderworkerset.group.names import hpa_pod_selector
from leaderworkerset.group.readiness import (
    ordinal_group_ready,
    ordinal_group_updated,
    pod_finished,
    pod_running_and_ready,
    pod_terminating,
)
from leaderworkerset.group.recreations import (
    failed_groups,
    leader_count,
    read_records_leniently,
)

# Available excludes the other two; Progressing and UpdateInProgress coexist. Failed (a
# group used up maxGroupRestarts, upstream #877) excludes all three.
EXCLUSIVE_PAIRS: Final = frozenset(
    {
        frozenset({c.CONDITION_AVAILABLE, c.CONDITION_PROGRESSING}),
        frozenset({c.CONDITION_AVAILABLE, c.CONDITION_UPDATE_IN_PROGRESS}),
        frozenset({c.CONDITION_FAILED, c.CONDITION_AVAILABLE}),
        frozenset({c.CONDITION_FAILED, c.CONDITION_PROGRESSING}),
        frozenset({c.CONDITION_FAILED, c.CONDITION_UPDATE_IN_PROGRESS}),
    }
)
_CATALOGUE: Final = {
    c.CONDITION_AVAILABLE: (c.REASON_ALL_GROUPS_READY, c.MESSAGE_ALL_GROUPS_READY),
    c.CONDITION_PROGRESSING: (c.REASON_GROUPS_PROGRESSING, c.MESSAGE_GROUPS_PROGRESSING),
    c.CONDITION_UPDATE_IN_PROGRESS: (c.REASON_GROUPS_UPDATING, c.MESSAGE_GROUPS_UPDATING),
    c.CONDITION_FAILED: (
        c.REASON_MAX_GROUP_RESTARTS_EXCEEDED,
        c.MESSAGE_MAX_GROUP_RESTARTS_EXCEEDED,
    ),
}


@dataclass(frozen=True)
class GroupObservation:
    ready: bool
    updated: bool
    desired: bool  # one of the R groups the spec asks for (not surge)
    in_range: bool  # desired and not held back by the spec partition


@dataclass(frozen=True)
class GroupCounts:
    ready: int = 0
    updated: int = 0
    current: int = 0  # groups in range
    part_updated: int = 0  # groups in range that are updated
    ready_non_burst: int = 0  # desired groups that are ready
    part_updated_ready: int = 0  # groups in range that are updated and ready


@dataclass(frozen=True)
class StatusUpdate:
    status: JSON  # the whole status to write
    changed: bool  # write only when set
    event: events.Event | None  # when the conditions changed
    done: bool  # the rollout is complete: old revisions may be truncated
    skipped_leaders: tuple[str, ...] = ()  # leaders without a usable group index


# --- Observing groups ---------------------------------------------------------------------
# Per leader name: the leader pod and worker StatefulSet an observation was made from,
# what else it depended on, and the observation (None: left out of the count). The
# caches replace an object on each change and never edit one, so the same objects
# give the same observation: a pass during a scale-up of a thousand groups costs a
# dictionary lookup per unchanged group.
ObservationMemo = dict[str, tuple[JSON, JSON | None, tuple[str, int, int], Any]]


def ordinal_groups(
    view: LwsView,
    key: str,
    leader_pods: Iterable[JSON],
    worker_statefulsets: Iterable[JSON],
    memo: ObservationMemo | None = None,
) -> tuple[list[GroupObservation], list[str]]:
    """One observation per leader pod whose worker StatefulSet exists (a group still
    being built is not counted); and the names of leaders skipped for a bad index.

    With `memo` (kept by the caller between passes, rewritten here), a group whose
    leader and worker StatefulSet are the very objects of the last pass is not looked
    at again."""
    by_name = {_name(s): s for s in worker_statefulsets}
    no_workers = view.size == 1
    depends = (key, view.replicas, view.partition)
    last = memo if memo is not None else {}
    fresh: ObservationMemo = {}
    groups, skipped = [], []
    for pod in _leaders_of(view, leader_pods):
        name = _name(pod)
        workers = None if no_workers else by_name.get(name)
        known = last.get(name)
        if known is not None and known[0] is pod and known[1] is workers and known[2] == depends:
            observed = known[3]
        else:
            observed = _observe_ordinal(view, key, pod, workers, no_workers)
        fresh[name] = (pod, workers, depends, observed)
        if observed is not None:
            groups.append(observed)
        elif go_atoi_or_none(labels_of(pod).get(c.LABEL_GROUP_INDEX)) is None:
            skipped.append(name)
    if memo is not None:
        memo.clear()
        memo.update(fresh)
    return groups, skipped


def _observe_ordinal(
    view: LwsView, key: str, pod: JSON, workers: JSON | None, no_workers: bool
) -> GroupObservation | None:
    index = go_atoi_or_none(labels_of(pod).get(c.LABEL_GROUP_INDEX))
    if index is None or (not no_workers and workers is None):
        return None
    return GroupObservation(
        ready=ordinal_group_ready(pod, workers),
        updated=ordinal_group_updated(pod, workers, key),
        desired=index < view.replicas,
        in_range=view.partition <= index < view.replicas,
    )


def hash_groups(
    view: LwsView,
    key: str,
    leader_pods: Iterable[JSON],
    memo: ObservationMemo | None = None,
) -> list[GroupObservation]:
    """A group per live leader pod of the Deployment, gated or not. A leader is Ready
    only with its whole group (group-ready gate), so its readiness is the group's.
    Terminating leaders are groups on their way out and are not counted, nor are
    finished (failed, evicted) ones, which the ReplicaSet has already replaced.

    Groups have no index, so "desired" is a ranking: the best R groups (updated and
    ready first) play the R desired groups and the rest count as surge, which is
    what the Deployment will scale away. `memo` as for `ordinal_groups`."""
    depends = (key, 0, 0)
    last = memo if memo is not None else {}
    fresh: ObservationMemo = {}
    observed: list[tuple[bool, bool]] = []
    for pod in _leaders_of(view, leader_pods):
        name = _name(pod)
        known = last.get(name)
        if known is not None and known[0] is pod and known[2] == depends:
            ready_updated = known[3]
        elif pod_terminating(pod) or pod_finished(pod):
            ready_updated = None
        else:
            ready_updated = (pod_running_and_ready(pod), revision_key_of(pod) == key)
        fresh[name] = (pod, None, depends, ready_updated)
        if ready_updated is not None:
            observed.append(ready_updated)
    if memo is not None:
        memo.clear()
        memo.update(fresh)
    observed.sort(key=lambda ru: (not (ru[0] and ru[1]), not ru[1], not ru[0]))
    return [
        GroupObservation(ready=r, updated=u, desired=i < view.replicas, in_range=i < view.replicas)
        for i, (r, u) in enumerate(observed)
    ]


def count_groups(groups: Iterable[GroupObservation]) -> GroupCounts:
    """`ready`/`updated` include surge groups; the part counters do not."""
    ready = updated = current = part_updated = ready_non_burst = part_updated_ready = 0
    for g in groups:
        current += g.in_range
        ready += g.ready
        updated += g.updated
        part_updated += g.updated and g.in_range
        ready_non_burst += g.desired and g.ready
        part_updated_ready += g.in_range and g.ready and g.updated
    return GroupCounts(ready, updated, current, part_updated, ready_non_burst, part_updated_ready)


# --- Conditions ---------------------------------------------------------------------------
def chosen_condition_types(counts: GroupCounts, replicas: int, failed: bool = False) -> list[str]:
    """The condition types that hold, in the order they are merged."""
    if failed:
        return [c.CONDITION_FAILED]
    if counts.part_updated < counts.current:
        return [c.CONDITION_UPDATE_IN_PROGRESS, c.CONDITION_PROGRESSING]
    if counts.ready_non_burst == replicas and counts.part_updated_ready == counts.current:
        return [c.CONDITION_AVAILABLE]
    return [c.CONDITION_PROGRESSING]


def new_condition(condition_type: str, generation: int, now: str) -> JSON:
    reason, message = _CATALOGUE[condition_type]
    return {
        "type": condition_type,
        "status": "True",
        "observedGeneration": generation,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def done_flag(counts: GroupCounts, replicas: int, partition: int) -> bool:
    """Every desired group updated and ready, none held back by a partition."""
    return partition == 0 and counts.part_updated_ready == replicas


def merge_conditions(
    existing: Sequence[JSON], new: Sequence[JSON], generation: int, now: str
) -> list[JSON]:
    """Upstream's merge: conditions are added only as True and never removed; one turns False
    only when an exclusive partner becomes True (keeping its reason and message)."""
    merged = [copy.deepcopy(e) for e in existing if isinstance(e, dict)]
    for cond in new:
        seen = False
        for i, old in enumerate(merged):
            if old.get("type") == cond["type"]:
                seen = True
                if old.get("status") != cond["status"] or (
                    old.get("observedGeneration") != cond["observedGeneration"]
                ):
                    merged[i] = copy.deepcopy(cond)
            elif (
                frozenset({old.get("type"), cond["type"]}) in EXCLUSIVE_PAIRS
                and old.get("status") == "True"
                and cond["status"] == "True"
            ):
                old["status"] = "False"
                old["lastTransitionTime"] = now
                old["observedGeneration"] = cond["observedGeneration"]
        if not seen and cond["status"] == "True":
            merged.append(copy.deepcopy(cond))
    for cond in merged:
        if cond.get("observedGeneration") != generation:
            cond["observedGeneration"] = generation
    return merged


def budget_used_up(view: LwsView, leader_pods: Iterable[JSON]) -> bool:
    """Some live group of this LWS is past maxGroupRestarts (its count on the LWS or,
    as upstream reads it, on its leader)."""
    budget = view.template.max_group_restarts
    if budget is None:
        return False
    records, _ = read_records_leniently(view.annotations)
    live = {
        g: leader_count(p)
        for p in _leaders_of(view, leader_pods)
        if not pod_finished(p) and (g := labels_of(p).get(c.LABEL_GROUP_INDEX))
    }
    return bool(failed_groups(records, budget, live))


# --- Assembling the status ------------------------------------------------------------------
def ordinal_status(
    view: LwsView,
    key: str,
    leader_sts: JSON | None,
    leader_pods: Iterable[JSON],
    worker_statefulsets: Iterable[JSON],
    now: str,
    memo: ObservationMemo | None = None,
) -> StatusUpdate:
    """The status of an Ordinal-mode LWS; `replicas` is the leader StatefulSet's."""
    leader_pods = list(leader_pods)
    groups, skipped = ordinal_groups(view, key, leader_pods, worker_statefulsets, memo)
    replicas = ((leader_sts or {}).get("status") or {}).get("replicas", 0)
    failed = budget_used_up(view, leader_pods)
    return _status_update(
        view, count_groups(groups), replicas, view.partition, now, skipped, failed=failed
    )


def hash_status(
    view: LwsView,
    key: str,
    leader_pods: Iterable[JSON],
    now: str,
    *,
    held: HeldReplacements | None = None,
    memo: ObservationMemo | None = None,
) -> StatusUpdate:
    """The status of a Hash-mode LWS; `replicas` counts every live leader pod."""
    leader_pods = list(leader_pods)
    groups = hash_groups(view, key, leader_pods, memo)
    # Partition is rejected in Hash mode; it means nothing to a Deployment.
    counts = count_groups(groups)
    failed = budget_used_up(view, leader_pods)
    update = _status_update(view, counts, len(groups), 0, now, [], failed=failed)
    status = update.status
    if held is not None:
        status["conditions"] = with_held_condition(status["conditions"], held, view.generation, now)
    # Old revisions may go only when no live leader still needs one to build its
    # workers: the old ReplicaSet can keep leaders beside the best R for a while.
    return dataclasses.replace(
        update,
        status=status,
        changed=status_changed(view.obj.get("status"), status),
        done=update.done and counts.updated == len(groups),
    )


# --- Hash mode: replacements held by PostTermination ---------------------------------------
# Our addition. The E11 event is about the upstream conditions only, so this one is
# merged after it has been decided.
CONDITION_REPLACEMENT_HELD: Final = "GroupReplacementHeld"
REASON_WAITING_FOR_TERMINATION: Final = "WaitingForTermination"
REASON_NO_REPLACEMENT_HELD: Final = "NoReplacementHeld"
_SHOWN = 3


def _waits(held: HeldReplacements) -> str:
    pairs = [
        f"{leader} waits for group {group[:8]}"
        for leader, group in zip(held.leaders[:_SHOWN], held.groups, strict=False)
    ]
    more = len(held.leaders) - _SHOWN
    return "; ".join(pairs) + (f"; and {more} more" if more > 0 else "")


def held_condition(held: HeldReplacements, generation: int, now: str) -> JSON:
    if held.any:
        status, reason = "True", REASON_WAITING_FOR_TERMINATION
        message = (
            f"{len(held.leaders)} replacement leader(s) wait for tearing-down groups to "
            f"finish terminating: {_waits(held)}"
        )
    else:
        status, reason = "False", REASON_NO_REPLACEMENT_HELD
        message = "No replacement group is waiting for a group to terminate"
    return {
        "type": CONDITION_REPLACEMENT_HELD,
        "status": status,
        "observedGeneration": generation,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def with_held_condition(
    conditions: Sequence[JSON], held: HeldReplacements, generation: int, now: str
) -> list[JSON]:
    """The conditions with GroupReplacementHeld set: added the first time a replacement
    is held, then True or False; lastTransitionTime moves only with the status."""
    out = [copy.deepcopy(cond) for cond in conditions]
    index = next(
        (i for i, cond in enumerate(out) if cond.get("type") == CONDITION_REPLACEMENT_HELD), None
    )
    if index is None:
        if held.any:
            out.append(held_condition(held, generation, now))
        return out
    old = out[index]
    new = held_condition(held, generation, now)
    if old.get("status") == new["status"]:
        new["lastTransitionTime"] = old.get("lastTransitionTime", now)
    out[index] = new
    return out


def with_condition(conditions: Sequence[JSON], condition: JSON) -> list[JSON]:
    """The conditions with `condition` set in place of one of its type (added if
    there is none); lastTransitionTime moves only with the status."""
    out = [copy.deepcopy(cond) for cond in conditions]
    new = copy.deepcopy(condition)
    for i, old in enumerate(out):
        if old.get("type") == new["type"]:
            if old.get("status") == new["status"]:
                new["lastTransitionTime"] = old.get("lastTransitionTime", new["lastTransitionTime"])
            out[i] = new
            return out
    out.append(new)
    return out


def _status_update(
    view: LwsView,
    counts: GroupCounts,
    replicas: int,
    partition: int,
    now: str,
    skipped: list[str],
    *,
    failed: bool = False,
) -> StatusUpdate:
    old = view.obj.get("status") or {}
    status = copy.deepcopy(old)
    status["replicas"] = replicas
    status["observedGeneration"] = view.generation
    if not status.get("hpaPodSelector"):
        status["hpaPodSelector"] = hpa_pod_selector(view.name)
    status["readyReplicas"] = counts.ready
    status["updatedReplicas"] = counts.updated
    types = chosen_condition_types(counts, view.replicas, failed)
    fresh = [new_condition(t, view.generation, now) for t in types]
    status["conditions"] = merge_conditions(
        old.get("conditions") or [], fresh, view.generation, now
    )
    event = None
    if status["conditions"] != (old.get("conditions") or []):
        first = fresh[0]
        event = events.conditions_changed(
            first["reason"], first["message"], counts.ready, view.replicas
        )
    return StatusUpdate(
        status=status,
        changed=status_changed(old, status),
        event=event,
        done=done_flag(counts, view.replicas, partition),
        skipped_leaders=tuple(skipped),
    )


_DEFAULTS: Final = {
    "replicas": 0,
    "observedGeneration": 0,
    "hpaPodSelector": "",
    "readyReplicas": 0,
    "updatedReplicas": 0,
    "conditions": [],
}


def status_changed(old: JSON | None, new: JSON) -> bool:
    """Whether any field the controller owns differs (absent = its zero value)."""
    old = old or {}
    return any(
        (old.get(f) or default) != (new.get(f) or default) for f, default in _DEFAULTS.items()
    )


def _leaders_of(view: LwsView, pods: Iterable[JSON]) -> list[JSON]:
    """Leader pods of this LWS; callers may pass a wider list from a cache."""
    # `roles.lws_name` and `roles.is_leader`, inline: a status pass asks this of every
    # leader of a thousand-group LWS, and the calls were most of the pass.
    name, leader = view.name, c.LEADER_WORKER_INDEX
    kept = []
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(c.LABEL_SET_NAME) == name and labels.get(c.LABEL_WORKER_INDEX) == leader:
            kept.append(pod)
    return kept


def _name(obj: JSON) -> str:
    # name_of without its str(): cached objects always carry their name as a string.
    name: str = (obj.get("metadata") or {}).get("name") or ""
    return name
