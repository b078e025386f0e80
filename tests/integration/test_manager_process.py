"""`lws controller` as a deployment runs it: real processes with a Configuration file,
leader election, internal certificates and webhooks, against the session's control
plane and node simulator.

The session's in-process controller (`lws_controller`, created lazily by earlier
modules) would reconcile too and answer the webhooks, so it is stopped for this
module and started again after it (:func:`paused_lws_controller`).

Each test has an operator namespace of its own, so a fresh Lease and a fresh
certificate Secret; the webhook configurations are installed with a `url` client
config pointing at one manager's webhook port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
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
from leaderworkerset.localcluster.deploy import free_port, install
from leaderworkerset.localcluster.nodesim.simulator import NodeSimulator
from leaderworkerset.runtime.client import (
    LEADERWORKERSETS,
    LEASES,
    MUTATING_WEBHOOKS,
    NAMESPACES,
    VALIDATING_WEBHOOKS,
    ApiClient,
    ApiError,
)
from leaderworkerset.runtime.pki import CA_CERT
from tests.fixtures.lws import paused_lws_controller
from tests.waiting import eventually

from .lws_helpers import live_pods, lws_manifest, wait_ready

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.timeout(600)]

JSON = dict[str, Any]
LEASE = c.LEADER_ELECTION_LEASE_NAME
MASTER_METRIC = f'leader_election_master_status{{name="{LEASE}"}}'
# Short election timings so that a takeover is quick.
FAST_ELECTION = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"}
# A dead leader's lease is free this long after its last renewal, at most; the rest
# is slack for a busy machine (two cores shared with the control plane).
TAKEOVER_WITHIN = 4.0 + 11.0
# Process start (imports, certificates, cache sync) on a busy machine.
START_WITHIN = 120.0
GRACEFUL_SHUTDOWN = 30.0  # ManagerOptions.graceful_shutdown_timeout


def _lws_executable() -> list[str]:
    """The `lws` entry point of this environment, as an image's ENTRYPOINT runs it."""
    beside = Path(sys.executable).with_name("lws")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("lws")
    assert found, "the lws entry point is not installed"
    return [found]


def _insecure_context() -> ssl.SSLContext:
    # The metrics server serves HTTPS with a self-signed certificate.
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5, context=_insecure_context()) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (OSError, urllib.error.URLError) as exc:
        return 0, str(exc)


@dataclass
class ManagerProcess:
    """One `lws controller` process with its ports, files and log."""

    name: str
    workdir: Path
    kubeconfig: Path
    operator_namespace: str
    election: dict[str, str]
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
            *_lws_executable(),
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
        env = {k: v for k, v in os.environ.items() if k not in _UNWANTED_ENV}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
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

    def _check_alive(self) -> None:
        if not self.running():
            code = self.proc.returncode if self.proc else None
            raise AssertionError(f"{self.name} exited with {code}; log tail:\n{self.log_tail()}")

    async def readyz(self) -> tuple[int, str]:
        return await asyncio.to_thread(_http_get, f"http://127.0.0.1:{self.health_port}/readyz")

    async def metrics(self) -> str:
        status, body = await asyncio.to_thread(
            _http_get, f"https://127.0.0.1:{self.metrics_port}/metrics"
        )
        assert status == 200, f"{self.name} /metrics: {status} {body[:300]}"
        return body

    async def is_master(self) -> bool:
        return _sample(await self.metrics(), MASTER_METRIC) == 1.0

    async def wait_ready(self, within: float = START_WITHIN) -> None:
        async def probe() -> bool:
            self._check_alive()
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


# Variables that would make the manager think it runs in a pod, or drop its webhooks.
_UNWANTED_ENV = ("KUBERNETES_SERVICE_HOST", "ENABLE_WEBHOOKS", "LWS_OPERATOR_NAMESPACE")


def _sample(metrics_text: str, series: str) -> float | None:
    for line in metrics_text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


