"""pytest plugin: simulated nodes for tests against the real control plane.

Fixtures (all in the session event loop; mark tests with
``pytest.mark.asyncio(loop_scope="session")``):

- ``node_simulator``: one :class:`NodeSimulator` for the session with four nodes
  (8 cpu, 32Gi, 110 pods, 8 ``nvidia.com/gpu``) spread over two zones.
- ``extra_nodes``: adds nodes to that simulator for one test and removes them after.
- ``node_simulator_factory``: starts a test's own simulator with exactly the nodes it
  asks for (e.g. a full cluster with exact capacity) and stops it after the test.
- ``nodesim_api``: the project's raw JSON :class:`ApiClient`, for the tests themselves.

Helpers for tests: :func:`isolated` / :func:`isolated_pod_spec` keep a test's node to
the pods that ask for it; polling and pod helpers live in ``nodesim_testing``.

Requires the ``kubeconfig`` fixture from ``leaderworkerset.localcluster.fixtures``.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest_asyncio

from leaderworkerset.localcluster.nodesim.api import JsonObj, simulator_client
from leaderworkerset.localcluster.nodesim.fleet import SimNode
from leaderworkerset.localcluster.nodesim.nodes import NodeSpec
from leaderworkerset.localcluster.nodesim.simulator import NodeSimulator
from leaderworkerset.runtime.client import ApiClient

ZONE_LABEL = "topology.kubernetes.io/zone"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ISOLATION_KEY = "nodesim.leaderworkerset.dev/dedicated"
DEFAULT_ZONES = ("zone-a", "zone-b")


def default_nodes(count: int = 4, prefix: str = "sim-node") -> list[NodeSpec]:
    return [
        NodeSpec(
            name=f"{prefix}-{i}",
            cpu="8",
            memory="32Gi",
            pods=110,
            gpus=8,
            labels={
                ZONE_LABEL: DEFAULT_ZONES[i % len(DEFAULT_ZONES)],
                "topology.kubernetes.io/region": "sim-region",
                NODEPOOL_LABEL: "default-pool",
            },
        )
        for i in range(count)
    ]


def isolated(spec: NodeSpec, group: str | None = None) -> NodeSpec:
    """Taint and label a node so only pods that ask for ``group`` land on it; returns
    the spec with the label/taint added (see :func:`isolated_pod_spec`)."""
    group = group or spec.name
    spec.labels = {**spec.labels, ISOLATION_KEY: group}
    spec.taints = [
        *spec.taints,
        {"key": ISOLATION_KEY, "value": group, "effect": "NoSchedule"},
    ]
    return spec


def isolated_pod_spec(group: str) -> JsonObj:
    """Pod spec fields that select (and tolerate) nodes made by :func:`isolated`."""
    return {
        "nodeSelector": {ISOLATION_KEY: group},
        "tolerations": [
            {"key": ISOLATION_KEY, "operator": "Equal", "value": group, "effect": "NoSchedule"}
        ],
    }


_node_counter = itertools.count()


def unique_node_name(prefix: str = "sim-extra") -> str:
    return f"{prefix}-{next(_node_counter)}-{secrets.token_hex(2)}"


class NodePool:
    """Nodes a test adds to the session simulator; all removed by :meth:`cleanup`."""

    def __init__(self, simulator: NodeSimulator) -> None:
        self.simulator = simulator
        self.names: list[str] = []

    async def add(
        self,
        name: str | None = None,
        *,
        cpu: str = "8",
        memory: str = "32Gi",
        pods: int = 110,
        gpus: int = 0,
        extended: Mapping[str, str | int] | None = None,
        labels: Mapping[str, str] | None = None,
        taints: list[JsonObj] | None = None,
        isolate: bool = False,
        termination_delay: float | None = None,
    ) -> SimNode:
        spec = NodeSpec(
            name=name or unique_node_name(),
            cpu=cpu,
            memory=memory,
            pods=pods,
            gpus=gpus,
            extended=dict(extended or {}),
            labels=dict(labels or {}),
            taints=list(taints or []),
            termination_delay=termination_delay,
        )
        return await self.add_spec(isolated(spec) if isolate else spec)

    async def add_spec(self, spec: NodeSpec) -> SimNode:
        self.names.append(spec.name)
        return await self.simulator.add_node(spec)

    async def cleanup(self) -> None:
        for name in reversed(self.names):
            if name in self.simulator.fleet.nodes:
                await self.simulator.remove_node(name)
        self.names.clear()


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def nodesim_api(kubeconfig: Path) -> AsyncIterator[ApiClient]:
    api = simulator_client(kubeconfig)
    try:
        yield api
    finally:
        await api.close()


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def node_simulator(kubeconfig: Path) -> AsyncIterator[NodeSimulator]:
    async with NodeSimulator(kubeconfig, default_nodes()) as simulator:
        yield simulator


@pytest_asyncio.fixture(loop_scope="session")
async def extra_nodes(node_simulator: NodeSimulator) -> AsyncIterator[NodePool]:
    pool = NodePool(node_simulator)
    try:
        yield pool
    finally:
        await pool.cleanup()


SimulatorFactory = Callable[..., Awaitable[NodeSimulator]]


@pytest_asyncio.fixture(loop_scope="session")
async def node_simulator_factory(kubeconfig: Path) -> AsyncIterator[SimulatorFactory]:
    """``await factory(nodes, **NodeSimulator kwargs)`` starts a simulator that is
    stopped, its nodes deleted, after the test."""
    started: list[NodeSimulator] = []

    async def factory(nodes: list[NodeSpec], **kwargs: Any) -> NodeSimulator:
        simulator = NodeSimulator(kubeconfig, nodes, **kwargs)
        await simulator.start()
        started.append(simulator)
        return simulator

    try:
        yield factory
    finally:
        for simulator in reversed(started):
            await simulator.stop()
