"""Releasing the lease: when the API server cannot be reached it gives up quietly (the
manager is stopping, and the lease then simply expires); when the lease changed since
it was seen, it is released from what the server holds, unless another took it."""

from __future__ import annotations

import aiohttp
import pytest

from leaderworkerset.api.resources import LEASES
from leaderworkerset.runtime.client import ApiError
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


def lease(holder: str) -> dict[str, object]:
    return {
        "metadata": {"name": "lease", "namespace": "ns"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


async def test_a_release_that_meets_its_own_late_renewal_is_made_from_the_fresh_lease() -> None:
    """The shutdown cancelled a renewal the API server had already stored: the lease
    this process saw is one version behind, the release conflicts, and is made again
    from what the server holds."""
    client = FakeApiClient()
    seen = client.put(LEASES, lease("me"))
    client.put(LEASES, lease("me"))  # the renewal whose answer never arrived
    elector = LeaderElector(
        client, LeaderElectionConfig(namespace="ns", name="lease", identity="me")
    )
    elector._lease = seen
    assert await elector.release() is True
    stored = client.stored(LEASES, "lease", "ns")
    assert stored is not None and stored["spec"]["holderIdentity"] == ""
    assert len(client.calls_of("replace")) == 2


async def test_a_lease_another_took_meanwhile_is_left_to_it() -> None:
    client = FakeApiClient()
    seen = client.put(LEASES, lease("me"))
    client.put(LEASES, lease("standby"))
    elector = LeaderElector(
        client, LeaderElectionConfig(namespace="ns", name="lease", identity="me")
    )
    elector._lease = seen
    assert await elector.release() is True
    stored = client.stored(LEASES, "lease", "ns")
    assert stored is not None and stored["spec"]["holderIdentity"] == "standby"
    assert len(client.calls_of("replace")) == 1


async def test_every_lease_write_is_counted_apart_from_the_reconcilers_writes() -> None:
    client = FakeApiClient()
    elector = LeaderElector(
        client, LeaderElectionConfig(namespace="ns", name="counted", identity="me")
    )
    counted = elector.metrics.lease_writes.labels(name="counted")
    before = counted._value.get()
    assert await elector._try_acquire_or_renew()  # no lease yet: a create
    assert await elector._try_acquire_or_renew()  # ours: a renewal
    assert await elector.release()
    writes = len(client.calls_of("create")) + len(client.calls_of("replace"))
    assert writes == 3
    assert counted._value.get() - before == writes


@pytest.mark.parametrize(
    ("error", "counted"),
    [(ApiError(409, {"message": "conflict"}, "PUT", "/x"), 1), (OSError(111), 0)],
    ids=["answered", "no-answer"],
)
async def test_a_lease_write_counts_when_an_answer_came_back(
    error: Exception, counted: int
) -> None:
    """As rest_client_requests_total counts: an error answer is a request made, a
    connection that never answered is not."""
    client = FakeApiClient()
    client.put(LEASES, lease("me") | {"metadata": {"name": "answered", "namespace": "ns"}})
    client.fail[("replace", "leases")] = error
    elector = LeaderElector(
        client, LeaderElectionConfig(namespace="ns", name="answered", identity="me")
    )
    gauge = elector.metrics.lease_writes.labels(name="answered")
    before = gauge._value.get()
    assert await elector._try_acquire_or_renew() is False
    assert gauge._value.get() - before == counted


async def test_a_leader_renews_without_reading_and_reads_again_after_a_conflict() -> None:
    client = FakeApiClient()
    elector = LeaderElector(
        client, LeaderElectionConfig(namespace="ns", name="fast", identity="me")
    )
    slow = elector.metrics.leader_election_slowpath.labels(name="fast")
    assert await elector._try_acquire_or_renew()
    elector._start_leading()
    gets = len(client.calls_of("get"))
    for _ in range(3):
        assert await elector._try_acquire_or_renew()
    assert len(client.calls_of("get")) == gets  # three renewals, no read
    assert slow._value.get() == 0
    # Someone else wrote the lease (a standby's takeover after a pause, say): the
    # renewal of the version held conflicts, the lease is read, and it is theirs.
    taken = client.stored(LEASES, "fast", "ns")
    assert taken is not None
    client.put(LEASES, {**taken, "spec": {**taken["spec"], "holderIdentity": "standby"}})
    assert not await elector._try_acquire_or_renew()
    assert slow._value.get() == 1
    assert len(client.calls_of("get")) == gets + 1
    assert elector.observed_holder == "standby"
