"""The replacement reconciler end to end over cached objects: switching the policy to
Immediate releases the waiting leaders, how a gate is removed and what a refused
removal does, when it wakes itself, what its Events say and about what, which pod
and node events wake it, and what it forgets with its LeaderWorkerSet."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import build_caches
from leaderworkerset.controllers import events as ev
from leaderworkerset.controllers.group_metrics import GroupMetrics
from leaderworkerset.controllers.held import HeldReplacements
from leaderworkerset.controllers.replacement.reconciler import (
    REFUSED_RETRY_FIRST,
    RELEASE_SLACK,
    UNGATED,
    ReplacementReconciler,
    lws_key_of,
)
from leaderworkerset.controllers.replacement.triggers import node_events, replacement_events
from leaderworkerset.group.options import ControllerOptions, ReleaseThresholds
from leaderworkerset.runtime.client import JSON_PATCH, ApiError
from tests.toolkit.caches import seeded_caches
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.lws import lws_object
from tests.toolkit.pods import container, lws_labels, pod
from tests.toolkit.recorded_events import RecordedEvents

JSON = dict[str, Any]
KEY = "default/lws"
T0 = "2026-01-01T00:00:00Z"
T0_SECONDS = 1767225600.0
NODE_BOUND, OVERRUN_BOUND = 60.0, 120.0
BOUNDS = ReleaseThresholds(node_not_ready=NODE_BOUND, termination_overrun=OVERRUN_BOUND)


def hash_lws(policy: str = c.GROUP_REPLACEMENT_POST_TERMINATION) -> JSON:
    return lws_object(
        "lws", replicas=1, groupIdentity=c.GROUP_IDENTITY_HASH, groupReplacementPolicy=policy
    )


def a_pod(
    name: str, group: str, *, leader: bool = True, gated: bool = False, deleted: bool = False
) -> JSON:
    return pod(
        name,
        "default",
        api_version="v1",
        kind="Pod",
        uid=f"uid-{name}",
        created=T0,
        deleted=T0 if deleted else None,
        labels=lws_labels("lws", worker="0" if leader else "1", group_key=group, group_index=group),
        containers=[container("c", "pause")],
        gates=["someone-else", c.SCHEDULING_GATE_GROUP_REPLACEMENT] if gated else None,
        node=None if gated else "n1",
        status={},
    )


def a_node(name: str, status: str = "True", since: str = T0) -> JSON:
    ready = {"type": "Ready", "status": status, "lastTransitionTime": since}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": T0},
        "status": {"conditions": [ready]},
    }


# A group whose leader and worker are terminating on n1.
OLD_GROUP = [
    a_pod("old", "a" * 40, deleted=True),
    a_pod("old-1", "a" * 40, leader=False, deleted=True),
]
WAITING = a_pod("new", "b" * 40, gated=True)


def refusing(error: BaseException) -> FakeApiClient:
    """A client whose every pod PATCH raises `error`."""
    client = FakeApiClient()
    client.fail[("patch", "pods")] = error
    return client


def patched(client: FakeApiClient) -> list[str]:
    """The pods whose gate removal was sent, in order."""
    return [call.name for call in client.calls_of("patch", "pods")]


@contextlib.asynccontextmanager
async def rig(
    *objects: JSON,
    client: FakeApiClient | None = None,
    now: float = T0_SECONDS,
    metrics: GroupMetrics | None = None,
) -> AsyncIterator[tuple[ReplacementReconciler, FakeApiClient, RecordedEvents]]:
    client = client or FakeApiClient()
    events = RecordedEvents()
    async with seeded_caches(*objects) as caches:
        yield (
            ReplacementReconciler(
                client,
                caches,
                events,
                options=ControllerOptions(replacement_release=BOUNDS),
                clock=lambda: now,
                group_metrics=metrics or GroupMetrics(),
            ),
            client,
            events,
        )


# --- the policy --------------------------------------------------------------------------------
async def test_switching_to_immediate_releases_the_waiting_leaders() -> None:
    async with rig(hash_lws(), *OLD_GROUP, WAITING, a_node("n1")) as (replacement, client, _):
        await replacement(KEY)
        assert patched(client) == []
        assert replacement.held.get(KEY) == HeldReplacements(("new",), ("a" * 40,))
    immediate = hash_lws(c.GROUP_REPLACEMENT_IMMEDIATE)
    async with rig(immediate, *OLD_GROUP, WAITING, a_node("n1")) as (replacement, client, _):
        assert await replacement(KEY) is None
        assert patched(client) == ["new"]
        assert replacement.held.get(KEY) == HeldReplacements()


async def test_an_ordinal_lws_is_not_this_reconcilers() -> None:
    ordinal = lws_object("lws", replicas=1)
    async with rig(ordinal, WAITING) as (replacement, client, events):
        assert await replacement(KEY) is None
        assert (client.calls_of("patch"), events.told, replacement.held.get(KEY)) == (
            [],
            [],
            None,
        )


# --- removing a gate ---------------------------------------------------------------------------
async def test_the_gate_is_removed_by_a_json_patch_of_its_own_index() -> None:
    async with rig(hash_lws(), WAITING) as (replacement, client, _):
        assert await replacement(KEY) is None
    (call,) = client.calls_of("patch")
    assert (call.plural, call.name, call.namespace) == ("pods", "new", "default")
    assert call.options == {"subresource": None, "content_type": JSON_PATCH}
    # The gate is second: the first one is somebody else's and stays.
    assert {"op": "remove", "path": "/spec/schedulingGates/1"} in call.body
    assert replacement.ungating(KEY) == {"new"}


def admissions(metrics: GroupMetrics) -> float:
    labels = {"namespace": "default", "leaderworkerset": "lws", "group_identity": "Hash"}
    value = metrics.registry.get_sample_value("lws_scheduling_gate_admissions_total", labels)
    return value or 0.0


async def test_a_gate_removed_is_counted_and_a_gone_pod_is_not() -> None:
    metrics = GroupMetrics()
    before = admissions(metrics)
    async with rig(hash_lws(), WAITING, metrics=metrics) as (replacement, _, _):
        await replacement(KEY)
    assert admissions(metrics) == before + 1
    gone = refusing(ApiError(404, {"reason": "NotFound"}))
    async with rig(hash_lws(), WAITING, client=gone, metrics=metrics) as (replacement, _, _):
        # Gone with its pod is as good as removed: no retry.
        assert await replacement(KEY) is None
    assert admissions(metrics) == before + 1


@pytest.mark.parametrize("status", [409, 422])
async def test_a_lost_race_on_the_gates_looks_again_with_backoff(status: int) -> None:
    refused = refusing(ApiError(status, {"message": "the gates changed"}))
    async with rig(hash_lws(), WAITING, client=refused) as (replacement, _, _):
        result = await replacement(KEY)
        assert result is not None and result.requeue_after == REFUSED_RETRY_FIRST
        # Not removed here, so not waited for.
        assert replacement.ungating(KEY) == set()


async def test_other_errors_fail_the_reconcile() -> None:
    broken = refusing(ApiError(500, {"message": "etcd is unhappy"}))
    async with rig(hash_lws(), WAITING, client=broken) as (replacement, _, _):
        with pytest.raises(ApiError):
            await replacement(KEY)
        assert replacement.ungating(KEY) == set()


async def test_a_cancelled_pass_waits_for_none_of_its_gates() -> None:
    async def stall(call: Call) -> None:
        if call.verb == "patch":
            await asyncio.Event().wait()

    stalling = FakeApiClient()
    stalling.on_call = stall
    async with rig(hash_lws(), WAITING, client=stalling) as (replacement, _, _):
        task = asyncio.ensure_future(replacement(KEY))
        for _ in range(20):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert replacement.ungating(KEY) == set()


# --- waking itself -----------------------------------------------------------------------------
async def test_it_wakes_just_after_the_next_release_even_when_it_is_near() -> None:
    due = T0_SECONDS + OVERRUN_BOUND
    objects = (hash_lws(), *OLD_GROUP, WAITING, a_node("n1"))
    async with rig(*objects, now=due - 0.5) as (replacement, _, _):
        result = await replacement(KEY)
    assert result is not None and result.requeue_after == pytest.approx(0.5 + RELEASE_SLACK)


async def test_nobody_waiting_needs_no_wake_up() -> None:
    async with rig(hash_lws(), *OLD_GROUP, a_node("n1")) as (replacement, _, _):
        assert await replacement(KEY) is None


# --- what it says ------------------------------------------------------------------------------
async def test_a_hold_is_told_on_the_lws_about_the_leader() -> None:
    async with rig(hash_lws(), *OLD_GROUP, WAITING, a_node("n1")) as (replacement, _, events):
        await replacement(KEY)
    (told,) = events.told
    assert (told.subject, told.reason) == ("LeaderWorkerSet/lws", ev.REASON_REPLACEMENT_HELD)
    assert told.related_name == "new"
    assert "aaaaaaaa" in told.note


async def test_an_overrun_release_is_told_with_the_overrun_bound() -> None:
    late = T0_SECONDS + OVERRUN_BOUND + 1
    objects = (hash_lws(), *OLD_GROUP, WAITING, a_node("n1"))
    async with rig(*objects, now=late) as (replacement, client, events):
        await replacement(KEY)
        assert patched(client) == ["new"]
    (told,) = events.told
    assert (told.subject, told.reason) == ("LeaderWorkerSet/lws", ev.REASON_REPLACEMENT_RELEASED)
    assert f"{OVERRUN_BOUND:g}s" in told.note and f"{NODE_BOUND:g}s" not in told.note


def early_releases(metrics: GroupMetrics) -> tuple[float, float]:
    """Counted so far for node_not_ready and termination_overrun."""
    labels = {"namespace": "default", "leaderworkerset": "lws", "group_identity": "Hash"}
    name = "lws_scheduling_gate_early_releases_total"

    def counted(reason: str) -> float:
        return metrics.registry.get_sample_value(name, {**labels, "reason": reason}) or 0.0

    return counted("node_not_ready"), counted("termination_overrun")


async def test_an_early_release_is_counted_by_its_reason() -> None:
    lost = [a_pod("old", "a" * 40, deleted=True), a_pod("old-1", "a" * 40, leader=False)]
    lost_node = a_node("n1", "Unknown", T0)
    metrics = GroupMetrics()
    before = early_releases(metrics)
    now = T0_SECONDS + NODE_BOUND
    async with rig(hash_lws(), *lost, WAITING, lost_node, now=now, metrics=metrics) as (
        replacement,
        _,
        events,
    ):
        await replacement(KEY)
    assert f"{NODE_BOUND:g}s" in events.notes[-1]
    after = early_releases(metrics)
    assert after == (before[0] + 1, before[1])


async def test_each_release_is_told_once_and_a_silent_one_is_told_when_it_matters() -> None:
    group_c = [
        a_pod("c", "c" * 40, deleted=True),
        a_pod("c-1", "c" * 40, leader=False, deleted=True),
    ]
    late = T0_SECONDS + OVERRUN_BOUND + 1
    base = (hash_lws(), *OLD_GROUP, *group_c, a_node("n1"))
    async with rig(*base, now=late) as (replacement, _, events):
        # Nobody waits: both groups are released, silently.
        await replacement(KEY)
        assert events.told == []
    async with rig(*base, WAITING, now=late) as (replacement, client, events):
        await replacement(KEY)
        assert events.reasons == [ev.REASON_REPLACEMENT_RELEASED] * 2
        # The cache still shows the leader gated: nothing is told twice.
        await replacement(KEY)
        assert events.reasons == [ev.REASON_REPLACEMENT_RELEASED] * 2
        assert patched(client) == ["new"]


async def test_a_release_nobody_waited_for_is_told_once_someone_does() -> None:
    """Released groups nobody waited for are not remembered as told."""
    late = T0_SECONDS + OVERRUN_BOUND + 1
    async with (
        seeded_caches(hash_lws(), *OLD_GROUP, a_node("n1")) as quiet,
        seeded_caches(hash_lws(), *OLD_GROUP, WAITING, a_node("n1")) as waiting,
    ):
        events = RecordedEvents()
        replacement = ReplacementReconciler(
            FakeApiClient(),
            quiet,
            events,
            options=ControllerOptions(replacement_release=BOUNDS),
            clock=lambda: late,
        )
        await replacement(KEY)
        assert events.told == []
        replacement.caches = waiting
        await replacement(KEY)
    assert events.reasons == [ev.REASON_REPLACEMENT_RELEASED]


# --- forgetting --------------------------------------------------------------------------------
async def test_a_deleted_lws_is_forgotten() -> None:
    async with (
        seeded_caches(hash_lws(), *OLD_GROUP, WAITING, a_node("n1")) as present,
        seeded_caches() as gone,
    ):
        events = RecordedEvents()
        replacement = ReplacementReconciler(
            FakeApiClient(),
            present,
            events,
            options=ControllerOptions(replacement_release=BOUNDS),
            clock=lambda: T0_SECONDS,
        )
        await replacement(KEY)
        assert replacement.held.get(KEY) is not None
        replacement.expectations.expect_deletions(KEY, UNGATED, ["new"])
        replacement.caches = gone
        assert await replacement(KEY) is None
        assert replacement.held.get(KEY) is None
        assert replacement.ungating(KEY) == set()
        # Back again with the same leader waiting: the hold is told anew.
        replacement.caches = present
        await replacement(KEY)
    assert events.reasons == [ev.REASON_REPLACEMENT_HELD] * 2


# --- what wakes it -----------------------------------------------------------------------------
def test_a_gate_that_stays_is_not_an_admission() -> None:
    client = FakeApiClient()
    replacement = ReplacementReconciler(client, build_caches(client))
    replacement.expectations.expect_deletions(KEY, UNGATED, ["new"])
    replacement.observe(WAITING, WAITING)
    assert replacement.ungating(KEY) == {"new"}
    ungated = {**WAITING, "spec": {"nodeName": "n1"}}
    replacement.observe(WAITING, ungated)
    assert replacement.ungating(KEY) == set()


def test_a_deleted_leader_is_not_waited_for() -> None:
    client = FakeApiClient()
    replacement = ReplacementReconciler(client, build_caches(client))
    replacement.expectations.expect_deletions(KEY, UNGATED, ["new"])
    replacement.observe_deleted(WAITING)
    assert replacement.ungating(KEY) == set()


def test_a_pod_without_an_lws_has_no_key() -> None:
    orphan = a_pod("p", "g")
    del orphan["metadata"]["labels"][c.LABEL_SET_NAME]
    assert lws_key_of(orphan) is None
    assert lws_key_of(WAITING) == KEY


def test_pod_events_that_change_nothing_wake_nobody() -> None:
    update = replacement_events().update
    assert update is not None
    leaving = a_pod("old", "a" * 40, deleted=True)
    assert not update(leaving, leaving)
    running = a_pod("old", "a" * 40)
    assert update(running, leaving)


def test_node_events_wake_on_readiness_moves_only() -> None:
    events = node_events()
    assert events.create is not None and not events.create(a_node("n1"))
    assert events.update is not None
    assert events.update(a_node("n1"), a_node("n1", "False"))
    # Not Ready again, since another moment: the release moment moved.
    assert events.update(a_node("n1", "False"), a_node("n1", "False", "2026-01-01T00:05:00Z"))
    assert not events.update(a_node("n1"), a_node("n1"))


async def test_an_overrun_release_is_counted_as_one() -> None:
    metrics = GroupMetrics()
    before = early_releases(metrics)
    late = T0_SECONDS + OVERRUN_BOUND + 1
    objects = (hash_lws(), *OLD_GROUP, WAITING, a_node("n1"))
    async with rig(*objects, now=late, metrics=metrics) as (replacement, _, _):
        await replacement(KEY)
    after = early_releases(metrics)
    assert after == (before[0], before[1] + 1)


async def test_a_release_is_not_told_again_while_its_leader_keeps_being_refused() -> None:
    late = T0_SECONDS + OVERRUN_BOUND + 1
    refused = refusing(ApiError(409, {"message": "the gates changed"}))
    objects = (hash_lws(), *OLD_GROUP, WAITING, a_node("n1"))
    async with rig(*objects, client=refused, now=late) as (replacement, _, events):
        await replacement(KEY)
        await replacement(KEY)
    assert patched(refused) == ["new", "new"]
    assert events.reasons == [ev.REASON_REPLACEMENT_RELEASED]


async def test_a_new_release_is_told_after_one_already_told() -> None:
    """Groups are told in key order; one told already does not stop the next."""
    late = T0_SECONDS + OVERRUN_BOUND + 1
    group_c = [
        a_pod("c", "c" * 40, deleted=True),
        a_pod("c-1", "c" * 40, leader=False, deleted=True),
    ]
    refused = refusing(ApiError(409, {"message": "the gates changed"}))
    async with (
        seeded_caches(hash_lws(), *OLD_GROUP, WAITING, a_node("n1")) as first,
        seeded_caches(hash_lws(), *OLD_GROUP, *group_c, WAITING, a_node("n1")) as second,
    ):
        events = RecordedEvents()
        replacement = ReplacementReconciler(
            refused,
            first,
            events,
            options=ControllerOptions(replacement_release=BOUNDS),
            clock=lambda: late,
        )
        await replacement(KEY)
        replacement.caches = second
        await replacement(KEY)
    notes = events.notes
    assert len(notes) == 2 and "aaaaaaaa" in notes[0] and "cccccccc" in notes[1]


async def test_an_lws_never_seen_is_forgotten_quietly() -> None:
    async with rig() as (replacement, client, events):
        assert await replacement("default/never-seen") is None
        assert (client.calls_of("patch"), events.told) == ([], [])
