"""The event recorder's series: a repeat within the finish window patches the series,
a series quiet for longer is forgotten (a later repeat creates a new Event), and
forgetting looks at the oldest series first."""

from __future__ import annotations

from typing import Any

import pytest

from leaderworkerset.runtime.events import NORMAL, EventRecorder


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Writes:
    """Stands in for the API client: records creates and patches of Events."""

    def __init__(self) -> None:
        self.created: list[str] = []
        self.patched: list[tuple[str, int]] = []

    async def create(self, resource: Any, body: dict[str, Any]) -> dict[str, Any]:
        name = f"event-{len(self.created)}"
        self.created.append(body["reason"])
        return {**body, "metadata": {"name": name, "namespace": "default"}}

    async def patch(self, resource: Any, name: str, patch: Any, namespace: str) -> None:
        self.patched.append((name, patch["series"]["count"]))


POD = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "default"}}


@pytest.fixture
def clock() -> Clock:
    return Clock()


async def record(recorder: EventRecorder, reason: str) -> None:
    recorder.event(POD, NORMAL, reason, "Act", f"note of {reason}")
    await recorder.flush()


async def test_series_quiet_past_the_window_are_forgotten_oldest_first(clock: Clock) -> None:
    writes = Writes()
    recorder = EventRecorder(writes, "test", finish_window=60.0, clock=clock)  # type: ignore[arg-type]
    await recorder.start()
    try:
        await record(recorder, "A")
        clock.now += 30
        await record(recorder, "B")
        clock.now += 20
        await record(recorder, "A")  # a repeat: patched, and A is now the newest series
        assert writes.created == ["A", "B"]
        assert writes.patched == [("event-0", 2)]
        clock.now += 50  # B quiet for 70 s, A for 50 s
        await record(recorder, "C")
        assert sorted(key[2] for key in recorder._series) == ["A", "C"]
        await record(recorder, "B")  # B's series was forgotten: a new Event
        await record(recorder, "A")  # A's was not: its series goes on
        assert writes.created == ["A", "B", "C", "B"]
        assert writes.patched[-1] == ("event-0", 3)
    finally:
        await recorder.stop(1.0)
