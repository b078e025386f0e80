"""Start and stop the real node: containerd, the kubelet, kube-proxy and CoreDNS, as
children of the process that owns the control plane."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from leaderworkerset.runtime.client import ApiClient
from lws_localcluster.binaries import build_script, ensure_node_binaries
from lws_localcluster.controlplane import ControlPlane, cache_root, die_with_parent
from lws_localcluster.realnode import configs, host
from lws_localcluster.realnode import layout as n
from lws_localcluster.realnode.cluster_dns import install_cluster_dns
from lws_localcluster.realnode.credentials import (
    COREDNS,
    KUBE_PROXY,
    KUBELET,
    kubeconfig_path,
    write_node_credentials,
)
from lws_localcluster.realnode.images import (
    BuiltImage,
    ctr,
    ensure_images,
    import_images,
)

log = logging.getLogger("realnode")

CONTAINERD = "containerd"
# Started in this order, stopped in the reverse one.
COMPONENTS = (CONTAINERD, KUBELET, KUBE_PROXY, COREDNS)
LOCK_FILE = Path("/run/lws-realnode.lock")


class RealNodeError(RuntimeError):
    pass


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class RealNode:
    """One node run by a real kubelet; see the package docstring."""

    def __init__(self, workdir: Path) -> None:
        self.paths = n.NodePaths(workdir.resolve(), cache_root() / "realnode" / "containerd")
        self.binaries: Path | None = None
        self.sandbox: BuiltImage | None = None
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock: IO[str] | None = None

    # -- start -------------------------------------------------------------------------

    @staticmethod
    def check_host() -> None:
        """Root, and the Debian packages, installed with apt-get when missing."""
        if os.geteuid() != 0:
            raise RealNodeError("a real node runs containers: it needs root")
        missing = host.missing_packages()
        script = build_script("debian-packages.sh")
        if missing and script.is_file():
            subprocess.run(["bash", str(script), *missing], check=False)
            missing = host.missing_packages()
        if missing:
            raise RealNodeError(f"missing Debian packages {missing}: apt-get install them")

    def prepare(self) -> None:
        """What the node needs before it can start: root, packages, binaries and the
        sandbox image. Builds on first use (minutes)."""
        self.check_host()
        self._take_lock()
        self.binaries = ensure_node_binaries()
        self.sandbox = ensure_images(n.SANDBOX_IMAGE_NAME)[n.SANDBOX_IMAGE_NAME]
        # Before the control plane: its API server listens on the bridge's address.
        host.prepare_network()

    def start(self, control_plane: ControlPlane, timeout: float = 120.0) -> None:
        """Join the node to ``control_plane`` (started with ``host_ip=layout.HOST_IP``)."""
        if self.binaries is None or self.sandbox is None:
            self.prepare()
        assert self.sandbox is not None
        if control_plane.host_ip != n.HOST_IP:
            raise RealNodeError(f"the control plane must publish {n.HOST_IP} (host_ip)")
        if control_plane.node_lifecycle is None:
            # Only the node lifecycle controller lifts the not-ready taint a kubelet
            # registers its node with.
            raise RealNodeError("the control plane must run node lifecycle (node_lifecycle)")
        deadline = time.monotonic() + timeout
        try:
            self._write_files(control_plane)
            self._spawn_containerd()
            self._wait(CONTAINERD, self._containerd_answers, deadline)
            # A killed run's containers: containerd finds them in its state dir and
            # kills them through their shims (killing a shim would orphan them). What
            # they leave (volume mounts, sandbox namespaces, NAT rules, IP leases) goes
            # next, before the kubelet starts.
            self._clear_containers()
            host.sweep_pod_leftovers([n.RUN_DIR, self.paths.kubelet_root])
            for stale in (self.paths.ipam_dir, self.paths.kubelet_root):
                shutil.rmtree(stale, ignore_errors=True)
                stale.mkdir(parents=True)
            import_images([self.sandbox])
            asyncio.run(self._install_dns(control_plane.kubeconfig))
            for component, command in self._commands().items():
                self._spawn(component, command)
            for component, ready in self._readiness(control_plane).items():
                self._wait(component, ready, deadline)
        except BaseException:
            self.stop()
            raise

    def trust_insecure_registry(self, host: str) -> Path:
        """Let the node pull from the plain-HTTP registry at `host` (HOST:PORT); takes
        effect at the next pull, without a restart. Returns the file written."""
        return write_insecure_registry(self.paths, host)

    def _spawn_containerd(self) -> None:
        config = self.paths.config("containerd.toml")
        self._spawn(CONTAINERD, ["containerd", "--config", str(config)])

    def _commands(self) -> dict[str, list[str]]:
        p = self.paths
        return {
            KUBELET: [
                self._binary(KUBELET),
                f"--config={p.config('kubelet.yaml')}",
                f"--kubeconfig={kubeconfig_path(p.pki, KUBELET)}",
                f"--root-dir={p.kubelet_root}",
                f"--hostname-override={n.NODE_NAME}",
                f"--node-ip={n.HOST_IP}",
                "--v=1",
            ],
            KUBE_PROXY: [self._binary(KUBE_PROXY), f"--config={p.config('kube-proxy.yaml')}"],
            COREDNS: [self._binary(COREDNS), "-conf", str(p.config("Corefile"))],
        }

    def _readiness(self, control_plane: ControlPlane) -> dict[str, Callable[[], bool]]:
        proxy = f"http://127.0.0.1:{n.KUBE_PROXY_HEALTHZ_PORT}/healthz"
        dns = f"http://127.0.0.1:{n.COREDNS_READY_PORT}/ready"
        return {
            KUBE_PROXY: lambda: _http_ok(proxy),
            COREDNS: lambda: _http_ok(dns),
            KUBELET: lambda: node_ready(control_plane),
        }

    def _binary(self, name: str) -> str:
        assert self.binaries is not None
        return str(self.binaries / name)

    def _take_lock(self) -> None:
        if self._lock is not None:
            return
        lock = LOCK_FILE.open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise RealNodeError(
                f"another real node runs on this machine ({LOCK_FILE} is locked); "
                "stop it first (`lws dev down`)"
            ) from None
        self._lock = lock

    def _write_files(self, control_plane: ControlPlane) -> None:
        p = self.paths
        lifecycle = control_plane.node_lifecycle
        assert lifecycle is not None
        for folder in (p.base, p.cni_conf_dir, p.ipam_dir, p.kubelet_root, p.registry_hosts):
            folder.mkdir(parents=True, exist_ok=True)
        write_node_credentials(control_plane.pki, p.pki, control_plane.server)
        assert self.sandbox is not None
        files = {
            p.config("containerd.toml"): configs.containerd_toml(p, self.sandbox.ref),
            p.cni_conf_dir / "10-lws-pods.conflist": configs.cni_conflist(p),
            p.config("kubelet.yaml"): configs.kubelet_config(
                p,
                client_ca=control_plane.pki.ca_crt,
                lease_seconds=lifecycle.kubelet_lease_seconds,
            ),
            p.config("kube-proxy.yaml"): configs.kube_proxy_config(
                kubeconfig_path(p.pki, KUBE_PROXY)
            ),
            p.config("Corefile"): configs.corefile(kubeconfig_path(p.pki, COREDNS)),
        }
        for path, text in files.items():
            path.write_text(text)

    async def _install_dns(self, kubeconfig: Path) -> None:
        api = ApiClient.from_kubeconfig(kubeconfig)
        try:
            await install_cluster_dns(api)
        finally:
            await api.close()

    # -- processes ---------------------------------------------------------------------

    def _spawn(self, component: str, command: list[str]) -> None:
        log = self.paths.log(component)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            self._procs[component] = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.paths.base,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
            )

    def _wait(self, component: str, ready: Callable[[], bool], deadline: float) -> None:
        proc = self._procs[component]
        while not ready():
            if proc.poll() is not None:
                raise RealNodeError(
                    f"{component} exited with code {proc.returncode}; "
                    f"{self.paths.log(component)}:\n{_tail(self.paths.log(component))}"
                )
            if time.monotonic() > deadline:
                raise RealNodeError(
                    f"{component} not ready in time; {self.paths.log(component)}:\n"
                    f"{_tail(self.paths.log(component))}"
                )
            time.sleep(0.2)

    def _containerd_answers(self) -> bool:
        try:
            ctr("version")
        except Exception:
            return False
        return True

    def restart(self, component: str, control_plane: ControlPlane, timeout: float = 120.0) -> float:
        """Stop ``component`` (SIGTERM, as systemd would) and start it again; the seconds
        until it is ready. Containers outlive a containerd restart (their shims keep
        them), and a kubelet started again adopts the pods it finds running."""
        if component not in COMPONENTS:
            raise RealNodeError(f"no component {component!r}; one of {COMPONENTS}")
        started = time.monotonic()
        self._terminate(component, timeout)
        if component == CONTAINERD:
            self._spawn_containerd()
            ready: Callable[[], bool] = self._containerd_answers
        else:
            self._spawn(component, self._commands()[component])
            ready = self._readiness(control_plane)[component]
        if component == KUBELET:
            # The node is still Ready from before the restart: the kubelet's own health
            # endpoint says when this one is up.
            healthz = f"http://127.0.0.1:{n.KUBELET_HEALTHZ_PORT}/healthz"
            node_up = ready
            ready = lambda: _http_ok(healthz) and node_up()  # noqa: E731
        self._wait(component, ready, time.monotonic() + timeout)
        return time.monotonic() - started

    @property
    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self._procs.items() if p.poll() is None}

    # -- stop --------------------------------------------------------------------------

    def _clear_containers(self) -> None:
        """Kill and remove every container of the CRI namespace: pods of an earlier
        cluster, or of this one at stop. Sandboxes are containers too."""
        for task in ctr("tasks", "ls", "-q").split():
            with contextlib.suppress(Exception):
                ctr("tasks", "kill", "--all", "--signal", "SIGKILL", task)
            with contextlib.suppress(Exception):
                ctr("tasks", "delete", "--force", task)
        containers = ctr("containers", "ls", "-q").split()
        if containers:
            with contextlib.suppress(Exception):
                ctr("containers", "delete", *containers)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop every component and put the machine back (see ``host``)."""
        for component in reversed(COMPONENTS[1:]):
            self._terminate(component, timeout)
        try:
            if CONTAINERD not in self.pids and host.shims_running():
                # Containers outlive a dead containerd; only it can kill them (through
                # their shims), so it comes back for that.
                self._spawn_containerd()
                self._wait(CONTAINERD, self._containerd_answers, time.monotonic() + timeout)
            if CONTAINERD in self.pids:
                self._clear_containers()
        except Exception as err:
            log.warning("could not clear the node's containers: %s", err)
        self._terminate(CONTAINERD, timeout)
        try:
            self._sweep()
        except host.HostError as err:
            # Said, not raised: stop runs on failed starts too, whose error matters more.
            log.warning("the machine is not fully put back: %s", err)
        finally:
            if self._lock is not None:
                self._lock.close()
                self._lock = None

    def _terminate(self, component: str, timeout: float) -> None:
        proc = self._procs.pop(component, None)
        if proc is None or proc.poll() is not None:
            return
        for sig, seconds in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=seconds)
                return

    def _sweep(self) -> None:
        kube_proxy = self.binaries / KUBE_PROXY if self.binaries else None
        host.sweep([self.paths.base], kube_proxy)


def write_insecure_registry(paths: n.NodePaths, host: str) -> Path:
    """What ``RealNode.trust_insecure_registry`` writes, for a node run by another
    process (`lws dev up --real-node --insecure-registry`)."""
    folder = paths.registry_hosts / host
    folder.mkdir(parents=True, exist_ok=True)
    hosts = folder / "hosts.toml"
    hosts.write_text(configs.insecure_registry_hosts(host))
    return hosts


def node_ready(control_plane: ControlPlane) -> bool:
    """The real node is Ready and schedulable (its registration taint lifted)."""
    try:
        node = json.loads(control_plane.api_get(f"/api/v1/nodes/{n.NODE_NAME}"))
    except (OSError, urllib.error.URLError, ValueError):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") == "node.kubernetes.io/not-ready" for t in taints)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
