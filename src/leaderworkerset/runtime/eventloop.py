"""Which event loop the manager runs: asyncio's own, or uvloop's where it is installed.

uvloop's TLS transport is compiled; asyncio's is Python. At scale most of the webhook
thread's CPU and a good share of the manager loop's (reading watch streams) went to
TLS. uvloop took a median 12% off the webhook server's CPU per admission (pairs of
runs ranged from -29% to +8%; bench.webhook_load --loop), 25% off the API client's CPU
per watch event read one at a time, and 8% off the whole controller's CPU in a
150 x 8 scale-up, for 2-6 MiB more peak resident size.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable

EVENT_LOOPS = ("auto", "asyncio", "uvloop")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def uvloop_available() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def loop_factory(choice: str = "auto") -> LoopFactory:
    """How to make the loop `choice` names: "auto" is uvloop when installed."""
    if choice not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {choice!r}; one of {', '.join(EVENT_LOOPS)}")
    if choice == "asyncio" or (choice == "auto" and not uvloop_available()):
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        raise ValueError("event loop 'uvloop' asked for, but uvloop is not installed") from None
    return uvloop.new_event_loop


def same_kind(loop: asyncio.AbstractEventLoop) -> LoopFactory:
    """A factory of loops like `loop`: a thread serving beside the manager runs what it
    runs."""
    # A uvloop loop exists only once uvloop is imported: no import needed to tell.
    uvloop = sys.modules.get("uvloop")
    if uvloop is not None and isinstance(loop, uvloop.Loop):
        factory: LoopFactory = uvloop.new_event_loop
        return factory
    return asyncio.new_event_loop
