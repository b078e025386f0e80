"""PostTermination admission (T/G rule) and the Hash-mode treatment of a finished
(failed or evicted) leader, as pure functions."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.controllers.lws.status import hash_groups
from leaderworkerset.controllers.replacement.triggers import replacement_events
from leaderworkerset.group.options import ReleaseThresholds
from leaderworkerset.group.post_termination import (
    decide,
    gated_leaders,
    tearing_down_groups,
)
from leaderworkerset.group.readiness import leader_lost, pod_finished
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import NOW, container, lws_labels
from tests.toolkit.pods import pod as a_pod

JSON = dict[str, Any]
NAME = "lws"
# No bound on the wait: the plain T/G rule.
UNBOUNDED = ReleaseThresholds(node_not_ready=0, termination_overrun=0)


def to_admit(pods: list[JSON], immediate: bool = False) -> list[JSON]:
    """The gated leaders the replacement reconciler releases now."""
    return decide(pods, None, 0.0, UNBOUNDED, immediate=immediate).admit


def pod(
    name: str,
    key: str,
    *,
    leader: bool = True,
    created: str = NOW,
    gated: bool = False,
    terminating: bool = False,
    phase: str = "Running",
) -> JSON:
    return a_pod(
        name,
        "default",
        created=created,
        deleted=NOW if terminating else None,
        labels=lws_labels(
            NAME, worker="0" if leader else "1", group_key=key, group_index=key, revision="rev"
        ),
        containers=[container("c", "pause")],
        gates=[c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        phase=phase,
        ready=phase == "Running",
    )


def test_pod_finished() -> None:
    assert pod_finished(pod("a", "k", phase="Failed"))
    assert pod_finished(pod("a", "k", phase="Succeeded"))
    assert not pod_finished(pod("a", "k", phase="Running"))
    assert not pod_finished(pod("a", "k", phase="Pending"))
    assert not pod_finished({})


def test_leader_lost() -> None:
    assert leader_lost(pod("a", "k", terminating=True))
    assert leader_lost(pod("a", "k", phase="Failed"))
    assert not leader_lost(pod("a", "k"))


def test_tearing_down_groups() -> None:
    pods = [
        pod("a", "ka"),  # healthy group
        pod("a-1", "ka", leader=False),
        pod("b", "kb", terminating=True),  # leader terminating, worker left
        pod("b-1", "kb", leader=False),
        pod("c-1", "kc", leader=False),  # leader gone
        pod("d", "kd", phase="Failed"),  # leader failed, worker left
        pod("d-1", "kd", leader=False),
        pod("e", "ke", phase="Failed"),  # a failed leader alone is still a group
    ]
    assert tearing_down_groups(pods) == {"kb", "kc", "kd", "ke"}


def test_failed_leader_holds_its_replacement() -> None:
    """The ReplicaSet creates the replacement as soon as the leader fails, before the
    controller has deleted it: the failed group must already count."""
    pods = [
        pod("old", "k1", phase="Failed"),
        pod("old-1", "k1", leader=False),
        pod("new", "k2", gated=True, created="2024-01-01T00:00:01Z"),
    ]
    assert to_admit(pods) == []
    assert [p["metadata"]["name"] for p in to_admit(pods, immediate=True)] == ["new"]
    assert [p["metadata"]["name"] for p in to_admit(pods[2:])] == ["new"]


def test_oldest_gated_leaders_are_admitted_first() -> None:
    pods = [
        pod("gone-1", "k0", leader=False),
        pod("g2", "k2", gated=True, created="2024-01-01T00:00:02Z"),
        pod("g1b", "k1b", gated=True, created="2024-01-01T00:00:01Z"),
        pod("g1a", "k1a", gated=True, created="2024-01-01T00:00:01Z"),
    ]
    assert [p["metadata"]["name"] for p in gated_leaders(pods)] == ["g1a", "g1b", "g2"]
    assert [p["metadata"]["name"] for p in to_admit(pods)] == ["g1a", "g1b"]


@given(st.integers(0, 5), st.integers(0, 5))
def test_admits_g_minus_t(tearing: int, gated: int) -> None:
    pods = [pod(f"t{i}-1", f"t{i}", leader=False) for i in range(tearing)]
    pods += [
        pod(f"g{i}", f"g{i}", gated=True, created=f"2024-01-01T00:00:0{i}Z") for i in range(gated)
    ]
    admitted = to_admit(pods)
    assert len(admitted) == max(0, gated - tearing)
    assert admitted == gated_leaders(pods)[: len(admitted)]


def test_replacement_events_see_a_leader_fail() -> None:
    update = replacement_events().update
    assert update is not None
    running = pod("a", "k")
    assert update(running, pod("a", "k", phase="Failed"))
    assert update(running, pod("a", "k", terminating=True))
    assert update(pod("a", "k", gated=True), running)
    assert not update(running, pod("a", "k"))


def test_replacement_events_skip_worker_creations() -> None:
    create = replacement_events().create
    assert create is not None
    assert create(pod("g", "k", gated=True))
    assert not create(pod("g-1", "k", leader=False)), "a new worker can only add to T"


def test_hash_status_skips_a_finished_leader() -> None:
    lws = lws_object(name=NAME, replicas=2, size=2, groupIdentity=c.GROUP_IDENTITY_HASH)
    pods = [
        pod("a", "ka"),
        pod("b", "kb", phase="Failed"),
        pod("c", "kc", gated=True, phase="Pending"),
    ]
    groups = hash_groups(view_of(lws), "rev", pods)
    assert len(groups) == 2, "the failed leader was replaced; it is no group"
    assert sum(g.ready for g in groups) == 1
