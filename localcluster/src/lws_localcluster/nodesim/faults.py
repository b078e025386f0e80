"""Faults tests inject into simulated pods.

Each fault changes the pod's runtime state, which outlives the call: later watch events
recompute the status from that state, so the simulator never "heals" a pod by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from leaderworkerset.api.objects import format_time
from lws_localcluster.nodesim.api import JsonObj
from lws_localcluster.nodesim.pods import (
    ContainerRuntime,
    PodRuntime,
    Termination,
    ensure_containers,
    new_container_id,
)

PodChange = Callable[[PodRuntime, JsonObj], None]


class PodFaults:
    """Fault methods of :class:`~lws_localcluster.nodesim.simulator.NodeSimulator`."""

    async def _change_pod(self, namespace: str, name: str, change: PodChange) -> None:
        """Apply ``change`` to the pod's runtime state and write the resulting status."""
        raise NotImplementedError

    async def fail_pod(
        self,
        namespace: str,
        name: str,
        *,
        exit_code: int = 1,
        reason: str = "Error",
        message: str | None = None,
        pod_reason: str | None = None,
        pod_message: str | None = None,
    ) -> None:
        """Terminate all containers with ``exit_code``: phase Failed (Succeeded for 0)."""
        finished = format_time()

        def fail(rt: PodRuntime, pod: JsonObj) -> None:
            rt.terminal = Termination(exit_code, reason, finished, message, pod_reason, pod_message)

        await self._change_pod(namespace, name, fail)

    async def restart_container(
        self,
        namespace: str,
        name: str,
        container: str | None = None,
        *,
        exit_code: int = 1,
        downtime: float = 0.0,
    ) -> None:
        """Crash a container and start it again: restartCount+1 and lastState terminated.
        With ``downtime`` it first sits in CrashLoopBackOff, not ready, that long."""
        finished = format_time()

        def crash(rt: PodRuntime, pod: JsonObj) -> None:
            c = container_of(rt, pod, container)
            c.restart_count += 1
            c.last_terminated = {
                "exitCode": exit_code,
                "reason": "Error" if exit_code else "Completed",
                "startedAt": c.started_at,
                "finishedAt": finished,
                "containerID": c.container_id,
            }
            c.crashed = downtime > 0
            if not c.crashed:
                _start_again(c)

        def start(rt: PodRuntime, pod: JsonObj) -> None:
            c = container_of(rt, pod, container)
            c.crashed = False
            _start_again(c)

        await self._change_pod(namespace, name, crash)
        if downtime > 0:
            await asyncio.sleep(downtime)
            await self._change_pod(namespace, name, start)

    async def set_container_ready(
        self, namespace: str, name: str, ready: bool, container: str | None = None
    ) -> None:
        """Readiness of one container (default: every regular container)."""

        def mark(rt: PodRuntime, pod: JsonObj) -> None:
            names = [container] if container else [c["name"] for c in pod["spec"]["containers"]]
            for c in names:
                container_of(rt, pod, c).ready_override = None if ready else False

        await self._change_pod(namespace, name, mark)

    async def stall_termination(self, namespace: str, name: str) -> None:
        """Keep the pod Terminating once deleted, until :meth:`release_termination`."""

        def stall(rt: PodRuntime, pod: JsonObj) -> None:
            rt.stalled = True

        await self._change_pod(namespace, name, stall)

    async def release_termination(self, namespace: str, name: str) -> None:
        def release(rt: PodRuntime, pod: JsonObj) -> None:
            rt.stalled = False

        await self._change_pod(namespace, name, release)

    async def set_termination_delay(self, namespace: str, name: str, seconds: float | None) -> None:
        def set_delay(rt: PodRuntime, pod: JsonObj) -> None:
            rt.termination_delay = seconds

        await self._change_pod(namespace, name, set_delay)


def container_of(rt: PodRuntime, pod: JsonObj, name: str | None) -> ContainerRuntime:
    """The named container (default: the first regular one) of a simulated pod."""
    ensure_containers(rt, pod, format_time())
    name = name or pod["spec"]["containers"][0]["name"]
    try:
        return rt.containers[name]
    except KeyError:
        raise KeyError(f"pod {rt.namespace}/{rt.name} has no container {name!r}") from None


def _start_again(c: ContainerRuntime) -> None:
    c.started_at = format_time()
    c.container_id = new_container_id()
