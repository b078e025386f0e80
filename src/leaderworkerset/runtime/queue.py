"""client-go's rate-limited work queue of object keys.

A key added many times while it waits is handed out once; a key added while a
worker holds it is handed out again only after that worker calls ``done``, so
two workers never reconcile the same object at once. Failed keys come back
after a per-key exponential backoff; ``add_after`` brings a key back later.

Time comes from a :class:`Clock`, so tests run on a fake one that timers fire
from synchronously, with nothing to sleep for.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Protocol

from leaderworkerset.runtime.metrics import RuntimeMetrics

# -- time ------------------------------------------------------------------------


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer: ...


class RealClock:
    """Monotonic time; timers on the running event loop."""

    def now(self) -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        delay = max(0.0, when - time.monotonic())
        return asyncio.get_running_loop().call_later(delay, callback)


# -- rate limiters -----------------------------------------------------------------


class RateLimiter(Protocol):
    def when(self, key: str) -> float:
        """How long to wait before handing ``key`` out again; counts a failure."""
        ...

    def forget(self, key: str) -> None: ...

    def num_requeues(self, key: str) -> int: ...


class ExponentialRateLimiter:
    """``base * 2**failures``, capped: client-go's ItemExponentialFailureRateLimiter."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base = base
        self.cap = cap
        self._failures: dict[str, int] = {}

    def when(self, key: str) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if failures > 64:  # 2**failures would overflow a float long before mattering
            return self.cap
        return float(min(self.cap, self.base * 2.0**failures))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """An overall token bucket across all keys, so a mass failure cannot stampede."""

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock or RealClock()
        self._tokens = float(burst)
        self._stamp: float | None = None

    def when(self, key: str) -> float:
        now = self._clock.now()
        if self._stamp is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        # Tokens may go negative: each one below zero is a reservation further out.
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: str) -> None:
        return None

    def num_requeues(self, key: str) -> int:
        return 0


class MaxOfRateLimiter:
    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: str) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: str) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_rate_limiter(clock: Clock | None = None) -> RateLimiter:
    """controller-runtime's default: per-key 5 ms .. 1000 s, overall 10 qps burst 100."""
    return MaxOfRateLimiter(
        ExponentialRateLimiter(0.005, 1000.0), BucketRateLimiter(10.0, 100, clock)
    )


# -- the queue ---------------------------------------------------------------------

_HANDED_OUT_PRUNE_AT = 4096


