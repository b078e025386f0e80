"""Polling a condition inside a unit test's event loop, with a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(cond: Callable[[], bool], what: str, within: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.001)
