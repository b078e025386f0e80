"""The simulator's pod queue: the controller runtime's :class:`WorkQueue` (a key queued at
most once, one worker per key, a key dirtied while a worker holds it handed out again
after, per-key backoff for failed syncs, delayed adds for pods that wait out a startup or
termination delay), with one thing added that a controller has no use for: a wait until
no sync is queued or running, behind :meth:`NodeSimulator.settle`, so that a test can tell
that the simulator has acted on everything it has seen.

Keys waiting out a delay (a backoff, a startup or termination deadline) do not count as
work: a pod held back for seconds must not hold up a test that only wants the simulator
to have caught up.

Its metrics are the runtime queue's, named ``nodesim``, on a registry of its own that
nothing serves, so the controller's ``/metrics`` never counts the simulator's work.
"""

from __future__ import annotations

import asyncio

from leaderworkerset.runtime.queue import ExponentialRateLimiter, WorkQueue

QUEUE_NAME = "nodesim"
# A failed sync is retried after 0.1 s, doubling up to 10 s: a kubelet's status write
# that failed is worth retrying soon, and the API server that refused it is back soon.
RETRY_BASE = 0.1
RETRY_CAP = 10.0


class PodQueue(WorkQueue):
    def __init__(self) -> None:
        # No overall token bucket, unlike a controller's: the simulator bounds its
        # concurrent writes itself, and a bucket would cap how fast thousands of pods start.
        super().__init__(QUEUE_NAME, rate_limiter=ExponentialRateLimiter(RETRY_BASE, RETRY_CAP))
        self._idle = asyncio.Event()
        self._idle.set()

    def add(self, key: str) -> None:
        # Delayed adds come through here too when their time comes.
        super().add(key)
        if len(self) or key in self.processing:
            self._idle.clear()

    def done(self, key: str) -> None:
        super().done(key)
        if not len(self) and not self.processing:
            self._idle.set()

    @property
    def idle(self) -> bool:
        return self._idle.is_set()

    async def wait_idle(self) -> None:
        """Until no key is queued or being processed."""
        await self._idle.wait()
