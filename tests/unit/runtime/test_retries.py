"""Routine retries log at debug, a persistent failure warns once, a fault warns every
time: the classification, the streak, and an informer whose watch meets an API server
whose storage is still initializing (what `make run` used to print as warnings)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from leaderworkerset.runtime.client import ApiError
from leaderworkerset.runtime.retries import FailureStreak, routine_failure
from tests.toolkit.waiting import eventually
from tests.unit.runtime.test_cache import FakeServer, Gate, make

CACHE_LOGGER = "leaderworkerset.runtime.cache"


def initializing() -> ApiError:
    body = {"reason": "TooManyRequests", "message": "storage is (re)initializing"}
    return ApiError(429, body, "GET", "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets")


def forbidden() -> ApiError:
    return ApiError(403, {"reason": "Forbidden", "message": "no"}, "GET", "/api/v1/pods")


@pytest.mark.parametrize(
    ("failure", "routine"),
    [
        (None, True),  # a watch the server ended early
        (initializing(), True),
        (ApiError(410, {"reason": "Expired"}), True),
        (ApiError(503, {}), True),
        (ApiError(500, {"message": "etcdserver: leader changed"}), True),
        (ApiError(504, {}), True),
        (OSError("connection refused"), True),
        (TimeoutError(), True),
        (forbidden(), False),
        (ApiError(404, {"reason": "NotFound"}), False),
        (ApiError(401, {"reason": "Unauthorized"}), False),
        (ValueError("a bug"), False),
    ],
)
def test_routine_failures(failure: BaseException | None, routine: bool) -> None:
    assert routine_failure(failure) is routine


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def levels(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.levelname for r in caplog.records]


def test_routine_failures_log_at_debug_then_warn_once_after_n_tries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="streak")
    streak = FailureStreak(logging.getLogger("streak"), "pods", tries=4, seconds=60, clock=Clock())
    for _ in range(6):
        streak.failed(initializing(), "watch from %s ended, retrying in %.2fs", "301", 0.2)
    assert levels(caplog) == ["DEBUG", "DEBUG", "DEBUG", "WARNING", "DEBUG", "DEBUG"]
    first = caplog.records[0].getMessage()
    assert first == (
        "pods: watch from 301 ended, retrying in 0.20s: GET "
        "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets: 429 TooManyRequests: "
        "storage is (re)initializing"
    )
    assert "failing for 0s, 4 tries" in caplog.records[3].getMessage()

    caplog.clear()
    streak.succeeded("watching")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "pods: watching after 6 failed tries over 0s")
    ]
    # A new streak starts afresh: debug again, and a success after no warning says nothing.
    caplog.clear()
    streak.failed(None, "watch from %s ended, retrying in %.2fs", "302", 0.2)
    streak.succeeded()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "pods: watch from 302 ended, retrying in 0.20s: stream closed early")
    ]


def test_a_routine_failure_that_lasts_warns_once_after_t_seconds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="streak")
    clock = Clock()
    streak = FailureStreak(logging.getLogger("streak"), "pods", tries=100, seconds=30, clock=clock)
    for step in (0, 10, 29, 31, 60):
        clock.now = 100.0 + step
        streak.failed(OSError("connection refused"), "list failed, retrying in %.2fs", 1.0)
    assert levels(caplog) == ["DEBUG", "DEBUG", "DEBUG", "WARNING", "DEBUG"]
    assert "failing for 31s, 4 tries" in caplog.records[3].getMessage()


def test_a_fault_warns_every_time(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="streak")
    streak = FailureStreak(logging.getLogger("streak"), "pods", tries=2, seconds=60, clock=Clock())
    for _ in range(3):
        streak.failed(forbidden(), "list failed, retrying in %.2fs", 0.2)
    assert levels(caplog) == ["WARNING", "WARNING", "WARNING"]


async def watched_through(
    caplog: pytest.LogCaptureFixture, failures: list[Any]
) -> list[logging.LogRecord]:
    """The cache logger's records of an informer whose watch fails with `failures`
    before it sees an object added."""
    caplog.set_level(logging.DEBUG, logger=CACHE_LOGGER)
    server = FakeServer()
    server.watch_failures = failures
    informer = make(server, Gate())
    informer.start()
    await eventually(lambda: server.open_streams == 1, "the watch")
    server.create("a")
    await eventually(lambda: "ns/a" in informer, "the add")
    await informer.stop()
    return [r for r in caplog.records if r.name == CACHE_LOGGER]


async def test_an_informer_waits_out_initializing_storage_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache_records = await watched_through(caplog, [initializing()] * 3)
    retries = [r for r in cache_records if "storage is (re)initializing" in r.getMessage()]
    assert len(retries) == 3
    assert {r.levelname for r in retries} == {"DEBUG"}
    assert not [r for r in cache_records if r.levelno >= logging.WARNING]


async def test_an_informer_warns_once_when_the_failure_persists(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache_records = await watched_through(caplog, [initializing()] * 12)
    warnings = [r for r in cache_records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "(failing for" in warnings[0].getMessage()
    assert "storage is (re)initializing" in warnings[0].getMessage()
    recovered = [r for r in cache_records if "watching after 12 failed tries" in r.getMessage()]
    assert [r.levelname for r in recovered] == ["INFO"]


async def test_an_informer_warns_at_once_when_forbidden(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=CACHE_LOGGER)
    server = FakeServer()
    server.watch_failures = [forbidden()]
    informer = make(server, Gate())
    informer.start()
    await eventually(lambda: server.open_streams == 1, "the watch")
    await informer.stop()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "403 Forbidden" in warnings[0].getMessage()
