"""Registers simulated nodes and keeps them alive the way a kubelet does: a Lease renewed
every few seconds and a periodic node status post."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from leaderworkerset.api.objects import format_micro_time, format_time
from leaderworkerset.api.resources import LEASES, NODES, PODS
from leaderworkerset.runtime.client import (
    STRATEGIC_MERGE_PATCH,
    TRANSPORT_ERRORS,
    ApiClient,
    ApiError,
)
from lws_localcluster.nodesim.api import (
    JsonObj,
    delete_if_present,
    list_all,
)
from lws_localcluster.nodesim.nodes import (
    LEASE_NAMESPACE,
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    AddressPool,
    NodeSpec,
    condition_taints,
    has_taint,
    lease_object,
    node_conditions,
    node_object,
    node_status,
)

log = logging.getLogger(__name__)


@dataclass
class SimNode:
    spec: NodeSpec
    internal_ip: str
    uid: str = ""
    ready: bool = True
    # The Ready condition's status while not ready: "False" or "Unknown".
    not_ready_status: str = "False"
    ready_since: str = ""
    registered_at: str = ""

    @property
    def name(self) -> str:
        return self.spec.name


class NodeFleet:
    """The simulated nodes. With ``condition_taints`` the fleet keeps the not-ready and
    unreachable taints itself, for control planes without a node lifecycle controller;
    where that controller runs the fleet leaves them to it, so that the two never
    write the same taints."""

    def __init__(self, api: ApiClient, node_network: str, *, condition_taints: bool = True) -> None:
        self._api = api
        self._addresses = AddressPool(node_network)
        self.condition_taints = condition_taints
        self.nodes: dict[str, SimNode] = {}

    async def register(self, spec: NodeSpec) -> SimNode:
        if spec.name in self.nodes:
            raise ValueError(f"node {spec.name} is already simulated")
        now = format_time()
        node = SimNode(spec, self._addresses.allocate(), ready_since=now, registered_at=now)
        self.nodes[spec.name] = node
        body = node_object(spec)
        body["status"] = self._status(node)
        try:
            created = await self._api.create(NODES, body)
        except ApiError as err:
            if not err.already_exists:
                raise
            # A node left behind by an earlier run: take it over.
            meta = body["metadata"]
            created = await self._api.patch(
                NODES,
                spec.name,
                {
                    "metadata": {"labels": meta["labels"], "annotations": meta["annotations"]},
                    "spec": {"taints": spec.taints or None, "unschedulable": None},
                },
            )
        node.uid = created["metadata"]["uid"]
        # Status on create is kept by current servers, but posting it through the status
        # subresource is what a kubelet does and works on every version.
        await self.post_status(node)
        await self._create_lease(node)
        if self.condition_taints:
            await self.sync_condition_taints(node)
        return node

    async def sync_condition_taints(self, node: SimNode) -> None:
        """Set the not-ready/unreachable taints for the node's state, as the node
        lifecycle controller would. A local control plane runs without that controller
        unless asked, and the TaintNodesByCondition admission plugin puts a not-ready taint
        on every new node that only that controller would lift."""
        managed = (NOT_READY_TAINT, UNREACHABLE_TAINT)
        for _ in range(10):
            current = await self._api.get(NODES, node.name)
            taints = (current.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if t.get("key") not in managed]
            present = {(t.get("key"), t.get("effect")) for t in taints if t.get("key") in managed}
            wanted = condition_taints(node.ready, node.not_ready_status, node.ready_since)
            if present == {(t["key"], t["effect"]) for t in wanted}:
                return
            # resourceVersion makes this a compare-and-swap of the whole taint list.
            body = {
                "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                "spec": {"taints": [*kept, *wanted] or None},
            }
            try:
                await self._api.patch(NODES, node.name, body)
                return
            except ApiError as err:
                if not err.conflict:
                    raise
        raise RuntimeError(f"could not update taints of node {node.name}: too many conflicts")

    async def _create_lease(self, node: SimNode) -> None:
        try:
            await self._api.create(LEASES, lease_object(node.name, node.uid), LEASE_NAMESPACE)
        except ApiError as err:
            if not err.already_exists:
                raise
            await self.renew_lease(node)

    async def wait_schedulable(self, names: list[str]) -> None:
        """Wait for the node lifecycle controller to lift the not-ready taint the
        NodeTaint admission plugin puts on every new node (callers bound the wait)."""
        pending = set(names)
        while True:
            for name in list(pending):
                if not has_taint(await self._api.get(NODES, name), NOT_READY_TAINT):
                    pending.discard(name)
            if not pending:
                return
            await asyncio.sleep(0.2)

    async def renew_lease(self, node: SimNode) -> None:
        renewal = {"spec": {"renewTime": format_micro_time()}}
        try:
            await self._api.patch(LEASES, node.name, renewal, namespace=LEASE_NAMESPACE)
        except ApiError as err:
            if not err.not_found:
                raise
            await self._create_lease(node)

    def _status(self, node: SimNode) -> JsonObj:
        conditions = node_conditions(
            node.ready, node.not_ready_status, node.ready_since, node.registered_at
        )
        return node_status(node.spec, node.internal_ip, conditions)

    async def post_status(self, node: SimNode) -> None:
        # Conditions merge by type in a strategic merge patch.
        body = {"status": self._status(node)}
        await self._api.patch(
            NODES, node.name, body, subresource="status", content_type=STRATEGIC_MERGE_PATCH
        )

    async def set_ready(
        self, name: str, ready: bool, not_ready_status: str | None = "False"
    ) -> None:
        """Ready, or not: reported as ``not_ready_status`` ("False" or "Unknown"), or with
        None not reported at all, as by a kubelet that died: the node keeps the status it
        last posted until the node lifecycle controller sees its Lease lapse."""
        node = self.nodes[name]
        status = node.not_ready_status if not_ready_status is None else not_ready_status
        if node.ready != ready or node.not_ready_status != status:
            node.ready_since = format_time()
        node.ready = ready
        node.not_ready_status = status
        if not ready and not_ready_status is None:
            return
        await self.post_status(node)
        if ready:
            await self.renew_lease(node)
        if self.condition_taints:
            await self.sync_condition_taints(node)

    async def heartbeat(self, lease_interval: float, status_interval: float) -> None:
        """Renew leases of ready nodes forever; a NotReady node stops heartbeating so the
        node lifecycle controller sees it go silent, as with a dead kubelet."""
        loop = asyncio.get_running_loop()
        next_status = loop.time() + status_interval
        while True:
            await asyncio.sleep(lease_interval)
            post_status = loop.time() >= next_status
            if post_status:
                next_status = loop.time() + status_interval
            ready = [n for n in self.nodes.values() if n.ready]
            results = await asyncio.gather(
                *(self._beat(n, post_status) for n in ready), return_exceptions=True
            )
            for node, result in zip(ready, results, strict=True):
                if isinstance(result, Exception):
                    log.warning("heartbeat for node %s failed: %s", node.name, result)

    async def _beat(self, node: SimNode, post_status: bool) -> None:
        await self.renew_lease(node)
        if post_status:
            await self.post_status(node)

    async def unregister(self, name: str) -> None:
        """Delete a node with its lease and force-delete the pods bound to it, which no
        kubelet would otherwise ever finish terminating."""
        node = self.nodes.pop(name, None)
        if node is None:
            return
        pods, _ = await list_all(self._api, PODS, field_selector=f"spec.nodeName={name}")
        await asyncio.gather(*(self._force_delete(p) for p in pods))
        await delete_if_present(self._api, LEASES, name, LEASE_NAMESPACE)
        await delete_if_present(self._api, NODES, name)
        self._addresses.release(node.internal_ip)

    async def _force_delete(self, pod: JsonObj) -> None:
        meta = pod["metadata"]
        try:
            await delete_if_present(
                self._api,
                PODS,
                meta["name"],
                meta["namespace"],
                uid=meta["uid"],
                grace_period_seconds=0,
            )
        except (ApiError, *TRANSPORT_ERRORS) as err:
            log.warning("force-deleting pod %s/%s failed: %s", meta["namespace"], meta["name"], err)
