"""What a user of a LeaderWorkerSet waits for, ours against upstream's Go manager:

    python -m bench.latency [--replicas 100 --size 4 --kill 10 | --large]
        [--runs 2] [--configs ours,ours-hash,go] [--baseline /path/to/other/src]
        [--timeout 600] [--json FILE] [--plot DIR] [--keep-logs DIR]

Each configuration runs on a fresh local control plane with simulated nodes (the node
simulator as a process of its own, answering fault requests on a socket), one
LeaderWorkerSet of `replicas` groups of `size` (restartPolicy RecreateGroupOnPodRestart,
rolloutStrategy maxUnavailable 10%, maxSurge 0 unless told), whose pods take
`--grace` seconds (default 3) to terminate once deleted, as a container handling
SIGTERM would. In order:

  create      the LeaderWorkerSet, until every group is whole and Ready
  recovery    `--kill` groups at once, half by a worker's container crashing, half by
              deleting the leader; each timed until it is whole and Ready again
  rollout     a change of the pod template, until every group is updated and Ready
  scale       replicas N -> 2N until all Ready, and back until the extra pods are gone
  delete      the LeaderWorkerSet (background propagation, as kubectl), until its last
              pod is gone

Times come from the driver's pod watch: a group is whole and Ready when its leader and
`size - 1` workers are Ready and none is going, at the last of their Ready events.
Configurations: `ours` (Ordinal), `ours-hash` (Hash), `go` (upstream's manager, built by
hack/build-upstream-lws.sh; Ordinal, it has no Hash), `base` (ours from another src
tree, --baseline, Ordinal: a change against what it changes, in the same run).
Prints a line per configuration and at the end a markdown table of the medians (ours
against Go); --json appends a JSON line per configuration and run, --plot draws the
recovery distribution (bench.latency_report).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.manager_process import ManagerProcess, UpstreamManager, WebhookTLS
from lws_localcluster.nodesim.control import send_fault
from lws_localcluster.nodesim.pods import TERMINATION_DELAY_ANNOTATION

from bench import workload
from bench.latency_groups import MARKER, PodSeen, ReadySince, WholeGroup, pod_seen, whole_groups
from bench.latency_report import (
    GO,
    GroupReplacement,
    Result,
    plot_recovery,
    rollout_phases,
    steps_line,
    table,
)
from bench.processes import PeakMemory, Simulator, memory_kib, process_tree, tree_cpu_seconds
from bench.scale import PODS_PER_NODE, lws_ready, start_manager, upstream_manager_binary
from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS, PODS, STATEFULSETS
from leaderworkerset.runtime.cache import Informer
from leaderworkerset.runtime.client import ApiClient

T = TypeVar("T")
CONFIGS = {
    "ours": c.GROUP_IDENTITY_ORDINAL,
    "ours-hash": c.GROUP_IDENTITY_HASH,
    GO: c.GROUP_IDENTITY_ORDINAL,
    "base": c.GROUP_IDENTITY_ORDINAL,
}
# How often the driver looks at its caches; the times themselves come from the events.
POLL = 0.25


def manifest(args: argparse.Namespace, identity: str) -> dict[str, Any]:
    lws = workload.leaderworkerset(args.replicas, args.size, identity)
    spec = lws["spec"]
    unavailable: int | str = args.max_unavailable
    surge: int | str = args.max_surge
    spec["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {
            "maxUnavailable": int(unavailable) if str(unavailable).isdigit() else unavailable,
            "maxSurge": int(surge) if str(surge).isdigit() else surge,
        },
    }
    template = spec["leaderWorkerTemplate"]
    template["restartPolicy"] = c.RESTART_POLICY_RECREATE_GROUP_ON_POD_RESTART
    pod = template["workerTemplate"]
    pod["metadata"]["annotations"] = {TERMINATION_DELAY_ANNOTATION: str(args.grace), MARKER: "1"}
    # The grace period caps the simulated termination, as it caps a kubelet's.
    pod["spec"]["terminationGracePeriodSeconds"] = max(30, math.ceil(args.grace))
    return lws


def _partition(sts: dict[str, Any]) -> int:
    rolling = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
    return int(rolling.get("partition") or 0)


def _updated_and_ready(lws: dict[str, Any], replicas: int) -> bool:
    status = lws.get("status") or {}
    return lws_ready(lws, replicas) and status.get("updatedReplicas") == replicas


class Driver:
    """The watches, the manager and the clock of one configuration's run."""

    def __init__(
        self,
        api: ApiClient,
        args: argparse.Namespace,
        manager: ManagerProcess,
        faults: Path,
    ) -> None:
        self.api = api
        self.args = args
        self.manager = manager
        self.faults = faults
        self.since = ReadySince()
        # (monotonic time, partition) of the leader StatefulSet, each change.
        self.partitions: list[tuple[float, int]] = []
        self.last_gone = 0.0
        # Per pod UID: when the watch first saw it, saw it going, saw it gone; its last
        # state (a gone pod's included).
        self.first_seen: dict[str, float] = {}
        self.deleting_at: dict[str, float] = {}
        self.gone_at: dict[str, float] = {}
        self.last: dict[str, PodSeen] = {}
        self.pods = Informer(
            api,
            PODS,
            namespace=workload.NAMESPACE,
            label_selector=workload.POD_LABEL,
            transform=self._pod,
        )
        self.pods.add_handler(on_delete=self._gone)
        self.sets = Informer(api, STATEFULSETS, namespace=workload.NAMESPACE, transform=self._sts)

    def _pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        seen = pod_seen(pod)
        now = time.monotonic()
        self.since.observe(seen, now)
        self.first_seen.setdefault(seen.uid, now)
        if seen.deleting:
            self.deleting_at.setdefault(seen.uid, now)
        self.last[seen.uid] = seen
        meta = pod.get("metadata") or {}
        kept = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}
        return {"metadata": kept, "seen": seen}

    def _gone(self, pod: dict[str, Any]) -> None:
        self.last_gone = time.monotonic()
        self.gone_at[str((pod.get("metadata") or {}).get("uid", ""))] = self.last_gone

    def _sts(self, sts: dict[str, Any]) -> dict[str, Any]:
        meta = sts.get("metadata") or {}
        if meta.get("name") == workload.NAME:
            partition = _partition(sts)
            if not self.partitions or self.partitions[-1][1] != partition:
                self.partitions.append((time.monotonic(), partition))
        kept = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}
        return {"metadata": kept}

    def seen(self) -> list[PodSeen]:
        return [p["seen"] for p in self.pods.list()]

    def groups(self, **kw: Any) -> list[WholeGroup]:
        return whole_groups(self.seen(), self.args.size, self.since, **kw)

    async def lws(self) -> dict[str, Any]:
        return await self.api.get(LEADERWORKERSETS, workload.NAME, workload.NAMESPACE)

    async def until(self, what: str, check: Callable[[], T | None]) -> T:
        """Poll `check` until it answers; TimeoutError after --timeout seconds."""
        deadline = time.monotonic() + self.args.timeout
        while True:
            answer = check()
            if answer is not None:
                return answer
            if not self.manager.running():
                raise RuntimeError(f"{self.manager.name} exited:\n{self.manager.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.manager.name}: {what} not done in {self.args.timeout}s")
            await asyncio.sleep(POLL)

    async def until_lws(self, check: Callable[[dict[str, Any]], bool]) -> float:
        """The time the LeaderWorkerSet's status first passed `check`, polled."""
        deadline = time.monotonic() + self.args.timeout
        while not check(await self.lws()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.manager.name}: LWS status not done")
            await asyncio.sleep(POLL)
        return time.monotonic()

    # -- the phases ----------------------------------------------------------------------

    async def create(self, result: Result, identity: str) -> None:
        n = self.args.replicas
        started = time.monotonic()
        body = manifest(self.args, identity)
        await self.api.create(LEADERWORKERSETS, body, workload.NAMESPACE)
        groups = await self.until("create", lambda: g if len(g := self.groups()) == n else None)
        result.create_s = max(g.ready_at for g in groups) - started
        ready = await self.until_lws(lambda lws: lws_ready(lws, n))
        result.create_lws_s = ready - started

    async def recovery(self, result: Result) -> None:
        """Kill `--kill` groups at once, spread over the indices: even ones by a worker's
        container crash, odd ones by deleting the leader."""
        n, pods = self.args.replicas, self.seen()
        before = {p.uid for p in pods}
        groups = sorted(self.groups(), key=lambda g: (len(g.index), g.index))
        stride = max(1, len(groups) // self.args.kill)
        victims = groups[::stride][: self.args.kill]
        kills: dict[str, tuple[str, float]] = {}

        async def kill(i: int, group: WholeGroup) -> None:
            members = [p for p in pods if p.uid in group.uids]
            leader = next(p for p in members if p.leader)
            workers = [p for p in members if not p.leader]
            if i % 2 == 0 and workers:
                request = {
                    "fault": "crash",
                    "namespace": workload.NAMESPACE,
                    "pod": workers[0].name,
                }
                kills[group.key] = ("crash", time.monotonic())
                await asyncio.to_thread(send_fault, self.faults, request)
            else:
                kills[group.key] = ("delete", time.monotonic())
                await self.api.delete(PODS, leader.name, workload.NAMESPACE)

        await asyncio.gather(*(kill(i, g) for i, g in enumerate(victims)))
        first = min(at for _, at in kills.values())

        def recovered() -> list[WholeGroup] | None:
            fresh = self.groups(exclude=before)
            whole = len(self.groups())
            return fresh if len(fresh) >= len(victims) and whole == n else None

        for group in await self.until("recovery", recovered):
            kind, at = kills.get(group.key, ("-", first))
            result.recovery.append(group.ready_at - at)
            result.recovery_kinds.append(kind)

    async def rollout(self, result: Result) -> None:
        n = self.args.replicas
        self.partitions.clear()
        old = {p.index: p.uid for p in self.seen() if p.leader and not p.deleting}
        started = time.monotonic()
        patch = {
            "spec": {"leaderWorkerTemplate": {"workerTemplate": {"metadata": {"annotations": {
                MARKER: "2"
            }}}}}
        }  # fmt: skip
        await self.api.patch(LEADERWORKERSETS, workload.NAME, patch, namespace=workload.NAMESPACE)

        def updated() -> list[WholeGroup] | None:
            groups = self.groups(marker="2")
            return groups if len(groups) == n else None

        groups = await self.until("rollout", updated)
        result.rollout_s = max(g.ready_at for g in groups) - started
        result.updated_at = {g.index: g.ready_at - started for g in groups}
        ready = await self.until_lws(lambda lws: _updated_and_ready(lws, n))
        result.rollout_lws_s = ready - started
        partitions = [(at - started, p) for at, p in self.partitions]
        if partitions and partitions[0][1] != n:
            partitions.insert(0, (0.0, n))
        result.partitions = partitions
        replaced = {
            g.index: self._replacement(old.get(g.index), g, started, result.updated_at[g.index])
            for g in groups
        }
        result.rollout_phases = rollout_phases(partitions, replaced)

    def _replacement(
        self, old: str | None, group: WholeGroup, started: float, ready: float
    ) -> GroupReplacement:
        def since(at: float | None) -> float | None:
            return None if at is None else at - started

        workers = [
            self.first_seen[uid]
            for uid in group.uids
            if uid != group.leader_uid and uid in self.first_seen
        ]
        return GroupReplacement(
            old_deleting=since(self.deleting_at.get(old or "")),
            old_gone=since(self.gone_at.get(old or "")),
            new_leader=since(self.first_seen.get(group.leader_uid)),
            new_worker=since(min(workers, default=None)),
            ready=ready,
        )

    async def scale(self, result: Result) -> None:
        n, size = self.args.replicas, self.args.size
        started = time.monotonic()
        await self._replicas(2 * n)
        groups = await self.until(
            "scale up", lambda: g if len(g := self.groups()) == 2 * n else None
        )
        result.scale_up_s = max(g.ready_at for g in groups) - started
        await self.until_lws(lambda lws: lws_ready(lws, 2 * n))
        await asyncio.sleep(self.args.settle)
        started = time.monotonic()
        await self._replicas(n)
        await self.until("scale down", lambda: True if len(self.pods.list()) == n * size else None)
        result.scale_down_s = self.last_gone - started

    async def _replicas(self, replicas: int) -> None:
        patch = {"spec": {"replicas": replicas}}
        await self.api.patch(LEADERWORKERSETS, workload.NAME, patch, namespace=workload.NAMESPACE)

    async def delete(self, result: Result) -> None:
        started = time.monotonic()
        await self.api.delete(
            LEADERWORKERSETS, workload.NAME, workload.NAMESPACE, propagation_policy="Background"
        )
        await self.until("delete", lambda: True if not self.pods.list() else None)
        result.delete_s = self.last_gone - started


async def measure(
    config: str,
    run: int,
    args: argparse.Namespace,
    manager: ManagerProcess,
    kubeconfig: Path,
    faults: Path,
) -> Result:
    identity = CONFIGS[config]
    api = ApiClient.from_kubeconfig(kubeconfig, qps=0, burst=0, user_agent="lws-latency-bench")
    result = Result(config, run, identity, args.replicas, args.size, termination_delay=args.grace)
    driver = Driver(api, args, manager, faults)
    try:
        await start_manager(api, manager)
        for informer in (driver.pods, driver.sets):
            informer.start()
            await informer.wait_synced()
        pids = process_tree(manager.pid)
        memory = PeakMemory(pids)
        total = tree_cpu_seconds(pids)
        phases: tuple[tuple[str, Callable[[], Awaitable[None]]], ...] = (
            ("create", lambda: driver.create(result, identity)),
            ("recovery", lambda: driver.recovery(result)),
            ("rollout", lambda: driver.rollout(result)),
            ("scale", lambda: driver.scale(result)),
            ("delete", lambda: driver.delete(result)),
        )
        for name, phase in phases:
            cpu = tree_cpu_seconds(pids)
            try:
                await phase()
            except (TimeoutError, RuntimeError) as err:
                # The cluster is in no known state for the next phases; the other
                # configurations of the run still get theirs.
                result.failed = f"{name}: {err}"
                break
            result.cpu[name] = round(tree_cpu_seconds(pids) - cpu, 2)
            if name != "delete":
                # Let the phase's tail (the last status writes, terminating pods) pass.
                await asyncio.sleep(args.settle)
        result.cpu["total"] = round(tree_cpu_seconds(pids) - total, 2)
        peak, _ = memory.stop()
        result.peak_pss_mib = round(peak / 1024, 1)
        hwm = 0
        for pid in pids:
            with contextlib.suppress(OSError):
                hwm += memory_kib(pid)[1]
        result.peak_rss_mib = round(hwm / 1024, 1)
        return result
    finally:
        for informer in (driver.pods, driver.sets):
            await informer.stop()
        await api.close()


def run_config(config: str, run: int, args: argparse.Namespace, go_binary: Path | None) -> Result:
    nodes = max(1, math.ceil(2 * args.replicas * args.size / PODS_PER_NODE))
    with tempfile.TemporaryDirectory(prefix=f"lws-latency-{config}-") as tmp:
        workdir = Path(tmp)
        with ControlPlane(
            workdir / "cp", name=f"latency-{config}", binaries=ensure_binaries()
        ) as cp:
            tls = WebhookTLS.create(workdir / "certs", "lws-bench-ca")
            manager: ManagerProcess
            if config == GO:
                assert go_binary is not None
                manager = UpstreamManager(
                    config, workdir, cp.kubeconfig, executable=[str(go_binary)], tls=tls
                )
            else:
                env = {"PYTHONPATH": str(args.baseline.resolve())} if config == "base" else {}
                manager = ManagerProcess(config, workdir, cp.kubeconfig, tls=tls, env=env)
            faults = workdir / "faults.sock"
            result: Result | None = None
            try:
                with Simulator(cp.kubeconfig, nodes, workdir / "nodesim.log", faults):
                    result = asyncio.run(measure(config, run, args, manager, cp.kubeconfig, faults))
                    return result
            finally:
                manager.kill()
                failed = result is None or result.failed is not None
                # A failed configuration's logs are kept even unasked: they are the
                # only account of what went wrong.
                if args.keep_logs or failed:
                    kept = Path(args.keep_logs or tempfile.mkdtemp(prefix="lws-latency-logs-"))
                    if not args.keep_logs:
                        print(f"{config} run {run}: logs kept in {kept}", flush=True)
                    kept.mkdir(parents=True, exist_ok=True)
                    for name, path in (
                        (f"{config}-{run}.log", manager.log_path),
                        (f"{config}-{run}.nodesim.log", workdir / "nodesim.log"),
                    ):
                        if path.exists():
                            (kept / name).write_bytes(path.read_bytes())


def summary(result: Result) -> str:
    def f(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    line = (
        f"{result.config} run {result.run}: create {f(result.create_s)} s; recovery p50 "
        f"{f(result.recovery_p(0.5))} p99 {f(result.recovery_p(0.99))} max "
        f"{f(max(result.recovery, default=None))} s; rollout {f(result.rollout_s)} s "
        f"(LWS {f(result.rollout_lws_s)}); scale up {f(result.scale_up_s)} down "
        f"{f(result.scale_down_s)} s; delete {f(result.delete_s)} s; CPU {result.cpu}; "
        f"peak RSS {result.peak_rss_mib} MiB"
    )
    steps = steps_line(result)
    line += f"\n  rollout: {steps}" if steps else ""
    return line + (f"\n  not finished: {result.failed}" if result.failed else "")


def _configs(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    wrong = [n for n in names if n not in CONFIGS]
    if wrong or not names:
        raise argparse.ArgumentTypeError(f"--configs: {wrong or 'empty'}; from {sorted(CONFIGS)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=100, help="groups (N)")
    parser.add_argument("--size", type=int, default=4, help="pods per group")
    parser.add_argument("--kill", type=int, default=10, help="groups killed at once (V)")
    parser.add_argument(
        "--large", action="store_true", help="1000 groups x 8, 100 killed (overrides the three)"
    )
    parser.add_argument("--grace", type=float, default=3.0, help="seconds a pod takes to end")
    parser.add_argument("--max-unavailable", default="10%")
    parser.add_argument("--max-surge", default="0")
    parser.add_argument("--configs", type=_configs, default=["ours", "ours-hash", GO])
    parser.add_argument("--baseline", type=Path, help="src/ tree of the `base` configuration")
    parser.add_argument("--runs", type=int, default=1, help="configurations alternate within a run")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per phase")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between phases")
    parser.add_argument("--json", metavar="FILE", help="append each result as a JSON line")
    parser.add_argument("--plot", metavar="DIR", help="draw the recovery distribution here")
    parser.add_argument("--keep-logs", metavar="DIR", help="keep manager and simulator logs")
    args = parser.parse_args()
    if args.large:
        args.replicas, args.size, args.kill = 1000, 8, 100
    if "base" in args.configs and args.baseline is None:
        parser.error("the base configuration needs --baseline SRC")
    go_binary = upstream_manager_binary() if GO in args.configs else None
    print(
        f"{args.replicas} groups x {args.size}, {args.kill} killed, pods end in {args.grace} s, "
        f"maxUnavailable {args.max_unavailable} maxSurge {args.max_surge}, {os.cpu_count()} "
        f"CPUs: {', '.join(args.configs)}",
        flush=True,
    )
    results: list[Result] = []
    for run in range(1, args.runs + 1):
        for config in args.configs:
            result = run_config(config, run, args, go_binary)
            results.append(result)
            print(summary(result), flush=True)
            if args.json:
                with open(args.json, "a") as out:
                    out.write(json.dumps(result.record()) + "\n")
    print()
    print(table(results))
    if args.plot:
        path = Path(args.plot) / f"recovery-{args.replicas}x{args.size}.png"
        print(f"wrote {plot_recovery(results, path)}")


if __name__ == "__main__":
    main()
