"""Run etcd, kube-apiserver, kube-controller-manager and kube-scheduler locally.

Each component is a child process in its own process group, with its log in
``<workdir>/logs``. Children are asked to die with the thread that started
them (``PR_SET_PDEATHSIG``), so even a SIGKILLed test run leaks no process;
start a control plane from a thread that lives as long as it should (the main
thread, normally). A running cluster is recorded in ``<workdir>/state.json`` so
that another process (``lws dev status/down``) can find and stop it.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import yaml

from lws_localcluster import controlplane_pki as pkilib
from lws_localcluster.binaries import ensure_binaries
from lws_localcluster.node_lifecycle import NodeLifecycle

ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
COMPONENTS = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER)
STATE_FILE = "state.json"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# node-ipam does nothing without --allocate-node-cidrs. The node lifecycle controller
# runs only when asked for (see node_lifecycle: the test suite's simulator cannot keep
# its leases renewed through a synchronous test). Everything else runs.
KCM_CONTROLLERS = "*,-node-ipam-controller"
KCM_CONTROLLERS_WITHOUT_NODE_LIFECYCLE = KCM_CONTROLLERS + ",-node-lifecycle-controller"


class ControlPlaneError(RuntimeError):
    pass


class _PortInUseError(ControlPlaneError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get("LWS_CACHE_DIR") or Path.home() / ".cache" / "leaderworkerset")


def default_workdir(name: str) -> Path:
    return cache_root() / "clusters" / name


@dataclass(frozen=True)
class Revived:
    """A component found exited and started again: its exit code and last log line."""

    component: str
    exit_code: int
    last_line: str


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def pick(cls) -> Ports:
        # All sockets stay bound until every port is chosen, so the five differ.
        with contextlib.ExitStack() as stack:
            socks = [stack.enter_context(socket.socket()) for _ in range(5)]
            for s in socks:
                s.bind(("127.0.0.1", 0))
            return cls(*(s.getsockname()[1] for s in socks))


_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    def preexec() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # A zombie has exited; only its parent's reaping is pending.
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def pid_belongs_to(pid: int, workdir: Path) -> bool:
    """Guard against signalling a recycled pid: ours all name the workdir.

    An argument must be the work dir or lie under it, so that a cluster in
    ``.../default2`` is not taken for one in ``.../default``.
    """
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    wd = str(workdir).encode()
    return any(a == wd or a.endswith(b"=" + wd) or (wd + b"/") in a for a in args)


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def kubeconfig_text(server: str, ca: bytes, cert: bytes, key: bytes, user: str) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "lws",
                    "cluster": {"server": server, "certificate-authority-data": b64(ca)},
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
                }
            ],
            "contexts": [{"name": "lws", "context": {"cluster": "lws", "user": user}}],
            "current-context": "lws",
        },
        sort_keys=False,
    )


_LIVE: set[ControlPlane] = set()


@atexit.register
def _stop_all() -> None:
    for cp in list(_LIVE):
        with contextlib.suppress(Exception):
            cp.stop()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _install_termination_handlers() -> None:
    """Turn SIGTERM/SIGHUP into KeyboardInterrupt so that finally blocks,
    fixture teardown and atexit stop the cluster gracefully. Handlers someone
    else installed are left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _raise_interrupt)


