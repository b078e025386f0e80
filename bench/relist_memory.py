"""Resident memory of a manager before and after its caches are read again N times:

    python -m bench.relist_memory [--replicas 1000] [--size 8] [--relists 5]
        [--with-upstream] [--baseline /path/to/other/src]

Each configuration gets a fresh local control plane with simulated nodes and one
LeaderWorkerSet of `replicas` groups of `size` pods, all Ready. Then, `relists` times:
kube-apiserver is stopped, etcd compacted while it is down and the API server started
again, so every watch resumes at a version that is gone (410) and every cache of every
manager lists its resource again (the soak's compaction fault, `tests/chaos/harness`).
After each, the benchmark waits until the manager is ready and its RSS has settled
(samples within 1 % of each other for `--settle` seconds), and reads it.

ours      `lws controller` as its own process (counts its relists from
          lws_cache_lists_total: every cache must have listed once more per round)
upstream  upstream's Go manager (hack/build-upstream-lws.sh), with --with-upstream
base      `lws controller` from another source tree (--baseline SRC)

Printed: RSS (VmRSS, MiB) settled before the first relist, after each, the peak
(VmHWM) and the growth from the first to the last as MiB and per cent, one line per
configuration, then the growth as a multiple of upstream's when it ran.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.manager_process import ManagerProcess, UpstreamManager, WebhookTLS
from tests.chaos.harness import restart_over_compaction

from bench import workload
from bench.processes import Simulator, memory_kib, sum_by
from bench.scale import MODES, PODS_PER_NODE, lws_ready, start_manager, upstream_manager_binary
from leaderworkerset.api.resources import CONFIGMAPS, LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient

LISTS = "lws_cache_lists_total"


@dataclass
class Result:
    config: str
    before_kib: int = 0
    after_kib: list[int] = field(default_factory=list)
    peak_kib: int = 0
    lists: list[int] = field(default_factory=list)

    def line(self) -> str:
        after = " ".join(f"{kib / 1024:.1f}" for kib in self.after_kib)
        last = self.after_kib[-1] if self.after_kib else self.before_kib
        growth = (last - self.before_kib) / 1024
        share = 100 * (last - self.before_kib) / max(self.before_kib, 1)
        return (
            f"{self.config:<9} before {self.before_kib / 1024:6.1f}  after each: {after}"
            f"  peak {self.peak_kib / 1024:.1f}  growth {growth:+.1f} MiB ({share:+.1f} %)"
        )

    @property
    def growth_kib(self) -> int:
        return (self.after_kib[-1] if self.after_kib else self.before_kib) - self.before_kib


async def settled_rss(pid: int, seconds: float, within: float) -> int:
    """VmRSS once `seconds` of one-second samples lie within 1 % of each other."""
    deadline = time.monotonic() + within
    samples: list[int] = []
    window = max(2, math.ceil(seconds))
    while time.monotonic() < deadline:
        samples.append(memory_kib(pid)[0])
        recent = samples[-window:]
        if len(recent) == window and max(recent) - min(recent) <= 0.01 * max(recent):
            return recent[-1]
        await asyncio.sleep(1.0)
    raise TimeoutError(f"RSS of {pid} still moving after {within:.0f}s: {samples[-window:]}")


def _lists(metrics_text: str) -> dict[str, int]:
    """Lists so far by resource; at start, one per cache (a resource can have two)."""
    return {key[0]: int(n) for key, n in sum_by(metrics_text, LISTS, "resource").items()}


def _grown_by(now: dict[str, int], before: dict[str, int], caches: dict[str, int]) -> bool:
    return all(now.get(r, 0) >= before[r] + n for r, n in caches.items())


async def _wait_ready(api: ApiClient, replicas: int, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        current = await api.get(LEADERWORKERSETS, workload.NAME, workload.NAMESPACE)
        if lws_ready(current, replicas):
            return
        await asyncio.sleep(1.0)
    raise TimeoutError(f"the LeaderWorkerSet is not ready after {within:.0f}s")


async def _relists_seen(
    manager: ManagerProcess,
    token: str | None,
    before: dict[str, int],
    caches: dict[str, int],
    within: float,
) -> dict[str, int]:
    """Our managers count their lists; wait until every cache has listed again."""
    deadline = time.monotonic() + within
    while True:
        try:
            lists = _lists(manager.metrics_text(token))
        except OSError:
            lists = {}  # the metrics server answers again once the manager does
        if _grown_by(lists, before, caches):
            return lists
        if time.monotonic() > deadline:
            raise RuntimeError(f"{manager.name}: lists {lists}, from {before}, caches {caches}")
        await asyncio.sleep(0.5)


async def measure(
    config: str, cp: ControlPlane, manager: ManagerProcess, args: argparse.Namespace
) -> Result:
    result = Result(config)
    api = ApiClient.from_kubeconfig(cp.kubeconfig, qps=0, burst=0, user_agent="lws-bench")
    try:
        token = await start_manager(api, manager)
        lws = workload.leaderworkerset(args.replicas, args.size, MODES[args.mode])
        await api.create(LEADERWORKERSETS, lws, workload.NAMESPACE)
        await _wait_ready(api, args.replicas, args.timeout)
        ours = not isinstance(manager, UpstreamManager)
        result.before_kib = await settled_rss(manager.pid, args.settle, args.timeout)
        # Each cache listed once at start, and none since (no watch has expired yet).
        caches = _lists(manager.metrics_text(token)) if ours else {}
        lists = dict(caches)
        count = sum(caches.values())
        print(f"  {config}: ready, {result.before_kib / 1024:.1f} MiB, {count} caches", flush=True)
        for round_ in range(1, args.relists + 1):
            revision = await asyncio.to_thread(restart_over_compaction, cp, cp.etcd_endpoint)
            # A write after the compaction, so every watch has a newer version to reach.
            await api.create(
                CONFIGMAPS, {"metadata": {"name": f"relist-{round_}"}}, workload.NAMESPACE
            )
            if ours:
                seen = await _relists_seen(manager, token, lists, caches, args.timeout)
                result.lists.append(sum(seen.values()) - sum(lists.values()))
                lists = seen
            await manager.wait_ready(within=args.timeout)
            rss = await settled_rss(manager.pid, args.settle, args.timeout)
            result.after_kib.append(rss)
            print(
                f"  {config}: compacted at {revision}, relisted, {rss / 1024:.1f} MiB", flush=True
            )
        result.peak_kib = memory_kib(manager.pid)[1]
        if not manager.running():
            raise RuntimeError(f"{config} exited:\n{manager.log_tail()}")
        return result
    finally:
        await api.close()


def run_config(config: str, args: argparse.Namespace, go_binary: Path | None) -> Result:
    pods = args.replicas * args.size
    with tempfile.TemporaryDirectory(prefix=f"lws-relist-{config}-") as tmp:
        workdir = Path(tmp)
        with ControlPlane(
            workdir / "cp", name=f"relist-{config}", binaries=ensure_binaries()
        ) as cp:
            tls = WebhookTLS.create(workdir / "certs", "lws-bench-ca")
            manager: ManagerProcess
            if config == "upstream":
                assert go_binary is not None
                manager = UpstreamManager(
                    config, workdir, cp.kubeconfig, executable=[str(go_binary)], tls=tls
                )
            else:
                env = {"PYTHONPATH": str(args.baseline.resolve())} if config == "base" else {}
                env.update(item.split("=", 1) for item in args.env)
                manager = ManagerProcess(config, workdir, cp.kubeconfig, tls=tls, env=env)
            nodes = max(1, math.ceil(pods / PODS_PER_NODE))
            try:
                with Simulator(cp.kubeconfig, nodes, workdir / "nodesim.log"):
                    return asyncio.run(measure(config, cp, manager, args))
            finally:
                manager.kill()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, default=1000, help="groups")
    parser.add_argument("--size", type=int, default=8, help="pods per group")
    parser.add_argument("--mode", choices=sorted(MODES), default="ordinal", help="groupIdentity")
    parser.add_argument("--relists", type=int, default=5, help="rounds of relisting")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds of flat RSS")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per wait")
    parser.add_argument("--with-upstream", action="store_true", help="also upstream's Go manager")
    parser.add_argument("--baseline", type=Path, help="also `lws controller` from this src/ tree")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="for our managers"
    )
    args = parser.parse_args()
    go_binary = upstream_manager_binary() if args.with_upstream else None
    configs = ["ours"] + (["base"] if args.baseline else []) + (["upstream"] if go_binary else [])
    print(
        f"{args.replicas} groups x {args.size} ({args.replicas * args.size} pods), "
        f"{args.relists} relists, configurations {', '.join(configs)}",
        flush=True,
    )
    results = []
    for config in configs:
        results.append(run_config(config, args, go_binary))
        print(results[-1].line(), flush=True)
    print()
    for result in results:
        print(result.line())
    upstream = next((r for r in results if r.config == "upstream"), None)
    if upstream is not None and upstream.growth_kib > 0:
        for result in results:
            if result is not upstream:
                ratio = result.growth_kib / upstream.growth_kib
                print(f"{result.config}: growth {ratio:.2f}x upstream's")


if __name__ == "__main__":
    main()
