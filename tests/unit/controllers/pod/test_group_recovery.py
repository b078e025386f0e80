"""Before the restart policy recreates a group: the restart budget stops it for good
once used up, and the group back-off makes repeated recreations wait, wakes the leader
when the wait is over and says so once."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.pod.restart_policy import GroupRestarter
from leaderworkerset.group.recreations import BackoffPolicy, format_epoch
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.fake_client import FakeApiClient
from tests.toolkit.lws import lws_json
from tests.unit.controllers.pod.test_restart_policy import restarted_leader

JSON = dict[str, Any]
T0 = 1_800_000_000.0


def quiet_leader(uid: str = "uid-1") -> JSON:
    leader = restarted_leader(uid)
    leader["status"]["containerStatuses"][0]["restartCount"] = 0
    return leader


def view(budget: int | None = None, annotations: dict[str, str] | None = None) -> LwsView:
    body = lws_json()
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = (
        c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    )
    if budget is not None:
        body["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = budget
    body["metadata"]["annotations"] = annotations or {}
    return view_of(body)


def setup(
    now: list[float], policy: BackoffPolicy | None = None
) -> tuple[FakeApiClient, GroupRestarter, list[tuple[str, float]]]:
    client = FakeApiClient()
    # No caches: the group's workers are left to the garbage collector here.
    r = GroupRestarter(client, cast(LwsCaches, None), clock=lambda: now[0], parallel_teardown=False)
    r.recovery.clock = lambda: now[0]
    if policy is not None:
        r.recovery.policy = policy
    woken: list[tuple[str, float]] = []
    r.wake = lambda key, after: woken.append((key, after))
    return client, r, woken


def lws_patches(client: FakeApiClient) -> list[dict[str, str | None]]:
    return [
        call.body["metadata"]["annotations"]
        for call in client.calls_of("patch", "leaderworkersets")
    ]


def recreations(annotations: dict[str, str | None]) -> JSON:
    raw = annotations[c.ANNOTATION_GROUP_RECREATIONS]
    assert raw is not None
    return cast(JSON, json.loads(raw))


async def test_with_neither_budget_nor_back_off_nothing_is_written_but_the_delete() -> None:
    now = [T0]
    client, r, _ = setup(now, BackoffPolicy(initial=0))
    recreating, event = await r.handle(restarted_leader(), view())
    assert recreating and event is not None
    assert [(call.verb, call.plural) for call in client.writes()] == [("delete", "pods")]


async def test_a_recreation_is_recorded_before_the_leader_is_deleted() -> None:
    now = [T0]
    client, r, _ = setup(now)
    assert (await r.handle(restarted_leader(), view(budget=3)))[0]
    assert [(call.verb, call.plural) for call in client.writes()] == [
        ("patch", "leaderworkersets"),
        ("delete", "pods"),
    ]
    (annotations,) = lws_patches(client)
    assert json.loads(annotations[c.ANNOTATION_GROUP_RESTART_COUNTS] or "") == {"0": 1}
    assert recreations(annotations) == {
        "0": {"recent": 1, "last": format_epoch(T0), "notBefore": format_epoch(T0 + 10)}
    }
    # The write is conditional on the version the decision was made from.
    (patch,) = client.calls_of("patch", "leaderworkersets")
    assert "resourceVersion" in patch.body["metadata"]


async def test_a_used_up_budget_stops_recreation_marks_the_group_and_says_so_once() -> None:
    now = [T0]
    client, r, _ = setup(now)
    used_up = view(budget=2, annotations={c.ANNOTATION_GROUP_RESTART_COUNTS: '{"0": 2}'})
    recreating, event = await r.handle(restarted_leader(), used_up)
    assert not recreating and event is not None
    assert event.reason == "MaxGroupRestartsExceeded"
    assert event.note == "Skip recreating group 0: reached maxGroupRestarts=2"
    assert client.calls_of("delete") == []
    (annotations,) = lws_patches(client)
    assert json.loads(annotations[c.ANNOTATION_GROUP_RESTART_COUNTS] or "") == {"0": 3}
    (pod_patch,) = client.calls_of("patch", "pods")
    assert pod_patch.body["metadata"]["annotations"] == {c.ANNOTATION_GROUP_RESTART_COUNT: "3"}
    # Past the budget already (what the cache shows next): nothing more is written or said.
    marked = view(budget=2, annotations={c.ANNOTATION_GROUP_RESTART_COUNTS: '{"0": 3}'})
    assert await r.handle(restarted_leader(), marked) == (False, None)
    assert len(client.writes()) == 2


async def test_a_budget_of_zero_refuses_the_first_recreation() -> None:
    client, r, _ = setup([T0])
    recreating, event = await r.handle(restarted_leader(), view(budget=0))
    assert not recreating and event is not None and client.calls_of("delete") == []


async def test_the_leaders_own_count_counts_when_the_sets_lags() -> None:
    client, r, _ = setup([T0])
    leader = restarted_leader()
    leader["metadata"]["annotations"] = {c.ANNOTATION_GROUP_RESTART_COUNT: "2"}
    recreating, _ = await r.handle(leader, view(budget=2))
    assert not recreating and client.calls_of("delete") == []


async def test_a_repeated_recreation_waits_out_the_back_off_then_goes() -> None:
    now = [T0]
    client, r, woken = setup(now)
    recent = {
        c.ANNOTATION_GROUP_RECREATIONS: json.dumps(
            {"0": {"recent": 2, "last": format_epoch(T0 - 5)}}
        )
    }
    held = view(annotations=recent)
    recreating, event = await r.handle(restarted_leader(), held)
    # Two recent recreations: the third waits 20 s after the last, 15 s from now.
    assert not recreating and event is not None and event.reason == "GroupBackOff"
    assert "waits 20s" in event.note and "recreated 2 time(s)" in event.note
    assert woken == [("default/test-sample-0", 15.0)]
    # The wait is marked on the record (for a controller that restarts meanwhile).
    (marked,) = lws_patches(client)
    assert recreations(marked)["0"]["pending"] == "uid-1"
    assert r.recovery.holding(restarted_leader(), held)
    # Later pod events while it waits: no event, no write, the wake-up asked again.
    now[0] += 5
    assert await r.handle(restarted_leader(), held) == (False, None)
    assert woken[-1] == ("default/test-sample-0", 10.0)
    assert len(client.writes()) == 1
    # The wake-up reaches the leader, whose own containers never restarted.
    now[0] += 10
    recreating, event = await r.handle(quiet_leader(), held)
    assert recreating and event is not None and event.reason == c.EVENT_REASON_RECREATE_GROUP
    assert not r.recovery.holding(quiet_leader(), held)
    (_, annotations) = lws_patches(client)
    assert recreations(annotations)["0"] == {
        "recent": 3,
        "last": format_epoch(T0 + 15),
        "notBefore": format_epoch(T0 + 15 + 40),
    }


async def test_a_group_quiet_for_reset_after_is_recreated_at_once() -> None:
    now = [T0]
    client, r, woken = setup(now)
    old = {
        c.ANNOTATION_GROUP_RECREATIONS: json.dumps(
            {"0": {"recent": 6, "last": format_epoch(T0 - 600)}}
        )
    }
    recreating, _ = await r.handle(restarted_leader(), view(annotations=old))
    assert recreating and woken == []
    (annotations,) = lws_patches(client)
    assert recreations(annotations)["0"]["recent"] == 1


async def test_a_failed_delete_is_retried_without_counting_twice() -> None:
    now = [T0]
    client, r, _ = setup(now)
    client.fail[("delete", "pods")] = ApiError(500, {"message": "boom"})
    lws = view(budget=5)
    with pytest.raises(ApiError):
        await r.handle(restarted_leader(), lws)
    client.fail.clear()
    assert (await r.handle(restarted_leader(), lws))[0]
    assert len(lws_patches(client)) == 1 and len(client.calls_of("delete")) == 2


async def test_a_gone_leader_stops_its_hold() -> None:
    now = [T0]
    _, r, _ = setup(now)
    recent = {
        c.ANNOTATION_GROUP_RECREATIONS: json.dumps({"0": {"recent": 1, "last": format_epoch(T0)}})
    }
    lws = view(annotations=recent)
    await r.handle(restarted_leader(), lws)
    assert r.recovery.holding(restarted_leader(), lws)
    gauge = r.recovery.metrics.backing_off.labels("default", "test-sample")
    assert gauge._value.get() == 1
    r.recovery.forget(restarted_leader())
    assert gauge._value.get() == 0
    assert not r.recovery.holding(restarted_leader(), view())


async def test_a_restarted_controller_finds_the_wait_on_the_record() -> None:
    """The pod that failed is gone (a deleted worker): the leader alone, quiet, is
    recreated once the wait marked on the record is over."""
    now = [T0]
    client, r, woken = setup(now)
    entry = {"recent": 1, "last": format_epoch(T0 - 2), "pending": "uid-1"}
    marked = view(annotations={c.ANNOTATION_GROUP_RECREATIONS: json.dumps({"0": entry})})
    assert r.recovery.holding(quiet_leader(), marked)
    assert not r.recovery.holding(quiet_leader("uid-other"), marked)
    recreating, event = await r.handle(quiet_leader(), marked)
    assert not recreating and event is not None and woken == [("default/test-sample-0", 8.0)]
    assert client.writes() == []  # marked already
    now[0] += 8
    assert (await r.handle(quiet_leader(), marked))[0]
    assert [call.verb for call in client.writes()] == ["patch", "delete"]


async def test_an_unreadable_back_off_record_keeps_the_budget_counts() -> None:
    client, r, _ = setup([T0])
    broken = view(
        budget=5,
        annotations={
            c.ANNOTATION_GROUP_RESTART_COUNTS: '{"0": 1, "1": 6}',
            c.ANNOTATION_GROUP_RECREATIONS: "oops",
        },
    )
    assert (await r.handle(restarted_leader(), broken))[0]
    (annotations,) = lws_patches(client)
    assert json.loads(annotations[c.ANNOTATION_GROUP_RESTART_COUNTS] or "") == {"0": 2, "1": 6}


async def test_a_policy_that_stops_recreating_releases_the_wait() -> None:
    now = [T0]
    _, r, _ = setup(now)
    entry = {"recent": 1, "last": format_epoch(T0)}
    held = view(annotations={c.ANNOTATION_GROUP_RECREATIONS: json.dumps({"0": entry})})
    await r.handle(restarted_leader(), held)
    gauge = r.recovery.metrics.backing_off.labels("default", "test-sample")
    assert gauge._value.get() == 1
    body = lws_json()
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = c.RESTART_POLICY_NONE
    assert await r.handle(restarted_leader(), view_of(body)) == (False, None)
    assert gauge._value.get() == 0
