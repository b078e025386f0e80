"""Watch streams as bytes: the line splitter, and ApiClient.watch reading a real HTTP
stream cut into chunks anywhere."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import orjson
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from leaderworkerset.api.resources import PODS
from leaderworkerset.runtime.client import ApiClient, ApiError, LineSplitter
from tests.toolkit.api_server import Handler, api_server

EVENTS: list[dict[str, Any]] = [
    {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "1"}}},
    # Multi-byte UTF-8, and characters a text line splitter would break a line at:
    # NEL and the Unicode line separator travel raw inside JSON strings.
    {
        "type": "MODIFIED",
        "object": {
            "metadata": {"name": "b", "annotations": {"x": "é€😀 \u0085 \u2028 \x1c"}},
        },
    },
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}},
    {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}},
]
STREAM = b"".join(orjson.dumps(event) + b"\n" for event in EVENTS)


def split_all(chunks: list[bytes]) -> list[Any]:
    lines = LineSplitter()
    out = [orjson.loads(line) for chunk in chunks for line in lines.feed(chunk)]
    return out + [orjson.loads(line) for line in lines.flush()]


def test_a_stream_cut_at_every_byte() -> None:
    assert b"\xc3" in STREAM and "\u0085".encode() in STREAM
    for cut in range(len(STREAM) + 1):
        assert split_all([STREAM[:cut], STREAM[cut:]]) == EVENTS, cut
    assert split_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == EVENTS


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_a_stream_cut_anywhere(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    assert split_all([STREAM[a:b] for a, b in itertools.pairwise(bounds)]) == EVENTS


def test_a_last_line_without_newline_and_blank_lines() -> None:
    body = b"\n" + orjson.dumps(EVENTS[0]) + b"\r\n\r\n\n" + orjson.dumps(EVENTS[1])
    assert split_all([body]) == EVENTS[:2]
    assert split_all([]) == []
    assert split_all([b"", b"\n", b""]) == []


def streaming(code: int, chunks: list[bytes]) -> Handler:
    """Answers with `chunks`, each flushed on its own as the API server flushes events."""

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=code, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
            await asyncio.sleep(0)
        await response.write_eof()
        return response

    return handle


async def test_watch_yields_every_event_of_a_chunked_stream() -> None:
    chunks = [STREAM[i : i + 7] for i in range(0, len(STREAM), 7)]
    async with api_server(streaming(200, chunks)) as served:
        api = ApiClient(served.url, qps=0)
        events = [e async for e in api.watch(PODS, "ns", resource_version="5", timeout_seconds=9)]
        await api.close()
    assert events == EVENTS  # an ERROR event is the informer's to read, as before
    (seen,) = served.requests
    assert seen.path == "/api/v1/namespaces/ns/pods"
    assert dict(seen.query) == {
        "watch": "true",
        "resourceVersion": "5",
        "timeoutSeconds": "9",
        "allowWatchBookmarks": "true",
    }
    assert seen.headers["Accept"] == "application/json"


async def test_watch_ends_with_a_last_event_lacking_its_newline() -> None:
    async with api_server(streaming(200, [STREAM.rstrip(b"\n")])) as served:
        api = ApiClient(served.url, qps=0)
        assert [e async for e in api.watch(PODS)] == EVENTS
        await api.close()


async def test_watch_refused_with_410_raises_gone() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    async with api_server(streaming(410, [orjson.dumps(status)])) as served:
        api = ApiClient(served.url, qps=0)
        with pytest.raises(ApiError) as raised:
            async for _ in api.watch(PODS, "ns", resource_version="1"):
                pass
        await api.close()
    assert raised.value.gone and raised.value.message == "too old"


async def test_a_watch_left_early_frees_its_connection() -> None:
    """The consumer stops after one event of a stream that goes on: the response is
    closed, not left holding a pooled connection."""
    endless = [STREAM, *(b"\n" for _ in range(1000))]
    async with api_server(streaming(200, endless)) as served:
        api = ApiClient(served.url, qps=0)
        stream = api.watch(PODS)
        assert await anext(stream) == EVENTS[0]
        await stream.aclose()  # type: ignore[attr-defined]
        await api.close()
