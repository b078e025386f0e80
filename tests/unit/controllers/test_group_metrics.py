"""The group lifecycle metrics, fed by hand: a registry of their own, a clock of the
test's, and pod cache events delivered as the watch would deliver them."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import LwsCaches, build_caches
from leaderworkerset.controllers.group_metrics import (
    Cause,
    GroupMetrics,
    loss_cause,
    restart_cause,
    seconds_since,
)
from leaderworkerset.controllers.group_timing import Recovering, failure_time, match_recovery
from leaderworkerset.runtime.controller import Controller
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.pods import lws_labels
from tests.toolkit.pods import pod as a_pod

JSON = dict[str, Any]
CREATED = "2026-01-01T00:00:00Z"
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).timestamp()
LABELS = {"namespace": "ns", "leaderworkerset": "lws", "group_identity": "Ordinal"}


class Clock:
    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> float:
        return self.now


def pod(
    name: str,
    group: str,
    worker: int = 0,
    *,
    revision: str = "r1",
    ready: bool = True,
    uid: str = "",
    version: int = 1,
    **status: Any,
) -> JSON:
    return a_pod(
        name,
        "ns",
        uid=uid or f"uid-{name}",
        resource_version=str(version),
        created=CREATED,
        labels=lws_labels("lws", group_index=group, worker=str(worker), revision=revision),
        annotations={c.ANNOTATION_SIZE: "1"},
        node="n1",
        phase="Running",
        ready=ready,
        status=status,
    )


def deleting(obj: JSON) -> JSON:
    gone = copy.deepcopy(obj)
    gone["metadata"]["deletionTimestamp"] = CREATED
    version = int(gone["metadata"]["resourceVersion"]) + 1
    gone["metadata"]["resourceVersion"] = str(version)
    return gone


def lws(replicas: int = 2, mode: str = c.GROUP_IDENTITY_ORDINAL) -> JSON:
    return {
        "metadata": {"name": "lws", "namespace": "ns", "uid": "uid-lws", "resourceVersion": "1"},
        "spec": {"replicas": replicas, "groupIdentity": mode},
    }


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {**LABELS, **labels}) or 0.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry, clock: Clock) -> GroupMetrics:
    return GroupMetrics(registry, clock)


async def _never_reconciled(key: str) -> None:
    raise AssertionError(f"no worker runs here, yet {key} was reconciled")


class Cluster:
    """Caches that never list: the test delivers the watch events itself."""

    def __init__(self, metrics: GroupMetrics, ours: set[str] | None = None) -> None:
        self.caches: LwsCaches = build_caches(FakeApiClient())
        self.ours = ours if ours is not None else set()
        # One controller hosts both, connected as a leader's is when it starts.
        self.controller = Controller("test", _never_reconciled)
        metrics.track_changes(self.controller, self.caches)
        metrics.count_losses(self.controller, self.caches, self.ours.__contains__)
        self.controller.connect()

    def event(self, kind: str, obj: JSON) -> None:
        is_lws = obj["metadata"]["name"] == "lws"
        informer = self.caches.leaderworkersets if is_lws else self.caches.pods
        informer._handle_event({"type": kind, "object": obj})


# -- groups by state and time to Ready ------------------------------------------------------


def test_ready_time_is_observed_once_per_leader(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    waiting = [pod("lws-0", "0", ready=False), pod("lws-1", "1", ready=False)]
    metrics.count("ns", "lws", "Ordinal", "r1", waiting, [])
    assert value(registry, "lws_groups", state="not_ready") == 2
    assert value(registry, "lws_group_ready_seconds_count") == 0

    clock.now = EPOCH + 7
    ready = [pod("lws-0", "0"), pod("lws-1", "1", ready=False)]
    metrics.count("ns", "lws", "Ordinal", "r1", ready, [])
    metrics.count("ns", "lws", "Ordinal", "r1", ready, [])
    assert value(registry, "lws_group_ready_seconds_count") == 1
    assert value(registry, "lws_group_ready_seconds_sum") == 7
    assert value(registry, "lws_groups", state="ready") == 1
    assert value(registry, "lws_groups", state="not_ready") == 1

    # The group becomes not ready and Ready again: still one observation for that leader.
    metrics.count("ns", "lws", "Ordinal", "r1", waiting, [])
    metrics.count("ns", "lws", "Ordinal", "r1", [pod("lws-0", "0"), pod("lws-1", "1")], [])
    assert value(registry, "lws_group_ready_seconds_count") == 2

    # A new leader (new UID) of group 0 is observed again.
    recreated = [pod("lws-0", "0", uid="second", ready=False), pod("lws-1", "1")]
    metrics.count("ns", "lws", "Ordinal", "r1", recreated, [])
    metrics.count("ns", "lws", "Ordinal", "r1", [pod("lws-0", "0", uid="second")], [])
    assert value(registry, "lws_group_ready_seconds_count") == 3


def test_groups_ready_before_the_process_saw_them_are_not_observed(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    clock.now = EPOCH + 3600  # the process starts counting an hour after the pod was made
    metrics.count("ns", "lws", "Ordinal", "r1", [pod("lws-0", "0")], [])
    assert value(registry, "lws_group_ready_seconds_count") == 0
    assert value(registry, "lws_groups", state="ready") == 1


def test_a_group_created_since_and_first_seen_ready_is_timed_by_its_pods(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    """Refreshes are paced behind the events, so a fast group can be Ready by the first
    one that sees it; its time comes from the last Ready transition of its pods."""
    metrics.count("ns", "lws", "Ordinal", "r1", [], [])
    leader, worker = pod("lws-0", "0"), pod("lws-0-1", "0", 1)
    leader["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:04Z"
    worker["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:07Z"
    clock.now = EPOCH + 30
    metrics.count("ns", "lws", "Ordinal", "r1", [leader, worker], [])
    assert value(registry, "lws_group_ready_seconds_count") == 1
    # The transitions have whole seconds: the end of the last one's second.
    assert value(registry, "lws_group_ready_seconds_sum") == 8.0


def test_memory_is_bounded_by_the_live_leaders(metrics: GroupMetrics) -> None:
    for i in range(50):
        metrics.count("ns", "lws", "Ordinal", "r1", [pod("lws-0", "0", uid=f"u{i}")], [])
    record = metrics._lws[("ns", "lws")]
    assert record.done | record.waiting == {"u49"}


def test_every_state_is_a_series_and_they_go_with_the_lws(
    metrics: GroupMetrics, registry: CollectorRegistry
) -> None:
    pods = [
        pod("lws-0", "0"),
        deleting(pod("lws-1", "1")),
        pod("lws-2", "2", revision="r0", ready=False),
    ]
    metrics.count("ns", "lws", "Ordinal", "r1", pods, [])
    states = {"ready": 1, "not_ready": 0, "gated": 0, "tearing_down": 1, "updating": 1}
    for state, count in states.items():
        assert registry.get_sample_value("lws_groups", {**LABELS, "state": state}) == count
    metrics.forget("ns/lws")
    for state in states:
        assert registry.get_sample_value("lws_groups", {**LABELS, "state": state}) is None


def test_an_lws_without_groups_has_a_zero_series_per_state(
    metrics: GroupMetrics, registry: CollectorRegistry
) -> None:
    metrics.count("ns", "lws", "Ordinal", "r1", [], [])
    for state in ("ready", "not_ready", "gated", "tearing_down", "updating"):
        assert registry.get_sample_value("lws_groups", {**LABELS, "state": state}) == 0


# -- recreations ---------------------------------------------------------------------------


def test_causes_read_from_the_pod() -> None:
    restarted = pod("w", "0", 1, containerStatuses=[{"restartCount": 1}])
    assert restart_cause(restarted) is Cause.CONTAINER_RESTART
    failed = pod("w", "0", 1)
    failed["status"]["phase"] = "Failed"
    assert restart_cause(failed) is Cause.POD_FAILED
    evicted = pod("w", "0", 1, reason="Evicted")
    evicted["status"]["phase"] = "Failed"
    assert loss_cause(evicted) is Cause.POD_FAILED
    tainted = deleting(pod("w", "0", 1))
    tainted["status"]["conditions"].append(
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
    )
    assert restart_cause(tainted) is Cause.NODE_LOST
    assert restart_cause(deleting(pod("l", "0"))) is Cause.LEADER_DELETED
    assert restart_cause(deleting(pod("w", "0", 1))) is Cause.POD_FAILED


def test_a_restart_counted_by_the_controller_is_not_counted_again(
    metrics: GroupMetrics, registry: CollectorRegistry
) -> None:
    cluster = Cluster(metrics)
    cluster.event("ADDED", lws())
    leader = pod("lws-0", "0")
    cluster.event("ADDED", leader)
    cluster.ours.add("uid-lws-0")  # claimed before the DELETE is sent
    cluster.event("MODIFIED", deleting(leader))
    restarted = pod("lws-0-1", "0", 1, containerStatuses=[{"restartCount": 1}])
    metrics.group_restarted(leader, restarted, "Ordinal")
    metrics.group_restarted(leader, restarted, "Ordinal")
    cluster.event("DELETED", deleting(leader))
    assert value(registry, "lws_group_recreations_total", cause="container_restart") == 1
    assert value(registry, "lws_group_recreations_total", cause="leader_deleted") == 0


def test_leaders_taken_down_by_others(metrics: GroupMetrics, registry: CollectorRegistry) -> None:
    cluster = Cluster(metrics)
    cluster.event("ADDED", lws(replicas=2))
    leaders = [pod(f"lws-{i}", str(i)) for i in range(3)]
    for leader in leaders:
        cluster.event("ADDED", leader)
    metrics.count("ns", "lws", "Ordinal", "r2", leaders, [])

    # Beyond the replicas: a scale-down; on an old revision: a rollout (deleted at once,
    # grace period 0, so only the deletion is seen); else deleted by someone.
    cluster.event("MODIFIED", deleting(leaders[2]))
    cluster.event("DELETED", deleting(leaders[2]))
    cluster.event("DELETED", leaders[1])
    current = pod("lws-new-0", "0", revision="r2")
    cluster.event("ADDED", current)
    cluster.event("MODIFIED", deleting(current))
    for cause, count in (("scale_down", 1), ("rollout", 1), ("leader_deleted", 1)):
        assert value(registry, "lws_group_recreations_total", cause=cause) == count, cause


def test_hash_scale_down_leaves_as_many_leaders_as_wanted(
    metrics: GroupMetrics, registry: CollectorRegistry
) -> None:
    labels = {**LABELS, "group_identity": "Hash"}
    cluster = Cluster(metrics)
    cluster.event("ADDED", lws(replicas=1, mode="Hash"))
    a, b = pod("lws-a", "a"), pod("lws-b", "b")
    for leader in (a, b):
        cluster.event("ADDED", leader)
    cluster.event("MODIFIED", deleting(a))
    counts = {
        cause: registry.get_sample_value("lws_group_recreations_total", {**labels, "cause": cause})
        for cause in ("scale_down", "leader_deleted")
    }
    assert counts == {"scale_down": 1.0, "leader_deleted": None}
    cluster.event("MODIFIED", deleting(b))  # now one fewer than wanted
    value_deleted = registry.get_sample_value(
        "lws_group_recreations_total", {**labels, "cause": "leader_deleted"}
    )
    assert value_deleted == 1


def test_nothing_is_counted_when_the_lws_goes(
    metrics: GroupMetrics, registry: CollectorRegistry
) -> None:
    cluster = Cluster(metrics)
    leader = pod("lws-0", "0")
    cluster.event("ADDED", leader)
    cluster.event("MODIFIED", deleting(leader))
    assert (
        registry.get_sample_value(
            "lws_group_recreations_total", {**LABELS, "cause": "leader_deleted"}
        )
        is None
    )


# -- the scheduling gate -----------------------------------------------------------------------


def test_gate_release_counts_and_times(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    clock.now = EPOCH + 12.5
    metrics.gate_released(pod("lws-a", "a"))
    metrics.early_release(pod("lws-a", "a"), "timeout")
    labels = {**LABELS, "group_identity": "Hash"}
    assert registry.get_sample_value("lws_scheduling_gate_admissions_total", labels) == 1
    assert registry.get_sample_value("lws_replacement_gated_seconds_sum", labels) == 12.5
    assert (
        registry.get_sample_value(
            "lws_scheduling_gate_early_releases_total", {**labels, "reason": "timeout"}
        )
        == 1
    )


def test_seconds_since() -> None:
    assert seconds_since(pod("p", "0"), EPOCH + 3) == 3
    assert seconds_since(pod("p", "0"), EPOCH - 3) == 0
    assert seconds_since({"metadata": {}}, EPOCH) is None


# -- incremental refresh ---------------------------------------------------------------------


def _gauges(registry: CollectorRegistry) -> dict[str, float]:
    states = ("ready", "not_ready", "gated", "tearing_down", "updating")
    return {s: value(registry, "lws_groups", state=s) for s in states}


def test_refresh_recounts_only_changed_groups_and_agrees_with_a_full_count(clock: Clock) -> None:
    """Random pod events; after each, the incremental refresh and a count from scratch
    (a second metrics object fed the whole cache) give the same gauges and the same
    ready-time observations."""
    import random

    from leaderworkerset.api.leaderworkerset.view import view_of

    rng = random.Random(7)
    registry, full_registry = CollectorRegistry(), CollectorRegistry()
    metrics, full = GroupMetrics(registry, clock), GroupMetrics(full_registry, clock)
    cluster = Cluster(metrics)
    cluster.event("ADDED", lws(replicas=6))
    view = view_of(lws(replicas=6))
    live: dict[str, JSON] = {}
    version = 1
    for step in range(400):
        version += 2  # deleting() takes the next one
        group = str(rng.randrange(6))
        worker = rng.randrange(3)
        name = f"lws-{group}" if worker == 0 else f"lws-{group}-{worker}"
        current = live.get(name)
        action = rng.random()
        if current is not None and action < 0.2:
            cluster.event("DELETED", current)
            del live[name]
        else:
            uid = f"uid-{name}-{step}" if current is None else current["metadata"]["uid"]
            revision = rng.choice(("r1", "r2"))
            new = pod(
                name,
                group,
                worker,
                revision=revision,
                ready=rng.random() < 0.6,
                uid=uid,
                version=version,
            )
            if current is not None and rng.random() < 0.2:
                new = deleting(new)
            cluster.event("ADDED" if current is None else "MODIFIED", new)
            live[name] = new
        clock.now += 1.0
        metrics.refresh(cluster.caches, view, "r1")
        full.count("ns", "lws", "Ordinal", "r1", list(live.values()), [])
        assert _gauges(registry) == _gauges(full_registry), step
        observed = value(registry, "lws_group_ready_seconds_count")
        assert observed == value(full_registry, "lws_group_ready_seconds_count"), step
    assert value(registry, "lws_group_ready_seconds_count") > 0


# -- recovery and rollout durations -------------------------------------------------------------


def test_failure_time_is_what_the_pod_says_never_later_than_now() -> None:
    now = EPOCH + 60
    assert failure_time(pod("w", "0", 1), now) == now  # it says nothing
    crashed = pod(
        "w",
        "0",
        1,
        containerStatuses=[
            {"restartCount": 2, "lastState": {"terminated": {"finishedAt": "2026-01-01T00:00:20Z"}}}
        ],
    )
    # Whole seconds: the end of the second the container ended in.
    assert failure_time(crashed, now) == EPOCH + 21
    assert failure_time(crashed, EPOCH + 20.4) == EPOCH + 20.4
    gone = deleting(pod("l", "0"))
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:40Z"
    gone["metadata"]["deletionGracePeriodSeconds"] = 30
    assert failure_time(gone, now) == EPOCH + 11


def test_match_recovery_by_index_or_the_oldest_loss_before_the_leader() -> None:
    pending = {
        "0": Recovering(EPOCH + 5, Cause.LEADER_DELETED, "old-0"),
        "k1": Recovering(EPOCH + 2, Cause.CONTAINER_RESTART, "old-k1"),
    }
    assert match_recovery(pending, "0", "new-0", EPOCH + 6, same_index=True) == "0"
    # The lost leader itself Ready again is no recovery.
    assert match_recovery(pending, "0", "old-0", EPOCH, same_index=True) is None
    assert match_recovery(pending, "1", "new-1", EPOCH + 6, same_index=True) is None
    # A Hash replacement has a key of its own: the oldest loss before it was created.
    assert match_recovery(pending, "k9", "new-k9", EPOCH + 9, same_index=False) == "k1"
    assert match_recovery(pending, "k9", "new-k9", EPOCH, same_index=False) is None


def test_a_recreated_group_is_timed_from_its_failure_to_ready_again(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    leaders = [pod("lws-0", "0"), pod("lws-1", "1")]
    metrics.count("ns", "lws", "Ordinal", "r1", leaders, [])
    crashed = pod(
        "lws-0-1",
        "0",
        1,
        containerStatuses=[
            {"restartCount": 1, "lastState": {"terminated": {"finishedAt": "2026-01-01T00:00:10Z"}}}
        ],
    )
    clock.now = EPOCH + 10.5
    metrics.group_restarted(leaders[0], crashed, "Ordinal")
    # The old leader, still there and Ready, is not the group back.
    metrics.count("ns", "lws", "Ordinal", "r1", leaders, [])
    assert value(registry, "lws_group_recovery_seconds_count", cause="container_restart") == 0
    replacement = pod("lws-0", "0", uid="second", ready=False)
    clock.now = EPOCH + 13
    metrics.count("ns", "lws", "Ordinal", "r1", [replacement, leaders[1]], [])
    clock.now = EPOCH + 14
    metrics.count("ns", "lws", "Ordinal", "r1", [pod("lws-0", "0", uid="second"), leaders[1]], [])
    metrics.count("ns", "lws", "Ordinal", "r1", [pod("lws-0", "0", uid="second"), leaders[1]], [])
    assert value(registry, "lws_group_recovery_seconds_count", cause="container_restart") == 1
    assert value(registry, "lws_group_recovery_seconds_sum", cause="container_restart") == 3.5


def test_groups_replaced_by_a_rollout_or_removed_by_a_scale_down_are_no_recovery(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    metrics.count("ns", "lws", "Ordinal", "r1", [pod("lws-0", "0"), pod("lws-1", "1")], [])
    metrics.recreated(pod("lws-0", "0"), "Ordinal", Cause.ROLLOUT)
    metrics.recreated(pod("lws-1", "1"), "Ordinal", Cause.SCALE_DOWN)
    clock.now = EPOCH + 5
    back = [pod("lws-0", "0", uid="second"), pod("lws-1", "1", uid="third")]
    metrics.count("ns", "lws", "Ordinal", "r1", back, [])
    for cause in Cause:
        assert value(registry, "lws_group_recovery_seconds_count", cause=cause.value) == 0


def test_a_hash_replacement_answers_for_the_group_it_replaces(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    labels = {**LABELS, "group_identity": "Hash", "cause": "leader_deleted"}
    metrics.count("ns", "lws", "Hash", "r1", [pod("lws-a", "a")], [])
    clock.now = EPOCH + 2
    metrics.recreated(pod("lws-a", "a"), "Hash", Cause.LEADER_DELETED)
    replacement = pod("lws-b", "b", uid="b")
    replacement["metadata"]["creationTimestamp"] = "2026-01-01T00:00:03Z"
    clock.now = EPOCH + 6
    metrics.count("ns", "lws", "Hash", "r1", [replacement], [])
    assert registry.get_sample_value("lws_group_recovery_seconds_count", labels) == 1
    assert registry.get_sample_value("lws_group_recovery_seconds_sum", labels) == 4


def test_a_rollout_is_timed_from_the_new_revision_to_every_group_on_it_and_ready(
    metrics: GroupMetrics, registry: CollectorRegistry, clock: Clock
) -> None:
    from leaderworkerset.api.leaderworkerset.view import view_of

    cluster = Cluster(metrics)
    cluster.event("ADDED", lws(replicas=2))
    view = view_of(lws(replicas=2))
    old = [pod("lws-0", "0"), pod("lws-1", "1")]
    for p in old:
        cluster.event("ADDED", p)
    metrics.refresh(cluster.caches, view, "r1")
    clock.now = EPOCH + 100
    metrics.refresh(cluster.caches, view, "r2")  # the rollout begins
    assert value(registry, "lws_rollout_seconds_count") == 0
    cluster.event("DELETED", old[1])
    new_1 = pod("lws-1", "1", uid="n1", revision="r2", version=5)
    cluster.event("ADDED", new_1)
    clock.now = EPOCH + 110
    metrics.refresh(cluster.caches, view, "r2")
    # Group 0 is Ready but still on r1: not done.
    assert value(registry, "lws_rollout_seconds_count") == 0
    cluster.event("DELETED", old[0])
    cluster.event("ADDED", pod("lws-0", "0", uid="n0", revision="r2", ready=False, version=7))
    clock.now = EPOCH + 120
    metrics.refresh(cluster.caches, view, "r2")
    assert value(registry, "lws_rollout_seconds_count") == 0
    cluster.event("MODIFIED", pod("lws-0", "0", uid="n0", revision="r2", version=9))
    clock.now = EPOCH + 125
    metrics.refresh(cluster.caches, view, "r2")
    metrics.refresh(cluster.caches, view, "r2")
    assert value(registry, "lws_rollout_seconds_count") == 1
    assert value(registry, "lws_rollout_seconds_sum") == 25
