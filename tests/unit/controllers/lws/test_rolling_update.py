"""Rolling-update arithmetic: upstream's worked examples and the edge cases of
rollouts (partition floors, surge, scaling mid-rollout, budgets that round to zero),
replayed as sequences of reconciles against a small simulation of the StatefulSet
controller."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import view_of
from leaderworkerset.controllers.lws.leader_statefulset import leader_statefulset
from leaderworkerset.controllers.lws.rolling_update import (
    ReplicaState,
    RollingUpdateError,
    RollingUpdatePlan,
    leader_max_unavailable,
    replica_states,
    rolling_budget,
    rolling_partition,
    rolling_update_parameters,
    sts_partition,
    sts_replicas,
)
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import leader_pod
from tests.toolkit.statefulsets import leader_sts, worker_sts

JSON = dict[str, Any]
NAME = "lws"


@dataclass
class Group:
    key: str
    ready: bool


class Cluster:
    """The leader StatefulSet as applied, and its groups as the StatefulSet controller
    leaves them: ordinals >= partition move to the template's key (unready until
    `ready(i)`), new ordinals below the partition get the old revision."""

    def __init__(self, lws: JSON, key: str = "k1") -> None:
        self.lws = lws
        self.key = key
        self.current_key = key
        self.sts: JSON | None = None
        self.groups: dict[int, Group] = {}
        self.history: list[tuple[int, int]] = []

    @property
    def size(self) -> int:
        return int(self.lws["spec"]["leaderWorkerTemplate"]["size"])

    def pods(self) -> list[JSON]:
        return [leader_pod(NAME, i, g.key, g.ready) for i, g in self.groups.items()]

    def worker_sets(self) -> list[JSON]:
        if self.size == 1:
            return []
        sets = [worker_sts(NAME, i, g.key, self.size, g.ready) for i, g in self.groups.items()]
        return [*sets, self.sts] if self.sts else sets

    def reconcile(self, updated: bool = False) -> RollingUpdatePlan:
        plan = rolling_update_parameters(
            view_of(self.lws), self.sts, self.key, updated, self.pods(), self.worker_sets()
        )
        self.sts = leader_statefulset(view_of(self.lws), self.key, plan.partition, plan.replicas)
        self.history.append((plan.partition, plan.replicas))
        self._statefulset_controller()
        return plan

    def change_template(self, key: str) -> RollingUpdatePlan:
        self.key = key
        return self.reconcile(updated=True)

    def ready(self, *indexes: int) -> None:
        for i in indexes:
            self.groups[i].ready = True

    def settle(self) -> None:
        for g in self.groups.values():
            g.ready = True

    def set_spec(self, **changes: Any) -> None:
        config = self.lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
        for name, value in changes.items():
            if name == "replicas":
                self.lws["spec"]["replicas"] = value
            else:
                config[name] = value

    def _statefulset_controller(self) -> None:
        assert self.sts is not None
        spec = self.sts["spec"]
        replicas, partition = spec["replicas"], spec["updateStrategy"]["rollingUpdate"]["partition"]
        target = spec["template"]["metadata"]["labels"][c.LABEL_TEMPLATE_REVISION_HASH]
        for i in [i for i in self.groups if i >= replicas]:
            del self.groups[i]
        for i in range(replicas):
            group = self.groups.get(i)
            if group is None:
                self.groups[i] = Group(target if i >= partition else self.current_key, False)
            elif i >= partition and group.key != target:
                self.groups[i] = Group(target, False)
        if partition == 0 and all(g.key == target for g in self.groups.values()):
            self.current_key = target


def _at_rest(lws: JSON, key: str = "k1") -> Cluster:
    cluster = Cluster(lws, key)
    cluster.reconcile()
    cluster.settle()
    cluster.reconcile()
    return cluster


def _notes(plan: RollingUpdatePlan) -> list[str]:
    return [e.note for e in plan.events]


def _pr(plan: RollingUpdatePlan) -> tuple[int, int]:
    return plan.partition, plan.replicas


# --- Budget and StatefulSet maxUnavailable ---------------------------------
def test_budget_scales_against_desired_replicas_and_caps_surge() -> None:
    budget = rolling_budget(view_of(lws_object(replicas=4, max_unavailable="50%", max_surge="30%")))
    assert (budget.unavailable, budget.surge, budget.burst) == (2, 2, 6)
    capped = rolling_budget(view_of(lws_object(replicas=2, max_surge=4)))
    assert capped.surge == 2


@pytest.mark.parametrize(
    ("replicas", "unavailable", "surge", "expected"),
    [(4, 2, 1, 3), (2, 1, "50%", 2), (0, 0, 0, 1), (2, "25%", 0, 1), (4, 1, 0, 1)],
)
def test_leader_max_unavailable(replicas: int, unavailable: Any, surge: Any, expected: int) -> None:
    lws = lws_object(replicas=replicas, max_unavailable=unavailable, max_surge=surge)
    assert leader_max_unavailable(view_of(lws)) == expected


def test_defaults_apply_when_the_configuration_is_absent() -> None:
    lws = lws_object(replicas=4)
    del lws["spec"]["rolloutStrategy"]
    budget = rolling_budget(view_of(lws))
    assert (budget.unavailable, budget.surge) == (1, 0)


# --- Replica states -----------------------------------------------------------------
def test_replica_states_combine_leader_and_workers() -> None:
    lws = lws_object(name=NAME, replicas=4)
    pods = [
        leader_pod(NAME, 0, "new"),
        leader_pod(NAME, 1, "old"),
        leader_pod(NAME, 2, "new", ready=False),
        leader_pod(NAME, 3, "new"),
    ]
    sets = [
        worker_sts(NAME, 0, "new"),
        worker_sts(NAME, 1, "old"),
        worker_sts(NAME, 2, "new"),
        worker_sts(NAME, 3, "new", ready=False),
        leader_sts(NAME, "new", 4),
    ]
    assert replica_states(view_of(lws), 4, "new", pods, sets) == [
        ReplicaState(True, True),
        ReplicaState(True, False),
        ReplicaState(False, True),
        ReplicaState(False, True),
    ]


def test_replica_states_missing_or_misnamed_objects_are_unready() -> None:
    lws = lws_object(name=NAME, replicas=3)
    pods = [
        leader_pod(NAME, 0, "k"),
        leader_pod(NAME, 1, "k", name="stranger"),
        leader_pod(NAME, 2, "k"),
    ]
    sets = [worker_sts(NAME, 0, "k"), worker_sts(NAME, 1, "k")]
    assert replica_states(view_of(lws), 3, "k", pods, sets) == [
        ReplicaState(True, True),
        ReplicaState(False, False),
        ReplicaState(False, False),
    ]


def test_replica_states_of_size_one_look_at_leaders_only() -> None:
    lws = lws_object(name=NAME, replicas=2, size=1)
    pods = [leader_pod(NAME, 0, "k"), leader_pod(NAME, 1, "old", ready=False)]
    assert replica_states(view_of(lws), 2, "k", pods, []) == [
        ReplicaState(True, True),
        ReplicaState(False, False),
    ]


def test_replica_states_ignore_bad_and_out_of_range_indexes_and_last_pod_wins() -> None:
    lws = lws_object(name=NAME, replicas=2, size=1)
    pods = [
        leader_pod(NAME, "x", "k", name=f"{NAME}-0"),
        leader_pod(NAME, 5, "k"),
        leader_pod(NAME, 0, "old"),
        leader_pod(NAME, 0, "k"),
    ]
    assert replica_states(view_of(lws), 2, "k", pods, []) == [
        ReplicaState(True, True),
        ReplicaState(False, False),
    ]


# --- rolling_partition ---------------------------------------------------------------------------
def test_rolling_partition_protects_max_unavailable() -> None:
    """R=4, maxUnavailable=2, group 1 already unready -> 3, not 2."""
    old = ReplicaState(True, False)
    states = [old, ReplicaState(False, False), old, old]
    assert rolling_partition(states, 4, 2, 4) == 3


def test_rolling_partition_never_rises() -> None:
    states = [ReplicaState(True, False)] * 4
    assert rolling_partition(states, 4, 1, 2) == 2


def test_rolling_partition_walks_down_through_unready_and_updated_groups() -> None:
    states = [
        ReplicaState(True, False),
        ReplicaState(False, False),
        ReplicaState(True, True),
        ReplicaState(False, True),
    ]
    assert rolling_partition(states, 4, 2, 4) == 2
    assert rolling_partition(states, 4, 1, 4) == 3, "never below base"


# --- Worked examples --------------------------------------------------------------------
def test_creation_writes_partition_floor_and_desired_replicas() -> None:
    plan = Cluster(lws_object(name=NAME, replicas=3, partition=2)).reconcile()
    assert _pr(plan) == (2, 3) and plan.events == ()


def test_default_strategy_updates_one_group_at_a_time_from_the_top() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=4, max_unavailable=1, max_surge=0))
    plan = cluster.change_template("k2")
    assert _pr(plan) == (4, 4) and plan.events == ()
    plan = cluster.reconcile()
    assert _pr(plan) == (3, 4) and _notes(plan) == ["Updating replica 3"]
    assert _pr(cluster.reconcile()) == (3, 4), "waits while group 3 is unready"
    for group, expected in ((3, 2), (2, 1), (1, 0)):
        cluster.ready(group)
        plan = cluster.reconcile()
        assert _pr(plan) == (expected, 4)
        assert _notes(plan) == [f"Updating replica {expected}"]
    cluster.ready(0)
    plan = cluster.reconcile()
    assert _pr(plan) == (0, 4) and plan.events == ()
    assert all(g.key == "k2" and g.ready for g in cluster.groups.values())


def test_surge_and_unavailable_two_each() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=4, max_unavailable=2, max_surge=2))
    assert _pr(cluster.change_template("k2")) == (4, 6)
    plan = cluster.reconcile()
    assert _pr(plan) == (2, 6)
    assert _notes(plan) == ["Updating replicas 2 to 3 (inclusive)"]
    assert {i: g.key for i, g in cluster.groups.items() if g.key == "k2"}.keys() == {2, 3, 4, 5}
    cluster.ready(3, 2)
    plan = cluster.reconcile()
    assert plan.replicas == 4
    assert _notes(plan) == [f"deleting surge replicas from {NAME}-4 to {NAME}-5"]
    plan = cluster.reconcile()
    assert _pr(plan) == (0, 4)


def test_surge_only_rollout_then_surge_replica_removed() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=4, max_unavailable=0, max_surge=1))
    assert _pr(cluster.change_template("k2")) == (4, 5)
    assert _pr(cluster.reconcile()) == (4, 5), "waits for the surge group"
    for group, expected in ((4, (3, 5)), (3, (2, 5)), (2, (1, 5)), (1, (0, 5))):
        cluster.ready(group)
        assert _pr(cluster.reconcile()) == expected
    cluster.ready(0)
    plan = cluster.reconcile()
    assert _pr(plan) == (0, 4)
    assert _notes(plan) == [f"deleting surge replica {NAME}-4"]
    assert sorted(cluster.groups) == [0, 1, 2, 3]


def test_large_surge_starts_with_replicas_plus_unready_minus_unavailable() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=4, max_unavailable=1, max_surge=4))
    assert _pr(cluster.change_template("k2")) == (4, 7)


def test_already_unready_groups_reduce_the_budget() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=4, max_unavailable=2))
    cluster.groups[1].ready = False
    cluster.change_template("k2")
    assert _pr(cluster.reconcile()) == (3, 4)


def test_all_groups_unready_still_progress() -> None:
    """Upstream's R=2 example: every group unready at the start."""
    cluster = _at_rest(lws_object(name=NAME, replicas=2, max_unavailable=1))
    for g in cluster.groups.values():
        g.ready = False
    cluster.change_template("k2")
    assert _pr(cluster.reconcile()) == (1, 2)
    assert _pr(cluster.reconcile()) == (1, 2)
    cluster.ready(1)
    assert _pr(cluster.reconcile()) == (0, 2)


