"""The simulator's pod queue is idle (what settle() waits for) only once no key is queued
or held by a worker; a key waiting out a delay is not work yet."""

from __future__ import annotations

import asyncio

from lws_localcluster.nodesim.workqueue import PodQueue


async def test_idle_only_once_every_key_is_done() -> None:
    queue = PodQueue()
    assert queue.idle
    queue.add("ns/a")
    assert not queue.idle
    key = await queue.get()
    assert key == "ns/a" and not queue.idle
    queue.add("ns/a")  # dirtied while a worker holds it: handed out again after
    queue.done("ns/a")
    assert not queue.idle
    assert await queue.get() == "ns/a"
    queue.done("ns/a")
    assert queue.idle
    async with asyncio.timeout(1):
        await queue.wait_idle()
    queue.shutdown()


async def test_a_delayed_key_is_not_work_until_its_time() -> None:
    queue = PodQueue()
    queue.add_after("ns/a", 3600)
    assert queue.idle and queue.waiting == 1
    queue.add_rate_limited("ns/b")  # a failed sync's retry, 0.1 s out
    assert queue.idle
    async with asyncio.timeout(5):
        assert await queue.get() == "ns/b"
    assert not queue.idle
    queue.done("ns/b")
    assert queue.idle
    queue.shutdown()
