"""The Hash hostnames held by live groups, kept from the pod cache's events, and the
webhook asking about drawn keys without scanning the LeaderWorkerSet's pods."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import PODS, Resource
from leaderworkerset.caches import LwsCaches
from leaderworkerset.group.options import ControllerOptions
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.webhooks.admission import pod_mutator
from leaderworkerset.webhooks.hostnames import IssuedHostnames, LiveHostnames, hostnames_in_use
from tests.toolkit.caches import seeded_caches
from tests.toolkit.lws import leaderworkerset
from tests.toolkit.pods import unadmitted_leader
from tests.toolkit.waiting import eventually

JSON = dict[str, Any]
NS = "ns"


class QueueLister:
    """Lists the seeded pods, then streams what the test puts in its queue."""

    def __init__(self, pods: list[JSON]) -> None:
        self.pods = pods
        self.events: asyncio.Queue[JSON] = asyncio.Queue()

    async def list(self, resource: Resource, namespace: str | None = None, **kw: Any) -> JSON:
        return {"metadata": {"resourceVersion": "1"}, "items": list(self.pods)}

    async def watch(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Any:
        while True:
            yield await self.events.get()


def member(name: str, key: str, lws: str = "lws", phase: str = "Running", rv: int = 1) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "resourceVersion": str(rv),
            "labels": {c.LABEL_SET_NAME: lws, c.LABEL_GROUP_KEY: key},
        },
        "status": {"phase": phase},
    }


def key(hostname: str) -> str:
    return hostname + "f" * 32


@contextlib.asynccontextmanager
async def started(pods: list[JSON]) -> AsyncIterator[tuple[Informer, QueueLister, LiveHostnames]]:
    lister = QueueLister(pods)
    informer = Informer(lister, PODS, label_indexes=[c.LABEL_SET_NAME])
    live = LiveHostnames(informer)
    informer.start()
    try:
        assert await informer.wait_synced(5)
        yield informer, lister, live
    finally:
        await informer.stop()


async def send(informer: Informer, lister: QueueLister, kind: str, pod: JSON) -> None:
    lister.events.put_nowait({"type": kind, "object": pod})
    version = pod["metadata"]["resourceVersion"]
    await eventually(lambda: informer.resource_version == version, f"{kind} {version}")


async def test_hostnames_follow_pod_events() -> None:
    seeded = [
        member("a-0", key("aaaaaaaa")),
        member("a-1", key("aaaaaaaa")),
        member("done", key("dddddddd"), phase="Failed"),
        member("other", key("bbbbbbbb"), lws="other"),
    ]
    async with started(seeded) as (informer, lister, live):
        assert live.holds(NS, "lws", "aaaaaaaa")
        assert not live.holds(NS, "lws", "dddddddd")  # finished pods hold nothing
        assert not live.holds(NS, "lws", "bbbbbbbb")  # another LWS's
        assert not live.holds("elsewhere", "lws", "aaaaaaaa")

        await send(informer, lister, "ADDED", member("c-0", key("cccccccc"), rv=2))
        assert live.holds(NS, "lws", "cccccccc")
        await send(informer, lister, "DELETED", member("a-0", key("aaaaaaaa"), rv=3))
        assert live.holds(NS, "lws", "aaaaaaaa")  # a-1 still holds it
        await send(
            informer, lister, "MODIFIED", member("a-1", key("aaaaaaaa"), phase="Failed", rv=4)
        )
        assert not live.holds(NS, "lws", "aaaaaaaa")
        await send(informer, lister, "MODIFIED", member("c-0", key("cccccccc"), lws="x", rv=5))
        assert not live.holds(NS, "lws", "cccccccc")  # relabelled away


async def test_hostnames_agree_with_a_scan_after_random_events() -> None:
    rng = random.Random(7)
    hostnames = [f"{i:08x}" for i in range(6)]
    async with started([]) as (informer, lister, live):
        assert not live.holds(NS, "lws", hostnames[0])  # followed from now on
        pods: dict[str, JSON] = {}
        for rv in range(2, 300):
            name = f"p{rng.randrange(12)}"
            if name in pods and rng.random() < 0.3:
                gone = pods.pop(name)
                gone["metadata"]["resourceVersion"] = str(rv)
                await send(informer, lister, "DELETED", gone)
                continue
            kind = "MODIFIED" if name in pods else "ADDED"
            phase = rng.choice(["Running", "Pending", "Succeeded"])
            pods[name] = member(name, key(rng.choice(hostnames)), phase=phase, rv=rv)
            await send(informer, lister, kind, pods[name])
            if rv % 25 == 0:
                expected = hostnames_in_use(LwsCaches.of_lws(informer, NS, "lws"))
                assert {h for h in hostnames if live.holds(NS, "lws", h)} == expected


async def test_a_hash_leader_admission_does_not_scan_the_lws_pods(monkeypatch: Any) -> None:
    scans: list[str] = []
    of_lws = LwsCaches.of_lws

    def counted(informer: Informer, namespace: str, lws_name: str) -> list[JSON]:
        scans.append(lws_name)
        return of_lws(informer, namespace, lws_name)

    monkeypatch.setattr(LwsCaches, "of_lws", staticmethod(counted))
    lws = leaderworkerset("lws", NS, groupIdentity=c.GROUP_IDENTITY_HASH)
    members = [member(f"m{i}", key(f"{i:08x}")) for i in range(50)]
    # Each leader's first draw collides with a live group, its second does not.
    drawn = iter(key(f"{i + j * 100:08x}") for i in range(20) for j in (0, 1))
    async with seeded_caches(lws, *members) as caches:
        mutate = pod_mutator(
            caches, ControllerOptions(), None, new_group_key=lambda ns: next(drawn)
        )
        for i in range(20):
            leader = unadmitted_leader()
            response = await mutate({"object": leader, "namespace": NS})
            assert response.allowed, response.result
            hostname = {"op": "add", "path": "/spec/hostname", "value": f"{i + 100:08x}"}
            assert hostname in (response.patch or [])
    assert scans == ["lws"]  # once, when the LWS was first asked about


def test_issued_hostnames_handed_out_again_are_kept_from_then_on() -> None:
    now = [0.0]
    issued = IssuedHostnames(memory=10.0, clock=lambda: now[0])
    issued.add(NS, "lws", "aaaaaaaa")
    now[0] = 5.0
    issued.add(NS, "lws", "aaaaaaaa")
    issued.add(NS, "lws", "bbbbbbbb")
    now[0] = 12.0
    assert issued.holds(NS, "lws", "aaaaaaaa") and issued.holds(NS, "lws", "bbbbbbbb")
    now[0] = 16.0
    assert not issued.holds(NS, "lws", "aaaaaaaa")
    assert issued.recent(NS, "lws") == set()


async def test_a_pass_that_fails_is_not_kept(monkeypatch: Any) -> None:
    async with started([member("a-0", key("aaaaaaaa"))]) as (informer, _, live):
        real = informer.by_index
        failures = iter([RuntimeError("set changed size during iteration")])

        def flaky(index: str, value: str) -> list[JSON]:
            failure = next(failures, None)
            if failure is not None:
                raise failure
            return real(index, value)

        monkeypatch.setattr(informer, "by_index", flaky)
        with contextlib.suppress(RuntimeError):
            live.holds(NS, "lws", "aaaaaaaa")
        assert live.followed() == 0
        # The next question counts afresh, and sees the live group.
        assert live.holds(NS, "lws", "aaaaaaaa")
