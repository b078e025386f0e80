"""Which tearing-down group each gated replacement leader waits for.

The controller's PostTermination rule only counts: with T groups tearing down and G
gated leaders it releases the oldest G - T. It never ties a gated leader to one old
group. To give the reader a name to look at, the pairing here lines the gated
leaders up oldest first and the tearing-down groups by when their leader's grace
period ends (first due, first) and, past the G - T about to be admitted, pairs them
off in that order. It explains the count; it does not promise which old group's
departure releases which leader.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from leaderworkerset.api.objects import JSON, meta_of, name_of
from leaderworkerset.controllers.replacement.post_termination import (
    gated_leaders,
    tearing_down_groups,
)
from leaderworkerset.group.roles import group_key, is_leader


@dataclass
class Pairing:
    gated: int = 0  # G
    tearing_down: int = 0  # T
    # Leader pod name -> the group key it waits for.
    waits_for: dict[str, str] = field(default_factory=dict)
    # Gated leaders the rule releases now (the oldest G - T).
    admitting: set[str] = field(default_factory=set)
    # Tearing-down group keys, the first due to go first.
    tearing_order: list[str] = field(default_factory=list)


def _teardown_due(members: list[JSON]) -> str:
    """When the group is due to go: the end of its leader's grace period (the
    deletionTimestamp, which the API server sets to the deletion's time plus the
    grace period), else its first pod's; a group with no deletion yet (a failed
    leader not deleted so far) sorts last."""
    leaders = [p for p in members if is_leader(p)]
    for pods in (leaders, members):
        stamps = sorted(
            str(meta_of(p).get("deletionTimestamp"))
            for p in pods
            if meta_of(p).get("deletionTimestamp")
        )
        if stamps:
            return stamps[0]
    return "~"  # after any timestamp


def pair(pods: Iterable[JSON], *, immediate: bool = False) -> Pairing:
    """`pods`: every pod of one Hash-mode LeaderWorkerSet, terminating ones included.
    `immediate`: the policy is Immediate, under which every gated leader is released."""
    pods = list(pods)
    waiting = gated_leaders(pods)
    tearing = tearing_down_groups(pods)
    by_key: dict[str, list[JSON]] = {}
    for pod in pods:
        key = group_key(pod)
        if key in tearing:
            by_key.setdefault(key, []).append(pod)
    order = sorted(tearing, key=lambda k: (_teardown_due(by_key[k]), k))
    result = Pairing(gated=len(waiting), tearing_down=len(tearing), tearing_order=order)
    released = len(waiting) if immediate else max(0, len(waiting) - len(tearing))
    result.admitting = {name_of(p) for p in waiting[:released]}
    for leader, key in zip(waiting[released:], order, strict=False):
        result.waits_for[name_of(leader)] = key
    return result
