"""The real node's fixed names, addresses and paths.

Pods live on a bridge of their own; the bridge's address is this machine's address as
pods see it, so it is also the node's InternalIP, the address the API server publishes
for the ``kubernetes`` Service and the one CoreDNS listens on. This kernel has no dummy
interface driver, and a loopback address would be the pod's own, not the host's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NODE_NAME = "lws-real-0"
BRIDGE = "lwsbr0"
POD_CIDR = "10.214.0.0/16"
HOST_IP = "10.214.0.1"
# The tenth address of the control plane's service range, as kubeadm picks it.
CLUSTER_DNS_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"
CNI_NETWORK = "lws-pods"
KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248
KUBE_PROXY_HEALTHZ_PORT = 10256
KUBE_PROXY_METRICS_PORT = 10249
COREDNS_HEALTH_PORT = 10254
COREDNS_READY_PORT = 10255
# One real node per machine: containerd's runtime state (its socket, task bundles and the
# pods' network namespaces) is a fixed place, so that a later start finds what a killed
# one left there.
RUN_DIR = Path("/run/lws-realnode")
CONTAINERD_SOCKET = RUN_DIR / "containerd.sock"
# The images live in the cache, shared by every cluster's real node, so that they are
# imported once.
SANDBOX_IMAGE_NAME = "pause"


@dataclass(frozen=True)
class NodePaths:
    """Where one cluster's real node keeps its configuration and state."""

    workdir: Path
    containerd_root: Path

    @property
    def base(self) -> Path:
        return self.workdir / "realnode"

    @property
    def pki(self) -> Path:
        return self.base / "pki"

    @property
    def cni_conf_dir(self) -> Path:
        return self.base / "cni"

    @property
    def ipam_dir(self) -> Path:
        return self.base / "ipam"

    @property
    def registry_hosts(self) -> Path:
        """containerd's per-registry settings, one `HOST[:PORT]/hosts.toml` each (read at
        every pull, so a registry can be added to a running node)."""
        return self.base / "certs.d"

    @property
    def kubelet_root(self) -> Path:
        return self.base / "kubelet"

    @property
    def containerd_state(self) -> Path:
        return RUN_DIR / "state"

    def config(self, name: str) -> Path:
        return self.base / name

    def log(self, component: str) -> Path:
        return self.workdir / "logs" / f"{component}.log"
