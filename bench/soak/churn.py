"""Carrying out the schedule's actions on the cluster, the node simulator and the
controller processes, and keeping a record of each (an action that finds nothing to act
on, say no worker to crash, is recorded as skipped, not as a failure)."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.nodesim.simulator import NodeSimulator
from tests.chaos.harness import master_of, restart_over_compaction, roll
from tests.chaos.invariants import is_leader, live
from tests.toolkit.manager_process import ManagerProcess
from tests.toolkit.waiting import retrying

from bench.soak import fleet
from bench.soak import schedule as s
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import CONFIGMAPS, LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient

JSON = dict[str, Any]


@dataclass
class Done:
    at: float  # seconds since the soak's start
    kind: str
    target: str
    outcome: str  # what was done, "skipped: ..." or "failed: ..."


@dataclass
class Churn:
    api: ApiClient
    sim: NodeSimulator
    cp: ControlPlane
    procs: list[ManagerProcess]
    started: float = field(default_factory=time.monotonic)
    done: list[Done] = field(default_factory=list)
    rollouts: int = 0
    _later: set[asyncio.Task[None]] = field(default_factory=set)
    _random: random.Random = field(default_factory=lambda: random.Random(7))

    async def run(self, action: s.Action) -> None:
        try:
            outcome = await self._carry_out(action)
        except Exception as exc:  # recorded; the soak goes on and the checks judge
            outcome = f"failed: {type(exc).__name__}: {exc}"
        self._record(action.kind, action.target, outcome)

    async def drain(self) -> None:
        """Wait for the actions' second halves (a node back up, a second rollout)."""
        while self._later:
            await asyncio.gather(*self._later, return_exceptions=True)

    def _record(self, kind: str, target: str, outcome: str) -> None:
        self.done.append(Done(time.monotonic() - self.started, kind, target, outcome))
        print(f"  {self.done[-1].at / 60:6.2f} min {kind} {target} {outcome}", flush=True)

    def _after(
        self, delay: float, kind: str, target: str, step: Callable[[], Awaitable[str]]
    ) -> None:
        async def later() -> None:
            await asyncio.sleep(delay)
            try:
                outcome = await step()
            except Exception as exc:
                outcome = f"failed: {type(exc).__name__}: {exc}"
            self._record(kind, target, outcome)

        task = asyncio.create_task(later())
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def _carry_out(self, action: s.Action) -> str:
        kind = action.kind
        if kind == s.SCALE:
            return await self._scale(fleet.by_name(action.target), action.delta)
        if kind == s.ROLLOUT:
            return await self._roll(fleet.by_name(action.target))
        if kind == s.ROLLOUT_MID:
            member = fleet.by_name(action.target)
            first = await self._roll(member)
            self._after(
                s.MID_ROLLOUT_GAP, "second rollout", member.name, lambda: self._roll(member)
            )
            return first
        if kind == s.CRASH_WORKER:
            return await self._crash_worker(fleet.by_name(action.target))
        if kind == s.DELETE_LEADER:
            return await self._delete_leader(fleet.by_name(action.target))
        if kind == s.NODE_DOWN:
            return await self._node_down(action.target)
        if kind in (s.KILL_LEADER_REPLICA, s.KILL_STANDBY_REPLICA):
            return await self._kill(leading=kind == s.KILL_LEADER_REPLICA)
        if kind == s.RESTART_APISERVER:
            await asyncio.to_thread(self.cp.restart_apiserver)
            return "kube-apiserver stopped and started"
        if kind == s.COMPACTION:
            revision = await asyncio.to_thread(
                restart_over_compaction, self.cp, self.cp.etcd_endpoint
            )
            await retrying(self._touch, interval=0.2)
            return f"etcd compacted at {revision} while kube-apiserver was down"
        raise ValueError(f"unknown action {kind}")

    async def _scale(self, member: fleet.Member, delta: int) -> str:
        lws = await retrying(lambda: self.api.get(LEADERWORKERSETS, member.name, member.namespace))
        now = int(lws["spec"]["replicas"])
        low, high = fleet.bounds(member)
        want = min(high, max(low, now + delta))
        if want == now:
            return f"skipped: {now} groups is the bound"
        body = {"spec": {"replicas": want}}
        await retrying(
            lambda: self.api.patch(LEADERWORKERSETS, member.name, body, namespace=member.namespace)
        )
        return f"{now} -> {want} groups"

    async def _roll(self, member: fleet.Member) -> str:
        self.rollouts += 1
        value = f"r{self.rollouts}"
        await retrying(lambda: roll(self.api, member.namespace, member.name, value))
        return f"template revision {value}"

    async def _pods(self, member: fleet.Member) -> list[JSON]:
        selector = f"{c.LABEL_SET_NAME}={member.name}"
        answer = await retrying(
            lambda: self.api.list(PODS, member.namespace, label_selector=selector)
        )
        return [p for p in answer.get("items") or [] if live(p)]

    async def _crash_worker(self, member: fleet.Member) -> str:
        workers = [
            p for p in await self._pods(member) if not is_leader(p) and p["spec"].get("nodeName")
        ]
        if not workers:
            return "skipped: no running worker"
        name = self._random.choice(workers)["metadata"]["name"]
        await self.sim.restart_container(member.namespace, name)
        return f"container of {name} exited 1"

    async def _delete_leader(self, member: fleet.Member) -> str:
        leaders = [p for p in await self._pods(member) if is_leader(p)]
        if not leaders:
            return "skipped: no live leader"
        name = self._random.choice(leaders)["metadata"]["name"]
        await retrying(lambda: self.api.delete(PODS, name, member.namespace))
        return f"deleted {name}"

    async def _node_down(self, node: str) -> str:
        await self.sim.set_node_ready(node, False)

        async def up() -> str:
            await self.sim.set_node_ready(node, True)
            return "Ready again"

        self._after(s.NODE_DOWN_SECONDS, "node up", node, up)
        return f"NotReady for {s.NODE_DOWN_SECONDS:.0f} s"

    async def _kill(self, *, leading: bool) -> str:
        """SIGKILL the leading replica or the standby; the supervisor starts it again,
        as the kubelet would restart its container."""
        leader = await master_of(self.procs)
        running = [p for p in self.procs if p.running()]
        victims = [leader] if leading and leader else [p for p in running if p is not leader]
        if not victims:
            return "skipped: no such replica running"
        victims[0].signal(signal.SIGKILL)
        role = "leading" if leading and leader else "standby"
        return f"SIGKILL {victims[0].name} ({role})"

    async def _touch(self) -> None:
        """A write after the compaction, so every watch has something to resume to."""
        body = {"metadata": {"name": f"soak-touch-{len(self.done)}-{time.monotonic_ns()}"}}
        await self.api.create(CONFIGMAPS, body, fleet.NAMESPACE)
