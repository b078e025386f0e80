"""A compact per-group table of one LeaderWorkerSet, read from the API, for the demo
stories.

TODO: switch to the renderer of `kubectl lws groups` once that plugin lands; this
table is the demo's own stand-in with the columns the story needs (group, state,
ready pods / size, leader node).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.group.gates import is_scheduling_gated
from leaderworkerset.group.readiness import pod_running_and_ready, pod_terminating
from leaderworkerset.group.roles import group_index, group_key, is_leader
from leaderworkerset.runtime.client import LEADERWORKERSETS, PODS, ApiClient

READY = "Ready"
NOT_READY = "NotReady"
GATED = "Gated"
TEARING_DOWN = "TearingDown"
# Hash keys are 40 hex digits; their first 8 name the group's Service too.
KEY_PREFIX = 8


@dataclass(frozen=True)
class GroupRow:
    group: str
    state: str
    ready: int
    size: int
    leader_node: str
    created: str = ""


def group_rows(lws: JSON, pods: list[JSON]) -> list[GroupRow]:
    """One row per group that has pods: Ordinal groups by index, Hash groups in the
    order their leaders were created."""
    spec = lws.get("spec") or {}
    size = int((spec.get("leaderWorkerTemplate") or {}).get("size") or 1)
    hash_mode = spec.get("groupIdentity") == c.GROUP_IDENTITY_HASH
    members: dict[str, list[JSON]] = defaultdict(list)
    for pod in pods:
        group = group_index(pod) or group_key(pod)
        if group is not None:
            members[group].append(pod)
    rows = [_row(group, group_pods, size, hash_mode) for group, group_pods in members.items()]
    if hash_mode:
        return sorted(rows, key=lambda r: (r.created, r.group))
    return sorted(rows, key=lambda r: int(r.group) if r.group.isdigit() else -1)


def _row(group: str, pods: list[JSON], size: int, hash_mode: bool) -> GroupRow:
    leader = next((p for p in pods if is_leader(p)), None)
    live = [p for p in pods if not pod_terminating(p)]
    ready = sum(1 for p in live if pod_running_and_ready(p))
    if leader is None or pod_terminating(leader):
        state = TEARING_DOWN if any(pod_terminating(p) for p in pods) else NOT_READY
    elif is_scheduling_gated(leader):
        state = GATED
    elif ready == size:
        state = READY
    else:
        state = NOT_READY
    node = str(((leader or {}).get("spec") or {}).get("nodeName") or "-")
    return GroupRow(
        group=group[:KEY_PREFIX] if hash_mode else group,
        state=state,
        ready=ready,
        size=size,
        leader_node=node,
        created=str(meta_of(leader).get("creationTimestamp") or ""),
    )


def render(rows: list[GroupRow], indent: str = "  ") -> str:
    lines = [f"{'GROUP':<10} {'STATE':<12} {'READY':<6} LEADER NODE"]
    lines += [
        f"{r.group:<10} {r.state:<12} {f'{r.ready}/{r.size}':<6} {r.leader_node}" for r in rows
    ]
    return "\n".join(indent + line for line in lines)


async def read_groups(api: ApiClient, namespace: str, name: str) -> tuple[JSON, list[GroupRow]]:
    """The LeaderWorkerSet and its groups as they are now."""
    lws = await api.get(LEADERWORKERSETS, name, namespace)
    selector = f"{c.LABEL_SET_NAME}={name}"
    pods = (await api.list(PODS, namespace, label_selector=selector)).get("items") or []
    return lws, group_rows(lws, pods)
