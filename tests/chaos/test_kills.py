"""SIGKILLs of the leading `lws controller` (two replicas with leader election) spread
over a Hash-mode create, a rolling update and a storm of PostTermination
replacements; the killed process is started again at once each time."""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import wait_ready
from tests.toolkit.manager_process import ManagerProcess, Managers

from .harness import (
    GroupTally,
    WebhookRelay,
    chaos_lws,
    figures,
    kill_and_restart,
    log_paths,
    roll,
    settle,
    start_controllers,
)
from .invariants import converged, is_leader, live

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(900)]

GROUPS = int(os.environ.get("CHAOS_GROUPS", "50"))
KILLS = (7, 7, 6)  # during the create, the rolling update and the storm
# Seconds between two kills, drawn uniformly: the create is quick on simulated nodes.
CREATE_GAP = (0.5, 2.0)
KILL_GAP = (3.0, 6.0)
STORM = (10, 10)  # leaders deleted at once, per wave


async def killing(
    procs: list[ManagerProcess], kills: int, done: list[int], gap: tuple[float, float] = KILL_GAP
) -> None:
    for _ in range(kills):
        await asyncio.sleep(random.uniform(*gap))
        await kill_and_restart(procs)
        done.append(1)


async def test_sigkills_during_create_rollout_and_replacements(
    namespace: str, managers: Managers, relay: WebhookRelay, nodesim_api: ApiClient
) -> None:
    api = nodesim_api
    procs = await start_controllers(api, managers, relay)
    rollout = {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 10}}
    with figures(f"SIGKILLs: {GROUPS} groups of 2 (Hash, PostTermination)") as fig:
        async with GroupTally(api, namespace) as tally:
            kills: list[int] = []
            # The create.
            await api.create(
                LEADERWORKERSETS,
                chaos_lws("storm", namespace, replicas=GROUPS, rolloutStrategy=rollout),
            )
            killer = asyncio.create_task(killing(procs, KILLS[0], kills, CREATE_GAP))
            await wait_ready(api, namespace, "storm", GROUPS, within=400)
            await killer
            # The rolling update.
            killer = asyncio.create_task(killing(procs, KILLS[1], kills))
            await roll(api, namespace, "storm", "rolled")
            await killer
            # The replacement storm: waves of leaders deleted at once.
            killer = asyncio.create_task(killing(procs, KILLS[2], kills))
            for wave in STORM:
                pods = (await api.list(PODS, namespace))["items"]
                victims = random.sample([p for p in pods if is_leader(p) and live(p)], wave)
                await asyncio.gather(
                    *(api.delete(PODS, p["metadata"]["name"], namespace) for p in victims)
                )
                fig.fault("leaders deleted", wave)
                await asyncio.sleep(3.0)  # spacing of the waves (fault pacing)
            await killer
            fig.fault("SIGKILL", len(kills))
            verdict = await converged(
                api, namespace, "storm", log_paths=log_paths(procs), within=400
            )
        fig.groups_created = tally.count
        settle(fig, verdict)