def test_broken_groups_fixed_by_the_update_roll_through() -> None:
    """A rollout that fixes every broken group completes."""
    cluster = _at_rest(lws_object(name=NAME, replicas=3, max_unavailable=1))
    for g in cluster.groups.values():
        g.ready = False
    cluster.change_template("k2")
    for _ in range(10):
        cluster.reconcile()
        for g in cluster.groups.values():
            g.ready = g.key == "k2"  # the new image works, the old one never did
    assert _pr(cluster.reconcile()) == (0, 3)
    assert all(g.key == "k2" and g.ready for g in cluster.groups.values())


def test_partition_floor_holds_lower_groups_back() -> None:
    """Upstream's R=6, partition 4 example."""
    cluster = _at_rest(lws_object(name=NAME, replicas=6, partition=4))
    assert cluster.sts is not None
    assert cluster.sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 4
    assert _pr(cluster.change_template("k2")) == (6, 6)
    assert _pr(cluster.reconcile()) == (5, 6)
    cluster.ready(5)
    assert _pr(cluster.reconcile()) == (4, 6)
    cluster.ready(4)
    plan = cluster.reconcile()
    assert _pr(plan) == (4, 6) and plan.events == ()
    assert [cluster.groups[i].key for i in range(6)] == ["k1"] * 4 + ["k2"] * 2
    cluster.set_spec(partition=2)
    plan = cluster.reconcile()
    assert _pr(plan) == (3, 6) and _notes(plan) == ["Updating replica 3"]
    cluster.ready(3)
    assert _pr(cluster.reconcile()) == (2, 6)


