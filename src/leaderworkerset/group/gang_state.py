"""Where a gang-scheduled group stands with kube-scheduler: its PodGroup and one of
a few gang states, from the group's pods and the PodGroup as a LIST returns them.

kube-scheduler writes one condition on a PodGroup, `PodGroupInitiallyScheduled`:
True/Scheduled once the gang was placed, False/Unschedulable (with a message) when it
does not fit, False/SchedulerError when its pods disagree with it, and none while
fewer than minCount members exist or are ungated. The condition is sticky: once True
it stays True, even after every pod of the group is gone and the new ones cannot fit
(docs/gang-scheduling.md, "What kube-scheduler does (measured)"). So the pods decide
first, the condition only explains a wait. The states, first match wins:

- Missing: the group's pods name a PodGroup (or the group is to have one) that does
  not exist.
- Scheduled: every member the group is to have is bound to a node.
- Error: the condition is False/SchedulerError; the message says why.
- WaitingForMembers: fewer members exist, or are free of scheduling gates, than the
  gang's minCount (a group's size, for a basic policy): the scheduler has not tried.
- WaitingForCapacity: enough members, some not bound: the gang does not fit (the
  condition's False/Unschedulable, or pods the scheduler has yet to place).

Pure: JSON in, data out. `kubectl lws` and the demo's gang story both use it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from leaderworkerset.api.objects import JSON
from leaderworkerset.group.gates import is_scheduling_gated
from leaderworkerset.group.readiness import pod_finished, pod_terminating
from leaderworkerset.group.state import Group
from leaderworkerset.group.workload_objects import pod_group_name, pod_group_of_pod

CONDITION_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"


class GangState(enum.Enum):
    SCHEDULED = "Scheduled"
    WAITING_FOR_CAPACITY = "WaitingForCapacity"
    WAITING_FOR_MEMBERS = "WaitingForMembers"
    MISSING = "Missing"
    ERROR = "Error"
    # The PodGroups could not be read (the reader may not list them).
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Gang:
    pod_group: str
    state: GangState
    # A few words for a table cell; "" when the state says it all.
    reason: str
    # The whole story for `describe` and JSON: the scheduler's message, or ours.
    message: str
    min_count: int | None  # None: a basic policy, or no PodGroup
    members: int  # live pods naming the PodGroup
    bound: int  # of those, bound to a node


def named_pod_group(group: Group, lws_name: str) -> str | None:
    """The PodGroup the group's pods name (the leader's first), or, for a group whose
    pods are not there yet, the one the controller makes for it; None when its pods
    name none (they were made without spec.scheduling, e.g. before it was set)."""
    pods = group.pods
    for pod in pods:
        name = pod_group_of_pod(pod)
        if name:
            return name
    if pods:
        return None
    return pod_group_name(lws_name, group.index, group.revision or "")


def min_count_of(pod_group: JSON) -> int | None:
    policy = (pod_group.get("spec") or {}).get("schedulingPolicy") or {}
    gang = policy.get("gang")
    if not isinstance(gang, dict):
        return None
    value = gang.get("minCount")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def initially_scheduled(pod_group: JSON) -> JSON | None:
    for cond in (pod_group.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == CONDITION_INITIALLY_SCHEDULED:
            return cond
    return None


# "... first placement status: minCount (3) cannot be satisfied: 2 scheduled, 1 remaining"
_PLACEMENTS = re.compile(r"(\d+/\d+ placements are available)")
_MIN_COUNT = re.compile(r"minCount \((\d+)\) cannot be satisfied: (\d+) scheduled")
# A pod's own filter verdict: "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, ..."
_NODES = re.compile(r"\d+/\d+ nodes are available: (.*?)(?:\.\s|\.?$)")


def short_reason(message: str) -> str:
    """A few words from a scheduler message: how many of the gang's pods fit
    (`only 2 of 3 fit`), else the nodes' verdict (`4 Insufficient nvidia.com/gpu`),
    else its first clause."""
    text = " ".join(message.split())
    counts = _MIN_COUNT.search(text)
    if counts:
        needed, fit = counts.groups()
        return f"only {fit} of {needed} fit"
    nodes = _NODES.search(text)
    if nodes:
        return nodes.group(1).split(",")[0].strip()
    placements = _PLACEMENTS.search(text)
    if placements:
        return placements.group(1)
    return text.split(",")[0].rstrip(".")


def _members(group: Group, name: str) -> list[JSON]:
    return [
        p
        for p in group.pods
        if pod_group_of_pod(p) == name and not pod_terminating(p) and not pod_finished(p)
    ]


def _bound(pod: JSON) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _unschedulable_message(pod: JSON) -> str:
    """The message of the pod's PodScheduled=False/Unschedulable condition, or ""."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == (
            "PodScheduled",
            "False",
            REASON_UNSCHEDULABLE,
        ):
            return str(cond.get("message") or "")
    return ""


