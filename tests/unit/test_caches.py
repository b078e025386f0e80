"""The LeaderWorkerSet cache keeps the view of each version it holds: built once as
the version enters the cache, replaced with it, gone with it. Reconcilers and the
webhooks read it there instead of decoding the object on every event."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from leaderworkerset import caches as caches_module
from leaderworkerset.api.leaderworkerset.view import LwsView, view_of
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import LEADERWORKERSETS, Resource
from leaderworkerset.caches import LwsCaches, build_caches
from tests.toolkit.caches import StaticLister, started
from tests.toolkit.lws import leaderworkerset
from tests.toolkit.waiting import eventually


class WatchedLister(StaticLister):
    """Lists the seeded objects; the LeaderWorkerSet watch sends what `send` is given."""

    def __init__(self, objects: list[JSON]) -> None:
        super().__init__(objects)
        self.events: asyncio.Queue[JSON] = asyncio.Queue()

    async def watch(
        self, resource: Resource, namespace: str | None = None, **kwargs: Any
    ) -> AsyncIterator[JSON]:
        if resource != LEADERWORKERSETS:
            await asyncio.Event().wait()
        while True:
            yield await self.events.get()

    def send(self, kind: str, obj: JSON) -> None:
        self.events.put_nowait({"type": kind, "object": copy.deepcopy(obj)})


def stored(version: str, replicas: int = 2, uid: str = "uid-a") -> JSON:
    return leaderworkerset(
        "a", "ns", replicas=replicas, metadata={"uid": uid, "resourceVersion": version}
    )


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The resourceVersion of every view the caches build."""
    built: list[str] = []

    def counting(lws: JSON) -> LwsView:
        built.append(str(lws["metadata"].get("resourceVersion")))
        return view_of(lws)

    monkeypatch.setattr(caches_module, "view_of", counting)
    return built


def cached(caches: LwsCaches) -> LwsView:
    view = caches.lws_view("ns", "a")
    assert view is not None
    return view


async def test_a_cached_version_is_read_once_however_often_it_is_asked_for(
    decodes: list[str],
) -> None:
    async with started(build_caches(WatchedLister([stored("7")]))) as caches:
        view = cached(caches)
        for _ in range(3):
            assert cached(caches) is view
            assert caches.lws_view_by_key("ns/a") is view
        assert decodes == ["7"]
        # The view carries the very object the cache holds.
        assert view.obj is caches.leaderworkersets.get("ns", "a")
        assert (view.name, view.uid, view.replicas) == ("a", "uid-a", 2)


async def test_an_update_replaces_the_view_with_the_object(decodes: list[str]) -> None:
    lister = WatchedLister([stored("7")])
    async with started(build_caches(lister)) as caches:
        first = cached(caches)
        lister.send("MODIFIED", stored("8", replicas=5))
        await eventually(lambda: cached(caches) is not first, "the update")
        view = cached(caches)
        # Never stale: whenever the cache holds the new object, the view is its own.
        assert view.obj is caches.leaderworkersets.get("ns", "a")
        assert (view.replicas, view.obj["metadata"]["resourceVersion"]) == (5, "8")
        assert decodes == ["7", "8"]


async def test_a_delete_takes_the_view_with_it(decodes: list[str]) -> None:
    lister = WatchedLister([stored("7")])
    async with started(build_caches(lister)) as caches:
        lister.send("DELETED", stored("9"))
        await eventually(lambda: caches.lws_view("ns", "a") is None, "the delete")
        assert caches.leaderworkersets.get("ns", "a") is None
        assert caches.lws_view_by_key("ns/a") is None


async def test_an_object_made_again_under_its_name_gets_a_view_of_its_own(
    decodes: list[str],
) -> None:
    lister = WatchedLister([stored("7")])
    async with started(build_caches(lister)) as caches:
        lister.send("ADDED", stored("9", replicas=3, uid="uid-b"))
        await eventually(lambda: cached(caches).uid == "uid-b", "the new object")
        assert cached(caches).replicas == 3
        assert cached(caches).obj is caches.leaderworkersets.get("ns", "a")


async def test_a_name_never_cached_has_no_view() -> None:
    async with started(build_caches(WatchedLister([]))) as caches:
        assert caches.lws_view("ns", "missing") is None


async def test_a_view_the_cache_could_not_build_is_built_by_the_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def failing_once(lws: JSON) -> LwsView:
        calls.append(str(lws["metadata"]["resourceVersion"]))
        if len(calls) == 1:
            raise ValueError("unreadable")
        return view_of(lws)

    monkeypatch.setattr(caches_module, "view_of", failing_once)
    async with started(build_caches(WatchedLister([stored("7")]))) as caches:
        view = cached(caches)
        assert view.obj is caches.leaderworkersets.get("ns", "a")
        assert calls == ["7", "7"]
