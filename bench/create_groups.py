"""Time from creating a LeaderWorkerSet to all groups Ready, and the controller's API
writes for it and in an idle period afterwards.

    .venv/bin/python bench/create_groups.py --replicas 10 --size 4 --idle 60 [--hash]

Runs a local control plane, simulated nodes and the controller in this process.
Writes are counted from the controller's own `rest_client_requests_total`
(methods POST, PUT, PATCH, DELETE); the node simulator's and this script's
requests are not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.deploy import running_controller
from lws_localcluster.nodesim.nodes import default_nodes
from lws_localcluster.nodesim.simulator import NodeSimulator
from prometheus_client import CollectorRegistry

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def controller_writes(registry: CollectorRegistry) -> dict[str, int]:
    counts = dict.fromkeys(WRITE_METHODS, 0)
    for metric in registry.collect():
        if metric.name != "rest_client_requests":
            continue
        for sample in metric.samples:
            method = sample.labels.get("method")
            if sample.name.endswith("_total") and method in counts:
                counts[method] += int(sample.value)
    return counts


def manifest(replicas: int, size: int, identity: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "groupIdentity": identity,
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "10m"}},
                            }
                        ]
                    }
                },
            },
        },
    }


async def run(cp: ControlPlane, replicas: int, size: int, idle: float, identity: str) -> None:
    async with (
        NodeSimulator(cp.kubeconfig, default_nodes(4)),
        running_controller(cp.kubeconfig) as running,
    ):
        assert running.manager is not None
        registry = running.manager.metrics.registry
        api = ApiClient.from_kubeconfig(cp.kubeconfig)
        before = controller_writes(registry)
        started = time.monotonic()
        await api.create(LEADERWORKERSETS, manifest(replicas, size, identity))
        while True:
            lws = await api.get(LEADERWORKERSETS, "bench", "default")
            status = lws.get("status") or {}
            if status.get("readyReplicas") == replicas and any(
                x["type"] == c.CONDITION_AVAILABLE and x["status"] == "True"
                for x in status.get("conditions") or []
            ):
                break
            await asyncio.sleep(0.05)
        elapsed = time.monotonic() - started
        # The last status write may trail the observation by a moment.
        await asyncio.sleep(2)
        created = controller_writes(registry)
        await asyncio.sleep(idle)
        after_idle = controller_writes(registry)
        await api.close()

    def delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        return {k: b[k] - a[k] for k in WRITE_METHODS}

    to_ready = delta(before, created)
    idle_writes = delta(created, after_idle)
    print(f"mode                     {identity}")
    print(f"groups x size            {replicas} x {size} ({replicas * size} pods)")
    print(f"create -> all Ready      {elapsed:.2f} s")
    print(f"controller writes        {sum(to_ready.values())} {to_ready}")
    print(f"writes in {idle:.0f} s idle      {sum(idle_writes.values())} {idle_writes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=10)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--hash", action="store_true", help="groupIdentity: Hash")
    args = parser.parse_args()
    identity = c.GROUP_IDENTITY_HASH if args.hash else c.GROUP_IDENTITY_ORDINAL
    with (
        tempfile.TemporaryDirectory(prefix="lws-bench-") as workdir,
        ControlPlane(Path(workdir), name="bench", binaries=ensure_binaries()) as cp,
    ):
        asyncio.run(run(cp, args.replicas, args.size, args.idle, identity))


if __name__ == "__main__":
    main()
