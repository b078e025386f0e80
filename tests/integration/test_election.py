"""Leader election against a real API server, with short timings."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from leaderworkerset.api.resources import EVENTS, LEASES
from leaderworkerset.runtime.client import ApiClient, ApiError
from leaderworkerset.runtime.election import LeaderElectionConfig, LeaderElector
from leaderworkerset.runtime.events import NORMAL, EventRecorder
from tests.toolkit.waiting import eventually

pytestmark = pytest.mark.cluster

LEASE = 3.0
RENEW = 2.0
RETRY = 0.5
# Timings for tests that must not lose the lease to a slow renewal on a loaded
# machine: renewals every RETRY, yet 10 s of API latency before stepping down.
PATIENT = (15.0, 10.0, 0.5)


@pytest_asyncio.fixture
async def api(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    client = ApiClient.from_kubeconfig(kubeconfig)
    yield client
    await client.close()


def elector(
    api: ApiClient,
    namespace: str,
    identity: str,
    *,
    release: bool = True,
    recorder: EventRecorder | None = None,
    name: str = "test-lease",
    timings: tuple[float, float, float] = (LEASE, RENEW, RETRY),
) -> LeaderElector:
    lease, renew, retry = timings
    config = LeaderElectionConfig(
        namespace=namespace,
        name=name,
        identity=identity,
        lease_duration=lease,
        renew_deadline=renew,
        retry_period=retry,
        release_on_cancel=release,
    )
    return LeaderElector(api, config, recorder=recorder)


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def lease_spec(api: ApiClient, namespace: str, name: str = "test-lease") -> dict[str, Any]:
    spec: dict[str, Any] = (await api.get(LEASES, name, namespace))["spec"]
    return spec


async def test_exactly_one_leader_at_any_time(api: ApiClient, namespace: str) -> None:
    a = elector(api, namespace, "a", timings=PATIENT)
    b = elector(api, namespace, "b", timings=PATIENT)
    tasks = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    try:
        leader = await eventually(
            lambda: next((e for e in (a, b) if e.is_leader()), None), "a leader", within=10
        )
        spec = await lease_spec(api, namespace)
        assert spec["holderIdentity"] == leader.identity
        assert spec["leaseDurationSeconds"] == 15
        # Sample across several renewals: never two leaders, and the leader holds on.
        # Longer than the renew deadline: a leader whose renewals failed would step down.
        end = time.monotonic() + PATIENT[1] + 2
        while time.monotonic() < end:
            assert [a.is_leader(), b.is_leader()].count(True) == 1
            assert leader.is_leader()
            await asyncio.sleep(0.05)
        renewed = await lease_spec(api, namespace)
        assert renewed["renewTime"] > spec["renewTime"]
        assert renewed["acquireTime"] == spec["acquireTime"]
        assert renewed.get("leaseTransitions", 0) == spec.get("leaseTransitions", 0)
    finally:
        for task in tasks:
            await stop(task)


async def test_takeover_after_a_crash_waits_for_expiry(api: ApiClient, namespace: str) -> None:
    # A lease long enough that waiting it out stands clear of a prompt takeover, and
    # of a late last renewal by a (which shortens b's wait) on a loaded machine.
    lease, _, retry = timings = (6.0, 4.0, RETRY)
    a = elector(api, namespace, "a", release=False, timings=timings)
    task_a = asyncio.create_task(a.run())
    await eventually(a.is_leader, "a to lead", within=10)
    b = elector(api, namespace, "b", timings=timings)
    task_b = asyncio.create_task(b.run())
    try:
        before = await lease_spec(api, namespace)
        # A crash: the campaign ends without releasing the lease.
        await stop(task_a)
        crashed = time.monotonic()
        await eventually(b.is_leader, "b to take over", within=lease + 10)
        waited = time.monotonic() - crashed
        # b last saw the record change about one jittered retry before the crash (or
        # one after), so it waits out nearly a full lease, then up to one more retry.
        assert lease - 2.2 * retry - 1.5 < waited < lease + 2 * 2.2 * retry + 5, waited
        after = await lease_spec(api, namespace)
        assert after["holderIdentity"] == "b"
        assert after["leaseTransitions"] == before.get("leaseTransitions", 0) + 1
        assert not a.is_leader()
    finally:
        await stop(task_b)


async def test_release_on_cancel_hands_over_at_once(api: ApiClient, namespace: str) -> None:
    # A long lease: a handover well inside it can only be the release's doing.
    a = elector(api, namespace, "a", release=True, timings=PATIENT)
    task_a = asyncio.create_task(a.run())
    await eventually(a.is_leader, "a to lead", within=10)
    b = elector(api, namespace, "b", timings=PATIENT)
    task_b = asyncio.create_task(b.run())
    try:
        await eventually(lambda: b.observed_holder == "a", "b to see a leading", within=5)
        await stop(task_a)
        stopped = time.monotonic()
        # What the API server stored for the release (b may take the lease before a GET
        # here could read it).
        released = a._lease["spec"] if a._lease else {}
        assert released["holderIdentity"] == ""
        assert released["leaseDurationSeconds"] == 1
        await eventually(b.is_leader, "b to take over", within=PATIENT[0])
        # Well inside the lease a crash would cost: the next retry finds the lease free.
        assert time.monotonic() - stopped < PATIENT[0] / 2
        after = await lease_spec(api, namespace)
        assert after["holderIdentity"] == "b"
        assert after["leaseTransitions"] == released.get("leaseTransitions", 0) + 1
    finally:
        await stop(task_b)


async def test_leader_that_cannot_renew_steps_down(api: ApiClient, namespace: str) -> None:
    # A lease far longer than the renew deadline, so that stepping down at the deadline
    # (as it must) is told apart from stepping down when the lease would run out.
    _, renew, retry = timings = (20.0, 4.0, RETRY)
    a = elector(api, namespace, "a", name="steal-me", timings=timings)
    gauge = a.metrics.leader_election_master.labels(name="steal-me")
    task = asyncio.create_task(a.run())
    try:
        await eventually(a.is_leader, "a to lead", within=10)
        assert gauge._value.get() == 1
        # Someone else now holds a valid lease (a partition healed the wrong way round):
        # every renewal fails, and a must stop leading within renewDeadline.
        while True:  # a's renewals race this update: try again on a conflict
            lease = await api.get(LEASES, "steal-me", namespace)
            lease["spec"]["holderIdentity"] = "usurper"
            lease["spec"]["leaseDurationSeconds"] = 60
            try:
                await api.replace(LEASES, lease)
                break
            except ApiError as exc:
                if not exc.conflict:
                    raise
        stolen = time.monotonic()
        await asyncio.wait_for(asyncio.shield(task), renew + retry + 10)
        assert time.monotonic() - stolen < renew + retry + 5  # well before 20 s
        assert not a.is_leader()
        assert gauge._value.get() == 0
        # Losing does not give the lease away to nobody: the usurper keeps it.
        assert (await lease_spec(api, namespace, "steal-me"))["holderIdentity"] == "usurper"
    finally:
        await stop(task)


async def test_timing_rules_are_enforced(api: ApiClient) -> None:
    bad = LeaderElectionConfig(namespace="x", name="y", lease_duration=2, renew_deadline=2)
    with pytest.raises(ValueError, match="leaseDuration must be greater than renewDeadline"):
        LeaderElector(api, bad)
    bad = LeaderElectionConfig(namespace="x", name="y", renew_deadline=2, retry_period=2)
    with pytest.raises(ValueError, match="retryPeriod"):
        LeaderElector(api, bad)


# --- events ------------------------------------------------------------------------


async def events_about(api: ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    items = (await api.list(EVENTS, namespace))["items"]
    return [e for e in items if e.get("regarding", {}).get("name") == name]


async def test_election_records_events_on_the_lease(api: ApiClient, namespace: str) -> None:
    recorder = EventRecorder(api, "test-controller", "test-instance")
    await recorder.start()
    a = elector(api, namespace, "a", recorder=recorder)
    task = asyncio.create_task(a.run())
    try:
        await eventually(a.is_leader, "a to lead", within=10)
        await asyncio.wait_for(recorder.flush(), 10)
        (event,) = await events_about(api, namespace, "test-lease")
        assert event["reason"] == "LeaderElection"
        assert event["note"] == "a became leader"
        assert event["regarding"]["kind"] == "Lease"
        assert event["reportingController"] == "test-controller"
        assert event["reportingInstance"] == "test-instance"
    finally:
        await stop(task)
        await recorder.stop(5)


async def test_repeated_events_become_a_series(api: ApiClient, namespace: str) -> None:
    recorder = EventRecorder(api, "test-controller")
    await recorder.start()
    cm = await api.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps",
        body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "subject"}},
    )
    cm.setdefault("apiVersion", "v1")
    cm.setdefault("kind", "ConfigMap")
    try:
        for _ in range(3):
            recorder.event(cm, NORMAL, "Poked", "Poke", "poked the config map")
        recorder.event(cm, NORMAL, "Poked", "Poke", "a different note")
        related = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": namespace}
        recorder.event(cm, "Bogus", "Poked", "Poke", "dropped: not Normal/Warning")
        recorder.event(cm, NORMAL, "Poked", "Poke", "x" * 5000, related=related)
        await asyncio.wait_for(recorder.flush(), 10)

        async def settled() -> list[dict[str, Any]] | None:
            events = await events_about(api, namespace, "subject")
            counts = sorted((e.get("series") or {}).get("count", 1) for e in events)
            return events if counts == [1, 1, 3] else None

        events: list[dict[str, Any]] = await eventually(
            settled, "one series of 3 and two single events", within=10
        )
        by_note = {e["note"][:20]: e for e in events}
        series = by_note["poked the config map"]
        assert series["series"]["lastObservedTime"] >= series["eventTime"]
        assert series["regarding"]["uid"] == cm["metadata"]["uid"]
        long = by_note["x" * 20]
        assert len(long["note"].encode()) == 1024
        assert long["related"]["name"] == "p"
        assert series["reportingInstance"].startswith("test-controller-")
    finally:
        await recorder.stop(5)
