"""A second client edits the LWS while the controller reconciles it: scale through the
scale subresource, annotation and label edits, read-modify-write replaces (which meet
the controller's status writes as conflicts) and a few template changes (rollouts)."""

from __future__ import annotations

import asyncio
import os
import random

import pytest

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import LEADERWORKERSETS
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.toolkit.manager_process import Managers

from .harness import (
    GroupTally,
    WebhookRelay,
    chaos_lws,
    figures,
    log_paths,
    roll,
    settle,
    start_controllers,
)
from .invariants import converged

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(600)]

EDITS = int(os.environ.get("CHAOS_EDITS", "100"))
WRITERS = 2
REPLICAS = (2, 6)
FINAL_REPLICAS = 4
TEMPLATE_EDITS = 3  # rollouts among the edits
PAUSE = (0.0, 0.3)  # between two edits of one writer


class Editor:
    def __init__(self, api: ApiClient, namespace: str, name: str) -> None:
        self.api, self.namespace, self.name = api, namespace, name
        self.done = 0
        self.conflicts = 0
        self.template_edits = 0

    async def scale(self) -> None:
        replicas = random.randint(*REPLICAS)
        await self.api.patch(
            LEADERWORKERSETS,
            self.name,
            {"spec": {"replicas": replicas}},
            namespace=self.namespace,
            subresource="scale",
        )

    async def annotate(self) -> None:
        patch = {
            "metadata": {
                "annotations": {"chaos/edit": str(self.done)},
                "labels": {"chaos-edit": str(self.done % 7)},
            }
        }
        await self.api.patch(LEADERWORKERSETS, self.name, patch, namespace=self.namespace)

    async def replace(self) -> None:
        """Read, change, write back: a 409 when the controller wrote in between."""
        lws = await self.api.get(LEADERWORKERSETS, self.name, self.namespace)
        lws["spec"]["replicas"] = random.randint(*REPLICAS)
        lws["metadata"].setdefault("annotations", {})["chaos/replaced"] = str(self.done)
        await asyncio.sleep(random.uniform(0.0, 0.2))  # widen the race with status writes
        await self.api.replace(LEADERWORKERSETS, lws)

    async def roll(self) -> None:
        await roll(self.api, self.namespace, self.name, f"edit-{self.done}")
        self.template_edits += 1

    async def run(self, edits: int, roll_at: set[int]) -> None:
        for _ in range(edits):
            n = self.done + self.conflicts
            edit = (
                self.roll
                if n in roll_at
                else random.choice([self.scale, self.annotate, self.replace])
            )
            try:
                await edit()
                self.done += 1
            except ApiError as exc:
                if not exc.conflict:
                    raise
                self.conflicts += 1
            await asyncio.sleep(random.uniform(*PAUSE))


@pytest.mark.parametrize("hash_mode", [False, True], ids=["ordinal", "hash"])
async def test_concurrent_spec_edits(
    hash_mode: bool,
    namespace: str,
    managers: Managers,
    relay: WebhookRelay,
    nodesim_api: ApiClient,
) -> None:
    api = nodesim_api
    procs = await start_controllers(api, managers, relay, count=1)
    mode = c.GROUP_IDENTITY_HASH if hash_mode else c.GROUP_IDENTITY_ORDINAL
    rollout = {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxUnavailable": 2}}
    with figures(f"concurrent edits ({mode}): {EDITS} edits by {WRITERS} clients") as fig:
        async with GroupTally(api, namespace) as tally:
            body = chaos_lws(
                "edited", namespace, replicas=3, hash_mode=hash_mode, rolloutStrategy=rollout
            )
            await api.create(LEADERWORKERSETS, body)
            editors = [Editor(api, namespace, "edited") for _ in range(WRITERS)]
            per = EDITS // WRITERS
            rolls = set(random.sample(range(per), TEMPLATE_EDITS // WRITERS + 1))
            await asyncio.gather(*(e.run(per, rolls) for e in editors))
            await api.patch(
                LEADERWORKERSETS,
                "edited",
                {"spec": {"replicas": FINAL_REPLICAS}},
                namespace=namespace,
                subresource="scale",
            )
            fig.fault("edits", sum(e.done for e in editors))
            fig.fault("editor conflicts", sum(e.conflicts for e in editors))
            fig.fault("template edits", sum(e.template_edits for e in editors))
            verdict = await converged(
                api, namespace, "edited", log_paths=log_paths(procs), within=300
            )
            assert verdict.snapshot is not None
            generation = verdict.snapshot.lws["metadata"].get("generation")
            observed = (verdict.snapshot.lws.get("status") or {}).get("observedGeneration")
            fig.notes.append(f"generation {generation}, observed {observed}")
        fig.groups_created = tally.count
        settle(fig, verdict)
        assert observed == generation
