"""The :class:`ControlPlane` facade: a work dir, fresh credentials and ports, the four
components started in order and waited for (``processes``, ``flags``, ``readiness``), and
the state file through which another process finds and stops the cluster."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any

from lws_localcluster.binaries import ensure_binaries, kubernetes_version
from lws_localcluster.controlplane import pki as pkilib
from lws_localcluster.controlplane import readiness
from lws_localcluster.controlplane.components import (
    APISERVER,
    CONTROLLER_MANAGER,
    ETCD,
    SCHEDULER,
    STATE_FILE,
    ControlPlaneError,
    PortInUseError,
    Ports,
    default_workdir,
)
from lws_localcluster.controlplane.flags import (
    AUDIT_LOG,
    AUDIT_POLICY,
    SCHEDULER_CONFIG,
    Version,
    audit_policy,
    component_args,
    scheduler_config,
    serves_workload_api,
)
from lws_localcluster.controlplane.processes import (
    Revived,
    Supervisor,
    install_termination_handlers,
    pid_alive,
    pid_belongs_to,
)
from lws_localcluster.node_lifecycle import NodeLifecycle

_LIVE: set[ControlPlane] = set()


@atexit.register
def _stop_all() -> None:
    for cp in list(_LIVE):
        with contextlib.suppress(Exception):
            cp.stop()


class ControlPlane:
    """A local Kubernetes control plane; see the package docstring."""

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        name: str = "default",
        binaries: Path | None = None,
        start_timeout: float = 180.0,
        stop_timeout: float = 15.0,
        extra_args: Mapping[str, Sequence[str]] | None = None,
        node_lifecycle: NodeLifecycle | None = None,
        host_ip: str | None = None,
        workload_api: bool = True,
        pod_max_backoff: int | None = None,
        audit_users: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.workdir = (workdir or default_workdir(name)).resolve()
        self.binaries = binaries
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        # None: nodes stay Ready whatever their leases do (see flags.KCM_CONTROLLERS).
        self.node_lifecycle = node_lifecycle
        # Set when pods run for real (a real node): the API server then listens on this
        # non-loopback address of this machine, which pods can route to, and publishes it
        # as the `kubernetes` Service's endpoint. The address must exist before start.
        self.host_ip = host_ip
        # The Workload API (Workload, PodGroup, pods' schedulingGroup) is served and
        # scheduled by; False gives a cluster as v1.37 runs by default, without it.
        self.workload_api = workload_api
        # The scheduler's longest back-off in seconds (None: upstream's, 10 s, longer
        # for a pod group); see flags.scheduler_config.
        self.pod_max_backoff = pod_max_backoff
        # The binaries' release, read at start: older ones take fewer flags.
        self.version: Version | None = None
        # Users whose requests the API server writes to its audit log (`audit_log`);
        # none: no audit log.
        self.audit_users = tuple(audit_users)
        self.ports: Ports | None = None
        self._supervisor = Supervisor(self.workdir)
        # Set when attached to a cluster another process started.
        self._foreign_pids: dict[str, int] = {}
        self._owner_pid: int | None = None
        # revive() may poll from one thread while restart_apiserver() runs in another.
        # Held while a component is stopped and started again, or all are stopped: a
        # revive racing stop() would otherwise start a component stop() then forgets.
        self._respawning = threading.Lock()
        self._stopped = False

    # -- paths and addresses -------------------------------------------------

    @property
    def log_dir(self) -> Path:
        return self._supervisor.log_dir

    @property
    def pki_dir(self) -> Path:
        return self.workdir / "pki"

    @property
    def pki(self) -> pkilib.ControlPlanePKI:
        return pkilib.ControlPlanePKI(self.pki_dir)

    @property
    def audit_log(self) -> Path | None:
        """The API server's audit log (JSON lines), when the cluster keeps one."""
        return self.workdir / AUDIT_LOG if self.audit_users else None

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    def _ports(self) -> Ports:
        if self.ports is None:
            raise ControlPlaneError("control plane not started")
        return self.ports

    @property
    def server(self) -> str:
        return f"https://{self.host_ip or '127.0.0.1'}:{self._ports().apiserver}"

    @property
    def etcd_endpoint(self) -> str:
        return self._ports().etcd_endpoint

    @property
    def pids(self) -> dict[str, int]:
        if self._foreign_pids:
            return dict(self._foreign_pids)
        return self._supervisor.live_pids()

    @property
    def owner_pid(self) -> int | None:
        return self._owner_pid

    def component_args(self, component: str) -> list[str]:
        """The arguments ``component`` is (or would be) started with on this cluster's ports."""
        return component_args(
            component,
            self._ports(),
            self.workdir,
            self.pki,
            host_ip=self.host_ip,
            node_lifecycle=self.node_lifecycle,
            workload_api=self.workload_api,
            pod_max_backoff=self.pod_max_backoff,
            audit=bool(self.audit_users),
            extra_args=self.extra_args,
            version=self.version,
        )

    @property
    def serves_workload_api(self) -> bool:
        """The cluster has the Workload API: asked for, and its release has it."""
        return self.workload_api and serves_workload_api(self.version)

    # -- lifecycle -----------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start all components on fresh ports with fresh state; wait until healthy."""
        if self._supervisor.procs or self._foreign_pids:
            raise ControlPlaneError("already started")
        existing = ControlPlane.attach(self.workdir)
        if existing is not None:
            raise ControlPlaneError(
                f"a control plane is already running in {self.workdir} (pids {existing.pids})"
            )
        if self.binaries is None:
            self.binaries = ensure_binaries()
        self.version = kubernetes_version(self.binaries)
        install_termination_handlers()
        _LIVE.add(self)
        self._stopped = False
        deadline = time.monotonic() + self.start_timeout
        try:
            # Another process may grab a picked port before its component
            # binds it; fresh ports on a retry settle that.
            for attempt in range(3):
                self._prepare_workdir()
                self.ports = Ports.pick()
                try:
                    self._start_components(deadline)
                    break
                except PortInUseError:
                    self._supervisor.stop_all(self.stop_timeout)
                    if attempt == 2:
                        raise
            self._owner_pid = os.getpid()
            self._write_state()
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare_workdir(self) -> None:
        for sub in ("etcd", "pki", "certs", "logs", str(AUDIT_LOG.parent)):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
        for stale in (STATE_FILE, "kubeconfig", SCHEDULER_CONFIG):
            (self.workdir / stale).unlink(missing_ok=True)
        self.log_dir.mkdir(parents=True)
        pkilib.create_control_plane_pki(self.pki_dir, host_ip=self.host_ip)

    def _start_components(self, deadline: float) -> None:
        pkilib.write_kubeconfigs(self.pki, self.server, self.workdir)
        if self.pod_max_backoff is not None:
            config = scheduler_config(self.workdir, pod_max_backoff=self.pod_max_backoff)
            (self.workdir / SCHEDULER_CONFIG).write_text(config)
        if self.audit_users:
            (self.workdir / AUDIT_POLICY).write_text(audit_policy(self.audit_users))
            (self.workdir / AUDIT_LOG).parent.mkdir(parents=True, exist_ok=True)
        ports = self._ports()
        self._spawn(ETCD)
        self._supervisor.wait(ETCD, lambda: readiness.etcd_healthy(ports), deadline)
        self._spawn(APISERVER)
        self._supervisor.wait(APISERVER, self.is_healthy, deadline)
        self._spawn(CONTROLLER_MANAGER)
        self._spawn(SCHEDULER)
        self._supervisor.wait(
            CONTROLLER_MANAGER, lambda: readiness.controller_manager_ready(ports), deadline
        )
        self._supervisor.wait(SCHEDULER, lambda: readiness.scheduler_ready(ports), deadline)

    def _spawn(self, component: str) -> None:
        assert self.binaries is not None
        command = [str(self.binaries / component), *self.component_args(component)]
        self._supervisor.spawn(component, command)

    # -- health --------------------------------------------------------------

    def api_get(self, path: str, *, timeout: float = 5.0) -> bytes:
        """GET ``path`` from the API server as the cluster admin."""
        return readiness.api_get(self.server, self.pki_dir, path, timeout=timeout)

    def is_healthy(self) -> bool:
        return readiness.apiserver_ready(self.server, self.pki_dir)

    def component_metrics(self, component: str) -> str | None:
        """kube-controller-manager's or kube-scheduler's /metrics, None if unanswered."""
        return readiness.component_metrics(self._ports(), component)

    def component_health(self) -> dict[str, bool]:
        return readiness.component_health(self.server, self.pki_dir, self._ports())

    # -- restart and stop ------------------------------------------------------

    def restart_apiserver(self, while_down: Callable[[], object] | None = None) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd; `while_down`
        runs between the two (a fault injected where no client can see it happen)."""
        if APISERVER not in self._supervisor.procs:
            raise ControlPlaneError("restart_apiserver needs a control plane this process started")
        with self._respawning:
            self._supervisor.stop(APISERVER, self.stop_timeout)
            if while_down is not None:
                while_down()
            self._spawn(APISERVER)
            deadline = time.monotonic() + self.start_timeout
            self._supervisor.wait(APISERVER, self.is_healthy, deadline)
            self._write_state()

    @contextlib.contextmanager
    def paused(self, component: str) -> Iterator[None]:
        """``component`` (one this process started) stopped with SIGSTOP for the block
        and continued after: kube-controller-manager, say, to see what happens without
        its garbage collector, and no lease to lose meanwhile (it runs with
        --leader-elect=false)."""
        proc = self._supervisor.procs.get(component)
        if proc is None:
            raise ControlPlaneError(f"pausing {component} needs one this process started")
        os.killpg(proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(proc.pid, signal.SIGCONT)

    def revive(self) -> list[Revived]:
        """Start kube-controller-manager or kube-scheduler again if it has exited.

        Both exit by design on some faults: the scheduler when a binding it lost
        track of over an API server restart shows up on another node than it assumed
        ("Scheduler cache is corrupted"), kcm when the API server goes away while its
        controllers are built. On a real node the kubelet restarts them; a caller that
        keeps a cluster up for long under faults polls this to do the same. A
        component started again dies with the thread that called this (see the package
        docstring): an executor's threads live until the executor shuts down.
        """
        with self._respawning:
            if self._stopped:
                return []
            revived = self._supervisor.exited((CONTROLLER_MANAGER, SCHEDULER))
            for gone in revived:
                self._spawn(gone.component)
            if revived:
                self._write_state()
        return revived

    def stop(self) -> None:
        """Stop every component (SIGTERM, then SIGKILL after ``stop_timeout``)."""
        _LIVE.discard(self)
        # Bounded: stop() also runs from a signal handler, possibly in the very thread
        # holding the lock mid-restart; stopping anyway beats hanging there.
        locked = self._respawning.acquire(timeout=self.stop_timeout)
        try:
            self._stopped = True
            if self._foreign_pids:
                self._stop_foreign()
            else:
                self._supervisor.stop_all(self.stop_timeout)
        finally:
            if locked:
                self._respawning.release()
        if self._owner_pid in (None, os.getpid()) or not pid_alive(self._owner_pid or 0):
            (self.workdir / STATE_FILE).unlink(missing_ok=True)

    def _stop_foreign(self) -> None:
        owner = self._owner_pid
        terminate = self._supervisor.terminate
        if owner and owner != os.getpid() and pid_belongs_to(owner, self.workdir):
            # The owner stops its children itself and removes the state file.
            terminate({"owner": owner}, self.stop_timeout * 2, group=False)
        leftovers = {
            n: pid for n, pid in self._foreign_pids.items() if pid_belongs_to(pid, self.workdir)
        }
        terminate(leftovers, self.stop_timeout)
        self._foreign_pids.clear()

    # -- state shared with other processes -------------------------------------

    def _write_state(self) -> None:
        state = {
            "name": self.name,
            "owner_pid": self._owner_pid,
            "pids": self.pids,
            "ports": asdict(self._ports()),
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "binaries": str(self.binaries),
            "node_lifecycle": asdict(self.node_lifecycle) if self.node_lifecycle else None,
            "host_ip": self.host_ip,
            "workload_api": self.workload_api,
            "kubernetes_version": list(self.version) if self.version else None,
            "pod_max_backoff": self.pod_max_backoff,
            "audit_users": list(self.audit_users),
            "started_at": time.time(),
        }
        tmp = self.workdir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.workdir / STATE_FILE)

    @classmethod
    def attach(cls, workdir: Path) -> ControlPlane | None:
        """The cluster recorded in ``workdir`` if any of its processes still run."""
        workdir = workdir.resolve()
        try:
            state = json.loads((workdir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        cp = cls(workdir, name=state.get("name", workdir.name))
        cp.ports = Ports(**state["ports"])
        cp.binaries = Path(state["binaries"])
        cp._owner_pid = state.get("owner_pid")
        lifecycle = state.get("node_lifecycle")
        cp.node_lifecycle = NodeLifecycle(**lifecycle) if lifecycle else None
        cp.host_ip = state.get("host_ip")
        cp.workload_api = state.get("workload_api", True)
        version = state.get("kubernetes_version")
        cp.version = (int(version[0]), int(version[1]), int(version[2])) if version else None
        cp.pod_max_backoff = state.get("pod_max_backoff")
        cp.audit_users = tuple(state.get("audit_users") or ())
        cp._foreign_pids = {
            n: pid
            for n, pid in state.get("pids", {}).items()
            if pid_alive(pid) and pid_belongs_to(pid, workdir)
        }
        if not cp._foreign_pids:
            return None
        return cp


@contextlib.contextmanager
def running(workdir: Path | None = None, **kwargs: Any) -> Iterator[ControlPlane]:
    """``with running() as cp:`` — a started control plane, stopped on exit."""
    cp = ControlPlane(workdir, **kwargs)
    with cp:
        yield cp
