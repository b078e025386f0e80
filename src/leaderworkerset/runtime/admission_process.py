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
- A few bytes of anonymous shared memory the child writes: whether it serves, the
  port it listens on, when it last said so, and a digest of the certificate it
  presents. The manager's readiness and its wait for a rotated certificate read them.
- A socket pair the manager asks the child's metrics over, each question numbered
  so that an answer that came too late is told apart; the manager's `/metrics`
  carries the webhook families from it (`ChildMetrics`) and the child's CPU and
  memory. No file is made for either, so a read-only root filesystem is fine.
- Signals, sent through a pidfd (never to a pid already reaped and reused): SIGUSR1
  asks the child to stop, after the manager has stopped its controllers as the
  in-process server stopped; SIGHUP to reload its certificate now. The child ignores
  SIGTERM and SIGINT, which a terminal or an init that signals the whole process
  group sends to both: the manager leads.
- Exits: the manager fails when the child exits unasked (the container restarts, as
  for any other failure of a part every replica needs), and the child stops when the
  manager is gone. One task reaps the child; everything else reads what it found.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import logging
import mmap
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from leaderworkerset.runtime import metrics

log = logging.getLogger("admission-process")

# The webhook families the child records; the manager's own copies of them stay empty
# and are left out of its registry while a child serves.
WEBHOOK_FAMILY_PREFIXES = ("controller_runtime_webhook_", "lws_webhook_")
STOP_SIGNAL = signal.SIGUSR1
RELOAD_SIGNAL = signal.SIGHUP
# Held back while forking, so that none reaches the child before it has chosen what
# to do with it (the manager's own handlers would apply until then).
_FORK_BLOCKED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, STOP_SIGNAL}
# How often the child publishes its state, and how long a scrape waits for it.
REPORT_PERIOD = 0.1
SCRAPE_TIMEOUT = 2.0
# A child that has not reported for this long is stuck, and not ready.
REPORT_STALE = 10.0
_NUMBER = 8  # bytes of a question's number, and of an answer's length
_DIGEST_SIZE = 32
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class AdmissionExitedError(RuntimeError):
    """The admission process ended while the manager ran."""


def certificate_digest(cert: bytes | None) -> bytes:
    return hashlib.sha256(cert).digest() if cert else bytes(_DIGEST_SIZE)


class _State(ctypes.Structure):
    """Written by the child only, read by the manager: each field is one aligned
    store, and a reader that catches the digest mid-write reads it again later."""

    _fields_ = [
        ("serving", ctypes.c_bool),
        ("port", ctypes.c_int),
        # time.monotonic() of the last report: CLOCK_MONOTONIC, the same in both.
        ("reported_at", ctypes.c_double),
        ("digest", ctypes.c_char * _DIGEST_SIZE),
    ]


class ChildLink:
    """What the child is given: where to report, its end of the metrics channel, and
    how to learn it should stop."""

    def __init__(self, state: _State, metrics_channel: socket.socket) -> None:
        self._state = state
        self.metrics_channel = metrics_channel

    def report(self, *, serving: bool, port: int, certificate: bytes | None) -> None:
        state = self._state
        state.port = port
        state.digest = certificate_digest(certificate)
        state.serving = serving
        state.reported_at = time.monotonic()

    def parent_gone(self) -> int:
        """A file descriptor that turns readable when the manager's process ends."""
        parent = multiprocessing.parent_process()
        if parent is None:
            raise RuntimeError("not an admission process")
        return parent.sentinel

    def on_stop_and_reload(
        self, loop: asyncio.AbstractEventLoop, stop: Callable[[], None], reload: Callable[[], None]
    ) -> None:
        """Call `stop` when the manager asks or is gone, `reload` when it asks."""
        gone = self.parent_gone()

        def parent_ended() -> None:
            # The sentinel stays readable: watched on, it would call this at every turn.
            loop.remove_reader(gone)
            stop()

        loop.add_reader(gone, parent_ended)
        loop.add_signal_handler(STOP_SIGNAL, stop)
        loop.add_signal_handler(RELOAD_SIGNAL, reload)


ChildMain = Callable[[ChildLink], int]


