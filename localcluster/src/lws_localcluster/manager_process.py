"""A LeaderWorkerSet manager run as a process of its own beside a local control plane:
`lws controller`, or upstream's Go manager for comparison.

The process reads a Configuration file written here, serves its webhooks, health
probes and metrics on 127.0.0.1 ports of its own, and logs to one file. Its webhooks
are reached through `url` client configs (see :mod:`.deploy`); with a
:class:`WebhookTLS` made beforehand, :func:`route_webhooks` points both webhook
configurations at it, and managers can be swapped by swapping the port.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import yaml

from leaderworkerset.api.disaggregatedset.crd import build_disaggregatedset_crd, build_scaler_crd
from leaderworkerset.api.objects import JSON
from leaderworkerset.api.resources import CRDS, MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from leaderworkerset.runtime.client import ApiClient
from leaderworkerset.runtime.pki import issue_cert, make_ca
from lws_localcluster.deploy import (
    FIELD_MANAGER,
    free_port,
    install,
    webhook_configurations,
)

# Process start (imports, certificates, cache sync) on a busy machine.
START_WITHIN = 120.0
STOP_WITHIN = 45.0
# Variables that would make a manager think it runs in a pod, or drop its webhooks.
UNWANTED_ENV = ("KUBERNETES_SERVICE_HOST", "ENABLE_WEBHOOKS", "LWS_OPERATOR_NAMESPACE")


class ManagerExited(RuntimeError):
    pass


def lws_command() -> list[str]:
    """How to run ``lws``: the entry point beside this interpreter, else the module."""
    beside = Path(sys.executable).with_name("lws")
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-c", "from leaderworkerset.cli import main; main()"]


def http_get(url: str, token: str | None = None, timeout: float = 10.0) -> tuple[int, str]:
    """Status and body of a GET; status 0 when nothing answered. Certificates are not
    checked: the servers asked make their own."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=ctx) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:  # URLError is one
        return 0, str(exc)


# -- webhook serving certificate and routing ---------------------------------------------


@dataclass(frozen=True)
class WebhookTLS:
    """A CA and a serving certificate for 127.0.0.1, as controller-runtime reads them
    (``tls.crt``, ``tls.key``). A manager given one runs with internal certificate
    management off, so any manager can serve behind the same caBundle."""

    cert_dir: Path
    ca_pem: bytes

    @classmethod
    def create(cls, directory: Path, ca_name: str = "lws-local-ca") -> WebhookTLS:
        directory.mkdir(parents=True, exist_ok=True)
        ca = make_ca(ca_name)
        server = issue_cert(
            ca, "lws-webhook", dns_names=("localhost",), ip_addresses=("127.0.0.1",), server=True
        )
        server.write(directory, "tls")
        return cls(directory, ca.cert_pem)


async def route_webhooks(
    api: ApiClient, port: int, ca_pem: bytes, repo: Path | None = None
) -> None:
    """The CRD, and both webhook configurations calling https://127.0.0.1:<port> with
    ``ca_pem`` as their caBundle."""
    await install(api, port)
    bundle = base64.b64encode(ca_pem).decode()
    for config in webhook_configurations(port, repo):
        for webhook in config["webhooks"]:
            webhook["clientConfig"]["caBundle"] = bundle
        resource = (
            MUTATING_WEBHOOKS if config["kind"].startswith("Mutating") else VALIDATING_WEBHOOKS
        )
        await api.apply(resource, config, field_manager=FIELD_MANAGER)


# -- stand-in CRDs -------------------------------------------------------------------------


def stand_in_crd(
    group: str, version: str, kind: str, plural: str, *, status_subresource: bool = False
) -> JSON:
    """A namespaced CRD that accepts any object of ``kind``: enough for a controller
    that watches or creates a kind whose real CRD is not installed."""
    served: JSON = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status_subresource:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "scope": "Namespaced",
            "versions": [served],
        },
    }


# -- upstream's other kinds -------------------------------------------------------------


def disaggregatedset_crds() -> tuple[JSON, JSON]:
    """Upstream's manager (v0.9 on) also runs a DisaggregatedSet controller (v0.10 on, with
    RoleScalers); without those kinds' CRDs its cache never syncs and, after
    controller-runtime's sync timeout, the whole manager exits. These are the real CRDs,
    the same schema as upstream's."""
    return build_disaggregatedset_crd(), build_scaler_crd()


async def crd_established(api: ApiClient, name: str) -> bool:
    crd = await api.get(CRDS, name)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(x["type"] == "Established" and x["status"] == "True" for x in conditions)


