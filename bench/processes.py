"""The processes a scale benchmark runs beside a local control plane: the node
simulator and a LeaderWorkerSet manager (ours or upstream's Go build), with what
is read from them: CPU time and peak RSS from /proc, counters from /metrics.
"""

from __future__ import annotations

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from leaderworkerset.localcluster.deploy import free_port
from leaderworkerset.runtime.pki import issue_cert, make_ca

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
POD_WEBHOOK = "/mutate--v1-pod"
_UNWANTED_ENV = ("KUBERNETES_SERVICE_HOST", "ENABLE_WEBHOOKS", "LWS_OPERATOR_NAMESPACE")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- /proc ----------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User plus system time of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of stat(5), counted after the command name's closing parenthesis.
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in KiB: resident now and at its peak."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values["VmRSS"], values["VmHWM"]


# -- /metrics ---------------------------------------------------------------------------


@dataclass
class Metrics:
    """The series a benchmark reads, from one scrape."""

    writes: int = 0
    # Cumulative bucket counts of the pod webhook's latency histogram, by upper bound.
    webhook_buckets: dict[float, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> Metrics:
        out = cls()
        for line in text.splitlines():
            if line.startswith("rest_client_requests_total{"):
                labels, value = _series(line)
                if labels.get("method") in WRITE_METHODS:
                    out.writes += int(float(value))
            elif line.startswith("controller_runtime_webhook_latency_seconds_bucket{"):
                labels, value = _series(line)
                if labels.get("webhook") == POD_WEBHOOK:
                    out.webhook_buckets[float(labels["le"])] = float(value)
        return out


def _series(line: str) -> tuple[dict[str, str], str]:
    head, _, value = line.rpartition(" ")
    inner = head[head.index("{") + 1 : head.rindex("}")]
    labels = {}
    for part in inner.split('",'):
        key, _, val = part.partition("=")
        labels[key.strip(",")] = val.strip('"')
    return labels, value


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float | None:
    """Prometheus' histogram_quantile over the observations between two scrapes."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    lower, below = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if bound == float("inf"):
                return lower
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 0.0)
        lower, below = bound, count
    return None


def _get(url: str, token: str | None) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10, context=ctx) as answer:
        return str(answer.read().decode())


def http_status(url: str) -> int:
    try:
        _get(url, None)
        return 200
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


# -- webhook serving certificate ----------------------------------------------------------


def webhook_tls(directory: Path) -> bytes:
    """A serving certificate for 127.0.0.1 in `directory`; returns the CA's PEM for the
    webhook configurations' caBundle. Both managers run with internal certificate
    management off, so their start-up is alike."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_ca("lws-bench-ca")
    server = issue_cert(
        ca, "lws-webhook", dns_names=("localhost",), ip_addresses=("127.0.0.1",), server=True
    )
    (directory / "tls.crt").write_bytes(server.cert_pem)
    key = directory / "tls.key"
    key.touch(mode=0o600)
    key.write_bytes(server.key_pem)
    return ca.cert_pem


# -- managers ------------------------------------------------------------------------------


def lws_executable() -> str:
    beside = Path(sys.executable).with_name("lws")
    if beside.exists():
        return str(beside)
    found = shutil.which("lws")
    if not found:
        raise FileNotFoundError("the lws entry point is not installed")
    return found


@dataclass
class Manager:
    """One manager process with its configuration, ports and log."""

    name: str
    workdir: Path
    kubeconfig: Path
    cert_dir: Path
    go_binary: Path | None = None  # upstream's manager; None runs ours
    webhook_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    metrics_token: str | None = None  # upstream serves /metrics behind authn/authz
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def configuration(self) -> dict[str, Any]:
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
            # One manager per cluster: an election would only add Lease writes.
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
        }

    def command(self, config: Path) -> list[str]:
        common = [f"--config={config}", f"--kubeconfig={self.kubeconfig}", "--zap-log-level=info"]
        if self.go_binary is not None:
            return [str(self.go_binary), *common]
        return [lws_executable(), "controller", *common, "--metrics-secure=false"]

    def start(self) -> None:
        config = self.workdir / f"{self.name}-config.yaml"
        config.write_text(yaml.safe_dump(self.configuration(), sort_keys=False))
        env = {k: v for k, v in os.environ.items() if k not in _UNWANTED_ENV}
        env.update(self.env)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(config),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait_ready(self, within: float = 180.0) -> None:
        deadline = time.monotonic() + within
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
            if http_status(url) == 200:
                return
            time.sleep(0.25)
        raise TimeoutError(f"{self.name} not ready within {within}s:\n{self.log_tail()}")

    def metrics(self) -> Metrics:
        scheme = "https" if self.go_binary is not None else "http"
        url = f"{scheme}://127.0.0.1:{self.metrics_port}/metrics"
        return Metrics.parse(_get(url, self.metrics_token))

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class Simulator:
    """`python -m bench.nodesim_process` as a child process."""

    def __init__(self, kubeconfig: Path, nodes: int, log_path: Path) -> None:
        self.kubeconfig = kubeconfig
        self.nodes = nodes
        self.log_path = log_path
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Simulator:
        with self.log_path.open("a") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.nodesim_process",
                    str(self.kubeconfig),
                    str(self.nodes),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
            )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.__exit__()
            raise RuntimeError(f"node simulator did not start: {self.log_path.read_text()[-2000:]}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
