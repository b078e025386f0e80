"""The replacement reconciler removes the scheduling gates of the leaders it admits
many at a time, and a leader whose removal fails is not waited for."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.caches import LwsCaches
from leaderworkerset.controllers.replacement.reconciler import (
    UNGATE_IN_FLIGHT,
    UNGATED,
    ReplacementReconciler,
)
from leaderworkerset.runtime.client import ApiError
from tests.toolkit.fake_client import Call, FakeApiClient

KEY = "ns/lws"


def gated(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"schedulingGates": [{"name": c.SCHEDULING_GATE_GROUP_REPLACEMENT}]},
    }


class Patches:
    """The fake client's hook that holds every PATCH until `together` of them are in
    flight at once; a PATCH of a leader in `refuse` then meets a conflict, one of a
    leader in `broken` fails at once."""

    def __init__(
        self,
        together: int,
        refuse: frozenset[str] = frozenset(),
        broken: frozenset[str] = frozenset(),
    ) -> None:
        self.together, self.refuse, self.broken = together, refuse, broken
        self.in_flight = self.most = 0
        self.all_in = asyncio.Event()
        self.patched: list[str] = []

    async def __call__(self, call: Call) -> None:
        if call.verb != "patch":
            return
        if call.name in self.broken:
            raise ApiError(500, {"message": "etcd timeout"})
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight >= self.together:
            self.all_in.set()
        try:
            await self.all_in.wait()
        finally:
            self.in_flight -= 1
        if call.name in self.refuse:
            raise ApiError(409, {"message": "the gates changed"})
        self.patched.append(call.name)


def reconciler(patches: Patches) -> ReplacementReconciler:
    client = FakeApiClient()
    client.on_call = patches
    return ReplacementReconciler(client, cast(LwsCaches, None))


async def test_gates_go_many_at_a_time_and_no_more_than_the_bound() -> None:
    leaders = [gated(f"leader-{i}") for i in range(3 * UNGATE_IN_FLIGHT)]
    client = Patches(together=UNGATE_IN_FLIGHT)
    replacement = reconciler(client)
    names = [p["metadata"]["name"] for p in leaders]
    replacement.expectations.expect_deletions(KEY, UNGATED, names)
    # One at a time, the first PATCH would wait for the others for ever.
    assert await asyncio.wait_for(replacement._ungate_all(KEY, leaders), 5)
    assert client.most == UNGATE_IN_FLIGHT
    assert sorted(client.patched) == sorted(names)


async def test_a_refused_removal_is_not_waited_for_and_the_rest_go() -> None:
    leaders = [gated(name) for name in ("a", "b", "c")]
    client = Patches(together=3, refuse=frozenset({"b"}))
    replacement = reconciler(client)
    replacement.expectations.expect_deletions(KEY, UNGATED, ["a", "b", "c"])
    assert not await asyncio.wait_for(replacement._ungate_all(KEY, leaders), 5)
    assert sorted(client.patched) == ["a", "c"]
    assert replacement.ungating(KEY) == {"a", "c"}


async def test_an_error_is_raised_after_the_others_are_done() -> None:
    client = Patches(together=2, broken=frozenset({"b"}))
    replacement = reconciler(client)
    replacement.expectations.expect_deletions(KEY, UNGATED, ["a", "b", "c"])
    with pytest.raises(ApiError):
        await asyncio.wait_for(replacement._ungate_all(KEY, [gated(n) for n in ("a", "b", "c")]), 5)
    assert sorted(client.patched) == ["a", "c"]
    assert replacement.ungating(KEY) == {"a", "c"}
