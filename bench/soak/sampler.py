"""The controller's figures, read once a minute from both replicas: memory and CPU from
/proc, the rest from /metrics. Counters are turned into amounts per interval here; a
replica started again (a new pid) starts its counters from 0."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from tests.toolkit.manager_process import ManagerProcess, sample

from bench.processes import WRITE_METHODS, cpu_seconds, memory_kib, sum_by
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import EVENTS
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiClient, ApiError, list_pages

OURS = c.EVENT_REPORTING_CONTROLLER


@dataclass(frozen=True)
class Reading:
    """One replica at one moment."""

    pid: int
    rss_kib: int
    cpu: float
    leading: bool
    writes: float
    lease_writes: float
    queue_depth: float
    queue_wait_sum: float
    queue_wait_count: float
    watches: float
    tasks: float


def parse(pid: int, rss_kib: int, cpu: float, text: str) -> Reading:
    methods = sum_by(text, "rest_client_requests_total", "method")
    return Reading(
        pid=pid,
        rss_kib=rss_kib,
        cpu=cpu,
        leading=1.0 in sum_by(text, "leader_election_master_status", "name").values(),
        writes=sum(n for (m,), n in methods.items() if m in WRITE_METHODS),
        lease_writes=sum(sum_by(text, "lws_leader_election_lease_writes_total", "name").values()),
        queue_depth=sum(sum_by(text, "workqueue_depth", "name").values()),
        queue_wait_sum=sum(sum_by(text, "workqueue_queue_duration_seconds_sum", "name").values()),
        queue_wait_count=sum(
            sum_by(text, "workqueue_queue_duration_seconds_count", "name").values()
        ),
        watches=sum(sum_by(text, "lws_watches_open", "resource").values()),
        tasks=sample(text, "lws_event_loop_tasks") or 0.0,
    )


def grown(before: Reading | None, after: Reading, attr: str) -> float:
    """How much a counter of `after` grew since `before` (all of it after a restart)."""
    now = float(getattr(after, attr))
    if before is None or before.pid != after.pid:
        return now
    return max(0.0, now - float(getattr(before, attr)))


@dataclass(frozen=True)
class Sample:
    minute: float
    leader: str  # the replica leading, "" while none does
    leader_pid: int  # its process: a replica started again keeps its name, not its pid
    leader_rss_mib: float
    standby_rss_mib: float
    standby_pid: int  # the first standby's process, 0 while there is none
    cpu_seconds: float  # both replicas, over the interval
    writes: float  # object writes (lease renewals left out), both replicas, in the interval
    lease_writes: float
    queue_depth: float
    queue_wait_ms: float | None  # mean wait in the interval's queue, all controllers
    watches: float
    tasks: float
    events: int  # Events the controller reported, in the cluster now
    interval_minutes: float

    @property
    def writes_per_minute(self) -> float:
        return self.writes / self.interval_minutes if self.interval_minutes else 0.0


def combine(
    minute: float,
    interval_minutes: float,
    before: dict[str, Reading],
    after: dict[str, Reading],
    events: int,
) -> Sample:
    leading = [name for name, r in after.items() if r.leading]
    leader = leading[0] if leading else ""
    standby = [r for name, r in after.items() if name != leader]

    def total(attr: str) -> float:
        return sum(grown(before.get(name), r, attr) for name, r in after.items())

    waits, count = total("queue_wait_sum"), total("queue_wait_count")
    lead = after.get(leader)
    return Sample(
        minute=minute,
        leader=leader,
        leader_pid=lead.pid if lead else 0,
        leader_rss_mib=lead.rss_kib / 1024 if lead else 0.0,
        standby_rss_mib=sum(r.rss_kib for r in standby) / 1024,
        standby_pid=standby[0].pid if standby else 0,
        cpu_seconds=total("cpu"),
        writes=max(0.0, total("writes") - total("lease_writes")),
        lease_writes=total("lease_writes"),
        queue_depth=lead.queue_depth if lead else 0.0,
        queue_wait_ms=waits / count * 1000 if count else None,
        watches=lead.watches if lead else 0.0,
        tasks=lead.tasks if lead else 0.0,
        events=events,
        interval_minutes=interval_minutes,
    )


@dataclass
class Sampler:
    api: ApiClient
    procs: list[ManagerProcess]
    period: float = 60.0
    samples: list[Sample] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _last: dict[str, Reading] = field(default_factory=dict)
    _last_at: float = 0.0

    async def read(self) -> dict[str, Reading]:
        out = {}
        for proc in self.procs:
            if proc.proc is None or not proc.running():
                continue
            # Not answering yet (started again a moment ago) or gone (just killed: a
            # process not yet reaped has a /proc status without VmRSS, a KeyError): the
            # replica is left out of this reading, which complete() then refuses.
            with contextlib.suppress(OSError, RuntimeError, KeyError):
                pid = proc.pid
                text = await asyncio.to_thread(proc.metrics_text)
                rss, _ = memory_kib(pid)
                out[proc.name] = parse(pid, rss, cpu_seconds(pid), text)
        return out

    async def events(self) -> int:
        ours = 0
        async for page in list_pages(self.api, EVENTS):
            items = page.get("items") or []
            ours += sum(1 for e in items if e.get("reportingController") == OURS)
        return ours

    async def take(self) -> Sample | None:
        """Read now; the sample covers the time since the previous read (None at the first)."""
        readings = await self.read()
        now = time.monotonic()
        try:
            events = await self.events()
        except (ApiError, *TRANSPORT_ERRORS):  # the API server restarting
            events = self.samples[-1].events if self.samples else 0
        previous, previous_at = self._last, self._last_at
        self._last, self._last_at = readings, now
        if not previous_at:
            return None
        taken = combine(
            (now - self.started) / 60, (now - previous_at) / 60, previous, readings, events
        )
        self.samples.append(taken)
        return taken

    async def run(self) -> None:
        await self.take()
        while True:
            await asyncio.sleep(self.period - (time.monotonic() - self._last_at) % self.period)
            taken = await self.take()
            if taken is not None:
                # One line a minute: a run can be watched, and a sampler that stopped shows.
                print(
                    f"  sample {taken.minute:.1f} min: leader {taken.leader or '-'} "
                    f"{taken.leader_rss_mib:.1f} MiB, {taken.writes:.0f} writes, "
                    f"{taken.cpu_seconds:.1f} CPU s, queue {taken.queue_depth:.0f}",
                    flush=True,
                )

    def complete(self, start: dict[str, Reading], end: dict[str, Reading]) -> bool:
        """Both readings cover every replica, each the same process: only then is the
        difference every write made between them."""
        names = {p.name for p in self.procs}
        same = all(start[n].pid == end[n].pid for n in names if n in start and n in end)
        return set(start) == set(end) == names and same

    def writes_between(self, start: dict[str, Reading], end: dict[str, Reading]) -> float | None:
        """Object writes between two readings; None when they cannot say (see complete)."""
        if not self.complete(start, end):
            return None
        grown_writes = sum(grown(start.get(n), r, "writes") for n, r in end.items())
        grown_leases = sum(grown(start.get(n), r, "lease_writes") for n, r in end.items())
        return grown_writes - grown_leases
