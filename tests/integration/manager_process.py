"""`lws controller` run as a real process against the session's control plane: the
process, its ports, files and log, and the fixtures that give a test a quiet cluster
(the in-process controller paused) and an operator namespace of its own.

Test modules take the fixtures by importing them (they are registered under the
names without the `_fixture` suffix).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from leaderworkerset.api import constants as c
from leaderworkerset.localcluster.deploy import free_port
from leaderworkerset.localcluster.nodesim.simulator import NodeSimulator
from leaderworkerset.runtime.client import NAMESPACES, ApiClient, ApiError
from tests.fixtures.lws import paused_lws_controller
from tests.waiting import eventually

JSON = dict[str, Any]
LEASE = c.LEADER_ELECTION_LEASE_NAME
MASTER_METRIC = f'leader_election_master_status{{name="{LEASE}"}}'
# Short election timings so that a takeover is quick.
FAST_ELECTION = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"}
# Process start (imports, certificates, cache sync) on a busy machine.
START_WITHIN = 120.0


def lws_executable() -> list[str]:
    """The `lws` entry point of this environment, as an image's ENTRYPOINT runs it."""
    beside = Path(sys.executable).with_name("lws")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("lws")
    assert found, "the lws entry point is not installed"
    return [found]


def http_get(url: str) -> tuple[int, str]:
    """Status and body; status 0 when nothing answered. Certificates are not checked
    (the servers under test make their own)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=ctx) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (OSError, urllib.error.URLError) as exc:
        return 0, str(exc)


def sample(metrics_text: str, series: str) -> float | None:
    for line in metrics_text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


# Variables that would make the manager think it runs in a pod, or drop its webhooks.
_UNWANTED_ENV = ("KUBERNETES_SERVICE_HOST", "ENABLE_WEBHOOKS", "LWS_OPERATOR_NAMESPACE")


@dataclass
class ManagerProcess:
    """One `lws controller` process with its ports, files and log. Metrics are served
    with --metrics-secure=false, so plain HTTP that needs no token."""

    name: str
    workdir: Path
    kubeconfig: Path
    operator_namespace: str
    election: dict[str, str]
    executable: list[str] = field(default_factory=lws_executable)
    env: dict[str, str] = field(default_factory=dict)  # on top of the test's environment
    drop_env: tuple[str, ...] = ()
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def cert_dir(self) -> Path:
        return self.workdir / f"{self.name}-certs"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def config_path(self) -> Path:
        return self.workdir / f"{self.name}-config.yaml"

    def configuration(self) -> JSON:
        return {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.cert_dir),
            },
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "leaderElection": {"leaderElect": True, **self.election},
            "internalCertManagement": {"enable": True},
        }

    def command(self) -> list[str]:
        return [
            *self.executable,
            "controller",
            f"--config={self.config_path}",
            f"--kubeconfig={self.kubeconfig}",
            f"--operator-namespace={self.operator_namespace}",
            "--webhook-cert-extra-sans=127.0.0.1",
            "--metrics-secure=false",
            "--zap-log-level=info",
        ]

    def start(self) -> None:
        assert self.proc is None, f"{self.name} already started"
        self.config_path.write_text(yaml.safe_dump(self.configuration(), sort_keys=False))
        unwanted = (*_UNWANTED_ENV, *self.drop_env)
        env = {k: v for k, v in os.environ.items() if k not in unwanted}
        env.update(self.env)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.workdir,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL the whole process group (the manager starts no children, but be sure)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        if not self.running():
            code = self.proc.returncode if self.proc else None
            raise AssertionError(f"{self.name} exited with {code}; log tail:\n{self.log_tail()}")

    async def readyz(self) -> tuple[int, str]:
        return await asyncio.to_thread(http_get, f"http://127.0.0.1:{self.health_port}/readyz")

    async def metrics(self) -> str:
        status, body = await asyncio.to_thread(
            http_get, f"http://127.0.0.1:{self.metrics_port}/metrics"
        )
        assert status == 200, f"{self.name} /metrics: {status} {body[:300]}"
        return body

    async def is_master(self) -> bool:
        return sample(await self.metrics(), MASTER_METRIC) == 1.0

    async def wait_ready(self, within: float = START_WITHIN) -> None:
        async def probe() -> bool:
            self.check_alive()
            status, _ = await self.readyz()
            return status == 200

        await eventually(probe, within=within, interval=0.25, what=f"{self.name} /readyz 200")

    async def wait_exit(self, within: float) -> int:
        async def probe() -> tuple[int] | None:
            assert self.proc is not None
            code = self.proc.poll()
            return None if code is None else (code,)  # a tuple: exit code 0 is done too

        (code,) = await eventually(probe, within=within, interval=0.1, what=f"{self.name} exit")
        return code


class Managers:
    """The manager processes of one test; all killed (and their logs shown) after it."""

    def __init__(self, workdir: Path, kubeconfig: Path, operator_namespace: str) -> None:
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.operator_namespace = operator_namespace
        self.all: list[ManagerProcess] = []

    def new(
        self, name: str, election: dict[str, str] | None = None, **options: Any
    ) -> ManagerProcess:
        manager = ManagerProcess(
            name,
            self.workdir,
            self.kubeconfig,
            self.operator_namespace,
            dict(FAST_ELECTION if election is None else election),
            **options,
        )
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