class ControlPlane:
    """A local Kubernetes control plane; see the module docstring."""

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
    ) -> None:
        self.name = name
        self.workdir = (workdir or default_workdir(name)).resolve()
        self.binaries = binaries
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        # None: nodes stay Ready whatever their leases do (see KCM_CONTROLLERS).
        self.node_lifecycle = node_lifecycle
        # Set when pods run for real (a real node): the API server then listens on this
        # non-loopback address of this machine, which pods can route to, and publishes it
        # as the `kubernetes` Service's endpoint. The address must exist before start.
        self.host_ip = host_ip
        self.ports: Ports | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
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
        return self.workdir / "logs"

    @property
    def pki_dir(self) -> Path:
        return self.workdir / "pki"

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
        return f"http://127.0.0.1:{self._ports().etcd_client}"

    @property
    def pids(self) -> dict[str, int]:
        if self._foreign_pids:
            return dict(self._foreign_pids)
        return {n: p.pid for n, p in self._procs.items() if p.poll() is None}

    @property
    def owner_pid(self) -> int | None:
        return self._owner_pid

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
        if self._procs or self._foreign_pids:
            raise ControlPlaneError("already started")
        existing = ControlPlane.attach(self.workdir)
        if existing is not None:
            raise ControlPlaneError(
                f"a control plane is already running in {self.workdir} (pids {existing.pids})"
            )
        if self.binaries is None:
            self.binaries = ensure_binaries()
        _install_termination_handlers()
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
                except _PortInUseError:
                    self._stop_procs()
                    if attempt == 2:
                        raise
            self._owner_pid = os.getpid()
            self._write_state()
        except BaseException:
            self.stop()
            raise
        return self

    def _prepare_workdir(self) -> None:
        for sub in ("etcd", "pki", "certs", "logs"):
            shutil.rmtree(self.workdir / sub, ignore_errors=True)
        for stale in (STATE_FILE, "kubeconfig"):
            (self.workdir / stale).unlink(missing_ok=True)
        self.log_dir.mkdir(parents=True)
        pkilib.create_control_plane_pki(self.pki_dir, host_ip=self.host_ip)

    @property
    def pki(self) -> pkilib.ControlPlanePKI:
        return pkilib.ControlPlanePKI(self.pki_dir)

    def _write_kubeconfigs(self) -> None:
        ca = self.pki.ca_crt.read_bytes()
        for stem, (user, _groups) in pkilib.CLIENTS.items():
            if stem == pkilib.APISERVER_KUBELET_CLIENT:
                continue  # the API server's own identity towards kubelets, not a user's
            text = kubeconfig_text(
                self.server,
                ca,
                self.pki.crt(stem).read_bytes(),
                self.pki.key(stem).read_bytes(),
                user,
            )
            path = self.kubeconfig if stem == "admin" else self.workdir / f"{stem}.kubeconfig"
            path.touch(mode=0o600, exist_ok=True)
            path.write_text(text)

    def _start_components(self, deadline: float) -> None:
        self._write_kubeconfigs()
        self._spawn(ETCD)
        self._wait(ETCD, self._etcd_healthy, deadline)
        self._spawn(APISERVER)
        self._wait(APISERVER, self.is_healthy, deadline)
        self._spawn(CONTROLLER_MANAGER)
        self._spawn(SCHEDULER)
        self._wait(CONTROLLER_MANAGER, self._controller_manager_ready, deadline)
        self._wait(SCHEDULER, self._scheduler_ready, deadline)

    # One piece: the flag lists of all four components, read best side by side.
    def _args(self, component: str) -> list[str]:
        p, w, k = self._ports(), self.workdir, self.pki
        if component == ETCD:
            peer = f"http://127.0.0.1:{p.etcd_peer}"
            args = [
                "--name=lws",
                f"--data-dir={w / 'etcd'}",
                f"--listen-client-urls={self.etcd_endpoint}",
                f"--advertise-client-urls={self.etcd_endpoint}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=lws={peer}",
                # Throw-away data: fsync only costs test time.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ]
        elif component == APISERVER:
            args = [
                f"--etcd-servers={self.etcd_endpoint}",
                *self._apiserver_address_args(),
                # Otherwise open watches hold a SIGTERM for the 60s request
                # timeout; in this mode the HTTP server gets 2s after the
                # in-flight requests drain, and late clients get 429 +
                # Retry-After (which client-go retries) rather than refusals.
                "--shutdown-send-retry-after=true",
                f"--secure-port={p.apiserver}",
                f"--cert-dir={w / 'certs' / 'apiserver'}",
                f"--tls-cert-file={k.crt('apiserver')}",
                f"--tls-private-key-file={k.key('apiserver')}",
                f"--client-ca-file={k.ca_crt}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={k.sa_pub}",
                f"--service-account-signing-key-file={k.sa_key}",
                "--authorization-mode=Node,RBAC",
                # As on clusters that harden owner references: a controller that
                # sets blockOwnerDeletion must be allowed to update the owner's
                # finalizers, which the RBAC test holds config/rbac to.
                "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
                "--allow-privileged=true",
                f"--requestheader-client-ca-file={k.crt('front-proxy-ca')}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={k.crt('front-proxy-client')}",
                f"--proxy-client-key-file={k.key('front-proxy-client')}",
                f"--kubelet-client-certificate={k.crt('apiserver-kubelet-client')}",
                f"--kubelet-client-key={k.key('apiserver-kubelet-client')}",
                # A real node's name is not in this machine's DNS; its address is.
                "--kubelet-preferred-address-types=InternalIP",
            ]
            if self.node_lifecycle is not None:
                args += self.node_lifecycle.apiserver_args()
        else:
            port = p.controller_manager if component == CONTROLLER_MANAGER else p.scheduler
            stem = "controller-manager" if component == CONTROLLER_MANAGER else "scheduler"
            kubeconfig = w / f"{stem}.kubeconfig"
            args = [
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={w / 'certs' / component}",
                "--leader-elect=false",
                # A local cluster's own figures (its client's requests, the scheduler's
                # queues) are for anyone on the machine to read, as its health is.
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            ]
            if component == CONTROLLER_MANAGER:
                lifecycle = self.node_lifecycle
                controllers = KCM_CONTROLLERS_WITHOUT_NODE_LIFECYCLE
                if lifecycle is not None:
                    controllers = KCM_CONTROLLERS
                    args += lifecycle.controller_manager_args()
                args += [
                    f"--controllers={controllers}",
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={k.sa_key}",
                    f"--root-ca-file={k.ca_crt}",
                    f"--cluster-signing-cert-file={k.ca_crt}",
                    f"--cluster-signing-key-file={k.ca_key}",
                    # At the default 20 qps, minting one token per controller
                    # alone takes ~5s of start-up, and tests creating many
                    # pods at once would queue behind the limiter.
                    "--kube-api-qps=200",
                    "--kube-api-burst=400",
                    "--concurrent-statefulset-syncs=10",
                ]
        return args + self.extra_args.get(component, [])

    def _apiserver_address_args(self) -> list[str]:
        if self.host_ip is None:
            return [
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # The endpoint reconciler refuses loopback addresses; nothing
                # routes to the `kubernetes` Service here anyway.
                "--endpoint-reconciler-type=none",
            ]
        # The host address only: pods and this machine reach it, other machines do not.
        return [f"--bind-address={self.host_ip}", f"--advertise-address={self.host_ip}"]

    def _spawn(self, component: str) -> None:
        assert self.binaries is not None
        log = (self.log_dir / f"{component}.log").open("ab")
        try:
            self._procs[component] = subprocess.Popen(
                [str(self.binaries / component), *self._args(component)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )
        finally:
            log.close()

    def _wait(self, component: str, healthy: Callable[[], bool], deadline: float) -> None:
        proc = self._procs[component]
        log = self.log_dir / f"{component}.log"
        while True:
            if proc.poll() is not None:
                tail = _log_tail(log)
                error = _PortInUseError if "address already in use" in tail else ControlPlaneError
                raise error(f"{component} exited with code {proc.returncode}; {log}:\n{tail}")
            if healthy():
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{component} not healthy in time; {log}:\n{_log_tail(log)}"
                )
            time.sleep(0.1)

    # -- health --------------------------------------------------------------

    def _admin_ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        ctx.load_cert_chain(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        return ctx

    def api_get(self, path: str, *, timeout: float = 5.0) -> bytes:
        """GET ``path`` from the API server as the cluster admin."""
        with urllib.request.urlopen(
            self.server + path, context=self._admin_ssl(), timeout=timeout
        ) as resp:
            body: bytes = resp.read()
            return body

    def is_healthy(self) -> bool:
        try:
            return self.api_get("/readyz", timeout=2.0) == b"ok"
        except (OSError, urllib.error.URLError, ssl.SSLError):
            return False

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.etcd_endpoint + "/health", timeout=2.0) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    @staticmethod
    def _local_get(port: int, path: str) -> bytes | None:
        """GET from kcm or the scheduler; None unless 200.

        They serve a self-signed certificate of their own, and the health
        paths need no credentials, so nothing is verified here.
        """
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        try:
            url = f"https://127.0.0.1:{port}{path}"
            with urllib.request.urlopen(url, context=ctx, timeout=2.0) as resp:
                body: bytes = resp.read()
                return body if resp.status == 200 else None
        except OSError:
            return None

    def component_metrics(self, component: str) -> str | None:
        """kube-controller-manager's or kube-scheduler's /metrics, None if unanswered."""
        ports = self._ports()
        port = ports.controller_manager if component == CONTROLLER_MANAGER else ports.scheduler
        body = self._local_get(port, "/metrics")
        return None if body is None else body.decode()

    def _controller_manager_ready(self) -> bool:
        # /healthz answers as soon as kcm listens, but its controllers are
        # built later, and an API server restart during that phase makes kcm
        # exit. The per-controller checks appear once they are all built.
        body = self._local_get(self._ports().controller_manager, "/healthz?verbose")
        return body is not None and b"garbage-collector-controller ok" in body

    def _scheduler_ready(self) -> bool:
        return self._local_get(self._ports().scheduler, "/readyz") is not None

    def component_health(self) -> dict[str, bool]:
        return {
            ETCD: self._etcd_healthy(),
            APISERVER: self.is_healthy(),
            CONTROLLER_MANAGER: self._controller_manager_ready(),
            SCHEDULER: self._scheduler_ready(),
        }

    # -- restart and stop ------------------------------------------------------

    def restart_apiserver(self, while_down: Callable[[], object] | None = None) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd; `while_down`
        runs between the two (a fault injected where no client can see it happen)."""
        if APISERVER not in self._procs:
            raise ControlPlaneError("restart_apiserver needs a control plane this process started")
        with self._respawning:
            self._terminate({APISERVER: self._procs[APISERVER].pid}, self.stop_timeout)
            self._procs.pop(APISERVER).wait()
            if while_down is not None:
                while_down()
            self._spawn(APISERVER)
            self._wait(APISERVER, self.is_healthy, time.monotonic() + self.start_timeout)
            self._write_state()

    def revive(self) -> list[Revived]:
        """Start kube-controller-manager or kube-scheduler again if it has exited.

        Both exit by design on some faults: the scheduler when a binding it lost
        track of over an API server restart shows up on another node than it assumed
        ("Scheduler cache is corrupted"), kcm when the API server goes away while its
        controllers are built. On a real node the kubelet restarts them; a caller that
        keeps a cluster up for long under faults polls this to do the same. A
        component started again dies with the thread that called this (see the module
        docstring): an executor's threads live until the executor shuts down.
        """
        revived: list[Revived] = []
        with self._respawning:
            if self._stopped:
                return revived
            for name in (CONTROLLER_MANAGER, SCHEDULER):
                proc = self._procs.get(name)
                if proc is None or proc.poll() is None:
                    continue
                last = _log_tail(self.log_dir / f"{name}.log", lines=1).strip()
                revived.append(Revived(name, proc.returncode, last))
                self._spawn(name)
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
                self._stop_procs()
        finally:
            if locked:
                self._respawning.release()
        if self._owner_pid in (None, os.getpid()) or not pid_alive(self._owner_pid or 0):
            (self.workdir / STATE_FILE).unlink(missing_ok=True)

    def _stop_procs(self) -> None:
        # Reverse start order: clients first, etcd last, so nothing logs
        # connection errors against an already stopped dependency.
        for group in ((SCHEDULER, CONTROLLER_MANAGER), (APISERVER,), (ETCD,)):
            pids = {n: self._procs[n].pid for n in group if n in self._procs}
            self._terminate(pids, self.stop_timeout)
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
        self._procs.clear()

    def _stop_foreign(self) -> None:
        owner = self._owner_pid
        if owner and owner != os.getpid() and pid_belongs_to(owner, self.workdir):
            # The owner stops its children itself and removes the state file.
            self._terminate({"owner": owner}, self.stop_timeout * 2, group=False)
        leftovers = {
            n: pid for n, pid in self._foreign_pids.items() if pid_belongs_to(pid, self.workdir)
        }
        self._terminate(leftovers, self.stop_timeout)
        self._foreign_pids.clear()

    def _terminate(self, pids: Mapping[str, int], timeout: float, *, group: bool = True) -> None:
        def send(sig: signal.Signals) -> None:
            for pid in pids.values():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if group:
                        os.killpg(pid, sig)
                    else:
                        os.kill(pid, sig)

        def wait(until: float) -> bool:
            while True:
                for name, pid in pids.items():
                    proc = self._procs.get(name)
                    if proc is not None and proc.pid == pid:
                        proc.poll()
                if not any(pid_alive(pid) for pid in pids.values()):
                    return True
                if time.monotonic() > until:
                    return False
                time.sleep(0.05)

        if not pids:
            return
        send(signal.SIGTERM)
        if not wait(time.monotonic() + timeout):
            send(signal.SIGKILL)
            wait(time.monotonic() + 5)

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
