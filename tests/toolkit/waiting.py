"""Polling a condition with a deadline, the one way tests wait (no sleeps as
synchronisation).

`eventually` polls inside a test's event loop. The probe may be a plain function (it
reads in-memory state, which only changes when other tasks run, so it is cheap to
check on nearly every loop turn) or a coroutine function (it usually asks the API
server, so it is checked less often). `eventually_blocking` is the same for tests
that run no event loop, `stays` asserts that something keeps holding for a while, and
`retrying` repeats an API call that a restarting API server may refuse for a moment.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiError

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
    ignoring: tuple[type[BaseException], ...] = ...,
) -> T: ...


@overload
async def eventually(
    probe: Callable[[], T | None],
    what: str = ...,
    *,
    within: float = ...,
    interval: float | None = ...,
    ignoring: tuple[type[BaseException], ...] = ...,
) -> T: ...


async def eventually(
    probe: Callable[[], object],
    what: str = "condition",
    *,
    within: float = 30.0,
    interval: float | None = None,
    ignoring: tuple[type[BaseException], ...] = (),
) -> object:
    """Call ``probe`` until it returns something truthy and return that; fail with the
    last value seen once ``within`` seconds have passed. An exception of a type in
    ``ignoring`` counts as a falsy answer (e.g. a server that is not up yet)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        awaited = False
        try:
            result = probe()
            awaited = inspect.isawaitable(result)
            last = await result if inspect.isawaitable(result) else result
        except ignoring as exc:
            last = exc
        else:
            if last:
                return last
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        if interval is not None:
            pause = interval
        else:
            pause = AWAITED_INTERVAL if awaited else PLAIN_INTERVAL
        await asyncio.sleep(pause)


async def stays(
    probe: Callable[[], Awaitable[Any]], *, seconds: float, what: str, interval: float = 0.2
) -> None:
    """Assert `probe` holds on every poll for `seconds` (an observation window, not a
    wait: the positive outcome is checked by `eventually` afterwards)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        value = await probe()
        assert value, f"{what} stopped holding: {value!r}"
        await asyncio.sleep(interval)


def eventually_blocking(
    probe: Callable[[], T | None],
    what: str = "condition",
    *,
    within: float = 30.0,
    interval: float = 0.1,
) -> T:
    """:func:`eventually` for a test without an event loop: the probe blocks (a
    subprocess, a synchronous request), so polls are spaced by ``interval``."""
    deadline = time.monotonic() + within
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


# What an API server still starting (or just restarted) may answer for a moment.
TRANSIENT_STATUSES = (429, 500, 503, 504)


async def retrying(
    call: Callable[[], Awaitable[T]], within: float = 60.0, interval: float = 0.1
) -> T:
    """Repeat ``call`` while it fails the way a server warming up fails (no connection,
    or a transient status), for at most ``within`` seconds; other errors are raised at
    once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            return await call()
        except (ApiError, *TRANSPORT_ERRORS) as exc:
            transient = not isinstance(exc, ApiError) or exc.status in TRANSIENT_STATUSES
            if not transient or loop.time() > deadline:
                raise
        await asyncio.sleep(interval)
