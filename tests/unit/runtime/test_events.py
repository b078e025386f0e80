"""The event recorder's series: a repeat within the finish window patches the series,
a series quiet for longer is forgotten (a later repeat creates a new Event), and
forgetting looks at the oldest series first."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.events import NORMAL, EventRecorder
from tests.toolkit.fake_client import Call, FakeApiClient


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def event_writes() -> FakeApiClient:
    """The fake client, naming each created Event event-0, event-1, ..."""
    client = FakeApiClient()

    async def named(call: Call) -> dict[str, Any] | None:
        if call.verb != "create":
            return None
        name = f"event-{len(client.calls_of('create')) - 1}"
        return {**call.body, "metadata": {"name": name, "namespace": "default"}}

    client.on_call = named
    return client


def created(client: FakeApiClient) -> list[str]:
    return [call.body["reason"] for call in client.calls_of("create")]


def patched(client: FakeApiClient) -> list[tuple[str, int]]:
    return [(call.name, call.body["series"]["count"]) for call in client.calls_of("patch")]


POD = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default"}}


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def record(recorder: EventRecorder, reason: str) -> None:
    recorder.event(POD, NORMAL, reason, "Act", f"note of {reason}")
    await recorder.flush()


async def test_series_quiet_past_the_window_are_forgotten_oldest_first(clock: Clock) -> None:
    writes = event_writes()
    recorder = EventRecorder(writes, "test", finish_window=60.0, clock=clock)
    await recorder.start()
    try:
        await record(recorder, "A")
        clock.now += 30
        await record(recorder, "B")
        clock.now += 20
        await record(recorder, "A")  # a repeat: patched, and A is now the newest series
        assert created(writes) == ["A", "B"]
        assert patched(writes) == [("event-0", 2)]
        clock.now += 50  # B quiet for 70 s, A for 50 s
        await record(recorder, "C")
        assert sorted(key[2] for key in recorder._series) == ["A", "C"]
        await record(recorder, "B")  # B's series was forgotten: a new Event
        await record(recorder, "A")  # A's was not: its series goes on
        assert created(writes) == ["A", "B", "C", "B"]
        assert patched(writes)[-1] == ("event-0", 3)
    finally:
        await recorder.stop(1.0)


@pytest.mark.parametrize(
    ("causes", "level"),
    [([{"reason": "NamespaceTerminating"}], logging.DEBUG), ([], logging.ERROR)],
)
async def test_a_refused_event_is_an_error_unless_its_namespace_is_going(
    causes: list[dict[str, str]], level: int, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeApiClient()

    async def forbidden(call: Call) -> None:
        raise ApiError(403, {"reason": "Forbidden", "details": {"causes": causes}})

    client.on_call = forbidden
    recorder = EventRecorder(client, "test")
    await recorder.start()
    try:
        with caplog.at_level(logging.DEBUG, logger="events"):
            await record(recorder, "A")
    finally:
        await recorder.stop(1.0)
    assert [r.levelno for r in caplog.records if "could not write event" in r.message] == [level]