def test_partition_floor_at_or_above_replicas_updates_nothing() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=3, partition=5))
    cluster.change_template("k2")
    for _ in range(3):
        assert _pr(cluster.reconcile()) == (5, 3)
    assert all(g.key == "k1" for g in cluster.groups.values())


def test_partition_floor_with_surge_keeps_the_surge_group() -> None:
    """Upstream's R=3, maxSurge=1, partition 2 example."""
    cluster = _at_rest(lws_object(name=NAME, replicas=3, max_surge=1, partition=2))
    assert _pr(cluster.change_template("k2")) == (3, 4)
    assert _pr(cluster.reconcile()) == (2, 4)
    cluster.ready(2, 3)
    for _ in range(2):
        assert _pr(cluster.reconcile()) == (2, 4), "surge kept while the floor holds"
    cluster.set_spec(partition=0)
    plan = cluster.reconcile()
    assert _pr(plan) == (0, 4)
    assert _notes(plan) == ["Updating replicas 0 to 1 (inclusive)"]
    cluster.ready(1, 0)
    plan = cluster.reconcile()
    assert _pr(plan) == (0, 3)
    assert _notes(plan) == [f"deleting surge replica {NAME}-3"]


def test_replicas_changed_during_a_rollout() -> None:
    """Upstream's example of spec.replicas lowered mid-rollout."""
    cluster = _at_rest(lws_object(name=NAME, replicas=4, max_unavailable=1, max_surge=2))
    assert _pr(cluster.change_template("k2")) == (4, 6)
    assert _pr(cluster.reconcile()) == (3, 6)
    cluster.set_spec(replicas=6)
    assert _pr(cluster.reconcile()) == (3, 8)
    cluster.set_spec(replicas=2)
    plan = cluster.reconcile()
    assert _pr(plan) == (3, 3)
    # Groups 3..5 were desired before: a scale-down, not surge removal (see
    # docs/upstream-deviations.md#scale-down-events-say-surge-only-for-surge-replicas).
    assert _notes(plan) == [f"deleting replicas from {NAME}-3 to {NAME}-7"]
    assert _pr(cluster.reconcile()) == (1, 3)


