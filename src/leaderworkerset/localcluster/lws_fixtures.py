"""Pytest fixtures for tests of the LeaderWorkerSet controller on the local cluster.

`lws_controller` runs the whole manager (caches, reconcilers, webhooks with
certificates the manager made) in the test session's event loop, once per
session, against the session's control plane. `lws_api` is a client for the
tests themselves, with helpers to create LeaderWorkerSets and wait on them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from leaderworkerset.localcluster.deploy import RunningController, running_controller
from leaderworkerset.localcluster.nodesim import NodeSimulator


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def lws_controller(
    kubeconfig: Path, node_simulator: NodeSimulator
) -> AsyncIterator[RunningController]:
    async with running_controller(kubeconfig) as running:
        yield running
