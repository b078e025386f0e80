"""The admission webhooks in a process of their own, and the manager's handle on it.

The API server holds every pod create until the pod webhook answers, so the webhook's
latency is the cluster's. Served from a thread of the manager's process, a review
needs the GIL, and on a busy node the thread holding it (the manager's, decoding watch
events or reconciling) is often the one the OS has just taken off the CPU: the review
then waits for that thread's next time slice, tens of milliseconds, though the
webhook's own work takes one. Measured with `bench.webhook_load`: with three
processes spinning beside it, the pod webhook's p99 was 6 ms served by a process of
its own and 18-20 ms beside a manager thread busy half the time; the same reviews
also cost 0.67 ms of CPU each instead of 1.0 ms (no GIL hand-overs).

So `lws controller` forks the admission process at start-up, before it starts any
thread or event loop: a fork copies only the calling thread, and a lock another
thread held would stay held in the child. Forking then also shares the imported
code's memory between the two until either writes to it.

What the two share, and how:
- A few bytes of shared memory the child writes: whether it serves, the port it
  listens on, and a digest of the certificate it presents. The manager's readiness
  and its wait for a rotated certificate read them.
- A socket pair the manager asks the child's metrics over (no file, so a read-only
  root filesystem is fine); the manager's `/metrics` carries the webhook families
  from it (`ChildMetrics`) and the child's CPU and memory.
- Signals: SIGTERM asks the child to stop (after the manager has stopped its
  controllers, as the in-process server stopped), SIGHUP to reload its certificate
  now. The child ignores SIGINT, which a terminal sends to both: the manager leads.
- Exits: the manager fails when the child exits unasked (the container restarts, as
  for any other failure of a part every replica needs), and the child stops when the
  manager is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

log = logging.getLogger("admission-process")

# The webhook families the child records; the manager's own copies of them stay empty
# and are left out of its registry while a child serves.
WEBHOOK_FAMILY_PREFIXES = ("controller_runtime_webhook_", "lws_webhook_")
_LENGTH = 8  # bytes of the length that precedes a metrics answer
# How often the child publishes its state, and how long a scrape waits for it.
REPORT_PERIOD = 0.1
SCRAPE_TIMEOUT = 2.0
# A child that has not reported for this long is stuck, and not ready.
REPORT_STALE = 10.0
_DIGEST_SIZE = 32
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def certificate_digest(cert: bytes | None) -> bytes:
    return hashlib.sha256(cert).digest() if cert else bytes(_DIGEST_SIZE)


class _SharedState:
    """Written by the child only, read by the manager: each field is one aligned
    store, and a reader that catches a digest mid-write just reads it again later."""

    def __init__(self, ctx: Any) -> None:
        self.serving = ctx.RawValue(ctypes.c_bool, False)
        self.port = ctx.RawValue(ctypes.c_int, 0)
        # time.monotonic() of the last report: CLOCK_MONOTONIC, the same in both.
        self.reported_at = ctx.RawValue(ctypes.c_double, 0.0)
        self.digest = ctx.RawArray(ctypes.c_char, _DIGEST_SIZE)


@dataclass
class ChildLink:
    """What the child is given: where to report and how to learn it should stop."""

    _state: _SharedState
    # The child's end of the metrics channel: a byte asks, a length and the
    # exposition text answer.
    metrics_channel: socket.socket

    def report(self, *, serving: bool, port: int, certificate: bytes | None) -> None:
        self._state.port.value = port
        self._state.digest.raw = certificate_digest(certificate)
        self._state.serving.value = serving
        self._state.reported_at.value = time.monotonic()

    def parent_gone(self) -> int:
        """A file descriptor that turns readable when the manager's process ends."""
        parent = multiprocessing.parent_process()
        if parent is None:
            raise RuntimeError("not an admission process")
        return parent.sentinel


ChildMain = Callable[[ChildLink], int]


async def answer_metrics(link: ChildLink, render: Callable[[], bytes]) -> None:
    """The child's side of the metrics channel, until the manager closes it."""
    reader, writer = await asyncio.open_connection(sock=link.metrics_channel)
    try:
        while await reader.read(1):
            body = render()
            writer.write(len(body).to_bytes(_LENGTH, "big") + body)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def _run_child(main: ChildMain, link: ChildLink) -> None:
    # The manager handles Ctrl-C for both, then asks this process to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A reload asked before `main` handles SIGHUP must not end the process; the server
    # reads the files when it starts anyway.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    raise SystemExit(main(link))