def _pending_message(members: list[JSON]) -> str:
    """The scheduler's verdict on a pending member: its own filter message first (it
    names the resource), else the gang's message it repeats."""
    messages = [_unschedulable_message(p) for p in members if not _bound(p)]
    messages = [m for m in messages if m]
    own = [m for m in messages if _NODES.search(m)]
    return (own or messages or [""])[0]


def gang_of(
    group: Group,
    lws_name: str,
    size: int,
    pod_groups: Mapping[str, JSON] | None,
    note: str = "",
) -> Gang | None:
    """The group's gang; None when its pods name no PodGroup. `pod_groups`: the
    namespace's PodGroups by name, None when they could not be read; `size`: the
    members the group is to have; `note`: why the PodGroups could not be read or
    why there are none (the API is not served), added to the message."""
    name = named_pod_group(group, lws_name)
    if name is None:
        return None
    members = _members(group, name)
    bound = sum(1 for p in members if _bound(p))
    if pod_groups is None:
        message = note or "the PodGroups could not be read"
        return Gang(name, GangState.UNKNOWN, "", message, None, len(members), bound)
    pod_group = pod_groups.get(name)
    if pod_group is None:
        message = f"PodGroup {name} does not exist; the scheduler holds pods that name it"
        message += f" ({note})" if note else ""
        return Gang(name, GangState.MISSING, "", message, None, len(members), bound)
    min_count = min_count_of(pod_group)

    def gang(state: GangState, reason: str, message: str) -> Gang:
        return Gang(name, state, reason, message, min_count, len(members), bound)

    if members and bound >= max(size, len(members)):
        return gang(GangState.SCHEDULED, "", f"all {bound} member(s) are bound to nodes")
    cond = initially_scheduled(pod_group) or {}
    if cond.get("status") == "False" and cond.get("reason") == REASON_SCHEDULER_ERROR:
        message = str(cond.get("message") or "")
        return gang(GangState.ERROR, short_reason(message), message)
    needed = min_count if min_count is not None else size
    ready = sum(1 for p in members if not is_scheduling_gated(p))
    if ready < needed:
        gated = len(members) - ready
        reason = f"{ready}/{needed} pods" + (f", {gated} gated" if gated else "")
        message = (
            f"{len(members)} member(s) exist, {gated} of them scheduling-gated; the "
            f"scheduler tries the gang once {needed} are there and ungated"
        )
        return gang(GangState.WAITING_FOR_MEMBERS, reason, message)
    if cond.get("status") == "False" and cond.get("reason") == REASON_UNSCHEDULABLE:
        message = str(cond.get("message") or "")
    else:
        message = _pending_message(members)
    if not message:
        pending = len(members) - bound
        return gang(
            GangState.WAITING_FOR_CAPACITY,
            "pending",
            f"{pending} member(s) not bound yet; the scheduler has given no reason",
        )
    return gang(GangState.WAITING_FOR_CAPACITY, short_reason(message), message)
