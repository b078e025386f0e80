"""Polling a condition inside a test's event loop, with a deadline.

One helper for unit and integration tests. The probe may be a plain function (it
reads in-memory state, which only changes when other tasks run, so it is cheap to
check on nearly every loop turn) or a coroutine function (it usually asks the API
server, so it is checked less often).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")

# Default pause between checks, by kind of probe.
PLAIN_INTERVAL = 0.001
AWAITED_INTERVAL = 0.1


@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    what: str = ...,
    *,
    within: float = ...,
    interval: float | None = ...,
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T | None],
    what: str = ...,
    *,
    within: float = ...,
    interval: float | None = ...,
) -> T: ...


async def eventually(
    probe: Callable[[], object],
    what: str = "condition",
    *,
    within: float = 30.0,
    interval: float | None = None,
) -> object:
    """Call ``probe`` until it returns something truthy and return that; fail with the
    last value seen once ``within`` seconds have passed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = probe()
        awaited = inspect.isawaitable(result)
        last = await result if inspect.isawaitable(result) else result
        if last:
            return last
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        if interval is not None:
            pause = interval
        else:
            pause = AWAITED_INTERVAL if awaited else PLAIN_INTERVAL
        await asyncio.sleep(pause)
