"""Releasing the lease when the API server cannot be reached gives up quietly:
the manager is stopping, and the lease then simply expires."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from leaderworkerset.runtime.election import LeaderElectionConfig, LeaderElector


class Unreachable:
    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    async def replace(self, resource: Any, obj: Any) -> Any:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize(
    "error",
    [aiohttp.ServerDisconnectedError(), aiohttp.ClientConnectionError("refused"), OSError(111)],
)
async def test_a_release_that_cannot_reach_the_api_server_returns_false(error: Exception) -> None:
    client = Unreachable(error)
    config = LeaderElectionConfig(namespace="ns", name="lease", identity="me")
    elector = LeaderElector(client, config)  # type: ignore[arg-type]
    elector._lease = {"metadata": {"name": "lease"}, "spec": {"holderIdentity": "me"}}
    assert await elector.release() is False
    assert client.calls == 1