async def answer_metrics(link: ChildLink, render: Callable[[], bytes]) -> None:
    """The child's side of the metrics channel: each question's number comes back
    with the answer's length and the exposition text, until the manager is gone."""
    reader, writer = await asyncio.open_connection(sock=link.metrics_channel)
    try:
        while True:
            try:
                number = await reader.readexactly(_NUMBER)
            except asyncio.IncompleteReadError:
                return
            body = render()
            writer.write(number + len(body).to_bytes(_NUMBER, "big") + body)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def _run_child(main: ChildMain, link: ChildLink, manager_end: socket.socket) -> None:
    # Its copy of the manager's end would keep the channel open after the manager.
    manager_end.close()
    # The manager handles SIGTERM and Ctrl-C for both, then asks this process to stop
    # (STOP_SIGNAL: until `main` handles it, its default action ends the process).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # A reload asked before `main` handles it must not end the process; the server
    # reads the files when it starts anyway.
    signal.signal(RELOAD_SIGNAL, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORK_BLOCKED)
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
        # MAP_SHARED and anonymous: the child writes the same pages after the fork.
        self._memory = mmap.mmap(-1, ctypes.sizeof(_State))
        self._state = _State.from_buffer(self._memory)
        self._channel, child_end = socket.socketpair()
        link = ChildLink(self._state, child_end)
        ctx = multiprocessing.get_context("fork")
        self._process = ctx.Process(
            target=_run_child,
            args=(main, link, self._channel),
            name="lws-admission",
            daemon=True,
        )
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _FORK_BLOCKED)
        try:
            self._process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        child_end.close()
        self._pidfd = os.pidfd_open(self.pid)
        self._returncode: int | None = None
        self._stopping = False
        self._exited: asyncio.Future[int] | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._metrics: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._metrics_lock: asyncio.Lock | None = None
        self._metrics_closed = False
        self._question = 0
        # (number, length) of an answer whose text a scrape gave up waiting for.
        self._pending: tuple[int, int] | None = None
        log.info("admission process started", extra={"pid": self.pid})

    @property
    def pid(self) -> int:
        return int(self._process.pid or 0)

    @property
    def port(self) -> int:
        return int(self._state.port)

    @property
    def running(self) -> bool:
        """Not reaped yet (once reaped, its pid may be another process's)."""
        return self._returncode is None

    async def start(self) -> None:
        """Reap the child from the manager's loop when it ends."""
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[int] = loop.create_future()
        self._exited = exited
        sentinel = self._process.sentinel

        def on_exit() -> None:
            loop.remove_reader(sentinel)
            self._reaper = loop.create_task(self._reap(exited), name="admission-reaper")

        loop.add_reader(sentinel, on_exit)

    async def _reap(self, exited: asyncio.Future[int]) -> None:
        # The only wait for this pid: a second one could take its status away. The
        # sentinel closes as the child exits, a moment before it can be reaped.
        await asyncio.to_thread(self._process.join)
        code = self._process.exitcode
        self._returncode = -1 if code is None else code
        os.close(self._pidfd)
        if not exited.done():
            exited.set_result(self._returncode)

    def exited(self) -> asyncio.Future[int] | None:
        """Done when the child has ended (after start())."""
        return self._exited

    def unasked_exit(self) -> str | None:
        """Why the manager must stop: the child ended though nobody asked it to."""
        if self._stopping or self._returncode is None:
            return None
        return f"the admission process exited with code {self._returncode}"

    def _send(self, sig: signal.Signals) -> None:
        if self._returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def is_serving(self) -> bool:
        """Alive, serving, and saying so lately (a child whose loop is stuck stops)."""
        return self.not_serving_reason() is None

    def not_serving_reason(self) -> str | None:
        if self._returncode is not None:
            return f"the admission process exited with code {self._returncode}"
        silent = time.monotonic() - self._state.reported_at
        if silent > REPORT_STALE:
            return f"the admission process has not reported for {silent:.0f}s"
        if not self._state.serving:
            return "the admission process does not serve: no serving certificate loaded"
        return None

    def certificate_digest(self) -> bytes:
        return bytes(self._state.digest)

    def reload_certificates(self) -> bool:
        """Ask the child to load the files now (it also watches them); the answer comes
        through `serves_certificate`."""
        if not self._stopping:
            self._send(RELOAD_SIGNAL)
        return True

    async def serves_certificate(self, cert: bytes, timeout: float) -> bool:  # noqa: ASYNC109
        wanted = certificate_digest(cert)
        deadline = time.monotonic() + timeout
        while True:
            if self._returncode is not None:
                raise AdmissionExitedError(
                    f"the admission process exited with code {self._returncode}"
                )
            if self.certificate_digest() == wanted and self._state.serving:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(REPORT_PERIOD / 2)

    async def stop(self, deadline: float) -> None:
        """Ask the child to stop, give in-flight reviews `deadline` seconds, then
        SIGKILL."""
        self._stopping = True
        self._metrics_closed = True
        try:
            exited = self._exited
            self._send(STOP_SIGNAL)
            if exited is None:
                # Never started: nothing else waits for the child here.
                await asyncio.to_thread(self._process.join, max(0.1, deadline))
                if self._process.exitcode is None:
                    self._process.kill()
                    await asyncio.to_thread(self._process.join, 5)
                return
            try:
                await asyncio.wait_for(asyncio.shield(exited), max(0.1, deadline))
            except TimeoutError:
                log.warning("the admission process did not stop in time; killing it")
                self._send(signal.SIGKILL)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(exited), 5)
        finally:
            if self._metrics is not None:
                self._metrics[1].close()
            self._channel.close()

    async def metrics_text(self) -> str:
        """The child's exposition text; one question at a time on the channel."""
        if self._metrics_lock is None:
            self._metrics_lock = asyncio.Lock()
        async with self._metrics_lock:
            if self._metrics_closed:
                raise OSError("the admission process's metrics channel is closed")
            if self._metrics is None:
                self._metrics = await asyncio.open_connection(sock=self._channel)
            reader, writer = self._metrics
            self._question += 1
            wanted = self._question
            try:
                async with asyncio.timeout(SCRAPE_TIMEOUT):
                    writer.write(wanted.to_bytes(_NUMBER, "big"))
                    await writer.drain()
                    return await self._answer_to(reader, wanted)
            except (asyncio.IncompleteReadError, ConnectionError):
                self._metrics_closed = True
                raise

    async def _answer_to(self, reader: asyncio.StreamReader, wanted: int) -> str:
        # readexactly takes nothing until all it asked for has come, so a scrape that
        # times out leaves the stream at a header or inside the answer `_pending` is.
        while True:
            if self._pending is None:
                head = await reader.readexactly(2 * _NUMBER)
                number = int.from_bytes(head[:_NUMBER], "big")
                self._pending = (number, int.from_bytes(head[_NUMBER:], "big"))
            number, length = self._pending
            text = await reader.readexactly(length)
            self._pending = None
            if number == wanted:
                return text.decode()
            # The answer to a scrape that stopped waiting: dropped.


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
            families = webhook_families(text)
        except Exception as exc:
            # Whatever happened to the child's, the manager's own metrics are served.
            log.info("could not read the admission process's metrics: %s", exc)
            self._families = []
            return
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families
        if self.process.running:
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
