"""A deduplicating work queue, like client-go's: a key is queued at most once, and a key
dirtied while a worker holds it is handed out again only after that worker is done.

This coalesces bursts of watch events for one pod into one sync and keeps two workers
from writing the same pod at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        # None entries wake workers up for shutdown.
        self._ready: asyncio.Queue[K | None] = asyncio.Queue()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._shutdown = False
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._dirty) + len(self._processing)

    def add(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        self._idle.clear()
        if key not in self._processing:
            self._ready.put_nowait(key)

    async def get(self) -> K | None:
        """The next key, or None once the queue is shut down."""
        key = await self._ready.get()
        if key is None or self._shutdown:
            return None
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._ready.put_nowait(key)
        elif not self._dirty and not self._processing:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Until no key is queued or being processed."""
        await self._idle.wait()

    def shutdown(self, workers: int) -> None:
        self._shutdown = True
        for _ in range(workers):
            self._ready.put_nowait(None)
