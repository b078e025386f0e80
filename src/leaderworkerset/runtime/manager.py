"""The manager: one process's API client, servers, certificates, election and runnables.

Every replica serves webhooks, probes and metrics and keeps the serving certificate
valid; only the elected leader runs the runnables that need leader election (the
controllers). Start-up and shutdown follow controller-runtime's order: runnables start
once certificates are ready and every cache has synced (and, for leader-elected ones,
once this replica leads); shutdown stops the leader-elected runnables first, then
caches and the rest, then the webhook server, releases the lease, and closes the probe
and metrics servers last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from leaderworkerset.runtime.certs import (
    CertRotator,
    CertRotatorOptions,
    CertsNotReadyError,
    TLSOptions,
)
from leaderworkerset.runtime.client import ApiClient
from leaderworkerset.runtime.election import LeaderElectionConfig, LeaderElector
from leaderworkerset.runtime.events import EventRecorder
from leaderworkerset.runtime.health import (
    DEFAULT_METRICS_CERT_DIR,
    Check,
    DelegatedAuth,
    HealthServer,
    MetricsServer,
)
from leaderworkerset.runtime.metrics import RuntimeMetrics
from leaderworkerset.runtime.webhook import WebhookServer

log = logging.getLogger("manager")


@runtime_checkable
class Runnable(Protocol):
    """Work the manager starts and stops.

    `start()` may return once the work runs in the background or may run until
    stopped. `stop(deadline)` stops taking new work and gives in-flight work `deadline`
    seconds. A runnable may say `needs_leader_election = False` to run on every replica;
    without the attribute it runs on the leader only (controller-runtime's default).
    """

    async def start(self) -> None: ...

    async def stop(self, deadline: float) -> None: ...


class Cache(Protocol):
    """An informer: started on every replica so a new leader starts with warm caches."""

    def start(self) -> object: ...

    async def stop(self) -> None: ...

    @property
    def has_synced(self) -> bool: ...

    # The name and meaning of `timeout` are those of the informer's method.
    async def wait_synced(self, timeout: float | None = None) -> bool: ...  # noqa: ASYNC109


class LeaderElectionLostError(RuntimeError):
    pass


@dataclass(frozen=True)
class ManagerOptions:
    namespace: str
    kubeconfig: Path | None = None
    qps: float = 500.0
    burst: int = 500
    user_agent: str = "lws"
    leader_election: LeaderElectionConfig | None = None
    # controller-runtime exits when the lease is lost; off, run() just returns.
    exit_on_leadership_loss: bool = True
    metrics_bind_address: str = "0"
    metrics_secure: bool = False
    metrics_cert_dir: Path = DEFAULT_METRICS_CERT_DIR
    health_probe_bind_address: str = "0"
    liveness_endpoint: str = "/healthz"
    readiness_endpoint: str = "/readyz"
    webhook_host: str = ""
    webhook_port: int = 9443
    cert_dir: Path = Path("/tmp/k8s-webhook-server/serving-certs")
    tls: TLSOptions = field(default_factory=TLSOptions)
    cert_rotator: CertRotatorOptions | None = None
    event_reporting_controller: str = ""
    graceful_shutdown_timeout: float = 30.0
    cache_sync_timeout: float = 120.0
    handle_signals: bool = True


@dataclass
class _Entry:
    runnable: Runnable
    leader_only: bool
    task: asyncio.Task[None] | None = None


class Manager:
    # One piece: the process's components, each built on the same client and metrics,
    # in the order later ones need earlier ones (the rotator the webhook server's reload).
    def __init__(
        self,
        options: ManagerOptions,
        client: ApiClient | None = None,
        *,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        """`metrics`: the process's families, which /metrics serves and whatever this
        manager builds (and the controllers added to it) updates; without, its own."""
        self.options = options
        self.metrics = metrics or RuntimeMetrics()
        self._own_client = client is None
        self.client = client or ApiClient.from_kubeconfig(
            options.kubeconfig,
            qps=options.qps,
            burst=options.burst,
            user_agent=options.user_agent,
            on_response=self.metrics.observe_client_response,
        )
        self.health = HealthServer(
            options.health_probe_bind_address,
            liveness_path=options.liveness_endpoint,
            readiness_path=options.readiness_endpoint,
        )
        self.metrics_server = MetricsServer(
            options.metrics_bind_address,
            secure=options.metrics_secure,
            auth=DelegatedAuth(self.client) if options.metrics_secure else None,
            tls=options.tls,
            cert_dir=options.metrics_cert_dir,
            metrics=self.metrics,
        )
        self.webhook_server = WebhookServer(
            cert_dir=options.cert_dir,
            host=options.webhook_host,
            port=options.webhook_port,
            tls=options.tls,
            metrics=self.metrics,
        )
        self.cert_rotator: CertRotator | None = None
        if options.cert_rotator is not None:
            self.cert_rotator = CertRotator(
                self.client,
                options.cert_rotator,
                on_written=self.webhook_server.reload_certificates_async,
            )
        self.recorder: EventRecorder | None = None
        if options.event_reporting_controller:
            self.recorder = EventRecorder(self.client, options.event_reporting_controller)
        self.elector: LeaderElector | None = None
        if options.leader_election is not None:
            self.elector = LeaderElector(
                self.client, options.leader_election, recorder=self.recorder, metrics=self.metrics
            )
        self._entries: list[_Entry] = []
        self._caches: list[tuple[str, Cache]] = []
        self._stop_requested = asyncio.Event()
        self._certs_ready = False
        self._leader_started = False
        self.health.add_healthz_check("ping", lambda: True)
        self.health.add_readyz_check("ping", lambda: True)
        self.health.add_readyz_check("webhook", self._webhook_ready)
        self.health.add_readyz_check("certs", self._certs_ready_check)

    def _webhook_ready(self) -> bool:
        if not self.webhook_server.is_serving():
            raise RuntimeError(f"no serving certificate loaded from {self.options.cert_dir}")
        return True

    def _certs_ready_check(self) -> bool:
        if not self._certs_ready:
            raise RuntimeError("waiting for the certificates to be generated and injected")
        return True

    # -- registration

    def add(self, runnable: Runnable, *, leader_election: bool | None = None) -> None:
        """Run `runnable` once certificates are ready; on the leader only unless it (or
        `leader_election=False`) says otherwise."""
        leader_only = leader_election
        if leader_only is None:
            leader_only = bool(getattr(runnable, "needs_leader_election", True))
        self._entries.append(_Entry(runnable, leader_only))

    def add_cache(self, cache: Cache, *, name: str = "") -> None:
        """Start `cache` on every replica; no runnable starts before it has synced."""
        label = name or str(getattr(cache, "name", f"cache-{len(self._caches) + 1}"))
        self._caches.append((label, cache))
        self.health.add_readyz_check(f"informer-sync-{label}", lambda: cache.has_synced)

    def add_healthz_check(self, name: str, check: Check) -> None:
        self.health.add_healthz_check(name, check)

    def add_readyz_check(self, name: str, check: Check) -> None:
        self.health.add_readyz_check(name, check)

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def request_stop(self) -> None:
        self._stop_requested.set()

    # -- running

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT (or request_stop()), then shut down gracefully.

        Raises LeaderElectionLostError when the lease was lost (unless configured not
        to), CertsNotReadyError when certificates never became ready, and the error of
        a runnable that failed.
        """
        loop = asyncio.get_running_loop()
        signals = self._install_signal_handlers(loop) if self.options.handle_signals else []
        failure: BaseException | None = None
        elector_task: asyncio.Task[None] | None = None
        try:
            await self.health.start()
            await self.metrics_server.start()
            if self.recorder is not None:
                await self.recorder.start()
            await self.webhook_server.start()
            if self.cert_rotator is not None:
                await self.cert_rotator.start()
            if self.elector is not None:
                elector_task = asyncio.create_task(self.elector.run(), name="leader-election")
            failure = await self._serve(elector_task)
        except Exception as exc:
            failure = exc
        finally:
            await self._shutdown(elector_task)
            for sig in signals:
                loop.remove_signal_handler(sig)
        if failure is not None:
            lost = isinstance(failure, LeaderElectionLostError)
            if lost and not self.options.exit_on_leadership_loss:
                return
            raise failure

    async def _serve(self, elector_task: asyncio.Task[None] | None) -> BaseException | None:
        """Run until a stop request (None) or a failure (returned)."""
        stop = asyncio.create_task(self._stop_requested.wait(), name="stop-requested")
        try:
            await self._first(stop, elector_task, self._wait_certs())
            for _name, cache in self._caches:
                cache.start()
            await self._first(stop, elector_task, self._wait_caches())
            self._start(leader_only=False)
            if self.elector is None:
                self._start(leader_only=True)
            else:
                await self._first(stop, elector_task, self.elector.elected.wait())
                log.info("became leader; starting leader-elected runnables")
                self._start(leader_only=True)
            while True:
                self._raise_failures()
                running = {
                    e.task for e in self._entries if e.task is not None and not e.task.done()
                }
                self._check(await self._wait_any(stop, elector_task, *running), stop, elector_task)
        except _Stopped:
            return None
        except Exception as exc:
            return exc
        finally:
            stop.cancel()

    async def _first(
        self,
        stop: asyncio.Task[bool],
        elector_task: asyncio.Task[None] | None,
        work: Coroutine[Any, Any, Any],
    ) -> None:
        """Await `work` unless a stop request, a lost election or a failure comes first."""
        task = asyncio.ensure_future(work)
        try:
            self._check(await self._wait_any(stop, elector_task, task), stop, elector_task)
            task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    @staticmethod
    async def _wait_any(*futures: asyncio.Future[Any] | None) -> set[asyncio.Future[Any]]:
        waiting = {f for f in futures if f is not None}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        return done

    def _check(
        self,
        done: set[asyncio.Future[Any]],
        stop: asyncio.Task[bool],
        elector_task: asyncio.Task[None] | None,
    ) -> None:
        """Raise what the finished futures mean for the manager, if anything."""
        if elector_task is not None and elector_task in done:
            exc = elector_task.exception()
            raise exc or LeaderElectionLostError("leader election lost")
        self._raise_failures()
        if stop in done:
            raise _Stopped()

    def _raise_failures(self) -> None:
        """A runnable whose start() failed fails the manager, as in controller-runtime."""
        for entry in self._entries:
            task = entry.task
            if task is not None and task.done() and not task.cancelled():
                failure = task.exception()
                if failure is not None:
                    raise failure

    async def _wait_certs(self) -> None:
        if self.cert_rotator is not None:
            await self.cert_rotator.wait_ready()
            # The rotator reloads the server when it writes the files; a Secret volume
            # is synced by the kubelet, so reload here too before declaring ready.
            await self.webhook_server.reload_certificates_async()
            current = self.cert_rotator.current
            if current is None or self.webhook_server.certificate() != current.cert:
                raise CertsNotReadyError("the webhook server could not load the certificate")
        self._certs_ready = True
        log.info("certificates are ready")

    async def _wait_caches(self) -> None:
        # Reconcilers read caches they do not watch, and a cache still listing reads as
        # empty, which is wrong rather than stale: so every cache, not just the sources.
        timeout = self.options.cache_sync_timeout
        deadline = time.monotonic() + timeout
        for name, cache in self._caches:
            if not await cache.wait_synced(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"cache {name} not synced after {timeout}s")
        log.info("caches are synced")

    def _start(self, *, leader_only: bool) -> None:
        for entry in self._entries:
            if entry.leader_only == leader_only and entry.task is None:
                name = type(entry.runnable).__name__
                entry.task = asyncio.create_task(entry.runnable.start(), name=f"runnable-{name}")

    async def _shutdown(self, elector_task: asyncio.Task[None] | None) -> None:
        timeout = self.options.graceful_shutdown_timeout
        deadline = time.monotonic() + timeout
        log.info("stopping", extra={"timeout": timeout})

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        await self._stop_entries(leader_only=True, deadline=deadline)
        for _name, cache in reversed(self._caches):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(cache.stop(), left() or 0.1)
        await self._stop_entries(leader_only=False, deadline=deadline)
        if self.recorder is not None:
            await self.recorder.stop(left())
        await self.webhook_server.stop(left())
        if self.cert_rotator is not None:
            await self.cert_rotator.stop(left())
        if elector_task is not None and not elector_task.done():
            # Cancelling the campaign releases the lease (release_on_cancel).
            elector_task.cancel()
            await asyncio.wait({elector_task}, timeout=left() or 0.1)
        await self.metrics_server.stop(left())
        await self.health.stop(left())
        if self._own_client:
            await self.client.close()
        log.info("stopped")

    async def _stop_entries(self, *, leader_only: bool, deadline: float) -> None:
        entries = [e for e in reversed(self._entries) if e.leader_only == leader_only and e.task]
        if not entries:
            return

        async def stop_one(entry: _Entry) -> None:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                await entry.runnable.stop(remaining)
            except Exception:
                log.exception("stopping a runnable failed")
            task = entry.task
            if task is not None and not task.done():
                await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
                if not task.done():
                    task.cancel()

        await asyncio.gather(*(stop_one(e) for e in entries))

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> list[signal.Signals]:
        def on_signal(sig: signal.Signals) -> None:
            if self._stop_requested.is_set():
                log.error("second signal, exiting at once", extra={"signal": sig.name})
                os._exit(1)
            log.info("received signal, shutting down", extra={"signal": sig.name})
            self._stop_requested.set()

        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, on_signal, sig)
            except (ValueError, RuntimeError, NotImplementedError):
                # Not the main thread (e.g. embedded in tests): use request_stop() instead.
                log.info("cannot handle signals here", extra={"signal": sig.name})
                continue
            installed.append(sig)
        return installed


class _Stopped(Exception):
    """A stop request arrived while waiting: not a failure."""