def test_scale_up_mid_rollout_keeps_the_partition() -> None:
    """New groups above the partition start on the new revision."""
    cluster = _at_rest(lws_object(name=NAME, replicas=4))
    cluster.change_template("k2")
    assert _pr(cluster.reconcile()) == (3, 4)
    cluster.set_spec(replicas=6)
    plan = cluster.reconcile()
    assert _pr(plan) == (3, 6) and plan.events == ()
    assert [cluster.groups[i].key for i in range(6)] == ["k1"] * 3 + ["k2"] * 3


def test_scale_down_at_rest_names_the_removed_replicas() -> None:
    """The replicas-deleted event without the word "surge", unlike upstream (see
    docs/upstream-deviations.md#scale-down-events-say-surge-only-for-surge-replicas)."""
    cluster = _at_rest(lws_object(name=NAME, replicas=4))
    cluster.set_spec(replicas=2)
    plan = cluster.reconcile()
    assert _pr(plan) == (0, 2)
    assert _notes(plan) == [f"deleting replicas from {NAME}-2 to {NAME}-3"]
    cluster.set_spec(replicas=1)
    plan = cluster.reconcile()
    assert _notes(plan) == [f"deleting replica {NAME}-1"]
    assert _pr(cluster.reconcile()) == (0, 1)


