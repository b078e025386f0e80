"""NodeSimulator: a kubelet stand-in for tests against a real control plane.

It registers Node objects, keeps them alive with Lease heartbeats, and drives every pod
bound to them through the lifecycle a kubelet would report: Running with IPs, container
statuses and conditions; graceful termination followed by the final delete; and faults
that tests inject (failed pods, container restarts, unready containers, dead nodes).

One pod informer (the controller runtime's) feeds the simulator's pod cache, which queues
changed pods on the runtime's deduplicating work queue, drained by a few workers: a burst
of events for one pod costs one sync and thousands of pods need no per-pod loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from leaderworkerset.api.objects import format_time, meta_of
from leaderworkerset.api.resources import PODS
from leaderworkerset.runtime.client import (
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiClient,
    ApiError,
)
from lws_localcluster.nodesim.api import (
    JsonObj,
    delete_if_present,
    simulator_client,
)
from lws_localcluster.nodesim.cache import NODE_INDEX, PodCache, PodKey, pod_informer
from lws_localcluster.nodesim.faults import PodChange, PodFaults
from lws_localcluster.nodesim.fleet import NodeFleet, SimNode
from lws_localcluster.nodesim.nodes import (
    AddressPool,
    NodeSpec,
    claim_networks,
    release_networks,
)
from lws_localcluster.nodesim.pods import (
    STARTUP_DELAY_ANNOTATION,
    TERMINAL_PHASES,
    TERMINATION_DELAY_ANNOTATION,
    PodRuntime,
    Termination,
    adopt_containers,
    annotation_seconds,
    desired_status,
    ensure_containers,
    status_patch,
)
from lws_localcluster.nodesim.workqueue import PodQueue

__all__ = [
    "DEFAULT_LEASE_INTERVAL",
    "STARTUP_DELAY_ANNOTATION",
    "TERMINATION_DELAY_ANNOTATION",
    "NodeSimulator",
    "NodeSpec",
    "SimulatorStats",
]

log = logging.getLogger(__name__)

# A kubelet's: it renews its 40 s Lease every quarter of that.
DEFAULT_LEASE_INTERVAL = 10.0


@dataclass
class SimulatorStats:
    events: int = 0
    status_writes: int = 0
    write_errors: int = 0
    deletes: int = 0
    # Pods whose status this simulator moved to Running for the first time.
    pods_started: int = 0


class NodeSimulator(PodFaults):
    """Simulated nodes and their kubelets. Use as ``async with NodeSimulator(...) as sim``
    or call :meth:`start` and :meth:`stop`.

    Termination delay for a deleted pod, first match wins: :meth:`set_termination_delay`,
    the pod annotation ``nodesim.leaderworkerset.dev/termination-delay-seconds``, the
    node's ``NodeSpec.termination_delay``, ``termination_delay`` here. Like the kubelet
    honouring grace, it never exceeds the pod's ``deletionGracePeriodSeconds``.
    ``startup_delay`` (and annotation ``...startup-delay-seconds``) holds a newly bound
    pod without status that long before its containers run. ``condition_taints``: the
    simulator sets the not-ready and unreachable taints of its nodes itself; turn it off
    where kube-controller-manager runs its node lifecycle controller, which then does.
    """

    def __init__(
        self,
        kubeconfig: Path | str | None = None,
        nodes: Iterable[NodeSpec] = (),
        *,
        api: ApiClient | None = None,
        termination_delay: float = 0.0,
        startup_delay: float = 0.0,
        workers: int = 20,
        max_concurrent_writes: int = 20,
        lease_interval: float = DEFAULT_LEASE_INTERVAL,
        node_status_interval: float = 60.0,
        delete_nodes_on_stop: bool = True,
        write_terminal_status: bool = True,
        schedulable_timeout: float = 60.0,
        pod_network: str | None = None,
        node_network: str | None = None,
        condition_taints: bool = True,
    ) -> None:
        if api is None:
            if kubeconfig is None:
                raise ValueError("NodeSimulator needs a kubeconfig or an api client")
            api = simulator_client(kubeconfig)
            self._owns_api = True
        else:
            self._owns_api = False
        self.api = api
        self._network_slot, default_pods, default_nodes = claim_networks()
        self._pod_ips = AddressPool(pod_network or default_pods)
        self.fleet = NodeFleet(
            api, node_network or default_nodes, condition_taints=condition_taints
        )
        self._initial_nodes = list(nodes)
        self.termination_delay = termination_delay
        self.startup_delay = startup_delay
        self.write_terminal_status = write_terminal_status
        self.delete_nodes_on_stop = delete_nodes_on_stop
        self.lookup_timeout = 30.0
        self._schedulable_timeout = schedulable_timeout
        self._lease_interval = lease_interval
        self._node_status_interval = node_status_interval
        self._workers = workers
        self._write_slots = asyncio.Semaphore(max_concurrent_writes)
        self._queue = PodQueue()
        self.cache = PodCache(
            is_our_node=lambda node: node in self.fleet.nodes,
            new_runtime=self._new_runtime,
            changed=self._queue.add,
            forgotten=self._forgotten,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._informer = pod_informer(api)
        self._informer.add_handler(self._count_event, self._count_event, self._count_event)
        self.cache.attach(self._informer)
        self.stats = SimulatorStats()

    # -- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> NodeSimulator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Register the nodes and start watching; returns once the first LIST is in."""
        try:
            await asyncio.gather(*(self.fleet.register(spec) for spec in self._initial_nodes))
            await self._wait_schedulable([spec.name for spec in self._initial_nodes])
            self._tasks.append(self._informer.start())
            heartbeat = self.fleet.heartbeat(self._lease_interval, self._node_status_interval)
            self._tasks.append(asyncio.create_task(heartbeat, name="nodesim-heartbeat"))
            for i in range(self._workers):
                worker = asyncio.create_task(self._worker(), name=f"nodesim-worker-{i}")
                self._tasks.append(worker)
            async with asyncio.timeout(60):
                await self._informer.synced.wait()
        except BaseException:
            # No caller stops a simulator whose start failed: leave no nodes behind.
            await self.stop()
            raise

    async def stop(self, delete_nodes: bool | None = None) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        # Also cancels the timer of the syncs that wait out a delay.
        self._queue.shutdown()
        try:
            if self.delete_nodes_on_stop if delete_nodes is None else delete_nodes:
                for name in list(self.fleet.nodes):
                    await self.remove_node(name)
        finally:
            release_networks(self._network_slot)
            if self._owns_api:
                await self.api.close()

    async def _wait_schedulable(self, names: list[str]) -> None:
        try:
            async with asyncio.timeout(self._schedulable_timeout):
                await self.fleet.wait_schedulable(names)
        except TimeoutError as err:
            raise TimeoutError(
                f"nodes {names} still carry the node.kubernetes.io/not-ready taint after "
                f"{self._schedulable_timeout}s"
            ) from err

    # -- nodes -------------------------------------------------------------------------

    @property
    def node_names(self) -> list[str]:
        return list(self.fleet.nodes)

    def node(self, name: str) -> SimNode:
        return self.fleet.nodes[name]

    async def add_node(self, spec: NodeSpec, *, wait_schedulable: bool = True) -> SimNode:
        node = await self.fleet.register(spec)
        if wait_schedulable:
            await self._wait_schedulable([spec.name])
        if self._informer.has_synced:
            # Pods bound to the name before it was ours produced no event we kept.
            for pod in self._informer.by_index(NODE_INDEX, spec.name):
                self.cache.remember(pod)
        return node

    async def remove_node(self, name: str) -> None:
        """Delete the node, its lease and (forcibly) the pods bound to it."""
        for key in self.cache.keys_on_node(name):
            self.cache.forget(key, meta_of(self.cache.pods[key]).get("uid"))
        await self.fleet.unregister(name)

    async def set_node_ready(self, name: str, ready: bool, *, status: str | None = "False") -> None:
        """NotReady stops the node's heartbeats and freezes its pods, like a dead kubelet;
        Ready again resumes and resyncs them. ``status`` is the Ready status the kubelet
        reports as it goes, "False" or "Unknown"; None reports nothing, which leaves it to
        the node lifecycle controller to notice the silence."""
        if status not in ("False", "Unknown", None):
            raise ValueError(f"a NotReady node's Ready status is False or Unknown, not {status}")
        await self.fleet.set_ready(name, ready, status)
        if ready:
            for key in self.cache.keys_on_node(name):
                self._queue.add(key)

    async def _change_pod(self, namespace: str, name: str, change: PodChange) -> None:
        key = f"{namespace}/{name}"
        try:
            async with asyncio.timeout(self.lookup_timeout):
                await self.cache.wait_for(key)
        except TimeoutError:
            raise LookupError(
                f"pod {namespace}/{name} is not bound to a node of this simulator"
            ) from None
        rt = self.cache.runtime(key)
        if rt is None:
            raise LookupError(f"pod {namespace}/{name} vanished")
        async with rt.lock:
            change(rt, self.cache.pods[key])
            await self._sync_locked(key, rt)

    def _count_event(self, *pods: JsonObj) -> None:
        self.stats.events += 1

    # -- syncing -----------------------------------------------------------------------

    def _new_runtime(self, pod: JsonObj) -> PodRuntime:
        meta, spec, status = meta_of(pod), pod.get("spec") or {}, pod.get("status") or {}
        node = self.fleet.nodes[spec["nodeName"]]
        if spec.get("hostNetwork"):
            ip = node.internal_ip
        else:
            # A pod keeps the IP it already reports (the simulator restarted), even one
            # from outside this simulator's pool: pod IPs never change while it lives.
            ip = status.get("podIP") or ""
            if not ip:
                ip = self._pod_ips.allocate()
            else:
                self._pod_ips.reserve(ip)
        rt = PodRuntime(
            uid=meta["uid"],
            namespace=meta["namespace"],
            name=meta["name"],
            node=node.name,
            pod_ip=ip,
            start_time=status.get("startTime") or format_time(),
            first_seen=asyncio.get_running_loop().time(),
        )
        adopt_containers(rt, pod)
        return rt

    def _forgotten(self, key: PodKey, rt: PodRuntime | None) -> None:
        # A delayed sync of the key may still come: it finds no pod and does nothing.
        if key not in self.cache.pods:
            self._queue.forget(key)
        if rt is not None:
            self._pod_ips.release(rt.pod_ip)

    async def _worker(self) -> None:
        while (key := await self._queue.get()) is not None:
            try:
                await self._sync(key)
                self._queue.forget(key)
            except (ApiError, *TRANSPORT_ERRORS) as err:
                self._retry(key, err)
            except Exception:
                # One bad pod must not take a worker down with it.
                log.exception("syncing pod %s failed", key)
            finally:
                self._queue.done(key)

    def _retry(self, key: PodKey, err: Exception) -> None:
        self.stats.write_errors += 1
        self._queue.add_rate_limited(key)
        log.info("pod %s: %s; retry %d", key, err, self._queue.num_requeues(key))

    async def _sync(self, key: PodKey) -> None:
        rt = self.cache.runtime(key)
        if rt is not None:
            async with rt.lock:
                await self._sync_locked(key, rt)

    async def _sync_locked(self, key: PodKey, rt: PodRuntime) -> None:
        pod = self.cache.pods.get(key)
        if pod is None or meta_of(pod).get("uid") != rt.uid:
            return
        node = self.fleet.nodes.get(rt.node)
        if node is None or not node.ready:
            # A NotReady node's kubelet is silent: nothing reported, nothing deleted.
            return
        now = asyncio.get_running_loop().time()
        if meta_of(pod).get("deletionTimestamp"):
            await self._sync_terminating(key, pod, rt, node, now)
            return
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES and rt.terminal is None:
            return  # ended by someone else; a kubelet never revives a terminal pod
        if rt.terminal is None:
            delay = annotation_seconds(pod, STARTUP_DELAY_ANNOTATION)
            if delay is None:
                delay = node.spec.startup_delay
            if delay is None:
                delay = self.startup_delay
            if now < rt.first_seen + delay:
                self._wake_at(key, rt.first_seen + delay)
                return
        await self._write_status(key, pod, rt, node)

    async def _sync_terminating(
        self, key: PodKey, pod: JsonObj, rt: PodRuntime, node: SimNode, now: float
    ) -> None:
        if rt.delete_sent:
            return
        if rt.deletion_seen is None:
            rt.deletion_seen = now
        if rt.stalled:
            return
        phase = (pod.get("status") or {}).get("phase")
        if rt.terminal is None and phase not in TERMINAL_PHASES:
            deadline = rt.deletion_seen + self._termination_delay(pod, rt, node)
            if now < deadline:
                self._wake_at(key, deadline)
                await self._write_status(key, pod, rt, node)
                return
            rt.terminal = Termination(0, "Completed", format_time())
            if self.write_terminal_status:
                await self._write_status(key, pod, rt, node)
        meta = meta_of(pod)
        async with self._write_slots:
            await delete_if_present(
                self.api, PODS, rt.name, rt.namespace, uid=meta["uid"], grace_period_seconds=0
            )
        rt.delete_sent = True
        self.stats.deletes += 1

    def _termination_delay(self, pod: JsonObj, rt: PodRuntime, node: SimNode) -> float:
        delay = rt.termination_delay
        if delay is None:
            delay = annotation_seconds(pod, TERMINATION_DELAY_ANNOTATION)
        if delay is None:
            delay = node.spec.termination_delay
        if delay is None:
            delay = self.termination_delay
        grace = meta_of(pod).get("deletionGracePeriodSeconds")
        return delay if grace is None else min(delay, float(grace))

    async def _write_status(self, key: PodKey, pod: JsonObj, rt: PodRuntime, node: SimNode) -> None:
        ensure_containers(rt, pod, format_time())
        desired = desired_status(pod, rt, node.internal_ip)
        patch = status_patch(pod, desired)
        if patch is None:
            return
        try:
            async with self._write_slots:
                updated = await self.api.patch(
                    PODS,
                    rt.name,
                    patch,
                    namespace=rt.namespace,
                    subresource="status",
                    content_type=STRATEGIC_MERGE_PATCH,
                )
        except ApiError as err:
            if err.not_found:
                return  # deleted meanwhile; the watch delivers the DELETED event
            if err.status in (409, 422) and "uid" in err.message.lower():
                return  # the name now belongs to a newer pod
            raise
        self.stats.status_writes += 1
        if desired["phase"] == "Running" and (pod.get("status") or {}).get("phase") != "Running":
            self.stats.pods_started += 1
        self.cache.remember_written(updated)
        # Another writer's change that landed between our read and our write (a readiness
        # gate set True) comes back merged into the answer; its own watch event is then
        # older than the cached answer and dropped as an echo, so nothing else would make
        # us recompute Ready from it.
        if status_patch(updated, desired_status(updated, rt, node.internal_ip)) is not None:
            self._queue.add(key)

    def _wake_at(self, key: PodKey, deadline: float) -> None:
        """Sync the pod again at ``deadline`` (loop time); an earlier wake-up is kept."""
        self._queue.add_after(key, deadline - asyncio.get_running_loop().time())

    # -- introspection for tests -------------------------------------------------------

    def cached_pod(self, namespace: str, name: str) -> JsonObj | None:
        """The simulator's latest copy of a pod bound to one of its nodes."""
        return self.cache.pods.get(f"{namespace}/{name}")

    async def settle(self) -> None:
        """Return once no pod sync is queued or running (callers bound the wait)."""
        await self._queue.wait_idle()
