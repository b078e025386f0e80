"""A compact per-group table of one LeaderWorkerSet, read from the API, for the demo
stories: the columns the story needs (group, state, ready pods / size, leader node),
with the state from `group.state`, the same answer `kubectl lws groups` and the
`lws_groups` metric give.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.types import group_identity_of, is_hash_mode
from leaderworkerset.api.objects import JSON, meta_of
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS, STATEFULSETS
from leaderworkerset.group.state import GroupState, group_state, groups_of, leader_node, ready_pods
from leaderworkerset.runtime.client import ApiClient
from leaderworkerset.tables import table

READY = GroupState.READY.value
NOT_READY = GroupState.NOT_READY.value
GATED = GroupState.GATED.value
TEARING_DOWN = GroupState.TEARING_DOWN.value
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


def group_rows(lws: JSON, pods: list[JSON], statefulsets: Sequence[JSON] = ()) -> list[GroupRow]:
    """One row per group that has pods: Ordinal groups by index, Hash groups in the
    order their leaders were created."""
    spec = lws.get("spec") or {}
    size = int((spec.get("leaderWorkerTemplate") or {}).get("size") or 1)
    hash_mode = is_hash_mode(group_identity_of(spec))
    rows = [
        GroupRow(
            group=group.index[:KEY_PREFIX] if hash_mode else group.index,
            state=group_state(group, None).value,
            ready=ready_pods(group),
            size=group.size or size,
            leader_node=leader_node(group) or "-",
            created=str(meta_of(group.leader).get("creationTimestamp") or ""),
        )
        for group in groups_of(pods, statefulsets)
    ]
    return rows


def render(rows: list[GroupRow], indent: str = "  ") -> str:
    cells = [[r.group, r.state, f"{r.ready}/{r.size}", r.leader_node] for r in rows]
    return table(["GROUP", "STATE", "READY", "LEADER NODE"], cells, indent=indent)


async def read_groups(api: ApiClient, namespace: str, name: str) -> tuple[JSON, list[GroupRow]]:
    """The LeaderWorkerSet and its groups as they are now."""
    lws = await api.get(LEADERWORKERSETS, name, namespace)
    selector = f"{c.LABEL_SET_NAME}={name}"
    pods = (await api.list(PODS, namespace, label_selector=selector)).get("items") or []
    statefulsets = (await api.list(STATEFULSETS, namespace, label_selector=selector)).get(
        "items"
    ) or []
    return lws, group_rows(lws, pods, statefulsets)
