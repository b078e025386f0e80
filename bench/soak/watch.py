"""The chaos suite's invariants, applied two ways while the soak runs:

- every `interval` seconds, the rules that must hold at every moment, churn or not: no
  two live leaders of one group, every live pod keyed by the pod webhook; and how long
  each group has not been whole (all `size` pods Running and Ready). A group not whole
  for longer than `STUCK_BOUND` is stuck.
- after each churn block, the whole checker (`tests/chaos/invariants.py`: group count,
  worker StatefulSets, orphans, gates, revisions, status, controller tracebacks) must
  pass within the schedule's `SETTLE_BOUND`.
- before a quiet window opens, the fleet must be at rest: every rollout the churn began
  finished and every group whole. Invariants hold mid-rollout too, so a settled block
  can still have a rollout of 50 groups, one at a time, running well into the next one.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.invariants import (
    Snapshot,
    check_keys,
    converged,
    group_id,
    leaders,
    live,
    replicas_of,
    running_and_ready,
    take_snapshot,
)

from bench.soak import fleet
from bench.soak.schedule import SETTLE_BOUND
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.runtime.client import TRANSPORT_ERRORS, ApiClient, ApiError

STUCK_BOUND = 300.0
# A rollout replaces one group at a time, a few seconds each; rollouts begun late in a
# churn block finish within this.
REST_BOUND = 600.0
JSON = dict[str, Any]


def always(snapshot: Snapshot) -> list[str]:
    """What must hold at any moment, however much is changing."""
    out = [str(v) for v in check_keys(snapshot)]
    ids = Counter(group_id(p) for p in leaders(snapshot))
    out += [f"group-count: {n} live leaders share group {g}" for g, n in ids.items() if n > 1]
    return out


def unwhole_groups(snapshot: Snapshot) -> dict[str, str]:
    """Groups (by leader) with fewer than `size` live pods Running and Ready, each with
    what its pods that are not say."""
    ready = Counter(group_id(p) for p in snapshot.pods if live(p) and running_and_ready(p))
    out = {}
    for leader in leaders(snapshot):
        gid = group_id(leader)
        if ready[gid] < fleet.SIZE:
            lagging = [p for p in snapshot.pods if group_id(p) == gid and not running_and_ready(p)]
            out[str(gid)] = "; ".join(describe(p) for p in lagging) or "pods missing"
    return out


def describe(pod: JSON) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    where = spec.get("nodeName") or ("gated" if spec.get("schedulingGates") else "unbound")
    if where == "unbound" and not any(
        x.get("type") == "PodScheduled" for x in status.get("conditions") or ()
    ):
        # Not even found unschedulable: the scheduler never looked at it.
        where = "never scheduled"
    gone = " deleting" if meta.get("deletionTimestamp") else ""
    return f"{meta['name']} {status.get('phase', '?')} {where}{gone}"


def scheduler_held(why: str) -> bool:
    """Every pod holding the group back exists, is ungated, and kube-scheduler never
    looked at it (no PodScheduled condition, not even Unschedulable): the group waits on
    the scheduler, not on the controller. After an API server restart the scheduler can
    lose a pod this way ("Scheduler cache is corrupted" in its log). A pod it found
    unschedulable (say, placement the controller got wrong) is not excused."""
    return all(part.endswith("Pending never scheduled") for part in why.split("; "))


def unrest(snapshot: Snapshot) -> str | None:
    """What keeps this LeaderWorkerSet from rest, or None at rest: its status reporting
    every replica updated and ready with no update in progress, and every group whole."""
    lws = snapshot.lws
    want = replicas_of(lws)
    status = lws.get("status") or {}
    counts = {k: int(status.get(k) or 0) for k in ("replicas", "readyReplicas", "updatedReplicas")}
    if any(n != want for n in counts.values()):
        return ", ".join(f"{k} {n}" for k, n in counts.items()) + f" of {want}"
    rolling = [
        x for x in status.get("conditions") or () if x.get("type") == c.CONDITION_UPDATE_IN_PROGRESS
    ]
    if any(x.get("status") == "True" for x in rolling):
        return f"{c.CONDITION_UPDATE_IN_PROGRESS} True"
    unwhole = unwhole_groups(snapshot)
    if unwhole:
        return f"{len(unwhole)} groups not whole"
    return None


@dataclass
class Settled:
    block: int
    seconds: float
    violations: list[str]


@dataclass
class Watch:
    api: ApiClient
    log_paths: list[Path]
    interval: float = 15.0
    violations: dict[str, float] = field(default_factory=dict)  # first seen, s since start
    stuck: dict[str, float] = field(default_factory=dict)  # group -> longest seen not whole
    stuck_why: dict[str, str] = field(default_factory=dict)  # group -> its pods then
    settles: list[Settled] = field(default_factory=list)
    polls: int = 0
    missed_polls: int = 0  # the API server was away
    started: float = field(default_factory=time.monotonic)
    _since: dict[str, float] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.poll()
            except (ApiError, *TRANSPORT_ERRORS):  # the API server restarting
                self.missed_polls += 1
            await asyncio.sleep(self.interval)

    async def snapshots(self) -> list[tuple[fleet.Member, Snapshot]]:
        """Every LeaderWorkerSet of the fleet as the API server has it now."""
        taken = await asyncio.gather(
            *(take_snapshot(self.api, m.namespace, m.name) for m in fleet.FLEET)
        )
        return list(zip(fleet.FLEET, taken, strict=True))

    async def poll(self) -> None:
        snapshots = await self.snapshots()
        now = time.monotonic()
        self.polls += 1
        unwhole: dict[str, str] = {}
        for member, snapshot in snapshots:
            for violation in always(snapshot):
                self.violations.setdefault(f"{member.name}: {violation}", now - self.started)
            for gid, why in unwhole_groups(snapshot).items():
                unwhole[f"{member.name}/{gid}"] = why
        self._track(unwhole, now)

    def _track(self, unwhole: dict[str, str], now: float) -> None:
        self._since = {g: self._since.get(g, now) for g in unwhole}
        for group, since in self._since.items():
            if now - since > STUCK_BOUND:
                self.stuck[group] = max(self.stuck.get(group, 0.0), now - since)
                self.stuck_why[group] = unwhole[group]  # the latest: what holds it now

    def stuck_on_controller(self) -> list[str]:
        return [g for g in self.stuck if not scheduler_held(self.stuck_why.get(g, ""))]

    async def settle(self, block: int) -> Settled:
        try:
            return await self._settle(block)
        except (ApiError, *TRANSPORT_ERRORS) as exc:
            # Counted against the block (unsettled), and the soak goes on to report.
            settled = Settled(block, SETTLE_BOUND, [f"the check could not read: {exc}"])
            self.settles.append(settled)
            return settled

    async def _settle(self, block: int) -> Settled:
        verdicts = await asyncio.gather(
            *(
                converged(
                    self.api,
                    m.namespace,
                    m.name,
                    log_paths=self.log_paths,
                    within=SETTLE_BOUND,
                    interval=2.0,
                )
                for m in fleet.FLEET
            )
        )
        found = []
        for member, verdict in zip(fleet.FLEET, verdicts, strict=True):
            found += [f"{member.name}: {v}" for v in verdict.violations]
        now = time.monotonic() - self.started
        for violation in found:
            self.violations.setdefault(violation, now)
        settled = Settled(block, max(v.seconds for v in verdicts), found)
        self.settles.append(settled)
        return settled

    async def rest(
        self, bound: float = REST_BOUND, interval: float = 2.0
    ) -> tuple[float, list[str]]:
        """Wait for the whole fleet to be at rest; the seconds waited and, if the bound
        passed first, what was still moving."""
        start = time.monotonic()
        while True:
            try:
                moving = [
                    f"{member.name}: {why}"
                    for member, snapshot in await self.snapshots()
                    if (why := unrest(snapshot))
                ]
            except (ApiError, *TRANSPORT_ERRORS) as exc:
                moving = [f"the check could not read: {exc}"]
            waited = time.monotonic() - start
            if not moving or waited >= bound:
                return waited, moving
            await asyncio.sleep(interval)