class WorkQueue:
    """De-duplicating, delaying, rate-limited queue of string keys.

    Workers loop ``key = await q.get()`` (None once shut down), process, then
    ``q.done(key)``; on failure ``q.add_rate_limited(key)``, on success
    ``q.forget(key)``.
    """

    def __init__(
        self,
        name: str,
        *,
        controller: str | None = None,
        rate_limiter: RateLimiter | None = None,
        clock: Clock | None = None,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        self.name = name
        self._clock: Clock = clock or RealClock()
        self.rate_limiter = rate_limiter or default_rate_limiter(self._clock)
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: dict[str, float] = {}
        self._queued_at: dict[str, float] = {}
        self._waiting: dict[str, float] = {}
        self._heap: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._timer: Timer | None = None
        self._timer_at = 0.0
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        # When each paced key was last handed out; kept only once add_paced is used.
        self._handed_out: dict[str, float] = {}
        self._longest_pace = 0.0

        labels = {"name": name, "controller": controller or name}
        self.metrics = metrics = metrics or RuntimeMetrics()
        self._depth = metrics.workqueue_depth.labels(**labels)
        self._adds = metrics.workqueue_adds.labels(**labels)
        self._latency = metrics.workqueue_latency.labels(**labels)
        self._work_duration = metrics.workqueue_work_duration.labels(**labels)
        self._retries = metrics.workqueue_retries.labels(**labels)
        # Computed when scraped, like client-go's periodic update, without a task;
        # a weak reference so the registry does not keep dead queues alive.
        ref = weakref.ref(self)
        metrics.workqueue_unfinished_work.labels(**labels).set_function(
            lambda: q.unfinished_work() if (q := ref()) is not None else 0.0
        )
        metrics.workqueue_longest_running.labels(**labels).set_function(
            lambda: q.longest_running() if (q := ref()) is not None else 0.0
        )

    # -- state -------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys ready to be handed out (not those waiting for a delay or in process)."""
        return len(self._queue)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def processing(self) -> frozenset[str]:
        return frozenset(self._processing)

    def num_requeues(self, key: str) -> int:
        return self.rate_limiter.num_requeues(key)

    def unfinished_work(self) -> float:
        now = self._clock.now()
        return sum(now - start for start in self._processing.values())

    def longest_running(self) -> float:
        now = self._clock.now()
        return max((now - start for start in self._processing.values()), default=0.0)

    # -- adding --------------------------------------------------------------------

    def add(self, key: str) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._adds.inc()
        if key in self._processing:
            return  # handed out again by done()
        self._enqueue(key)

    def add_after(self, key: str, delay: float) -> None:
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        ready_at = self._clock.now() + delay
        current = self._waiting.get(key)
        if current is not None and current <= ready_at:
            return
        self._waiting[key] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), key))
        self._arm()

    def add_paced(self, key: str, interval: float) -> None:
        """Add `key`, but not sooner than `interval` seconds after it was last handed
        out. A lone event is not delayed; a stream of them (a scale-up's pod status
        changes) becomes one pass per interval instead of passes back to back."""
        if self._shutting_down or key in self._dirty:
            return
        self._longest_pace = max(self._longest_pace, interval)
        started = self._handed_out.get(key)
        wait = 0.0 if started is None else started + interval - self._clock.now()
        if wait > 0:
            self.add_after(key, wait)
        else:
            self.add(key)

    def add_rate_limited(self, key: str) -> None:
        self._retries.inc()
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: str) -> None:
        self.rate_limiter.forget(key)

    # -- handing out ------------------------------------------------------------------

    async def get(self) -> str | None:
        """The next key, exclusively until ``done(key)``; None once shut down."""
        while not self._queue and not self._shutting_down:
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._getters:
                    self._getters.remove(waiter)
                elif not waiter.cancelled():
                    self._wake_one()  # pass on the wake-up this getter will not use
                raise
        if self._shutting_down:
            return None
        key = self._queue.popleft()
        now = self._clock.now()
        self._depth.set(len(self._queue))
        queued_at = self._queued_at.pop(key, None)
        if queued_at is not None:
            self._latency.observe(now - queued_at)
        self._processing[key] = now
        self._dirty.discard(key)
        if self._longest_pace:
            self._remember_hand_out(key, now)
        return key

    def _remember_hand_out(self, key: str, now: float) -> None:
        self._handed_out[key] = now
        if len(self._handed_out) > _HANDED_OUT_PRUNE_AT:
            # Keys handed out longer ago than any pace would not be held back anyway.
            horizon = now - self._longest_pace
            self._handed_out = {k: t for k, t in self._handed_out.items() if t > horizon}

    def done(self, key: str) -> None:
        started = self._processing.pop(key, None)
        if started is None:
            return
        self._work_duration.observe(self._clock.now() - started)
        if key in self._dirty and not self._shutting_down:
            self._enqueue(key)

    # -- shutting down --------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop handing out keys; ``get`` returns None from now on."""
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # -- internals --------------------------------------------------------------------

    def _enqueue(self, key: str) -> None:
        self._queue.append(key)
        self._queued_at[key] = self._clock.now()
        self._depth.set(len(self._queue))
        self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _arm(self) -> None:
        if not self._heap or self._shutting_down:
            return
        ready_at = self._heap[0][0]
        if self._timer is not None:
            if self._timer_at <= ready_at:
                return
            self._timer.cancel()
        self._timer = self._clock.call_at(ready_at, self._fire)
        self._timer_at = ready_at

    def _fire(self) -> None:
        self._timer = None
        now = self._clock.now()
        while self._heap and self._heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(self._heap)
            # Entries superseded by an earlier add_after of the same key are stale.
            if self._waiting.get(key) == ready_at:
                del self._waiting[key]
                self.add(key)
        self._arm()
