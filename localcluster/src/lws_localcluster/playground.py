"""The background processes of a playground beside its control plane: the node
simulator (``lws dev nodesim``) and the controller (``lws controller``).

Each runs in a session of its own, so it outlives ``lws dev up``; its pid, ports and
log are recorded in ``<workdir>/playground.json``, which ``status``, ``fault`` and
``down`` read. Every command line names the work dir, which is how a recorded pid is
told from a recycled one before it is signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leaderworkerset.api.leaderworkerset import constants as c
from leaderworkerset.api.resources import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from leaderworkerset.runtime.client import ApiClient
from lws_localcluster.controlplane import cache_root, pid_alive, pid_belongs_to
from lws_localcluster.deploy import prepare_cluster
from lws_localcluster.manager_process import ManagerProcess, lws_command
from lws_localcluster.node_lifecycle import PLAYGROUND_GROUP_REPLACEMENT
from lws_localcluster.nodesim.control import send_fault

STATE_FILE = "playground.json"
NODESIM = "nodesim"
CONTROLLER = "controller"
# Stopped in this order: nothing reconciles against a cluster whose nodes are leaving.
PROCESSES = (CONTROLLER, NODESIM)


class PlaygroundError(RuntimeError):
    pass


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _poll(
    ready: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    log: Path,
    what: str,
    timeout: float,
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise PlaygroundError(
                f"{what} exited with code {proc.returncode}; {log}:\n{_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise PlaygroundError(f"{what} not ready after {timeout:.0f}s; {log}:\n{_tail(log)}")
        time.sleep(0.2)


def http_status(url: str, timeout: float = 2.0) -> int:
    """The HTTP status of a GET, 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def find_kubectl() -> Path | None:
    """kubectl as ``hack/build-tools.sh`` leaves it (newest complete build), else on PATH."""
    folder = os.environ.get("LWS_TOOLS_DIR")
    if folder and os.access(Path(folder) / "kubectl", os.X_OK):
        return Path(folder) / "kubectl"
    builds = [
        d / "kubectl"
        for d in cache_root().glob("tools-kubectl-*")
        if (d / ".complete").exists() and os.access(d / "kubectl", os.X_OK)
    ]
    if builds:
        return max(builds, key=lambda p: p.stat().st_mtime)
    found = shutil.which("kubectl")
    return Path(found) if found else None