class Managers:
    """The manager processes of one test; all killed (and their logs shown) after it."""

    def __init__(self, workdir: Path, kubeconfig: Path, operator_namespace: str) -> None:
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.operator_namespace = operator_namespace
        self.all: list[ManagerProcess] = []

    def new(self, name: str, election: dict[str, str] | None = None) -> ManagerProcess:
        manager = ManagerProcess(
            name,
            self.workdir,
            self.kubeconfig,
            self.operator_namespace,
            dict(FAST_ELECTION if election is None else election),
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


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def no_inprocess_controller(
    request: pytest.FixtureRequest, node_simulator: NodeSimulator
) -> AsyncIterator[NodeSimulator]:
    """Only this module's processes reconcile while it runs (see the module docstring)."""
    async with paused_lws_controller(request.session):
        yield node_simulator


@pytest_asyncio.fixture(loop_scope="session")
async def operator_namespace(nodesim_api: ApiClient) -> AsyncIterator[str]:
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


@pytest.fixture
def managers(
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


# --- helpers ---------------------------------------------------------------------------


async def lease_holder(api: ApiClient, namespace: str) -> str | None:
    lease = await api.get_or_none(LEASES, LEASE, namespace)
    if lease is None:
        return None
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def webhook_configurations(api: ApiClient) -> list[JSON]:
    return [
        await api.get(MUTATING_WEBHOOKS, c.MUTATING_WEBHOOK_CONFIGURATION),
        await api.get(VALIDATING_WEBHOOKS, c.VALIDATING_WEBHOOK_CONFIGURATION),
    ]


async def client_configs(api: ApiClient) -> list[JSON]:
    return [w["clientConfig"] for cfg in await webhook_configurations(api) for w in cfg["webhooks"]]


def env_names(pod: JSON) -> set[str]:
    return {
        e["name"] for container in pod["spec"]["containers"] for e in container.get("env") or []
    }


async def assert_pods_mutated(api: ApiClient, namespace: str, name: str, count: int) -> None:
    pods = await eventually(
        lambda: _pods_if(api, namespace, name, count), within=60, what=f"{count} pods of {name}"
    )
    for pod in pods:
        missing = set(c.LWS_ENV_NAMES) - env_names(pod)
        assert not missing, f"pod {pod['metadata']['name']} lacks {missing}: webhook not run?"


async def _pods_if(api: ApiClient, namespace: str, name: str, count: int) -> list[JSON] | None:
    pods = await live_pods(api, namespace, name)
    return pods if len(pods) == count else None


async def leader_among(candidates: list[ManagerProcess]) -> ManagerProcess | None:
    masters = [m for m in candidates if m.running() and await m.is_master()]
    assert len(masters) <= 1, f"more than one leader: {[m.name for m in masters]}"
    return masters[0] if masters else None


# --- tests -----------------------------------------------------------------------------


async def test_controller_process_serves_reconciles_and_reports(
    namespace: str, managers: Managers, nodesim_api: ApiClient
) -> None:
    manager = managers.new("solo")
    await install(nodesim_api, manager.webhook_port)
    manager.start()
    await manager.wait_ready()

    await nodesim_api.create(LEADERWORKERSETS, lws_manifest("proc", namespace))
    await wait_ready(nodesim_api, namespace, "proc", 2, within=180)
    await assert_pods_mutated(nodesim_api, namespace, "proc", 4)

    assert await lease_holder(nodesim_api, managers.operator_namespace)
    assert await manager.is_master()
    metrics = await manager.metrics()
    for name in ("controller_runtime_reconcile_total", "controller_runtime_webhook_requests_total"):
        assert f"\n{name}{{" in metrics, f"{name} missing from /metrics"
    # The injected CA is the one the process wrote for its server.
    ca = (manager.cert_dir / CA_CERT).read_bytes()
    for config in await client_configs(nodesim_api):
        assert config["url"].startswith(f"https://127.0.0.1:{manager.webhook_port}/")
        assert config.get("caBundle"), "the manager did not inject its CA"
        assert _b64decode(config["caBundle"]) == ca


async def test_leader_failover_between_two_processes(
    namespace: str, managers: Managers, nodesim_api: ApiClient
) -> None:
    a, b = managers.new("replica-a"), managers.new("replica-b")
    await install(nodesim_api, a.webhook_port)
    a.start()
    b.start()
    await asyncio.gather(a.wait_ready(), b.wait_ready())

    # Both share the certificate Secret of the operator namespace, so the same CA.
    assert (a.cert_dir / CA_CERT).read_bytes() == (b.cert_dir / CA_CERT).read_bytes()

    leader = await eventually(
        lambda: leader_among([a, b]), within=30, interval=0.25, what="one leader"
    )
    follower = b if leader is a else a
    holder = await lease_holder(nodesim_api, managers.operator_namespace)
    assert holder, "the Lease has no holder"
    # The follower stays a follower while the leader renews.
    for _ in range(4):
        assert await leader_among([a, b]) is leader
        assert await lease_holder(nodesim_api, managers.operator_namespace) == holder
        await asyncio.sleep(0.5)

    await nodesim_api.create(LEADERWORKERSETS, lws_manifest("failover", namespace))
    await wait_ready(nodesim_api, namespace, "failover", 2, within=180)

    # Webhooks must survive the leader: send them to the follower. The apply only
    # owns the URLs, so the injected caBundle (the shared CA) stays.
    await install(nodesim_api, follower.webhook_port)
    ca = (follower.cert_dir / CA_CERT).read_bytes()
    for config in await client_configs(nodesim_api):
        assert config["url"].startswith(f"https://127.0.0.1:{follower.webhook_port}/")
        assert config.get("caBundle") and _b64decode(config["caBundle"]) == ca

    killed_at = time.monotonic()
    leader.signal(signal.SIGKILL)
    assert await leader.wait_exit(within=10) == -signal.SIGKILL

    async def taken_over() -> bool:
        new_holder = await lease_holder(nodesim_api, managers.operator_namespace)
        return bool(new_holder) and new_holder != holder and await follower.is_master()

    await eventually(
        taken_over, within=TAKEOVER_WITHIN, interval=0.2, what=f"{follower.name} to lead"
    )
    print(f"takeover after {time.monotonic() - killed_at:.1f}s")
    assert follower.running()

    await nodesim_api.patch(
        LEADERWORKERSETS, "failover", {"spec": {"replicas": 3}}, namespace=namespace
    )
    await wait_ready(nodesim_api, namespace, "failover", 3, within=180)
    await assert_pods_mutated(nodesim_api, namespace, "failover", 6)
    assert follower.running() and await follower.is_master()


async def test_sigterm_releases_the_lease(
    namespace: str, managers: Managers, nodesim_api: ApiClient
) -> None:
    # A long lease: had it not been released, the next process would wait up to 120s.
    slow = {"leaseDuration": "120s", "renewDeadline": "60s", "retryPeriod": "500ms"}
    first = managers.new("first", slow)
    await install(nodesim_api, first.webhook_port)
    first.start()
    await first.wait_ready()
    await eventually(first.is_master, within=30, interval=0.25, what="first to lead")
    holder = await lease_holder(nodesim_api, managers.operator_namespace)
    assert holder

    stopping = time.monotonic()
    first.signal(signal.SIGTERM)
    assert await first.wait_exit(within=GRACEFUL_SHUTDOWN + 15) == 0
    print(f"first exited {time.monotonic() - stopping:.1f}s after SIGTERM")
    assert await lease_holder(nodesim_api, managers.operator_namespace) == ""
    assert "released leader lease" in first.log_path.read_text()

    second = managers.new("second", slow)
    await install(nodesim_api, second.webhook_port)
    started = time.monotonic()
    second.start()

    async def second_holds() -> bool:
        second._check_alive()
        new_holder = await lease_holder(nodesim_api, managers.operator_namespace)
        return bool(new_holder) and new_holder != holder

    await eventually(second_holds, within=60, interval=0.2, what="second to take the lease")
    print(f"second took the lease {time.monotonic() - started:.1f}s after starting")
    await second.wait_ready()
    assert await second.is_master()

    # And it reconciles.
    await nodesim_api.create(LEADERWORKERSETS, lws_manifest("after", namespace, replicas=1))
    await wait_ready(nodesim_api, namespace, "after", 1, within=180)
    await assert_pods_mutated(nodesim_api, namespace, "after", 2)


def _b64decode(text: str) -> bytes:
    return base64.b64decode(text)
