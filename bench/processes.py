"""The processes a scale benchmark runs beside a local control plane: the node
simulator (the managers are :mod:`lws_localcluster.manager_process`),
and what is read from a manager: CPU time and memory from /proc, counters from
/metrics.

CPU is summed over the manager's process and its children, and memory is their
summed proportional set size (PSS: a page shared by two processes counts half in
each), sampled while the run goes: what a container's memory use sees, whether a
manager is one process or several (a variant that forked its webhooks was measured
this way).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
POD_WEBHOOK = "/mutate--v1-pod"
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


def process_tree(pid: int) -> list[int]:
    """`pid` and its children."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            children.append(int(entry.name))
    return [pid, *children]


def tree_cpu_seconds(pids: list[int]) -> float:
    """User plus system time of these processes so far (those still running)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


def pss_kib(pids: list[int]) -> int:
    """Summed proportional set size of these processes, in KiB."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
                break
    return total


class PeakMemory:
    """Samples `pss_kib` on a thread of its own until stopped; keeps the peak."""

    def __init__(self, pids: list[int], period: float = 0.5) -> None:
        self.pids = pids
        self.period = period
        self.peak_kib = self.last_kib = pss_kib(pids)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.last_kib = pss_kib(self.pids)
            self.peak_kib = max(self.peak_kib, self.last_kib)

    def stop(self) -> tuple[int, int]:
        """(peak, now) in KiB."""
        self._stop.set()
        self._thread.join()
        self.last_kib = pss_kib(self.pids)
        self.peak_kib = max(self.peak_kib, self.last_kib)
        return self.peak_kib, self.last_kib


# -- /metrics ---------------------------------------------------------------------------


@dataclass
class Metrics:
    """The series a benchmark reads, from one scrape."""

    writes: int = 0
    # The same writes by method: POST creates, PUT updates, PATCH patches, DELETE deletes.
    writes_by_method: dict[str, int] = field(default_factory=dict)
    # Cumulative bucket counts of the pod webhook's latency histogram, by upper bound.
    webhook_buckets: dict[float, float] = field(default_factory=dict)
    # Reviews of every path, and the connections they came over (ours only).
    reviews: float = 0.0
    connections: float | None = None

    @classmethod
    def parse(cls, text: str) -> Metrics:
        out = cls()
        for line in text.splitlines():
            if line.startswith("rest_client_requests_total{"):
                labels, value = _series(line)
                method = labels.get("method", "")
                if method in WRITE_METHODS:
                    out.writes += int(float(value))
                    out.writes_by_method[method] = out.writes_by_method.get(method, 0) + int(
                        float(value)
                    )
            elif line.startswith("controller_runtime_webhook_latency_seconds_bucket{"):
                labels, value = _series(line)
                if labels.get("webhook") == POD_WEBHOOK:
                    out.webhook_buckets[float(labels["le"])] = float(value)
            elif line.startswith("controller_runtime_webhook_requests_total{"):
                out.reviews += float(_series(line)[1])
            elif line.startswith("lws_webhook_connections_total "):
                out.connections = float(line.split()[-1])
        return out


def sum_by(text: str, family: str, *label: str) -> dict[tuple[str, ...], float]:
    """A family's samples summed by some of their labels."""
    sums: dict[tuple[str, ...], float] = {}
    for line in text.splitlines():
        if line.startswith(family + "{"):
            labels, value = _series(line)
            key = tuple(labels.get(name, "") for name in label)
            sums[key] = sums.get(key, 0.0) + float(value)
    return sums


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


class Simulator:
    """`python -m bench.nodesim_process` as a child process."""

    def __init__(
        self, kubeconfig: Path, nodes: int, log_path: Path, faults: Path | None = None
    ) -> None:
        self.kubeconfig = kubeconfig
        self.nodes = nodes
        self.log_path = log_path
        # A unix socket the simulator answers fault requests on (send_fault), if any.
        self.faults = faults
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
                    *(["--faults", str(self.faults)] if self.faults else []),
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

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

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