class AdmissionProcess:
    """The manager's handle on the forked admission process. It stands where the
    in-process `WebhookServer` would: the manager starts it, asks whether it serves
    and which certificate it presents, and stops it."""

    needs_leader_election = False

    def __init__(self, main: ChildMain) -> None:
        if threading.active_count() > 1:
            raise RuntimeError(
                "the admission process must be forked before any other thread starts"
            )
        ctx = multiprocessing.get_context("fork")
        self._state = _SharedState(ctx)
        self._channel, child_end = socket.socketpair()
        link = ChildLink(self._state, child_end)
        self._process = ctx.Process(
            target=_run_child, args=(main, link), name="lws-admission", daemon=True
        )
        self._process.start()
        child_end.close()
        self._metrics: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._metrics_lock: asyncio.Lock | None = None
        self._metrics_broken = False
        self._stopping = False
        self._exited: asyncio.Future[int] | None = None
        self._reaper: asyncio.Task[None] | None = None
        log.info("admission process started", extra={"pid": self._process.pid})

    @property
    def pid(self) -> int:
        return int(self._process.pid or 0)

    @property
    def port(self) -> int:
        return int(self._state.port.value)

    async def start(self) -> None:
        """Watch for the child's exit from the manager's loop."""
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[int] = loop.create_future()
        self._exited = exited
        sentinel = self._process.sentinel

        def on_exit() -> None:
            # The sentinel closes as the child exits, a moment before it can be reaped.
            loop.remove_reader(sentinel)
            self._reaper = loop.create_task(reap(), name="admission-reaper")

        async def reap() -> None:
            await asyncio.to_thread(self._process.join, 5)
            if not exited.done():
                code = self._process.exitcode
                exited.set_result(-1 if code is None else code)

        loop.add_reader(sentinel, on_exit)

    def exited(self) -> asyncio.Future[int] | None:
        """Done when the child has ended (after start())."""
        return self._exited

    def unasked_exit(self) -> str | None:
        """Why the manager must stop: the child ended though nobody asked it to."""
        exited = self._exited
        if self._stopping or exited is None or not exited.done():
            return None
        return f"the admission process exited with code {exited.result()}"

    def is_serving(self) -> bool:
        """Alive, serving, and reporting so (a child whose loop is stuck stops reporting)."""
        fresh = time.monotonic() - self._state.reported_at.value < REPORT_STALE
        return fresh and self._process.is_alive() and bool(self._state.serving.value)

    def certificate_digest(self) -> bytes:
        return bytes(self._state.digest.raw)

    def reload_certificates(self) -> bool:
        """Ask the child to load the files now (it also watches them); the answer comes
        through `serves_certificate`."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGHUP)
        return True

    async def serves_certificate(self, cert: bytes, timeout: float) -> bool:  # noqa: ASYNC109
        wanted = certificate_digest(cert)
        deadline = time.monotonic() + timeout
        while self._process.is_alive():
            if self.certificate_digest() == wanted and self._state.serving.value:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(REPORT_PERIOD / 2)
        return False

    async def stop(self, deadline: float) -> None:
        """SIGTERM, `deadline` seconds for in-flight reviews, then SIGKILL."""
        self._stopping = True
        if self._exited is not None:
            asyncio.get_running_loop().remove_reader(self._process.sentinel)
        try:
            if self._process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGTERM)
                await asyncio.to_thread(self._process.join, max(0.1, deadline))
                if self._process.is_alive():
                    log.warning("the admission process did not stop in time; killing it")
                    self._process.kill()
            await asyncio.to_thread(self._process.join, 5)
        finally:
            if self._metrics is not None:
                self._metrics[1].close()
            self._channel.close()

    async def metrics_text(self) -> str:
        """The child's exposition text; one question at a time on the channel."""
        if self._metrics_lock is None:
            self._metrics_lock = asyncio.Lock()
        async with self._metrics_lock:
            if self._metrics_broken:
                raise OSError("the admission process's metrics channel was given up")
            if self._metrics is None:
                self._metrics = await asyncio.open_connection(sock=self._channel)
            reader, writer = self._metrics
            try:
                async with asyncio.timeout(SCRAPE_TIMEOUT):
                    writer.write(b"?")
                    await writer.drain()
                    length = int.from_bytes(await reader.readexactly(_LENGTH), "big")
                    return (await reader.readexactly(length)).decode()
            except BaseException:
                # An answer cut short would be read as the next one's start: the
                # channel is given up, and scrapes go on without the child's families.
                writer.close()
                self._metrics_broken = True
                raise


class ChildMetrics(Collector):
    """The admission process's webhook families and its CPU and memory, for the
    manager's registry. `refresh()` scrapes the child (on the manager's loop, before
    the registry is encoded); `collect()` yields the last scrape."""

    def __init__(self, process: AdmissionProcess) -> None:
        self.process = process
        self._families: list[Metric] = []

    async def refresh(self) -> None:
        try:
            text = await self.process.metrics_text()
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            # A scrape still answers with the rest; the webhook families go missing.
            log.info("could not read the admission process's metrics: %s", exc)
            self._families = []
            return
        self._families = webhook_families(text)

    def collect(self) -> Iterator[Metric]:
        yield from self._families
        yield from _process_families(self.process.pid)


def webhook_families(text: str) -> list[Metric]:
    """The webhook families of an exposition text."""
    families = []
    for family in text_string_to_metric_families(text):
        # The parser names counters without their _total suffix; the samples keep it.
        # A `_created` series parses as a family of its own: left out, as
        # controller-runtime has none.
        name = family.name
        if name.startswith(WEBHOOK_FAMILY_PREFIXES) and not name.endswith("_created"):
            families.append(family)
    return families


def _process_families(pid: int) -> Iterator[Metric]:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        statm = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:
        return
    cpu = CounterMetricFamily(
        "lws_admission_process_cpu_seconds",
        "User and system CPU time of the admission (webhook) process.",
    )
    cpu.add_metric([], (int(stat[11]) + int(stat[12])) / _CLK_TCK)
    yield cpu
    rss = GaugeMetricFamily(
        "lws_admission_process_resident_memory_bytes",
        "Resident memory of the admission (webhook) process, pages it shares with the "
        "manager's process included.",
    )
    rss.add_metric([], int(statm[1]) * _PAGE_SIZE)
    yield rss


def export_child_metrics(
    process: AdmissionProcess, registry: Any, before_collect: list[Any]
) -> ChildMetrics:
    """Serve the child's webhook families from the manager's registry in place of the
    manager's own (which stay empty while the child serves)."""
    from leaderworkerset.runtime import metrics

    own_families = (
        metrics.WEBHOOK_REQUESTS,
        metrics.WEBHOOK_LATENCY,
        metrics.WEBHOOK_IN_FLIGHT,
        metrics.WEBHOOK_CONNECTIONS,
    )
    for own in own_families:
        with contextlib.suppress(KeyError):
            registry.unregister(own)
    collector = ChildMetrics(process)
    registry.register(collector)
    before_collect.append(collector.refresh)
    return collector
