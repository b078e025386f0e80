"""The node simulator's pod watch (the runtime's informer, as the simulator sets it up)
resumes at once after a watch the API server ended early but that brought events (how
its cache drops a consumer that falls behind), and backs off from one that brought none."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lws_localcluster.nodesim.cache import pod_informer

from tests.toolkit.waiting import eventually


class ShortWatches:
    """An API whose every watch brings one event and ends, as a dropped slow watcher's."""

    def __init__(self, events_per_watch: int) -> None:
        self.events_per_watch = events_per_watch
        self.watches: list[str | None] = []
        self.version = 10

    async def list(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"items": [], "metadata": {"resourceVersion": str(self.version)}}

    async def watch(
        self, *args: Any, resource_version: str | None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        self.watches.append(resource_version)
        await asyncio.sleep(0)  # a connection's round trip: the loop runs others
        for _ in range(self.events_per_watch):
            self.version += 1
            pod = {"metadata": {"name": "p", "resourceVersion": str(self.version)}}
            yield {"type": "MODIFIED", "object": pod}


class Watching:
    def __init__(self, api: ShortWatches) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.informer = pod_informer(api)  # type: ignore[arg-type]
        self.informer.add_handler(
            lambda o: self.seen.append(("ADDED", o)),
            lambda old, o: self.seen.append(("MODIFIED", o)),
        )
        self.informer.start()

    async def stop(self) -> None:
        await self.informer.stop()


async def test_a_watch_that_brought_events_is_resumed_at_once_from_its_last_version() -> None:
    api = ShortWatches(events_per_watch=1)
    watching = Watching(api)
    # Backing off from 0.5 s, doubling, two seconds would hold three watches.
    await eventually(lambda: len(api.watches) >= 50, "50 watches", within=2.0)
    await watching.stop()
    assert api.watches[:3] == ["10", "11", "12"]
    assert len(watching.seen) >= len(api.watches) - 1


async def test_a_watch_that_ends_at_once_with_nothing_backs_off() -> None:
    api = ShortWatches(events_per_watch=0)
    watching = Watching(api)
    with pytest.raises(AssertionError):
        await eventually(lambda: len(api.watches) >= 4, "4 watches", within=1.0)
    await watching.stop()
    assert 1 <= len(api.watches) <= 3
