"""`lws controller` run as a real process against the session's control plane (the
process itself is :mod:`lws_localcluster.manager_process`), and the
fixtures that give a test a quiet cluster (the in-process controller paused) and an
operator namespace of its own.

Test modules take the fixtures by importing them (they are registered under the
names without the `_fixture` suffix).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
import pytest_asyncio
from lws_localcluster import manager_process
from lws_localcluster.nodesim.simulator import NodeSimulator

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import NAMESPACES
from leaderworkerset.runtime.client import ApiClient, ApiError
from tests.fixtures.lws import paused_lws_controller

LEASE = c.LEADER_ELECTION_LEASE_NAME
MASTER_METRIC = f'leader_election_master_status{{name="{LEASE}"}}'
# Short election timings so that a takeover is quick: for the tests of takeovers.
FAST_ELECTION = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"}
# Everyone else's: a manager that loses its lease exits, and on a loaded machine a
# renewal can take longer than FAST_ELECTION's 3 s; the first one still leads at once.
STEADY_ELECTION = {"leaseDuration": "20s", "renewDeadline": "15s", "retryPeriod": "1s"}
M = TypeVar("M", bound=manager_process.ManagerProcess)


def sample(metrics_text: str, series: str) -> float | None:
    for line in metrics_text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


class ManagerProcess(manager_process.ManagerProcess):
    """`lws controller` with leader election and its own certificates; metrics are
    served with --metrics-secure=false, so plain HTTP that needs no token."""

    async def metrics(self) -> str:
        return await asyncio.to_thread(self.metrics_text)

    async def is_master(self) -> bool:
        return sample(await self.metrics(), MASTER_METRIC) == 1.0


class ProcessGroup(Generic[M]):
    """The manager processes of one test; all killed (and their logs shown) after it."""

    def __init__(self) -> None:
        self.all: list[M] = []

    def add(self, manager: M) -> M:
        self.all.append(manager)
        return manager

    def kill_all(self) -> None:
        for manager in self.all:
            manager.kill()

    def report(self) -> str:
        return "\n".join(
            f"===== {m.name} (exit {m.proc.returncode if m.proc else None}) "
            f"{m.log_path}\n{m.log_tail()}"
            for m in self.all
        )


class Managers(ProcessGroup[ManagerProcess]):
    def __init__(self, workdir: Path, kubeconfig: Path, operator_namespace: str) -> None:
        super().__init__()
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.operator_namespace = operator_namespace

    def new(
        self, name: str, election: dict[str, str] | None = None, **options: Any
    ) -> ManagerProcess:
        return self.add(
            ManagerProcess(
                name,
                self.workdir,
                self.kubeconfig,
                operator_namespace=self.operator_namespace,
                election=dict(STEADY_ELECTION if election is None else election),
                **options,
            )
        )


# --- fixtures ------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session", scope="module", name="no_inprocess_controller")
async def no_inprocess_controller_fixture(
    request: pytest.FixtureRequest, node_simulator: NodeSimulator
) -> AsyncIterator[NodeSimulator]:
    """Only the module's processes reconcile and answer webhooks while it runs; the
    session's in-process controller is started again after it."""
    async with paused_lws_controller(request.session):
        yield node_simulator


@pytest_asyncio.fixture(loop_scope="session", name="operator_namespace")
async def operator_namespace_fixture(nodesim_api: ApiClient) -> AsyncIterator[str]:
    """A fresh namespace for the Lease and the certificate Secret."""
    name = f"lws-op-{os.urandom(3).hex()}"
    await nodesim_api.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    try:
        await nodesim_api.delete(NAMESPACES, name)
    except ApiError as exc:
        if not exc.not_found:
            raise


@pytest.fixture(name="managers")
def managers_fixture(
    no_inprocess_controller: NodeSimulator,
    kubeconfig: Path,
    operator_namespace: str,
    tmp_path: Path,
) -> Iterator[Managers]:
    group = Managers(tmp_path, kubeconfig, operator_namespace)
    try:
        yield group
    finally:
        group.kill_all()
        # pytest shows captured output only for failing tests.
        print(group.report())
