"""The stall probe: how a late wakeup is classified, and the thread observing real
stalls of both kinds into lws_process_stall_seconds."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.stalls import (
    BUSY,
    PERIOD,
    STARVED,
    THRESHOLD,
    classify,
    start_stall_probe,
)
from tests.toolkit.paths import REPO

SRC = REPO / "src"


def stalls(metrics: RuntimeMetrics, cause: str) -> float:
    value = metrics.registry.get_sample_value("lws_process_stall_seconds_count", {"cause": cause})
    return value or 0.0


def test_a_wakeup_within_the_threshold_is_no_stall() -> None:
    assert classify(0.0, 0.0) is None
    assert classify(-0.001, 0.0) is None
    assert classify(THRESHOLD, 0.0) is None
    assert classify(THRESHOLD, 1.0) is None


def test_a_stall_without_cpu_is_starved_and_with_cpu_busy() -> None:
    assert classify(0.1, 0.0) == STARVED
    assert classify(0.1, 0.049) == STARVED
    assert classify(0.1, 0.05) == BUSY
    assert classify(0.1, 0.12) == BUSY
    assert classify(THRESHOLD + 0.001, 0.0) == STARVED


def test_the_probe_sees_a_call_that_holds_the_interpreter_and_stops_at_once() -> None:
    # Sorting ints compares them in C without ever returning to the interpreter's
    # loop, so the probe cannot get the GIL back until the sort ends. On a machine
    # so loaded that the sort gets less than half a core the stall reads as starved,
    # hence the retries.
    numbers = list(range(500_000))
    random.Random(1).shuffle(numbers)
    metrics = RuntimeMetrics()
    before = stalls(metrics, BUSY)
    probe = start_stall_probe(metrics)
    try:
        deadline = time.monotonic() + 30
        while stalls(metrics, BUSY) == before:
            assert time.monotonic() < deadline, "no busy stall observed"
            sorted(numbers)
    finally:
        started = time.monotonic()
        probe.stop()
        stopped_in = time.monotonic() - started
    assert not probe.thread.is_alive()
    assert stopped_in < 1.0
    assert probe.thread.name == "stall-probe"


CHILD = textwrap.dedent(
    """
    import sys, time
    from leaderworkerset.runtime.metrics import RuntimeMetrics
    from leaderworkerset.runtime.stalls import start_stall_probe

    metrics = RuntimeMetrics()

    def starved():
        value = metrics.registry.get_sample_value(
            "lws_process_stall_seconds_count", {"cause": "starved"}
        )
        return int(value or 0)

    probe = start_stall_probe(metrics)
    print("ready", flush=True)
    for _ in sys.stdin:
        # The probe observes the stop once it has woken after SIGCONT.
        deadline = time.monotonic() + 5
        while starved() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        print(starved(), flush=True)
    probe.stop()
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")
def test_a_stopped_process_reads_as_starved() -> None:
    path = os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        observed = 0
        # A stop that lands before the probe's first wait began is not seen; another is.
        for _ in range(3):
            child.send_signal(signal.SIGSTOP)
            time.sleep(10 * PERIOD)  # the stall itself, not a wait for something
            child.send_signal(signal.SIGCONT)
            child.stdin.write("check\n")
            child.stdin.flush()
            observed = int(child.stdout.readline())
            if observed:
                break
        assert observed >= 1
        child.stdin.close()
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
