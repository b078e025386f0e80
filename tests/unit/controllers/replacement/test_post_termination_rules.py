"""The PostTermination decision at its edges: who counts as waiting and in which
order, when a pod or a whole group stops holding a replacement back (exact moments,
thresholds of one second, a node that is gone or never said when), and what the
held board keeps."""

from __future__ import annotations

from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.controllers.held import HeldBoard
from leaderworkerset.controllers.replacement.reconciler import held_of
from leaderworkerset.group.options import ReleaseThresholds
from leaderworkerset.group.post_termination import (
    NODE_NOT_READY,
    ORPHANED,
    TERMINATION_OVERRUN,
    PodRelease,
    decide,
    gated_leaders,
    group_release,
    node_not_ready_since,
    pod_release,
)
from tests.toolkit.pods import lws_labels, pod

JSON = dict[str, Any]
T0 = "2026-01-01T00:00:00Z"
T0_SECONDS = 1767225600.0
BOUNDS = ReleaseThresholds(node_not_ready=60, termination_overrun=120)


def a_pod(
    name: str,
    group: str,
    *,
    leader: bool = True,
    gated: bool = False,
    created: str = T0,
    deleted: str | None = None,
    node: str | None = "n1",
) -> JSON:
    return pod(
        name,
        "default",
        created=created,
        deleted=deleted,
        labels=lws_labels("lws", worker="0" if leader else "1", group_key=group, group_index=group),
        gates=[c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        node=None if gated else node,
        spec={},
        phase="Running",
    )


def names(pods: list[JSON]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# --- who waits, in which order ---------------------------------------------------------------
def test_a_dying_gated_leader_is_not_waiting() -> None:
    leaving = a_pod("leaving", "g1", gated=True, deleted=T0)
    assert names(gated_leaders([leaving, a_pod("waiting", "g2", gated=True)])) == ["waiting"]


def test_leaders_wait_oldest_first_then_by_name() -> None:
    pods = [
        a_pod("a-newest", "g1", gated=True, created="2026-01-01T00:00:09Z"),
        a_pod("z-oldest", "g2", gated=True, created="2026-01-01T00:00:01Z"),
        a_pod("c-tie", "g3", gated=True, created="2026-01-01T00:00:05Z"),
        a_pod("b-tie", "g4", gated=True, created="2026-01-01T00:00:05Z"),
    ]
    assert names(gated_leaders(pods)) == ["z-oldest", "b-tie", "c-tie", "a-newest"]


# --- when a node releases a pod --------------------------------------------------------------
def test_a_node_that_never_said_when_is_not_ready_since_the_epoch() -> None:
    assert node_not_ready_since({"metadata": {"name": "n1"}, "status": {}}) == 0.0
    unknown = {"type": "Ready", "status": "Unknown"}  # no lastTransitionTime
    assert node_not_ready_since({"metadata": {}, "status": {"conditions": [unknown]}}) == 0.0


def test_a_pod_on_a_gone_node_is_released_one_bound_after_the_epoch() -> None:
    release = pod_release(a_pod("p", "g", node="gone"), {}, BOUNDS)
    assert release is not None
    assert (release.at, release.reason, release.node) == (60.0, NODE_NOT_READY, "gone")


def test_an_unscheduled_pod_is_released_by_nothing_but_its_deletion() -> None:
    pod = a_pod("p", "g", node=None)
    assert pod_release(pod, {}, BOUNDS) is None


def test_a_one_second_threshold_is_a_threshold() -> None:
    one = ReleaseThresholds(node_not_ready=1, termination_overrun=1)
    release = pod_release(a_pod("p", "g", node="gone"), {}, one)
    assert release is not None and (release.at, release.reason) == (1.0, NODE_NOT_READY)
    deleted = a_pod("p", "g", deleted=T0)
    release = pod_release(deleted, {"n1": {"metadata": {"name": "n1"}, "status": {}}}, one)
    # The node (no Ready condition, no creation time) released it at 1 s after the
    # epoch; the overrun at 1 s after the deletion deadline.
    assert release is not None and release.at == 1.0
    ready = {"type": "Ready", "status": "True"}
    nodes = {"n1": {"metadata": {"name": "n1"}, "status": {"conditions": [ready]}}}
    release = pod_release(deleted, nodes, one)
    assert release is not None
    assert (release.at, release.reason) == (T0_SECONDS + 1, TERMINATION_OVERRUN)


def test_an_overrun_release_names_the_pods_node() -> None:
    ready = {"type": "Ready", "status": "True"}
    nodes = {"n1": {"metadata": {"name": "n1"}, "status": {"conditions": [ready]}}}
    members = [a_pod("old", "g", deleted=T0), a_pod("old-1", "g", leader=False, deleted=T0)]
    release = group_release("g", members, nodes, BOUNDS)
    assert release is not None
    assert (release.reason, release.nodes) == (TERMINATION_OVERRUN, ("n1",))
    assert release.pods == ("old", "old-1")


def of_set(pod: JSON, set_name: str) -> JSON:
    """`pod` as a worker its StatefulSet `set_name` controls."""
    ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": set_name, "controller": True}
    pod["metadata"]["ownerReferences"] = [ref]
    return pod


ORPHANED_SET = {"metadata": {"name": "old-set", "namespace": "default"}}


def test_a_pod_of_an_orphaned_set_is_released_at_once_on_its_node() -> None:
    worker = of_set(a_pod("old-1", "g", leader=False, node="n1"), "old-set")
    release = pod_release(worker, {}, BOUNDS, {"old-set": ORPHANED_SET})
    # At the epoch: before any moment the clock can read, whatever the thresholds.
    assert release == PodRelease(0.0, ORPHANED, "n1")
    members = [worker, of_set(a_pod("old-2", "g", leader=False, node="n2"), "old-set")]
    group = group_release("g", members, {}, BOUNDS, {"old-set": ORPHANED_SET})
    assert group is not None
    assert (group.at, group.reason, group.nodes) == (0.0, ORPHANED, ("n1", "n2"))


def test_a_group_orphaned_but_for_a_pod_on_a_lost_node_is_released_for_the_node() -> None:
    worker = of_set(a_pod("old-1", "g", leader=False, node="n1"), "old-set")
    leader = a_pod("old", "g", node="lost", deleted=T0)
    release = group_release("g", [leader, worker], {}, BOUNDS, {"old-set": ORPHANED_SET})
    assert release is not None
    assert (release.at, release.reason) == (BOUNDS.node_not_ready, NODE_NOT_READY)


# --- the decision ----------------------------------------------------------------------------
def test_a_group_stops_counting_at_its_release_moment_exactly() -> None:
    old = [a_pod("old", "g1", deleted=T0)]
    waiting = a_pod("new", "g2", gated=True)
    moment = T0_SECONDS + BOUNDS.termination_overrun
    ready = {"type": "Ready", "status": "True"}
    nodes = {"n1": {"metadata": {"name": "n1"}, "status": {"conditions": [ready]}}}
    assert names(decide([*old, waiting], nodes, moment - 0.001, BOUNDS).admit) == []
    decision = decide([*old, waiting], nodes, moment, BOUNDS)
    assert names(decision.admit) == ["new"] and decision.holding == []


def test_a_held_leader_waits_for_a_bounded_release_before_an_unbounded_one() -> None:
    ready = {"type": "Ready", "status": "True"}
    nodes: dict[str, JSON] = {
        "healthy": {"metadata": {"name": "healthy"}, "status": {"conditions": [ready]}},
        "lost": {"metadata": {"name": "lost"}, "status": {}},
    }
    # Group "a" keeps a Running worker on a healthy node: nothing bounds its wait. Group
    # "z" (later by key) has its worker on a lost node: it goes first.
    pods = [
        a_pod("a-1", "a", leader=False, node="healthy"),
        a_pod("z-1", "z", leader=False, node="lost"),
        a_pod("new", "new", gated=True),
    ]
    decision = decide(pods, nodes, 1.0, BOUNDS)
    assert decision.holding == ["a", "z"]
    assert decision.waits_for == {"new": "z"}
    assert decision.next_release_at == BOUNDS.node_not_ready


def test_immediate_holds_nothing_and_names_no_group() -> None:
    old = [a_pod("old", "g1", deleted=T0)]
    decision = decide([*old, a_pod("new", "g2", gated=True)], {}, 0.0, BOUNDS, immediate=True)
    assert names(decision.admit) == ["new"]
    assert (decision.held, decision.holding, decision.released) == ([], [], [])
    assert decision.next_release_at is None


# --- what is published -----------------------------------------------------------------------
def test_groups_are_named_only_while_a_leader_waits_for_them() -> None:
    old = [a_pod("old", "g1", deleted=T0)]
    nobody_waits = decide(old, None, 0.0, BOUNDS)
    assert nobody_waits.holding == ["g1"]
    assert held_of(nobody_waits).groups == () and not held_of(nobody_waits).any
    waits = decide([*old, a_pod("new", "g2", gated=True)], None, 0.0, BOUNDS)
    assert held_of(waits).groups == ("g1",) and held_of(waits).leaders == ("new",)


def test_forgetting_an_unknown_key_is_harmless() -> None:
    board = HeldBoard()
    board.forget("ns/never-published")
    assert board.get("ns/never-published") is None
