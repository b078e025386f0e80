"""The webhook unreachable for a while (failurePolicy Fail) just as a Hash Deployment
scales up: the ReplicaSet's creates are refused and retried; once the webhook is back
every leader must have a group key, and no gate may be left behind."""

from __future__ import annotations

import asyncio
import os

import pytest

from leaderworkerset.api.resources import LEADERWORKERSETS, PODS
from leaderworkerset.runtime.client import ApiClient
from tests.toolkit.cluster import wait_ready
from tests.toolkit.manager_process import Managers

from .harness import (
    GroupTally,
    WebhookRelay,
    chaos_lws,
    figures,
    log_paths,
    settle,
    start_controllers,
)
from .invariants import converged, is_leader, live

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(600)]

OUTAGE = float(os.environ.get("CHAOS_WEBHOOK_OUTAGE", "30"))
BEFORE, AFTER = 2, 8


async def test_webhook_outage_while_leaders_are_created(
    namespace: str, managers: Managers, relay: WebhookRelay, nodesim_api: ApiClient
) -> None:
    api = nodesim_api
    procs = await start_controllers(api, managers, relay)
    with figures(f"webhook outage {OUTAGE:.0f}s during a scale {BEFORE}->{AFTER}") as fig:
        async with GroupTally(api, namespace) as tally:
            await api.create(LEADERWORKERSETS, chaos_lws("cutoff", namespace, replicas=BEFORE))
            await wait_ready(api, namespace, "cutoff", BEFORE, within=120)
            # The LWS webhooks answer this patch; the pod webhook meets the outage.
            await api.patch(
                LEADERWORKERSETS, "cutoff", {"spec": {"replicas": AFTER}}, namespace=namespace
            )
            relay.block()
            await asyncio.sleep(OUTAGE)  # the fault's duration
            pods = (await api.list(PODS, namespace))["items"]
            during = sum(1 for p in pods if is_leader(p) and live(p))
            relay.unblock()
            fig.fault("webhook connections refused", relay.refused)
            assert relay.refused > 0 and during < AFTER, "the outage met no pod creation"
            verdict = await converged(
                api, namespace, "cutoff", log_paths=log_paths(procs), within=240
            )
        fig.groups_created = tally.count
        fig.notes.append(f"leaders when the webhook came back: {during} of {AFTER}")
        settle(fig, verdict)
