"""The chaos suite's invariants, applied two ways while the soak runs:

- every `interval` seconds, the rules that must hold at every moment, churn or not: no
  two live leaders of one group, every live pod keyed by the pod webhook; and how long
  each group has not been whole (all `size` pods Running and Ready). A group not whole
  for longer than `STUCK_BOUND` is stuck.
- after each churn block, the whole checker (`tests/chaos/invariants.py`: group count,
  worker StatefulSets, orphans, gates, revisions, status, controller tracebacks) must
  pass within the schedule's `SETTLE_BOUND`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.chaos.invariants import (
    Snapshot,
    check_keys,
    converged,
    group_id,
    leaders,
    live,
    running_and_ready,
    take_snapshot,
)

from bench.soak import fleet
from bench.soak.schedule import SETTLE_BOUND
from leaderworkerset.runtime.client import ApiClient

STUCK_BOUND = 300.0


def always(snapshot: Snapshot) -> list[str]:
    """What must hold at any moment, however much is changing."""
    out = [str(v) for v in check_keys(snapshot)]
    ids = Counter(group_id(p) for p in leaders(snapshot))
    out += [f"group-count: {n} live leaders share group {g}" for g, n in ids.items() if n > 1]
    return out


def unwhole_groups(snapshot: Snapshot) -> set[str]:
    """Groups (by leader) with fewer than `size` live pods Running and Ready."""
    ready = Counter(group_id(p) for p in snapshot.pods if live(p) and running_and_ready(p))
    return {str(group_id(p)) for p in leaders(snapshot) if ready[group_id(p)] < fleet.SIZE}


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
    settles: list[Settled] = field(default_factory=list)
    polls: int = 0
    missed_polls: int = 0  # the API server was away
    started: float = field(default_factory=time.monotonic)
    _since: dict[str, float] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.poll()
            except Exception:  # the API server restarting; the next poll reads again
                self.missed_polls += 1
            await asyncio.sleep(self.interval)

    async def poll(self) -> None:
        snapshots = await asyncio.gather(
            *(take_snapshot(self.api, m.namespace, m.name) for m in fleet.FLEET)
        )
        now = time.monotonic()
        self.polls += 1
        unwhole = set()
        for member, snapshot in zip(fleet.FLEET, snapshots, strict=True):
            for violation in always(snapshot):
                self.violations.setdefault(f"{member.name}: {violation}", now - self.started)
            unwhole |= {f"{member.name}/{g}" for g in unwhole_groups(snapshot)}
        self._track(unwhole, now)

    def _track(self, unwhole: Iterable[str], now: float) -> None:
        current = set(unwhole)
        self._since = {g: self._since.get(g, now) for g in current}
        for group, since in self._since.items():
            if now - since > STUCK_BOUND:
                self.stuck[group] = max(self.stuck.get(group, 0.0), now - since)

    async def settle(self, block: int) -> Settled:
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
