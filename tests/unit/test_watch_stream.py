"""Watch streams as bytes: the line splitter, and ApiClient.watch over an HTTP stream
cut into chunks anywhere."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from leaderworkerset.runtime.client import PODS, ApiClient, ApiError, LineSplitter

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


class Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def client(status: int, chunks: list[bytes], seen: list[httpx.Request]) -> ApiClient:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, stream=Chunks(chunks))

    transport = httpx.MockTransport(answer)
    return ApiClient(httpx.AsyncClient(transport=transport, base_url="https://api"), qps=0)


async def test_watch_yields_every_event_of_a_chunked_stream() -> None:
    seen: list[httpx.Request] = []
    chunks = [STREAM[i : i + 7] for i in range(0, len(STREAM), 7)]
    api = client(200, chunks, seen)
    events = [e async for e in api.watch(PODS, "ns", resource_version="5", timeout_seconds=9)]
    await api.close()
    assert events == EVENTS  # an ERROR event is the informer's to read, as before
    assert seen[0].url.path == "/api/v1/namespaces/ns/pods"
    assert dict(seen[0].url.params) == {
        "watch": "true",
        "resourceVersion": "5",
        "timeoutSeconds": "9",
        "allowWatchBookmarks": "true",
    }


async def test_watch_ends_with_a_last_event_lacking_its_newline() -> None:
    api = client(200, [STREAM.rstrip(b"\n")], [])
    assert [e async for e in api.watch(PODS)] == EVENTS
    await api.close()


async def test_watch_refused_with_410_raises_gone() -> None:
    status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    api = client(410, [orjson.dumps(status)], [])
    with pytest.raises(ApiError) as raised:
        async for _ in api.watch(PODS, "ns", resource_version="1"):
            pass
    await api.close()
    assert raised.value.gone and raised.value.message == "too old"
