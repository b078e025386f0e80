"""The group state that the metrics and `kubectl lws groups` share."""

from __future__ import annotations

from leaderworkerset.api import constants as c
from leaderworkerset.api.objects import JSON
from leaderworkerset.group.state import (
    GroupState,
    group_state,
    groups_of,
    ready_pods,
    restarts,
)
from tests.toolkit.lws import leaderworkerset


def pod(
    name: str,
    group: str,
    worker: int,
    *,
    revision: str = "r1",
    ready: bool = True,
    gated: bool = False,
    deleting: bool = False,
    uid: str = "",
    restarts: int = 0,
) -> JSON:
    meta: JSON = {
        "name": name,
        "uid": uid or f"uid-{name}",
        "labels": {
            c.LABEL_GROUP_INDEX: group,
            c.LABEL_WORKER_INDEX: str(worker),
            c.LABEL_TEMPLATE_REVISION_HASH: revision,
        },
        "annotations": {c.ANNOTATION_SIZE: "2"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: JSON = {"nodeName": "n1"}
    if gated:
        spec["schedulingGates"] = [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "metadata": meta,
        "spec": spec,
        "status": {
            "phase": "Pending" if gated else "Running",
            "conditions": conditions,
            "containerStatuses": [{"restartCount": restarts}],
        },
    }


def sts(owner_uid: str, *, revision: str = "r1", ready: bool = True) -> JSON:
    return {
        "metadata": {
            "labels": {c.LABEL_TEMPLATE_REVISION_HASH: revision},
            "ownerReferences": [{"kind": "Pod", "uid": owner_uid, "controller": True}],
        },
        "spec": {"replicas": 1},
        "status": {
            "availableReplicas": 1 if ready else 0,
            "currentRevision": "a",
            "updateRevision": "a",
        },
    }


def test_each_state() -> None:
    pods = [
        pod("ready-0", "0", 0),
        pod("ready-0-1", "0", 1),
        pod("down-1", "1", 0, deleting=True),
        pod("down-1-1", "1", 1),
        pod("gated", "2", 0, gated=True),
        pod("old-3", "3", 0, revision="r0", ready=False),
        pod("bad-4", "4", 0),
        pod("bad-4-1", "4", 1, ready=False),
    ]
    statefulsets = [
        sts("uid-ready-0"),
        sts("uid-old-3", revision="r0", ready=False),
        sts("uid-bad-4", ready=False),
    ]
    groups = {g.index: g for g in groups_of(pods, statefulsets)}
    states = {index: group_state(g, "r1") for index, g in groups.items()}
    assert states == {
        "0": GroupState.READY,
        "1": GroupState.TEARING_DOWN,
        "2": GroupState.GATED,
        "3": GroupState.UPDATING,
        "4": GroupState.NOT_READY,
    }
    assert ready_pods(groups["4"]) == 1
    assert len(set(states.values())) == len(GroupState) == len(states)  # each state once


def test_workers_of_another_revision_are_not_ready() -> None:
    pods = [pod("l", "0", 0), pod("l-1", "0", 1)]
    (group,) = groups_of(pods, [sts("uid-l", revision="r0")])
    assert group_state(group, "r1") is GroupState.UPDATING


def test_a_live_leader_wins_over_a_dying_one_and_groups_sort_by_number() -> None:
    pods = [
        pod("a-10", "10", 0),
        pod("old", "2", 0, deleting=True),
        pod("new", "2", 0, restarts=3),
    ]
    groups = groups_of(pods)
    assert [g.index for g in groups] == ["2", "10"]
    assert groups[0].leader is not None and groups[0].leader["metadata"]["name"] == "new"
    assert restarts(groups[0]) == 3
    assert group_state(groups[1], None) is GroupState.NOT_READY  # size 2, no workers yet


def test_a_stored_leaderworkerset_is_decoded_once_per_version() -> None:
    from leaderworkerset.group.view import view_of

    stored = {"uid": "u1", "resourceVersion": "7"}
    lws = leaderworkerset("a", "ns", replicas=2, size=3, metadata=stored)
    first = view_of(lws)
    assert view_of(lws) is first
    changed = {**lws, "metadata": {**lws["metadata"], "resourceVersion": "8"}}
    changed["spec"] = leaderworkerset(replicas=5, size=3)["spec"]
    assert view_of(changed).replicas == 5
    # Partial on purpose: never stored, so without the uid and resourceVersion a view
    # is remembered by.
    unstored = {"metadata": {"name": "a"}, "spec": {"replicas": 1}}
    assert view_of(unstored) is not view_of(unstored)
    # A revision applied to the live object keeps its uid and resourceVersion but not
    # its spec: its view is its own.
    applied = {**lws, "spec": leaderworkerset(replicas=2, size=9)["spec"]}
    assert view_of(applied).size == 9
    assert view_of(lws).size == 3


def test_a_deleted_leader_never_admitted_is_gated_not_tearing_down() -> None:
    (group,) = groups_of([pod("held", "k", 0, gated=True, deleting=True)])
    assert group_state(group, "r1") is GroupState.GATED
