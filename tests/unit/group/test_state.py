"""The group state that the metrics and `kubectl lws groups` share."""

from __future__ import annotations

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.objects import JSON, name_of
from leaderworkerset.group.state import (
    POD_STATES,
    GroupState,
    group_state,
    groups_of,
    leader_node,
    ready_pods,
    restarts,
)
from tests.toolkit.pods import lws_labels
from tests.toolkit.pods import pod as a_pod
from tests.toolkit.statefulsets import controller_ref, statefulset


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
    return a_pod(
        name,
        uid=uid or f"uid-{name}",
        deleted="2026-01-01T00:00:00Z" if deleting else None,
        labels=lws_labels(group_index=group, worker=str(worker), revision=revision),
        annotations={c.ANNOTATION_SIZE: "2"},
        node="n1",
        gates=[c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        phase="Pending" if gated else "Running",
        ready=ready,
        container_statuses=[{"restartCount": restarts}],
    )


def sts(owner_uid: str, *, revision: str = "r1", ready: bool = True) -> JSON:
    return statefulset(
        labels=lws_labels(revision=revision),
        owners=[controller_ref("Pod", uid=owner_uid)],
        replicas=1,
        status={
            "availableReplicas": 1 if ready else 0,
            "currentRevision": "a",
            "updateRevision": "a",
        },
    )


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
    assert len(set(states.values())) == len(POD_STATES) == len(states)  # each state once


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


def test_a_deleted_leader_never_admitted_is_gated_not_tearing_down() -> None:
    (group,) = groups_of([pod("held", "k", 0, gated=True, deleting=True)])
    assert group_state(group, "r1") is GroupState.GATED


def test_a_pod_without_a_group_index_is_passed_over() -> None:
    stray = pod("stray", "0", 0)
    del stray["metadata"]["labels"][c.LABEL_GROUP_INDEX]
    groups = groups_of([pod("a", "0", 0), stray, pod("b", "1", 0)])
    assert [(g.index, name_of(g.leader)) for g in groups] == [("0", "a"), ("1", "b")]


def test_a_worker_statefulset_is_the_group_of_the_leader_that_controls_it() -> None:
    owned = sts("uid-l")
    # The same leader named, but not as the controller: not its group's set.
    referring = sts("uid-m")
    referring["metadata"]["ownerReferences"][0]["controller"] = False
    other_kind = sts("uid-n")
    other_kind["metadata"]["ownerReferences"][0]["kind"] = "LeaderWorkerSet"
    pods = [pod("l", "0", 0), pod("m", "1", 0), pod("n", "2", 0)]
    groups = groups_of(pods, [owned, referring, other_kind])
    assert [g.worker_statefulset for g in groups] == [owned, None, None]


def test_hash_groups_sort_by_their_leaders_age_then_key_after_ordinal_ones() -> None:
    def leader(name: str, key: str, created: str) -> JSON:
        p = pod(name, key, 0)
        p["metadata"]["creationTimestamp"] = created
        return p

    pods = [
        leader("newer", "aaa", "2026-01-02T00:00:00Z"),
        leader("older", "bbb", "2026-01-01T00:00:00Z"),
        leader("same-age", "000c", "2026-01-02T00:00:00Z"),
        pod("leaderless-1", "zzz", 1),  # its leader is gone: the oldest group
        pod("ten", "10", 0),
        pod("seven", "7", 0),
    ]
    assert [g.index for g in groups_of(pods)] == ["7", "10", "zzz", "bbb", "000c", "aaa"]


def test_a_leader_without_a_size_is_a_group_of_one() -> None:
    alone = pod("alone", "0", 0)
    del alone["metadata"]["annotations"][c.ANNOTATION_SIZE]
    (group,) = groups_of([alone])
    assert group.size is None
    assert group_state(group, "r1") is GroupState.READY


def test_a_worker_statefulset_rolling_out_is_updating_and_a_new_one_is_not() -> None:
    pods = [pod("l", "0", 0), pod("l-1", "0", 1, ready=False)]
    rolling = sts("uid-l", ready=False)
    rolling["status"]["updateRevision"] = "b"
    (group,) = groups_of(pods, [rolling])
    assert group_state(group, "r1") is GroupState.UPDATING
    # Just created: its controller has written no revision yet.
    created = sts("uid-l", ready=False)
    created["status"] = {}
    (group,) = groups_of(pods, [created])
    assert group_state(group, "r1") is GroupState.NOT_READY


def test_restarts_add_up_init_and_regular_containers_of_every_pod() -> None:
    leader = pod("l", "0", 0, restarts=1)
    leader["status"]["containerStatuses"].append({"restartCount": 3})
    leader["status"]["initContainerStatuses"] = [{"restartCount": 2}]
    (group,) = groups_of([leader, pod("l-1", "0", 1, restarts=4)])
    assert restarts(group) == 10


def test_the_leader_node_is_empty_for_a_group_without_leader() -> None:
    (led,) = groups_of([pod("l", "0", 0)])
    (leaderless,) = groups_of([pod("l-1", "0", 1)])
    assert (leader_node(led), leader_node(leaderless)) == ("n1", "")