def test_scale_up_at_rest_raises_replicas_only() -> None:
    """Including from 0."""
    cluster = _at_rest(lws_object(name=NAME, replicas=0))
    assert _pr(cluster.reconcile()) == (0, 0)
    cluster.set_spec(replicas=3)
    plan = cluster.reconcile()
    assert _pr(plan) == (0, 3) and plan.events == ()


def test_scale_to_zero_forces_sts_max_unavailable_one() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=2))
    cluster.set_spec(replicas=0)
    assert _pr(cluster.reconcile()) == (0, 0)
    assert cluster.sts is not None
    assert cluster.sts["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1


def test_max_surge_above_replicas_is_capped() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=2, max_surge=4))
    assert _pr(cluster.change_template("k2")) == (2, 3)


def test_max_unavailable_at_least_replicas_updates_all_at_once() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=3, max_unavailable=3))
    cluster.change_template("k2")
    assert _pr(cluster.reconcile()) == (0, 3)
    assert all(g.key == "k2" and not g.ready for g in cluster.groups.values())


def test_another_template_change_resets_the_partition() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=4))
    cluster.change_template("k2")
    cluster.reconcile()
    cluster.ready(3)
    assert _pr(cluster.reconcile()) == (2, 4)
    cluster.ready(2)
    assert _pr(cluster.change_template("k3")) == (4, 4)
    assert _pr(cluster.reconcile()) == (3, 4)
    for i in (3, 2, 1, 0):
        cluster.ready(i)
        cluster.reconcile()
    assert _pr(cluster.reconcile()) == (0, 4)
    assert all(g.key == "k3" for g in cluster.groups.values())


def test_size_one_rolls_with_surge() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=2, size=1, max_unavailable=0, max_surge=1))
    assert _pr(cluster.change_template("k2")) == (2, 3)
    cluster.ready(2)
    assert _pr(cluster.reconcile()) == (1, 3)


