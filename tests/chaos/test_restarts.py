"""kube-apiserver restarted while a PostTermination replacement waits, then restarted
again over an etcd compaction so that every watch resumes at an expired version (410
Gone) and every cache of the controller must relist. Run last (see conftest): the
restarts push the controller manager's reflectors into backoff."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from lws_localcluster.controlplane import ControlPlane
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.resources import CONFIGMAPS, LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient
from tests.fixtures.controlplane import ExternalCluster
from tests.toolkit.cluster import wait_ready
from tests.toolkit.manager_process import Managers
from tests.toolkit.waiting import eventually, retrying

from .harness import (
    GroupTally,
    WebhookRelay,
    chaos_lws,
    figures,
    log_paths,
    restart_over_compaction,
    settle,
    start_controllers,
    supervising,
)
from .invariants import converged, gated, group_id, is_leader, live, terminating

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(900)]

# The API server is away for several seconds: a lease that outlives the restart keeps
# the leader leading (a lost lease makes the process exit; it is started again anyway).
SLOW_ELECTION = {"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "2s"}
# The message in either log format the controller writes: JSON (`"msg":"..."`) or the
# console's tab-separated fields (the default), where it follows the logger's name.
RELISTED = re.compile(r'(?:"msg":"|\t)([^"\t]+): version \S+ expired, relisting')


def log_sizes(paths: list[Path]) -> dict[Path, int]:
    return {p: p.stat().st_size if p.exists() else 0 for p in paths}


def relisted(since: dict[Path, int]) -> list[str]:
    """The caches that logged an expired version since those log offsets."""
    names = []
    for path, offset in since.items():
        with path.open("rb") as log:
            log.seek(offset)
            names += RELISTED.findall(log.read().decode(errors="replace"))
    return sorted(names)


async def test_apiserver_restarts_and_expired_watches(
    control_plane: ControlPlane | ExternalCluster,
    node_simulator: NodeSimulator,
    namespace: str,
    managers: Managers,
    relay: WebhookRelay,
    nodesim_api: ApiClient,
) -> None:
    if not isinstance(control_plane, ControlPlane):
        pytest.skip("restarts the API server of a control plane this session started")
    api, sim, cp = nodesim_api, node_simulator, control_plane
    procs = await start_controllers(api, managers, relay, election=SLOW_ELECTION)
    with figures("kube-apiserver restarts and 410 Gone on every cache") as fig:
        async with GroupTally(api, namespace) as tally, supervising(procs) as supervisor:
            await api.create(LEADERWORKERSETS, chaos_lws("phoenix", namespace, replicas=4))
            await wait_ready(api, namespace, "phoenix", 4, within=120)

            # A replacement held by PostTermination: the old group cannot finish.
            pods = (await api.list(PODS, namespace))["items"]
            victim = next(p for p in pods if is_leader(p))
            old = [p for p in pods if group_id(p) == group_id(victim)]
            for pod in old:
                await sim.stall_termination(namespace, pod["metadata"]["name"])
            await api.delete(PODS, victim["metadata"]["name"], namespace)
            fig.fault("leaders deleted")

            async def replacement_gated() -> bool:
                pods = (await api.list(PODS, namespace))["items"]
                return any(is_leader(p) and live(p) and gated(p) for p in pods)

            await eventually(replacement_gated, within=60, what="a gated replacement")
            await asyncio.to_thread(cp.restart_apiserver)
            fig.fault("apiserver restarts")
            for pod in old:
                await sim.release_termination(namespace, pod["metadata"]["name"])
            verdict = await converged(
                api, namespace, "phoenix", log_paths=log_paths(procs), within=240
            )
            fig.notes.append(f"after the first restart: converged in {verdict.seconds:.1f}s")
            if verdict.violations:
                settle(fig, verdict)

            # Expire every watch: changes the caches have not seen, then a compaction
            # while the API server is down.
            before = log_sizes(log_paths(procs))
            pods = (await api.list(PODS, namespace))["items"]
            leader = next(p for p in pods if is_leader(p) and not terminating(p))
            await retrying(
                lambda: api.delete(PODS, leader["metadata"]["name"], namespace), interval=0.2
            )
            await retrying(
                lambda: api.patch(
                    LEADERWORKERSETS, "phoenix", {"spec": {"replicas": 5}}, namespace=namespace
                ),
                interval=0.2,
            )
            fig.fault("leaders deleted")
            await asyncio.to_thread(restart_over_compaction, cp, cp.etcd_endpoint)
            fig.fault("apiserver restarts")
            fig.fault("etcd compactions")
            await retrying(
                lambda: api.create(
                    CONFIGMAPS,
                    {"metadata": {"name": "after-compaction", "namespace": namespace}},
                ),
                interval=0.2,
            )
            verdict = await converged(
                api, namespace, "phoenix", log_paths=log_paths(procs), within=240
            )
            caches = relisted(before)
            fig.notes.append(f"caches that relisted after 410: {len(caches)} {caches}")
            fig.fault("process restarts by the supervisor", supervisor.restarts)
        fig.groups_created = tally.count
        settle(fig, verdict)
        assert caches, "no cache of the controller relisted after the compaction"
