"""Pytest fixtures for tests of the LeaderWorkerSet controller on the local cluster.

`lws_controller` runs the whole manager (caches, reconcilers, webhooks with
certificates the manager made) in the test session's event loop, once per
session, against the session's control plane. `lws_api` is a client for the
tests themselves, with helpers to create LeaderWorkerSets and wait on them.

`lws_controller` is created lazily, by the first test that asks for it. Tests that
run managers of their own (e.g. as `lws controller` processes) must not share the
cluster with it: :func:`paused_lws_controller` stops it, if this session created
it, for as long as they run and brings it back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from leaderworkerset.localcluster.deploy import (
    RunningController,
    install,
    running_controller,
)
from leaderworkerset.localcluster.nodesim.simulator import NodeSimulator
from leaderworkerset.runtime.client import ApiClient

# The session's in-process controller while the `lws_controller` fixture lives.
RUNNING_CONTROLLER = pytest.StashKey[RunningController]()


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def lws_controller(
    kubeconfig: Path, node_simulator: NodeSimulator, request: pytest.FixtureRequest
) -> AsyncIterator[RunningController]:
    async with running_controller(kubeconfig) as running:
        request.session.stash[RUNNING_CONTROLLER] = running
        try:
            yield running
        finally:
            del request.session.stash[RUNNING_CONTROLLER]


@contextlib.asynccontextmanager
async def paused_lws_controller(session: pytest.Session) -> AsyncIterator[None]:
    """No in-process controller runs inside the block: the session's one (if it was
    created) is stopped, and afterwards its webhook configurations are installed
    again (pointing at its port; its certificate rotator re-injects its CA) and it
    is started again. Without one, this does nothing."""
    running = session.stash.get(RUNNING_CONTROLLER, None)
    if running is None or running.manager is None:
        yield
        return
    await running.stop()
    try:
        yield
    finally:
        client = ApiClient.from_kubeconfig(running.kubeconfig)
        try:
            await install(client, running.webhook_port)
        finally:
            await client.close()
        await running.start()
