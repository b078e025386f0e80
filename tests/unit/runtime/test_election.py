"""Releasing the lease when the API server cannot be reached gives up quietly:
the manager is stopping, and the lease then simply expires."""

from __future__ import annotations

import aiohttp
import pytest

from leaderworkerset.runtime.election import LeaderElectionConfig, LeaderElector
from tests.toolkit.fake_client import FakeApiClient


@pytest.mark.parametrize(
    "error",
    [aiohttp.ServerDisconnectedError(), aiohttp.ClientConnectionError("refused"), OSError(111)],
)
async def test_a_release_that_cannot_reach_the_api_server_returns_false(error: Exception) -> None:
    client = FakeApiClient()
    client.fail[("replace", "leases")] = error
    config = LeaderElectionConfig(namespace="ns", name="lease", identity="me")
    elector = LeaderElector(client, config)
    elector._lease = {"metadata": {"name": "lease"}, "spec": {"holderIdentity": "me"}}
    assert await elector.release() is False
    assert len(client.calls_of("replace")) == 1
