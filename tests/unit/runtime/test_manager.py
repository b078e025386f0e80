"""The manager starts no runnable, controllers included, before every cache it was
given has synced, and fails when a cache does not sync in time."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from leaderworkerset.runtime.controller import Controller, Result
from tests.toolkit.manager import new_manager
from tests.toolkit.waiting import eventually

_names = itertools.count()


class LateCache:
    """A cache that finishes listing `turns` loop turns after it starts (never if None)."""

    def __init__(self, turns: int | None) -> None:
        self.turns = turns
        self.synced = asyncio.Event()
        self.stopped = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> object:
        if self.turns is not None:
            self._task = asyncio.create_task(self._list())
        return self._task

    async def _list(self) -> None:
        for _ in range(self.turns or 0):
            await asyncio.sleep(0)
        self.synced.set()

    async def stop(self) -> None:
        self.stopped = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    @property
    def has_synced(self) -> bool:
        return self.synced.is_set()

    async def wait_synced(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                await self.synced.wait()
        except TimeoutError:
            return False
        return True


class Recorder:
    """A runnable noting, when started, whether every cache had synced."""

    def __init__(self, caches: list[LateCache], *, leader_only: bool) -> None:
        self.caches = caches
        self.needs_leader_election = leader_only
        self.started_synced: list[bool] = []

    async def start(self) -> None:
        self.started_synced.append(all(cache.has_synced for cache in self.caches))

    async def stop(self, deadline: float) -> None:
        return None


async def test_no_runnable_starts_before_every_cache_synced(tmp_path: Path) -> None:
    caches = [LateCache(0), LateCache(50), LateCache(10)]
    reconciled: list[tuple[str, bool]] = []

    async def reconcile(key: str) -> Result | None:
        reconciled.append((key, all(cache.has_synced for cache in caches)))
        return None

    # The controller watches none of the caches: only the manager makes it wait.
    controller = Controller(f"test-late-cache-{next(_names)}", reconcile)
    controller.enqueue("ns/a")
    everywhere = Recorder(caches, leader_only=False)
    manager = new_manager(tmp_path)
    for i, cache in enumerate(caches):
        manager.add_cache(cache, name=f"cache-{i}")
    manager.add(controller)
    manager.add(everywhere)
    run = asyncio.create_task(manager.run())
    try:
        await eventually(lambda: bool(reconciled) or run.done(), "the first reconcile")
    finally:
        manager.request_stop()
        await asyncio.wait_for(run, 10)
    assert reconciled == [("ns/a", True)]
    assert everywhere.started_synced == [True]
    assert all(cache.stopped for cache in caches)


async def test_a_cache_not_synced_in_time_fails_the_manager(tmp_path: Path) -> None:
    synced, stuck = LateCache(0), LateCache(None)
    reconciled: list[str] = []

    async def reconcile(key: str) -> Result | None:
        reconciled.append(key)
        return None

    controller = Controller(f"test-stuck-cache-{next(_names)}", reconcile)
    controller.enqueue("ns/a")
    leader_work = Recorder([synced, stuck], leader_only=True)
    manager = new_manager(tmp_path, cache_sync_timeout=0.05)
    manager.add_cache(synced, name="synced")
    manager.add_cache(stuck, name="stuck")
    manager.add(controller)
    manager.add(leader_work)
    with pytest.raises(TimeoutError, match="cache stuck not synced"):
        await asyncio.wait_for(manager.run(), 10)
    assert reconciled == [] and leader_work.started_synced == []
    assert not controller.running
