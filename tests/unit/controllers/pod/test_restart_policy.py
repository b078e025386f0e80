"""GroupRestarter: a leader is deleted once per group restart, even when
the pod cache has not caught up with that deletion yet."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import pytest

from leaderworkerset.api import constants as c
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.pod.restart_policy import DELETED_LEADER_MEMORY, GroupRestarter
from leaderworkerset.group.view import view_of
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.fake_client import Call, FakeApiClient
from tests.toolkit.lws import lws_json

JSON = dict[str, Any]


def fake_client(fail: ApiError | None = None) -> FakeApiClient:
    client = FakeApiClient()

    async def pause(call: Call) -> None:
        await asyncio.sleep(0)  # let a concurrent reconcile run in between

    client.on_call = pause
    if fail is not None:
        client.fail[("delete", "pods")] = fail
    return client


def deletes(client: FakeApiClient) -> list[tuple[str, JSON | None]]:
    """The leaders deleted, with the preconditions of each delete."""
    return [(call.name, call.options["preconditions"]) for call in client.calls_of("delete")]


def restarted_leader(uid: str = "uid-1") -> JSON:
    """A leader pod whose container restarted, as the (stale) cache shows it: alive."""
    return {
        "metadata": {
            "name": "test-sample-0",
            "namespace": "default",
            "uid": uid,
            "labels": {
                c.LABEL_SET_NAME: "test-sample",
                c.LABEL_WORKER_INDEX: "0",
                c.LABEL_GROUP_INDEX: "0",
            },
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "restartCount": 1}]},
    }


def restarter(client: FakeApiClient, now: list[float]) -> GroupRestarter:
    # A restarting leader is its own leader: the caches are not consulted.
    return GroupRestarter(client, cast(LwsCaches, None), clock=lambda: now[0])


def on_pod_restart() -> JSON:
    body = lws_json()
    body["spec"]["leaderWorkerTemplate"]["restartPolicy"] = (
        c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    )
    return body


VIEW = view_of(on_pod_restart())


async def test_leader_deleted_once_while_cache_lags() -> None:
    client, now = fake_client(), [0.0]
    r = restarter(client, now)
    first = await r.handle(restarted_leader(), VIEW)
    assert first[0] and first[1] is not None
    assert first[1].reason == c.EVENT_REASON_RECREATE_GROUP
    # The cache still shows the leader alive: no second DELETE, no second event.
    assert await r.handle(restarted_leader(), VIEW) == (True, None)
    assert deletes(client) == [("test-sample-0", {"uid": "uid-1"})]
    # A new leader (new UID) of the same group is deleted again when it fails.
    second = await r.handle(restarted_leader("uid-2"), VIEW)
    assert second[1] is not None
    assert [uid for _, uid in deletes(client)] == [{"uid": "uid-1"}, {"uid": "uid-2"}]


async def test_concurrent_reconciles_delete_once() -> None:
    client, now = fake_client(), [0.0]
    r = restarter(client, now)
    results = await asyncio.gather(
        r.handle(restarted_leader(), VIEW), r.handle(copy.deepcopy(restarted_leader()), VIEW)
    )
    assert len(deletes(client)) == 1
    assert sorted(e is not None for _, e in results) == [False, True]


async def test_failed_delete_is_retried_and_memory_expires() -> None:
    client, now = fake_client(ApiError(500, {"message": "boom"})), [0.0]
    r = restarter(client, now)
    with pytest.raises(ApiError):
        await r.handle(restarted_leader(), VIEW)
    client.fail.clear()
    assert (await r.handle(restarted_leader(), VIEW))[1] is not None
    assert len(deletes(client)) == 2
    now[0] = DELETED_LEADER_MEMORY + 1
    assert (await r.handle(restarted_leader("uid-3"), VIEW))[1] is not None
    assert "uid-1" not in r.deleted_leaders
