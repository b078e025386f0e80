"""Simulated Node objects: their spec, the status a kubelet would report, and their Lease;
and the default fleet that the demo, benchmarks and tests start with."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from leaderworkerset.api.objects import format_micro_time, format_time
from lws_localcluster.nodesim.api import JsonObj

KUBELET_VERSION = "v1.37.2"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
GPU = "nvidia.com/gpu"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


@dataclass
class NodeSpec:
    """What a test asks for: a node's name, resources, labels and taints.

    ``capacity`` keys are Kubernetes resource names; anything beyond cpu, memory and
    pods (``nvidia.com/gpu``, ``google.com/tpu``, ...) is reported as an extended
    resource. ``allocatable`` defaults to ``capacity``.
    """

    name: str
    cpu: str = "8"
    memory: str = "32Gi"
    pods: int = 110
    gpus: int = 0
    extended: Mapping[str, str | int] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: list[JsonObj] = field(default_factory=list)
    allocatable: Mapping[str, str | int] | None = None
    # Seconds a deleted pod stays Terminating on this node (None: simulator default).
    termination_delay: float | None = None
    # Seconds between a pod binding to this node and its containers running.
    startup_delay: float | None = None

    @property
    def capacity(self) -> dict[str, str]:
        resources: dict[str, str] = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": str(self.pods),
            "ephemeral-storage": "100Gi",
        }
        if self.gpus:
            resources[GPU] = str(self.gpus)
        resources.update({k: str(v) for k, v in self.extended.items()})
        return resources


ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
DEFAULT_ZONES = ("zone-a", "zone-b")


def default_nodes(count: int = 4, prefix: str = "sim-node") -> list[NodeSpec]:
    """GPU nodes (8 cpu, 32Gi, 110 pods, 8 GPUs) of one pool, spread over two zones."""
    return [
        NodeSpec(
            name=f"{prefix}-{i}",
            cpu="8",
            memory="32Gi",
            pods=110,
            gpus=8,
            labels={
                ZONE_LABEL: DEFAULT_ZONES[i % len(DEFAULT_ZONES)],
                REGION_LABEL: "sim-region",
                NODEPOOL_LABEL: "default-pool",
            },
        )
        for i in range(count)
    ]


def playground_nodes(count: int, gpus: int, zones: int, prefix: str = "lws-node") -> list[NodeSpec]:
    """``count`` nodes of 8 cpu and 32Gi with ``gpus`` GPUs each, dealt round-robin
    over ``zones`` zones (none labelled when ``zones`` is 0)."""
    names = [f"zone-{chr(ord('a') + i)}" if i < 26 else f"zone-{i}" for i in range(zones)]
    return [
        NodeSpec(
            name=f"{prefix}-{i}",
            gpus=gpus,
            labels={ZONE_LABEL: names[i % zones], REGION_LABEL: "sim-region"} if zones else {},
        )
        for i in range(count)
    ]


class AddressPool:
    """Hands out unique IPv4 addresses from a network and takes them back."""

    def __init__(self, network: str) -> None:
        self._network = ipaddress.ip_network(network)
        self._hosts: Iterator[ipaddress.IPv4Address | ipaddress.IPv6Address] = iter(
            self._network.hosts()
        )
        self._free: set[str] = set()
        self._used: set[str] = set()

    def allocate(self) -> str:
        if self._free:
            ip = self._free.pop()
        else:
            ip = next((ip for ip in map(str, self._hosts) if self._unclaimed(ip)), "")
            if not ip:
                raise RuntimeError(f"address pool {self._network} is exhausted")
        self._used.add(ip)
        return ip

    def _unclaimed(self, ip: str) -> bool:
        return ip not in self._used and ip not in self._free

    def reserve(self, ip: str) -> bool:
        """Claim an address found on an existing object; False if it is not ours or taken."""
        try:
            if ipaddress.ip_address(ip) not in self._network or ip in self._used:
                return False
        except ValueError:
            return False
        self._used.add(ip)
        self._free.discard(ip)
        return True

    def release(self, ip: str) -> None:
        if ip in self._used:
            self._used.discard(ip)
            self._free.add(ip)


# Simulators running at the same time in one process get disjoint pod and node
# networks, so a session-wide simulator and a test's own never hand out the same IP.
NETWORK_SLOTS = 12
_slots_in_use: set[int] = set()


def claim_networks() -> tuple[int, str, str]:
    """(slot, pod network, node network) for a new simulator; see release_networks."""
    free = [i for i in range(NETWORK_SLOTS) if i not in _slots_in_use]
    if not free:
        raise RuntimeError(f"more than {NETWORK_SLOTS} node simulators running at once")
    slot = free[0]
    _slots_in_use.add(slot)
    return slot, f"10.{244 + slot}.0.0/16", f"172.{20 + slot}.0.0/16"


def release_networks(slot: int) -> None:
    _slots_in_use.discard(slot)


def node_object(spec: NodeSpec) -> JsonObj:
    labels = {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "nodesim",
        **spec.labels,
    }
    body: JsonObj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": labels,
            "annotations": {"nodesim.leaderworkerset.dev/simulated": "true", **spec.annotations},
        },
        "spec": {"taints": list(spec.taints)} if spec.taints else {},
    }
    return body


def node_conditions(
    ready: bool, not_ready_status: str, ready_since: str, registered_at: str
) -> list[JsonObj]:
    now = format_time()

    def condition(kind: str, status: str, reason: str, message: str, since: str) -> JsonObj:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": since,
        }

    ready_condition = (
        condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", ready_since)
        if ready
        else condition(
            "Ready", not_ready_status, "KubeletNotReady", "simulated node failure", ready_since
        )
    )
    return [
        condition(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
            registered_at,
        ),
        condition(
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
            registered_at,
        ),
        condition(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
            registered_at,
        ),
        ready_condition,
    ]


def node_status(spec: NodeSpec, internal_ip: str, conditions: list[JsonObj]) -> JsonObj:
    capacity = spec.capacity
    allocatable = (
        {k: str(v) for k, v in spec.allocatable.items()} if spec.allocatable else dict(capacity)
    )
    return {
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": conditions,
        "addresses": [
            {"type": "InternalIP", "address": internal_ip},
            {"type": "Hostname", "address": spec.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": spec.name,
            "systemUUID": spec.name,
            "bootID": spec.name,
            "kernelVersion": "6.1.0-nodesim",
            "osImage": "nodesim",
            "containerRuntimeVersion": "containerd://2.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def lease_object(node_name: str, node_uid: str) -> JsonObj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node_name,
            "namespace": LEASE_NAMESPACE,
            # The garbage collector removes the lease with the node, as for a kubelet.
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}
            ],
        },
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": format_micro_time(),
        },
    }


def condition_taints(ready: bool, not_ready_status: str, since: str) -> list[JsonObj]:
    """The taints the node lifecycle controller keeps on a node in this Ready state."""
    if ready:
        return []
    key = UNREACHABLE_TAINT if not_ready_status == "Unknown" else NOT_READY_TAINT
    return [
        {"key": key, "effect": "NoSchedule"},
        {"key": key, "effect": "NoExecute", "timeAdded": since},
    ]


def has_taint(node: Mapping[str, Any], key: str) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return any(t.get("key") == key for t in taints)
