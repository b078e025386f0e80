"""`lws demo` and `lws dev up` install the CRDs and wait until the API server serves
watches of them, so the controller they start next does not meet 429 "storage is
(re)initializing" (its first watches used to, and `make run` printed every retry)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lws_localcluster.deploy import CRD_RESOURCES, wait_watchable

from leaderworkerset.api.disaggregatedset.crd import build_disaggregatedset_crd, build_scaler_crd
from leaderworkerset.api.leaderworkerset.crd import build_crd
from leaderworkerset.api.resources import LEADERWORKERSETS, Resource
from leaderworkerset.runtime.client import ApiError

JSON = dict[str, Any]


def initializing() -> ApiError:
    return ApiError(429, {"reason": "TooManyRequests", "message": "storage is (re)initializing"})


class Server:
    """LIST answers a version; WATCH fails with the queued errors, then stays open."""

    def __init__(self, *failures: ApiError) -> None:
        self.failures = list(failures)
        self.watches: list[tuple[str, str | None]] = []

    async def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> JSON:
        return {"metadata": {"resourceVersion": "42"}, "items": []}

    async def watch(
        self, resource: Resource, namespace: str | None = None, **options: Any
    ) -> AsyncIterator[JSON]:
        self.watches.append((resource.plural, options.get("resource_version")))
        if self.failures:
            raise self.failures.pop(0)
        await asyncio.Event().wait()  # open, and quiet
        yield {}


async def test_waits_while_the_storage_initializes() -> None:
    server = Server(initializing(), initializing())
    await wait_watchable(server, [LEADERWORKERSETS])  # type: ignore[arg-type]
    assert server.watches == [("leaderworkersets", "42")] * 3


async def test_a_served_watch_returns_at_once() -> None:
    server = Server()
    await asyncio.wait_for(wait_watchable(server, [LEADERWORKERSETS]), 2)  # type: ignore[arg-type]
    assert len(server.watches) == 1


async def test_other_errors_and_a_storage_that_never_comes_raise() -> None:
    forbidden = ApiError(403, {"reason": "Forbidden"})
    with pytest.raises(ApiError) as caught:
        await wait_watchable(Server(forbidden), [LEADERWORKERSETS])  # type: ignore[arg-type]
    assert caught.value.status == 403
    never = Server(*[initializing()] * 100)
    with pytest.raises(ApiError) as caught:
        await wait_watchable(never, [LEADERWORKERSETS], within=0.3)  # type: ignore[arg-type]
    assert caught.value.status == 429


def test_every_installed_crd_is_waited_for() -> None:
    names = {
        crd["metadata"]["name"]
        for crd in (build_crd(), build_disaggregatedset_crd(), build_scaler_crd())
    }
    assert set(CRD_RESOURCES) == names
