"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Expiry is judged on the local monotonic clock from the moment this process saw the
lease record change, never from the timestamps in it, so clock skew between replicas
cannot hand the lease to two holders. Writes carry the observed resourceVersion; a
conflict just means another candidate moved first. A leader that cannot renew within
renewDeadline stops leading (and, in the manager, exits) before any other candidate
may take over at leaseDuration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.objects import JSON, format_micro_time
from leaderworkerset.api.resources import LEASES
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiClient, ApiError
from leaderworkerset.runtime.events import NORMAL, EventRecorder
from leaderworkerset.runtime.logging import v
from leaderworkerset.runtime.metrics import RuntimeMetrics

log = logging.getLogger("leader-election")

JITTER_FACTOR = 1.2  # client-go's: acquisition retries spread over [retry, 2.2 * retry]
_RECORD_FIELDS = (
    "holderIdentity",
    "leaseDurationSeconds",
    "acquireTime",
    "renewTime",
    "leaseTransitions",
)


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def errors(self) -> list[str]:
        """client-go's NewLeaderElector checks."""
        errs = []
        if self.lease_duration <= self.renew_deadline:
            errs.append("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            errs.append("renewDeadline must be greater than retryPeriod*JitterFactor")
        if min(self.lease_duration, self.renew_deadline, self.retry_period) <= 0:
            errs.append("leaseDuration, renewDeadline and retryPeriod must be greater than zero")
        if not self.identity:
            errs.append("identity must not be empty")
        return errs


def _record(spec: JSON) -> tuple[Any, ...]:
    return tuple(spec.get(k) for k in _RECORD_FIELDS)


class LeaderElector:
    """Campaigns for one Lease. `run()` returns once leadership is lost; cancelling it
    stops the campaign and, with `release_on_cancel`, hands the lease over at once."""

    def __init__(
        self,
        client: ApiClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], object] | None = None,
        on_stopped_leading: Callable[[], object] | None = None,
        on_new_leader: Callable[[str], object] | None = None,
        recorder: EventRecorder | None = None,
        metrics: RuntimeMetrics | None = None,
    ) -> None:
        errs = config.errors()
        if errs:
            raise ValueError("invalid leader election config: " + "; ".join(errs))
        self.client = client
        self.config = config
        self.metrics = metrics or RuntimeMetrics()
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.recorder = recorder
        self.elected = asyncio.Event()
        self._leading = False
        self._lease: JSON | None = None  # last lease read or written
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_time = 0.0
        self._reported_leader: str | None = None

    @property
    def identity(self) -> str:
        return self.config.identity

    def is_leader(self) -> bool:
        return self._leading

    @property
    def observed_holder(self) -> str:
        spec = (self._lease or {}).get("spec") or {}
        return str(spec.get("holderIdentity") or "")

    async def run(self) -> None:
        self.metrics.leader_election_master.labels(name=self.config.name).set(0)
        try:
            await self._acquire()
            self._start_leading()
            await self._renew()
            log.info("leader election lost", extra={"lease": self._describe()})
        finally:
            with contextlib.suppress(asyncio.CancelledError):
                await self._stop_leading()

    # -- acquisition and renewal

    async def _acquire(self) -> None:
        log.info("attempting to acquire leader lease", extra={"lease": self._describe()})
        while not await self._try_acquire_or_renew():
            retry = self.config.retry_period
            await asyncio.sleep(retry + random.random() * JITTER_FACTOR * retry)
        log.info("successfully acquired lease", extra={"lease": self._describe()})

    async def _renew(self) -> None:
        cfg = self.config
        while True:
            deadline = time.monotonic() + cfg.renew_deadline
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.info("failed to renew lease", extra={"lease": self._describe()})
                    return
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
                if renewed:
                    break
                await asyncio.sleep(min(cfg.retry_period, max(0.0, deadline - time.monotonic())))
            await asyncio.sleep(cfg.retry_period)

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now = format_micro_time()
        desired: JSON = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        if self._leading and self._lease is not None:
            # The fast path, as client-go's: a leader renews the lease it last wrote
            # (its resourceVersion) without reading it first, one request instead of
            # two. Anyone else's write since fails it with a conflict, and the slow
            # path below reads the lease and decides again.
            renewed = await self._renew_held(dict(desired))
            if renewed:
                return True
            if renewed is False:
                self.metrics.leader_election_slowpath.labels(name=cfg.name).inc()
        try:
            lease = await self.client.get_or_none(LEASES, cfg.name, cfg.namespace)
            if lease is None:
                created = await self._counted(
                    self.client.create(
                        LEASES,
                        {
                            "apiVersion": "coordination.k8s.io/v1",
                            "kind": "Lease",
                            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                            "spec": desired,
                        },
                        cfg.namespace,
                    )
                )
                self._observe(created)
                return True
        except Exception as exc:  # any failure is just "not now"; the loop retries
            log.log(v(4), "error retrieving lease: %s", exc)
            return False

        spec = lease.get("spec") or {}
        self._observe(lease)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != cfg.identity and self._lease_valid(spec):
            return False
        if holder == cfg.identity:
            desired["acquireTime"] = spec.get("acquireTime") or now
            desired["leaseTransitions"] = spec.get("leaseTransitions") or 0
        else:
            desired["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + 1
        lease["spec"] = {**spec, **desired}
        try:
            updated = await self._counted(self.client.replace(LEASES, lease))
        except Exception as exc:
            log.log(v(4), "failed to update lease: %s", exc)
            return False
        self._observe(updated)
        return True

    async def _renew_held(self, desired: JSON) -> bool | None:
        """True when renewed, False when the write failed, None when the lease last seen
        is not ours or has run out (nothing to renew without reading)."""
        assert self._lease is not None
        held = self._lease
        spec = held.get("spec") or {}
        if spec.get("holderIdentity") != self.config.identity or not self._lease_valid(spec):
            return None
        desired["acquireTime"] = spec.get("acquireTime") or desired["acquireTime"]
        desired["leaseTransitions"] = spec.get("leaseTransitions") or 0
        try:
            updated = await self._counted(
                self.client.replace(LEASES, {**held, "spec": {**spec, **desired}})
            )
        except Exception as exc:
            log.log(v(4), "failed to renew the lease held, reading it again: %s", exc)
            return False
        self._observe(updated)
        return True

    def _observe(self, lease: JSON) -> None:
        self._lease = lease
        spec = lease.get("spec") or {}
        record = _record(spec)
        if record != self._observed_record:
            self._observed_record = record
            self._observed_time = time.monotonic()
        holder = self.observed_holder
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            if holder != self.config.identity:
                log.info("new leader elected", extra={"leader": holder})
            if self.on_new_leader is not None:
                self.on_new_leader(holder)

    def _lease_valid(self, spec: JSON) -> bool:
        # The record's own duration counts: a released lease says 1 s, so it is free
        # almost at once.
        duration = spec.get("leaseDurationSeconds") or self.config.lease_duration
        return self._observed_time + float(duration) > time.monotonic()

    # -- transitions

    def _start_leading(self) -> None:
        self._leading = True
        self.elected.set()
        self.metrics.leader_election_master.labels(name=self.config.name).set(1)
        self._record_event("became leader")
        if self.on_started_leading is not None:
            self.on_started_leading()

    async def _stop_leading(self) -> None:
        was_leading = self._leading
        self._leading = False
        self.elected.clear()
        self.metrics.leader_election_master.labels(name=self.config.name).set(0)
        if was_leading:
            self._record_event("stopped leading")
            if self.config.release_on_cancel:
                await self.release()
        if self.on_stopped_leading is not None:
            self.on_stopped_leading()

    async def release(self) -> bool:
        """Empty the holder and shorten the lease to 1 s so a standby takes over at once.

        A conflict means the lease changed since this process last saw it; most often
        its own renewal, cancelled by the shutdown after the API server had stored it.
        The lease is read again and, while this process still holds it, released from
        what the server has (once: a standby that took it meanwhile is left to lead)."""
        lease = self._lease
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                for attempt in range(2):
                    if not self._holds(lease):
                        return True
                    assert lease is not None
                    try:
                        released = self._released(lease)
                        self._observe(await self._counted(self.client.replace(LEASES, released)))
                        break
                    except ApiError as exc:
                        if not exc.conflict or attempt:
                            raise
                        lease = await self.client.get(
                            LEASES, self.config.name, self.config.namespace
                        )
        except (ApiError, *TRANSPORT_ERRORS) as exc:
            log.error("failed to release lease: %s", exc)
            return False
        log.info("released leader lease", extra={"lease": self._describe()})
        return True

    async def _counted(self, write: Awaitable[JSON]) -> JSON:
        """A Lease write, counted as rest_client_requests_total counts requests: once an
        answer came back, an error or not, so the two can be subtracted."""
        try:
            answer = await write
        except ApiError:
            self.metrics.lease_writes.labels(name=self.config.name).inc()
            raise
        self.metrics.lease_writes.labels(name=self.config.name).inc()
        return answer

    def _holds(self, lease: JSON | None) -> bool:
        spec = (lease or {}).get("spec") or {}
        return lease is not None and spec.get("holderIdentity") == self.config.identity

    @staticmethod
    def _released(lease: JSON) -> JSON:
        """A copy with the holder emptied: what was observed stays what the server holds
        if the release fails."""
        spec = lease.get("spec") or {}
        now = format_micro_time()
        return {
            **lease,
            "spec": {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": spec.get("leaseTransitions") or 0,
            },
        }

    def _record_event(self, what: str) -> None:
        if self.recorder is None or self._lease is None:
            return
        self.recorder.event(
            self._lease, NORMAL, "LeaderElection", "LeaderElection", f"{self.identity} {what}"
        )

    def _describe(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"