@dataclass
class Playground:
    workdir: Path

    # -- files ---------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.workdir / STATE_FILE

    @property
    def socket_path(self) -> Path:
        return self.workdir / "nodesim.sock"

    def log_path(self, process: str) -> Path:
        return self.workdir / "logs" / f"{process}.log"

    @property
    def controller_config(self) -> Path:
        return self.workdir / "controller.yaml"

    def state(self) -> dict[str, Any]:
        try:
            loaded: dict[str, Any] = json.loads(self.state_path.read_text())
            return loaded
        except (OSError, ValueError):
            return {}

    def _record(self, process: str, entry: Mapping[str, Any]) -> None:
        state = self.state()
        state[process] = dict(entry)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path)

    def pid(self, process: str) -> int | None:
        """The recorded pid of ``process`` while it runs (and is really ours)."""
        pid = self.state().get(process, {}).get("pid")
        if isinstance(pid, int) and pid_alive(pid) and pid_belongs_to(pid, self.workdir):
            return pid
        return None

    def _spawn(self, process: str, command: list[str]) -> Any:
        log = self.log_path(process)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
            )

    # -- node simulator ------------------------------------------------------------------

    def start_nodesim(self, nodes: int, gpus: int, zones: int, timeout: float = 120.0) -> int:
        if self.pid(NODESIM):
            raise PlaygroundError(f"a node simulator already runs for {self.workdir}")
        command = [*lws_command(), "dev", "nodesim", "--workdir", str(self.workdir)]
        command += ["--nodes", str(nodes), "--gpus", str(gpus), "--zones", str(zones)]
        self.socket_path.unlink(missing_ok=True)
        proc = self._spawn(NODESIM, command)
        self._record(NODESIM, {"pid": proc.pid, "nodes": nodes, "gpus": gpus, "zones": zones})
        _poll(self.nodesim_answers, proc, self.log_path(NODESIM), "the node simulator", timeout)
        return int(proc.pid)

    def nodesim_answers(self) -> bool:
        try:
            send_fault(self.socket_path, {"fault": "ping"}, timeout=5.0)
        except (ConnectionError, RuntimeError, OSError, ValueError):
            return False
        return True

    def fault(self, request: dict[str, Any]) -> None:
        if self.pid(NODESIM) is None:
            raise PlaygroundError(
                f"no node simulator runs for {self.workdir}; start one with `lws dev up`"
            )
        send_fault(self.socket_path, request)

    # -- controller ----------------------------------------------------------------------

    def start_controller(self, kubeconfig: Path, timeout: float = 180.0) -> dict[str, int]:
        if self.pid(CONTROLLER):
            raise PlaygroundError(f"a controller already runs for {self.workdir}")
        controller = ManagerProcess(
            CONTROLLER,
            self.workdir,
            kubeconfig,
            operator_namespace=c.DEFAULT_OPERATOR_NAMESPACE,
            # No election: with one controller it would only delay a restarted one by
            # a lease.
            election=None,
            log_flags=("--zap-encoder=console",),
            config_file=self.controller_config,
            log_file=self.log_path(CONTROLLER),
            # On the playground's time scale (see node_lifecycle).
            group_replacement=PLAYGROUND_GROUP_REPLACEMENT,
            # The local control plane serves the Workload API: gangs can be tried at once.
            workload_scheduling=True,
        )
        ports = {
            "webhook": controller.webhook_port,
            "health": controller.health_port,
            "metrics": controller.metrics_port,
        }
        asyncio.run(prepare_cluster(kubeconfig, ports["webhook"]))
        controller.start()
        proc = controller.proc
        assert proc is not None
        self._record(CONTROLLER, {"pid": proc.pid, **ports})

        def ready() -> bool:
            return self.controller_ready() and _webhooks_trusted(kubeconfig)

        _poll(ready, proc, self.log_path(CONTROLLER), "the controller", timeout)
        return ports

    def controller_url(self, endpoint: str) -> str | None:
        entry = self.state().get(CONTROLLER, {})
        port = entry.get("metrics" if endpoint == "metrics" else "health")
        return f"http://127.0.0.1:{port}/{endpoint}" if port else None

    def controller_ready(self) -> bool:
        url = self.controller_url("readyz")
        return url is not None and http_status(url) == 200

    # -- stop ----------------------------------------------------------------------------

    def stop(self, timeout: float = 20.0) -> list[str]:
        """SIGTERM each process (SIGKILL after ``timeout``); the names still running."""
        left = []
        for process in PROCESSES:
            pid = self.pid(process)
            if pid is not None and not _terminate(pid, timeout):
                left.append(process)
        if not left:
            self.state_path.unlink(missing_ok=True)
            self.socket_path.unlink(missing_ok=True)
        return left


def _terminate(pid: int, timeout: float) -> bool:
    """Stop the process group ``pid`` leads; True once nothing of it runs."""

    def wait(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while pid_alive(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    for sig, seconds in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        if wait(seconds):
            return True
    return False


def _webhooks_trusted(kubeconfig: Path) -> bool:
    """Both webhook configurations carry the controller's CA: before that the API
    server cannot call them and every LeaderWorkerSet write fails."""

    async def check() -> bool:
        api = ApiClient.from_kubeconfig(kubeconfig)
        try:
            for resource, name in (
                (MUTATING_WEBHOOKS, c.MUTATING_WEBHOOK_CONFIGURATION),
                (VALIDATING_WEBHOOKS, c.VALIDATING_WEBHOOK_CONFIGURATION),
            ):
                config = await api.get_or_none(resource, name)
                hooks = (config or {}).get("webhooks") or [{}]
                if not all((h.get("clientConfig") or {}).get("caBundle") for h in hooks):
                    return False
            return True
        finally:
            await api.close()

    return asyncio.run(check())
