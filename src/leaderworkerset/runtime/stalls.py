"""A thread that notices when the process stopped running Python, and why.

An admission the webhook answers in a fraction of a millisecond still arrives late,
or times out, when the process serving it is not running at all: its container has
used up its CPU quota for the scheduling period (CFS throttling under a CPU limit),
or the node's cores are taken by other work. The webhook's and the controllers' own
histograms only show this as an unexplained tail. A thread that does nothing but
sleep a short period sees every such stop as lateness when it wakes, whatever the
other threads were doing, so its lateness is the stop.

The process's CPU time over the same interval (every thread's) tells the two kinds
of stop apart. A process that was not scheduled used next to no CPU while the probe
was late: "starved". One that ran, but where some thread kept the interpreter from
the probe (a long C call holding the GIL, a garbage collection), used about as much
CPU as the lateness: "busy". Half the lateness divides them. The CPU counted also
covers the period itself, so a process that was busy up to the moment it was
stopped (as a throttled one is) can read "busy" for a stop not much longer than the
period; longer stops, the ones that hurt an admission, are told apart.

The period is short enough to catch stops that matter to a webhook and long enough
that waking costs nothing measurable; the threshold sits above the interpreter's
switch interval and the timer slack a loaded machine adds to any sleep, so an
ordinary late wakeup is not a stall. The thread waits on an Event rather than
sleeping so that stop() returns at once instead of after a period.
"""

from __future__ import annotations

import threading
import time

from leaderworkerset.runtime.metrics import RuntimeMetrics

PERIOD = 0.02
THRESHOLD = 0.01

STARVED = "starved"
BUSY = "busy"


def classify(lateness: float, cpu: float) -> str | None:
    """The cause of a wakeup `lateness` seconds late, over an interval in which the
    process used `cpu` seconds of CPU; None when it was not late enough to count."""
    if lateness <= THRESHOLD:
        return None
    return STARVED if cpu < lateness / 2 else BUSY


class StallProbe:
    """The running probe; stop() ends its thread."""

    def __init__(self, metrics: RuntimeMetrics) -> None:
        self._stall = metrics.process_stall
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stall-probe", daemon=True)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def _run(self) -> None:
        while True:
            started, cpu_started = time.perf_counter(), time.process_time()
            if self._stopping.wait(PERIOD):
                return
            lateness = time.perf_counter() - started - PERIOD
            cause = classify(lateness, time.process_time() - cpu_started)
            if cause is not None:
                self._stall.labels(cause).observe(lateness)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


def start_stall_probe(metrics: RuntimeMetrics) -> StallProbe:
    """Observe stalls into `metrics`' lws_process_stall_seconds until the handle is
    stopped."""
    probe = StallProbe(metrics)
    probe.thread.start()
    return probe