def test_scale_bypassing_validation_can_stall_a_rollout() -> None:
    """Kept as upstream (see docs/upstream-deviations.md#budgets-that-round-to-zero):
    25% of 2 rounds to 0 and maxSurge is 0, so step is 0."""
    cluster = _at_rest(lws_object(name=NAME, replicas=4, max_unavailable="25%", max_surge=0))
    cluster.set_spec(replicas=2)
    cluster.reconcile()
    assert _pr(cluster.reconcile()) == (0, 2)
    cluster.change_template("k2")
    for _ in range(3):
        assert _pr(cluster.reconcile()) == (2, 2)
    assert cluster.sts is not None
    assert cluster.sts["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1


def test_partition_raised_at_rest_says_which_replicas_pause() -> None:
    """No reversed range, unlike upstream (see
    docs/upstream-deviations.md#rising-partition-event)."""
    cluster = _at_rest(lws_object(name=NAME, replicas=6))
    cluster.set_spec(partition=4)
    plan = cluster.reconcile()
    assert _pr(plan) == (4, 6)
    assert _notes(plan) == ["Pausing update of replicas 0 to 3 (inclusive)"]
    cluster.set_spec(partition=5)
    assert _notes(cluster.reconcile()) == ["Pausing update of replica 4"]


def test_event_catalogue_fields_of_rollout_events() -> None:
    cluster = _at_rest(lws_object(name=NAME, replicas=2))
    cluster.change_template("k2")
    (event,) = cluster.reconcile().events
    assert (event.type, event.reason, event.action) == ("Normal", "GroupsUpdating", "Update")
    cluster.set_spec(replicas=1)
    cluster.ready(1)
    (event,) = [e for e in cluster.reconcile().events if e.action == "Delete"]
    assert (event.type, event.reason) == ("Normal", "GroupsProgressing")


def test_unreadable_replicas_annotation_is_a_reconcile_error() -> None:
    lws = lws_object(name=NAME, replicas=2)
    sts = leader_sts(NAME, "k", 3, partition=1)
    del sts["metadata"]["annotations"][c.ANNOTATION_REPLICAS]
    with pytest.raises(RollingUpdateError):
        rolling_update_parameters(view_of(lws), sts, "k", False, [], [])


# --- Properties ----------------------------------------------------------------------------
budgets = st.integers(0, 3) | st.sampled_from(["25%", "50%", "100%"])


@settings(max_examples=150, deadline=None)
@given(
    replicas=st.integers(1, 6),
    size=st.sampled_from([1, 2]),
    unavailable=budgets,
    surge=budgets,
    readiness=st.lists(st.booleans(), min_size=60, max_size=60),
)
def test_rollout_invariants(
    replicas: int, size: int, unavailable: Any, surge: Any, readiness: list[bool]
) -> None:
    """During a rollout the partition only moves down, replicas stay within R + surge,
    and (unless both budgets round to zero) the rollout completes."""
    lws = lws_object(
        name=NAME, replicas=replicas, size=size, max_unavailable=unavailable, max_surge=surge
    )
    budget = rolling_budget(view_of(lws))
    cluster = _at_rest(lws)
    cluster.change_template("k2")
    flips = iter(readiness)
    for _ in range(30):
        previous = cluster.history[-1][0]
        partition, sts_replicas = _pr(cluster.reconcile())
        assert partition <= previous
        assert replicas <= sts_replicas <= budget.burst
        for g in cluster.groups.values():
            if g.key == "k2" and not g.ready:
                g.ready = next(flips, True)
    for _ in range(3 * (replicas + 2)):
        cluster.settle()
        cluster.reconcile()
    if budget.unavailable + budget.surge == 0:
        return
    assert cluster.history[-1] == (0, replicas)
    assert all(g.key == "k2" for g in cluster.groups.values())


# --- Edges the worked examples do not reach ------------------------------------------------
def test_replica_states_of_size_one_ignore_a_stale_worker_statefulset() -> None:
    """A group of one has no workers: a worker StatefulSet left from when the groups were
    larger says nothing about it."""
    lws = lws_object(name=NAME, replicas=1, size=1)
    pods = [leader_pod(NAME, 0, "k")]
    assert replica_states(
        view_of(lws), 1, "k", pods, [worker_sts(NAME, 0, "old", ready=False)]
    ) == [ReplicaState(True, True)]


def test_replica_states_workers_of_an_older_revision_leave_the_group_outdated() -> None:
    lws = lws_object(name=NAME, replicas=1)
    pods = [leader_pod(NAME, 0, "new")]
    assert replica_states(view_of(lws), 1, "new", pods, [worker_sts(NAME, 0, "old")]) == [
        ReplicaState(True, False)
    ]


def test_rolling_partition_counts_missing_states_as_unready() -> None:
    assert rolling_partition([ReplicaState(True, True)], 2, 1, 2) == 1
    assert rolling_partition([], 2, 1, 2) == 1


def test_rolling_partition_walks_down_from_an_unready_top_group() -> None:
    old = ReplicaState(True, False)
    assert rolling_partition([old, old, old, ReplicaState(False, False)], 4, 1, 4) == 3


def test_rolling_partition_moves_up_past_every_unready_group_below_the_base() -> None:
    """With no budget to spend (step 0) and every group unready, the partition moves up
    once per unready group below the base, capped only by the current partition."""
    unready = ReplicaState(False, False)
    assert rolling_partition([unready, unready], 2, 0, 4) == 4
    assert rolling_partition([unready, unready], 2, 0, 3) == 3


def test_a_new_leader_statefulset_starts_with_every_replica_at_partition_zero() -> None:
    plan = rolling_update_parameters(view_of(lws_object(name=NAME, replicas=3)), None, "k", False)
    assert _pr(plan) == (0, 3)
    assert plan.events == ()


def test_a_template_change_during_a_surge_removes_the_surge_replica_it_no_longer_needs() -> None:
    lws = lws_object(name=NAME, replicas=2, max_surge=2, max_unavailable=1)
    sts = leader_sts(NAME, "k", 4, recorded=2)
    plan = rolling_update_parameters(view_of(lws), sts, "k2", True, [], [])
    assert _pr(plan) == (2, 3)
    assert _notes(plan) == [f"deleting surge replica {NAME}-3"]


def test_replicas_raised_during_a_surge_remove_the_surge_replica_by_that_name() -> None:
    """Replicas 2 -> 3 while the leader StatefulSet runs 4 (one of them surge): the
    fourth replica, above the old desired count, is a surge replica."""
    lws = lws_object(name=NAME, replicas=3, max_surge=1, max_unavailable=1)
    sts = leader_sts(NAME, "k", 4, recorded=2)
    pods = [leader_pod(NAME, i, "k") for i in range(4)]
    sets = [worker_sts(NAME, i, "k") for i in range(4)]
    plan = rolling_update_parameters(view_of(lws), sts, "k", False, pods, sets)
    assert _pr(plan) == (0, 3)
    assert _notes(plan) == [f"deleting surge replica {NAME}-3"]


def test_the_unreadable_replicas_annotation_is_named_with_its_value() -> None:
    lws = lws_object(name=NAME, replicas=2)
    sts = leader_sts(NAME, "k", 3, partition=1)
    sts["metadata"]["annotations"][c.ANNOTATION_REPLICAS] = "two"
    message = (
        f"leader statefulset {NAME}: annotation {c.ANNOTATION_REPLICAS} is not an integer: 'two'"
    )
    with pytest.raises(RollingUpdateError, match=f"^{re.escape(message)}$"):
        rolling_update_parameters(view_of(lws), sts, "k", False, [], [])


def test_an_unset_or_unreadable_replicas_or_partition_reads_as_the_api_default() -> None:
    """As the API server defaults them: replicas 1, partition 0."""
    assert sts_replicas({}) == sts_replicas({"spec": {}}) == 1
    assert sts_replicas({"spec": {"replicas": "3"}}) == 1
    assert sts_replicas({"spec": {"replicas": 0}}) == 0
    assert sts_partition({}) == sts_partition({"spec": {"updateStrategy": {}}}) == 0
    unreadable = {"spec": {"updateStrategy": {"rollingUpdate": {"partition": "2"}}}}
    assert sts_partition(unreadable) == 0
    assert sts_partition({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}) == 2
