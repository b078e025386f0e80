"""What the real node changes on this machine, and how it is put back.

The node's processes die with their owner, but a container outlives both: its runc
shim is a daemon of its own, and its mounts, network namespace and NAT rules stay
until someone removes them. ``sweep`` removes whatever a stopped or killed real node
left, so every start begins from the same machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

from lws_localcluster.realnode import layout as n

# Commands the node needs from Debian's packages, and the package of each.
PACKAGES = {
    "containerd": "containerd",
    "runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "iptables": "iptables",
    "ip": "iproute2",
    "conntrack": "conntrack",
}

_libc = ctypes.CDLL(None, use_errno=True)
_MNT_DETACH = 2


class HostError(RuntimeError):
    pass


def missing_packages() -> list[str]:
    def present(command: str) -> bool:
        if command.startswith("/"):
            return os.access(command, os.X_OK)
        return shutil.which(command) is not None

    return sorted({pkg for command, pkg in PACKAGES.items() if not present(command)})


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise HostError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _write_sysctl(name: str, value: str) -> None:
    path = Path("/proc/sys") / name.replace(".", "/")
    try:
        if path.read_text().strip() != value:
            path.write_text(value)
    except OSError as err:
        raise HostError(f"cannot set {name}={value}: {err}") from err


def prepare_network() -> None:
    """The pod bridge with the host's address on it, and the kernel's forwarding.

    The bridge exists before the first pod so that the node, the API server and CoreDNS
    can use its address from the start; the CNI bridge plugin adopts it.
    """
    if run("ip", "link", "show", n.BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", n.BRIDGE, "type", "bridge")
    prefix = n.POD_CIDR.split("/")[1]
    run("ip", "addr", "replace", f"{n.HOST_IP}/{prefix}", "dev", n.BRIDGE)
    run("ip", "link", "set", n.BRIDGE, "up")
    _write_sysctl("net.ipv4.ip_forward", "1")
    # Traffic between two pods on the bridge must pass iptables too, or a pod calling a
    # Service whose endpoint is on the same bridge never sees the reply translated.
    _write_sysctl("net.bridge.bridge-nf-call-iptables", "1")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _pids_naming(fragment: bytes) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and fragment in _cmdline(int(entry.name)):
            pids.append(int(entry.name))
    return pids


def _shims() -> list[int]:
    return [
        pid
        for pid in _pids_naming(str(n.CONTAINERD_SOCKET).encode())
        if b"containerd-shim" in _cmdline(pid)
    ]


def shims_running() -> bool:
    return bool(_shims())


def kill_shims() -> None:
    """SIGKILL every runc shim of this node's containerd (they name its socket)."""
    for pid in _shims():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# Every real node's kubelet keeps its pods' volumes below a folder named so, wherever
# its cluster's work dir was (a killed test run's temporary one included).
KUBELET_ROOT_MARK = "/realnode/kubelet/"


def mounts_under(roots: Iterable[Path], mountinfo: str | None = None) -> list[str]:
    """Mount points at or below any of ``roots`` or any kubelet root, deepest first
    (read from ``/proc/self/mountinfo`` unless its text is given)."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    prefixes = [str(r.resolve()) for r in roots]
    found = set()
    for line in mountinfo.splitlines():
        point = line.split()[4].replace("\\040", " ")
        mine = any(point == p or point.startswith(p + "/") for p in prefixes)
        if mine or KUBELET_ROOT_MARK in point:
            found.add(point)
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


def unmount_all(roots: Iterable[Path]) -> None:
    for point in mounts_under(roots):
        if _libc.umount2(point.encode(), _MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise HostError(f"cannot unmount {point}: {os.strerror(err)}")


def pod_nat_rules(saved: str) -> tuple[list[list[str]], set[str]]:
    """From ``iptables-save -t nat``: the arguments deleting each of the bridge plugin's
    per-pod masquerade rules for the node's network, and the chains they jump to."""
    marker = f'name: \\"{n.CNI_NETWORK}\\"'
    deletions, chains = [], set()
    for line in saved.splitlines():
        if line.startswith("-A POSTROUTING") and marker in line and " -j CNI-" in line:
            chains.add(line.rsplit(" -j ", 1)[1].split()[0])
            deletions.append(["-D", *shlex.split(line)[1:]])
    return deletions, chains


def remove_pod_nat_rules() -> None:
    """The per-pod masquerade rules and chains of pods that were never torn down."""
    saved = run("iptables-save", "-t", "nat", check=False).stdout
    deletions, chains = pod_nat_rules(saved)
    for deletion in deletions:
        run("iptables", "-t", "nat", *deletion, check=False)
    for chain in chains:
        run("iptables", "-t", "nat", "-F", chain, check=False)
        run("iptables", "-t", "nat", "-X", chain, check=False)


def delete_bridge() -> None:
    if run("ip", "link", "show", n.BRIDGE, check=False).returncode == 0:
        run("ip", "link", "del", n.BRIDGE)


def sweep_pod_leftovers(roots: Iterable[Path]) -> None:
    """What pods whose containers are gone leave: mounts (volumes, sandbox network
    namespaces) and masquerade rules."""
    unmount_all(roots)
    remove_pod_nat_rules()


def sweep(roots: Iterable[Path], kube_proxy: Path | None) -> None:
    """Remove what a real node leaves on the machine once its containerd is stopped.
    The two sysctls ``prepare_network`` sets stay: other bridges may rely on them too."""
    kill_shims()
    unmount_all([n.RUN_DIR, *roots])
    shutil.rmtree(n.RUN_DIR, ignore_errors=True)
    remove_pod_nat_rules()
    if kube_proxy is not None:
        run(str(kube_proxy), "--cleanup", check=False)
    delete_bridge()