async def install_upstream_needs(api: ApiClient, within: float = 60.0) -> None:
    """What upstream's manager needs beyond ours: the DisaggregatedSet CRDs, served."""
    crds = disaggregatedset_crds()
    for crd in crds:
        await api.apply(CRDS, crd, field_manager=FIELD_MANAGER)
    deadline = time.monotonic() + within
    for crd in crds:
        name = crd["metadata"]["name"]
        while not await crd_established(api, name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not established after {within}s")
            await asyncio.sleep(0.2)


# -- the process -----------------------------------------------------------------------------


@dataclass
class ManagerProcess:
    """One `lws controller` process with its Configuration file, ports and log."""

    name: str
    workdir: Path
    kubeconfig: Path
    _: KW_ONLY
    executable: list[str] = field(default_factory=lws_command)
    operator_namespace: str | None = None
    # Leader election with these timings (leaseDuration, ...); None: no election.
    election: Mapping[str, str] | None = None
    # A serving certificate made beforehand; None: the manager makes its own
    # (internal certificate management, 127.0.0.1 added to its names).
    tls: WebhookTLS | None = None
    serve_metrics: bool = True
    # Plain HTTP by default, so that a scrape needs no token.
    secure_metrics: bool = False
    log_flags: tuple[str, ...] = ("--zap-log-level=info",)
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's
    drop_env: tuple[str, ...] = ()
    config_file: Path | None = None  # default <workdir>/<name>-config.yaml
    # The Configuration's groupReplacement (nodeNotReadyRelease, ...); None: defaults.
    group_replacement: Mapping[str, str] | None = None
    # The Configuration's groupBackoff (initialDelay, ...); None: defaults.
    group_backoff: Mapping[str, str] | None = None
    # The Configuration's teardown (groupRestart, leaderWorkerSetDeletion); None: defaults.
    teardown: Mapping[str, str] | None = None
    # Serve spec.scheduling with Kubernetes' Workload API (the kubernetes provider and
    # the WorkloadAwareScheduling gate); upstream's v0.9.0 manager knows neither.
    workload_scheduling: bool = False
    log_file: Path | None = None  # default <workdir>/<name>.log
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def cert_dir(self) -> Path:
        return self.tls.cert_dir if self.tls else self.workdir / f"{self.name}-certs"

    @property
    def log_path(self) -> Path:
        return self.log_file or self.workdir / f"{self.name}.log"

    @property
    def config_path(self) -> Path:
        return self.config_file or self.workdir / f"{self.name}-config.yaml"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def configuration(self) -> JSON:
        # Upstream's manager reads the same file format.
        election: JSON = {"leaderElect": self.election is not None, **(self.election or {})}
        metrics = f"127.0.0.1:{self.metrics_port}" if self.serve_metrics else "0"
        if self.serve_metrics and not self.secure_metrics:
            # The scheme in the address asks for plain HTTP as --metrics-secure=false does,
            # and is also understood by builds older than that flag's plain-HTTP mode
            # (a benchmark's baseline).
            metrics = f"http://{metrics}"
        config: JSON = {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.cert_dir),
            },
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": metrics},
            "leaderElection": election,
            "internalCertManagement": {"enable": self.tls is None},
        }
        if self.group_replacement:
            config["groupReplacement"] = dict(self.group_replacement)
        if self.group_backoff:
            config["groupBackoff"] = dict(self.group_backoff)
        if self.teardown:
            config["teardown"] = dict(self.teardown)
        if self.workload_scheduling:
            config["gangSchedulingManagement"] = {"schedulerProvider": "kubernetes"}
            config["featureGates"] = {"WorkloadAwareScheduling": True}
        return config

    def command(self) -> list[str]:
        command = [
            *self.executable,
            "controller",
            f"--config={self.config_path}",
            f"--kubeconfig={self.kubeconfig}",
        ]
        if self.operator_namespace:
            command.append(f"--operator-namespace={self.operator_namespace}")
        if self.tls is None:
            command.append("--webhook-cert-extra-sans=127.0.0.1")
        if self.serve_metrics:
            command.append(f"--metrics-secure={str(self.secure_metrics).lower()}")
        return [*command, *self.log_flags]

    @property
    def metrics_url(self) -> str:
        scheme = "https" if self.secure_metrics else "http"
        return f"{scheme}://127.0.0.1:{self.metrics_port}/metrics"

    def start(self) -> None:
        assert not self.running(), f"{self.name} is running"
        self.config_path.write_text(yaml.safe_dump(self.configuration(), sort_keys=False))
        unwanted = (*UNWANTED_ENV, *self.drop_env)
        env = {k: v for k, v in os.environ.items() if k not in unwanted}
        env.update(self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
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
        """SIGKILL the whole process group (a manager starts no children, but be sure)."""
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
            raise ManagerExited(f"{self.name} exited with {code}; log tail:\n{self.log_tail()}")

    def readyz(self) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.health_port}/readyz", timeout=5)

    def metrics_text(self, token: str | None = None) -> str:
        status, body = http_get(self.metrics_url, token)
        if status != 200:
            raise RuntimeError(f"{self.name} /metrics: {status} {body[:300]}")
        return body

    async def wait_ready(self, within: float = START_WITHIN) -> None:
        """Until /readyz answers 200; fails at once if the process exits."""
        deadline = time.monotonic() + within
        while True:
            self.check_alive()
            status, _ = await asyncio.to_thread(self.readyz)
            if status == 200:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} not ready in {within}s:\n{self.log_tail()}")
            await asyncio.sleep(0.25)

    async def wait_exit(self, within: float = STOP_WITHIN) -> int:
        assert self.proc is not None
        deadline = time.monotonic() + within
        while (code := self.proc.poll()) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} still runs after {within}s")
            await asyncio.sleep(0.1)
        return code

    async def stop(self, within: float = STOP_WITHIN) -> int:
        """SIGTERM, as a Deployment scaled to zero does, and wait for the exit."""
        self.signal(signal.SIGTERM)
        return await self.wait_exit(within)


@dataclass
class UpstreamManager(ManagerProcess):
    """Upstream's Go manager (``executable`` is its binary). controller-runtime takes
    --kubeconfig; none of the flags that would override the file are given, so the
    file rules. Its metrics are HTTPS behind authentication."""

    secure_metrics: bool = field(default=True, kw_only=True)

    def command(self) -> list[str]:
        return [
            *self.executable,
            f"--config={self.config_path}",
            f"--kubeconfig={self.kubeconfig}",
            "--zap-log-level=info",
        ]
