"""Upstream #1048's crash-looping group, with and without the group back-off.

One LeaderWorkerSet of one group of two (restartPolicy RecreateGroupOnPodRestart) whose
worker's container exits as soon as it runs; the kubelet (simulated) restarts it in
place with its CrashLoopBackOff (10 s doubling), as a real one would while the group
waits. For `--seconds` (90, as #1048) from the first crash, on a fresh control plane
per configuration with our controller as its own process:

- recreations: leader pods the group went through, less the first;
- API writes: every POST, PUT, PATCH and DELETE the API server served meanwhile (all
  clients: the controller, kube-controller-manager, the scheduler, the kubelets), from
  its `apiserver_request_total`.

Configurations: `off` (groupBackoff.initialDelay 0s: upstream's behaviour) and `on`
(the defaults: 10 s doubling to 5 min).

    PYTHONPATH=$PWD/src:$PWD:$PWD/localcluster/src python -m bench.crashloop
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.manager_process import ManagerProcess, WebhookTLS
from lws_localcluster.nodesim.simulator import NodeSimulator, NodeSpec

from bench.processes import sum_by
from bench.scale import start_manager
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient

NAME = "crashloop"
NAMESPACE = "default"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")
# The kubelet's CrashLoopBackOff for a container restarted in place.
KUBELET_BACKOFF = 10.0
KUBELET_BACKOFF_CAP = 300.0
CONFIGS = {"off": {"initialDelay": "0s"}, "on": {}}


@dataclass
class Outcome:
    config: str
    seconds: float
    recreations: int
    api_writes: int
    container_restarts: int


def lws_body() -> dict[str, Any]:
    spec = {"containers": [{"name": "main", "image": "busybox", "command": ["false"]}]}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART,
                "workerTemplate": {"spec": spec},
            },
        },
    }


def api_writes(cp: ControlPlane) -> int:
    text = cp.api_get("/metrics", timeout=30).decode()
    verbs = sum_by(text, "apiserver_request_total", "verb")
    return int(sum(n for (verb,), n in verbs.items() if verb in WRITE_VERBS))


class CrashingWorkers:
    """Crashes each worker as soon as it runs, and again whenever the kubelet's
    back-off would have restarted it; notes every leader the group had."""

    def __init__(self, api: ApiClient, sim: NodeSimulator) -> None:
        self.api, self.sim = api, sim
        self.leaders: set[str] = set()
        self.crashes: dict[str, tuple[int, float]] = {}  # worker uid -> (crashes, last)
        self.first_crash: float | None = None

    async def step(self) -> None:
        now = time.monotonic()
        selector = f"{c.LABEL_SET_NAME}={NAME}"
        for pod in (await self.api.list(PODS, NAMESPACE, label_selector=selector))["items"]:
            meta, status = pod["metadata"], pod.get("status") or {}
            if meta.get("deletionTimestamp") or status.get("phase") != "Running":
                continue
            if meta["labels"].get(c.LABEL_WORKER_INDEX) == c.LEADER_WORKER_INDEX:
                self.leaders.add(meta["uid"])
                continue
            crashes, last = self.crashes.get(meta["uid"], (0, 0.0))
            wait = min(KUBELET_BACKOFF * 2 ** (crashes - 1), KUBELET_BACKOFF_CAP) if crashes else 0
            if now - last < wait:
                continue
            try:
                await self.sim.restart_container(NAMESPACE, meta["name"])
            except LookupError:
                continue  # gone meanwhile
            self.crashes[meta["uid"]] = (crashes + 1, now)
            if self.first_crash is None:
                self.first_crash = now


async def measure(config: str, cp: ControlPlane, workdir: Path, seconds: float) -> Outcome:
    manager = ManagerProcess(
        config,
        workdir,
        cp.kubeconfig,
        tls=WebhookTLS.create(workdir / "certs", "lws-bench-ca"),
        group_backoff=CONFIGS[config],
    )
    api = ApiClient.from_kubeconfig(cp.kubeconfig)
    nodes = [NodeSpec(f"crash-{i}") for i in range(2)]
    try:
        await start_manager(api, manager)
        async with NodeSimulator(cp.kubeconfig, nodes, termination_delay=0.5) as sim:
            await api.create(LEADERWORKERSETS, lws_body())
            crashing = CrashingWorkers(api, sim)
            while crashing.first_crash is None:
                await crashing.step()
                await asyncio.sleep(0.2)
            before = api_writes(cp)
            while time.monotonic() - crashing.first_crash < seconds:
                await crashing.step()
                await asyncio.sleep(0.2)
            writes = api_writes(cp) - before
            restarts = sum(n for n, _ in crashing.crashes.values())
            return Outcome(config, seconds, len(crashing.leaders) - 1, writes, restarts)
    finally:
        manager.kill()
        await api.close()


def run(config: str, seconds: float) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"lws-crashloop-{config}-") as tmp:
        workdir = Path(tmp)
        with ControlPlane(workdir / "cp", name=f"crash-{config}", binaries=ensure_binaries()) as cp:
            return asyncio.run(measure(config, cp, workdir, seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--configs", default="off,on")
    args = parser.parse_args()
    outcomes = [run(config, args.seconds) for config in args.configs.split(",")]
    for outcome in outcomes:
        print(json.dumps(asdict(outcome)))
    print()
    print(f"| back-off | recreations in {args.seconds:.0f} s | API writes | worker restarts |")
    print("|---|---|---|---|")
    for o in outcomes:
        print(f"| {o.config} | {o.recreations} | {o.api_writes} | {o.container_restarts} |")


if __name__ == "__main__":
    main()
