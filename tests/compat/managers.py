"""The two managers of the migration tests, each run as a process beside the local
control plane: upstream's Go manager and ours (`lws controller`).

Both serve their webhooks on 127.0.0.1 with one serving certificate that the test
session made (:class:`WebhookTLS`), internal certificate management off: a swap of
managers is then only a swap of the port in the webhook configurations' URLs,
which is what an operator does with the Service's selector in a real cluster.
Leader election is off too: only one manager runs at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from leaderworkerset.localcluster.deploy import free_port
from leaderworkerset.runtime.pki import CertKey, issue_cert, make_ca
from tests.waiting import eventually

JSON = dict[str, Any]
# Process start (Go: cache sync; ours: imports and cache sync) on a busy machine.
START_WITHIN = 120.0
STOP_WITHIN = 45.0
# Variables that would make a manager think it runs in a pod, or drop its webhooks.
_UNWANTED_ENV = ("KUBERNETES_SERVICE_HOST", "ENABLE_WEBHOOKS", "LWS_OPERATOR_NAMESPACE")


@dataclass(frozen=True)
class WebhookTLS:
    """A CA and a serving certificate for 127.0.0.1, as controller-runtime reads them."""

    cert_dir: Path
    ca_pem: bytes

    @classmethod
    def create(cls, directory: Path) -> WebhookTLS:
        directory.mkdir(parents=True, exist_ok=True)
        ca = make_ca("lws-compat-ca")
        server: CertKey = issue_cert(
            ca, "lws-webhook", dns_names=("localhost",), ip_addresses=("127.0.0.1",), server=True
        )
        (directory / "tls.crt").write_bytes(server.cert_pem)
        key = directory / "tls.key"
        key.touch(mode=0o600)
        key.write_bytes(server.key_pem)
        return cls(directory, ca.cert_pem)


def _lws_executable() -> str:
    beside = Path(sys.executable).with_name("lws")
    if beside.exists():
        return str(beside)
    found = shutil.which("lws")
    assert found, "the lws entry point is not installed"
    return found


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, urllib.error.URLError):
        return 0


@dataclass
class ManagerProcess:
    """One manager process: its configuration file, ports and log."""

    name: str
    executable: str
    workdir: Path
    kubeconfig: Path
    tls: WebhookTLS
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def config_path(self) -> Path:
        return self.workdir / f"{self.name}-config.yaml"

    def configuration(self) -> JSON:
        # The same file format for both: ours reads upstream's Configuration kind.
        return {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.tls.cert_dir),
            },
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        }

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is running"
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

    async def wait_ready(self, within: float = START_WITHIN) -> None:
        url = f"http://127.0.0.1:{self.health_port}/readyz"

        async def probe() -> bool:
            if not self.running():
                code = self.proc.returncode if self.proc else None
                raise AssertionError(f"{self.name} exited with {code}:\n{self.log_tail()}")
            return await asyncio.to_thread(_http_status, url) == 200

        await eventually(probe, within=within, interval=0.25, what=f"{self.name} /readyz 200")

    async def stop(self, within: float = STOP_WITHIN) -> int:
        """SIGTERM, as a Deployment scaled to zero does, and wait for the exit."""
        assert self.proc is not None
        proc = self.proc
        proc.send_signal(signal.SIGTERM)

        async def exited() -> tuple[int] | None:
            code = proc.poll()
            return None if code is None else (code,)  # a tuple: exit code 0 is done too

        (code,) = await eventually(exited, within=within, interval=0.1, what=f"{self.name} exit")
        return code

    def kill(self) -> None:
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


@dataclass
class GoManager(ManagerProcess):
    """Upstream's manager. controller-runtime takes --kubeconfig; the flags that would
    override the file are not given, so the file rules."""

    def command(self) -> list[str]:
        return [
            self.executable,
            f"--config={self.config_path}",
            f"--kubeconfig={self.kubeconfig}",
            "--zap-log-level=info",
        ]


@dataclass
class PyManager(ManagerProcess):
    """Ours, as its container image runs it."""

    def command(self) -> list[str]:
        return [
            self.executable,
            "controller",
            f"--config={self.config_path}",
            f"--kubeconfig={self.kubeconfig}",
            "--zap-log-level=info",
        ]


class Managers:
    """The manager processes of one test; all killed (and their logs shown) after it."""

    def __init__(self, workdir: Path, kubeconfig: Path, tls: WebhookTLS, go_binary: Path) -> None:
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.tls = tls
        self.go_binary = go_binary
        self.all: list[ManagerProcess] = []

    def go(self, name: str = "go") -> GoManager:
        manager = GoManager(name, str(self.go_binary), self.workdir, self.kubeconfig, self.tls)
        self.all.append(manager)
        return manager

    def ours(self, name: str = "ours") -> PyManager:
        manager = PyManager(name, _lws_executable(), self.workdir, self.kubeconfig, self.tls)
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
