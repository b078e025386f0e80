"""`python -m bench.soak [--minutes 60] [--seed 1] [--out DIR]`: see docs/soak.md.
Exits 1 when a pass condition fails."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.controlplane import APISERVER, ControlPlane, Revived
from lws_localcluster.nodesim.simulator import NodeSimulator
from tests.chaos.harness import WebhookRelay, log_paths, start_controllers, supervising
from tests.chaos.invariants import converged
from tests.toolkit.manager_process import ManagerProcess, Managers

from bench.soak import audit, fleet
from bench.soak import schedule as s
from bench.soak.churn import Churn
from bench.soak.report import QuietWindow, write
from bench.soak.sampler import Sampler
from bench.soak.watch import Watch
from leaderworkerset.api.resources import LEADERWORKERSETS, NAMESPACES
from leaderworkerset.runtime.client import ApiClient

OPERATOR_NAMESPACE = "lws-system"
# Longer than a kube-apiserver restart takes here, so the leader keeps leading through
# one (a replica that loses its lease exits, and would be started again with an empty
# heap, which is not what memory over time should measure).
ELECTION = {"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "2s"}


# How often the soak looks for an exited kube-scheduler or kcm, as a kubelet would.
REVIVE_EVERY = 2.0


async def _keep_control_plane_up(cp: ControlPlane, revived: list[tuple[float, Revived]]) -> None:
    """Starts an exited kube-scheduler or kcm again, and notes it for the report: a
    scheduler that exits after an API server restart would otherwise leave every pod
    created after it Pending, and the soak would measure a cluster no one runs."""
    while True:
        for r in await asyncio.to_thread(cp.revive):
            revived.append((time.monotonic(), r))
            print(f"  {r.component} exited ({r.exit_code}), started again: {r.last_line}")
        await asyncio.sleep(REVIVE_EVERY)


async def _until(moment: float) -> None:
    await asyncio.sleep(max(0.0, moment - time.monotonic()))


async def _set_up(api: ApiClient, managers: Managers, relay: WebhookRelay) -> list[ManagerProcess]:
    for name in (fleet.NAMESPACE, fleet.EXCLUSIVE_NAMESPACE, OPERATOR_NAMESPACE):
        await api.create(NAMESPACES, {"metadata": {"name": name}})
    procs = await start_controllers(api, managers, relay, election=ELECTION)
    for member in fleet.FLEET:
        await api.create(LEADERWORKERSETS, member.manifest(), member.namespace)
    verdicts = await asyncio.gather(
        *(converged(api, m.namespace, m.name, within=600) for m in fleet.FLEET)
    )
    broken = [str(v) for verdict in verdicts for v in verdict.violations]
    if broken:
        raise RuntimeError("the fleet did not come up whole:\n" + "\n".join(broken))
    return procs


async def soak(cp: ControlPlane, args: argparse.Namespace, workdir: Path, audit_log: Path) -> bool:
    api = ApiClient.from_kubeconfig(cp.kubeconfig, qps=0, burst=0, user_agent="lws-soak")
    relay = WebhookRelay()
    await relay.start()
    managers = Managers(workdir, cp.kubeconfig, OPERATOR_NAMESPACE)
    sim = NodeSimulator(cp.kubeconfig, fleet.nodes(), termination_delay=1.0)
    await sim.start()
    revived: list[tuple[float, Revived]] = []
    tasks = [asyncio.create_task(_keep_control_plane_up(cp, revived), name="control-plane")]
    try:
        procs = await _set_up(api, managers, relay)
        print(f"fleet Ready: {sum(m.replicas for m in fleet.FLEET)} groups", flush=True)
        watch = Watch(api, log_paths(procs))
        sampler = Sampler(api, procs)
        churn = Churn(api, sim, cp, procs)
        blocks = s.plan(
            args.minutes,
            args.seed,
            [m.name for m in fleet.FLEET],
            sim.node_names,
            relists=args.relists,
        )
        quiet: list[QuietWindow] = []
        async with supervising(procs) as supervisor:
            tasks += [
                asyncio.create_task(watch.run(), name="watch"),
                asyncio.create_task(sampler.run(), name="sampler"),
            ]
            started = churn.started = watch.started = sampler.started = time.monotonic()
            rested = 0.0  # waited for rest so far: every later block starts that much later
            for block in blocks:
                planned = started + block.index * s.BLOCK_SECONDS + rested
                begin = max(time.monotonic(), planned)
                await _until(begin)
                print(f"block {block.index} at {(begin - started) / 60:.1f} min", flush=True)
                if block.quiet:
                    # Quiet means nothing left to do, not merely nothing new asked.
                    waited, moving = await watch.rest()
                    rested += waited
                    print(f"  at rest after {waited:.0f} s {moving or ''}", flush=True)
                    opened = time.monotonic()
                    before, wall = await sampler.read(), audit.now()
                    await _until(opened + s.BLOCK_SECONDS)
                    writes = sampler.writes_between(before, await sampler.read())
                    named = await asyncio.to_thread(
                        audit.controller_writes, audit_log, wall, audit.now()
                    )
                    what = [f"{n} x {w}" for w, n in named.most_common(10)]
                    minute = (opened - started) / 60
                    quiet.append(
                        QuietWindow(minute, s.BLOCK_SECONDS / 60, writes, what, waited, moving)
                    )
                    print(f"  quiet: {writes} writes {what}", flush=True)
                    continue
                for action in block.actions:
                    await _until(begin + action.at)
                    await churn.run(action)
                await churn.drain()
                settled = await watch.settle(block.index)
                print(
                    f"  settled in {settled.seconds:.0f} s, {len(settled.violations)} violations",
                    flush=True,
                )
            await _until(started + len(blocks) * s.BLOCK_SECONDS + rested)
            # A watch or sampler that died has checked or measured nothing since: that
            # fails the run, loudly, rather than passing on what it did not see.
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    failure = f"soak tool: {task.get_name()} died: {task.exception()!r}"
                    print(failure, flush=True)
                    watch.violations[failure] = time.monotonic() - started
            # The last sample is this one, not one the sampler's own loop takes with it.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await sampler.take()
            restarts = supervisor.restarts
        return write(
            args.out,
            minutes=args.minutes,
            seed=args.seed,
            samples=sampler.samples,
            watch=watch,
            quiet=quiet,
            done=churn.done,
            restarts=restarts,
            # Before the churn began (fleet set-up) is a negative minute.
            revived=[((at - started) / 60, r) for at, r in revived],
            relists=args.relists,
        )
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        managers.kill_all()
        with contextlib.suppress(Exception):
            await sim.stop()
        await relay.stop()
        await api.close()


def _minutes(text: str) -> int:
    """Whole 5-minute blocks, at least two (a churn block and a quiet one)."""
    minutes = int(text)
    if minutes < 10 or minutes % 5:
        raise argparse.ArgumentTypeError(f"{minutes}: give 10 or more, a multiple of 5")
    return minutes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--minutes", type=_minutes, default=60, help="length of the churn: 10 or more, in 5s"
    )
    parser.add_argument("--seed", type=int, default=1, help="the schedule's seed")
    parser.add_argument("--out", type=Path, default=Path("soak-out"), help="report folder")
    parser.add_argument("--keep", type=Path, help="keep the cluster's and controllers' logs here")
    parser.add_argument(
        "--relists",
        action="store_true",
        help="every churn block also compacts etcd or restarts the API server (every cache "
        "lists again); memory is then held to 5 %%, for both replicas",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lws-soak-") as tmp:
        workdir = Path(args.keep or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        audit_log, audit_args = audit.apiserver_args(workdir / "audit")
        with ControlPlane(
            workdir / "cp",
            name="soak",
            binaries=ensure_binaries(),
            extra_args={APISERVER: audit_args},
        ) as cp:
            passed = asyncio.run(soak(cp, args, workdir, audit_log))
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
