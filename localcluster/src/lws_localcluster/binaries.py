"""Locate (building if needed) the control-plane binaries and the real node's.

The cache layout and builds live in the ``hack/build-*.sh`` scripts alone; this
module only checks the override variables itself (``KUBEBUILDER_ASSETS`` for the
control plane, ``LWS_NODE_BINARIES`` for the node) so that a machine with ready
binaries needs neither the repository's ``hack`` folder nor Go.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
NODE_BINARIES = ("kubelet", "kube-proxy", "coredns")


class BinariesError(RuntimeError):
    pass


def has_all_binaries(directory: Path, names: tuple[str, ...] = BINARIES) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in names)


def repo_root() -> Path:
    """The checkout this package is imported from (``LWS_REPO_ROOT`` overrides)."""
    override = os.environ.get("LWS_REPO_ROOT")
    # localcluster/src/lws_localcluster/binaries.py -> repository root
    return Path(override) if override else Path(__file__).resolve().parents[3]


def build_script(name: str = "build-controlplane.sh") -> Path:
    return repo_root() / "hack" / name


def run_build_script(script: Path, override: str, *, quiet: bool) -> list[str]:
    """Run one of the hack/ build scripts; the lines it printed on stdout."""
    if not script.is_file():
        raise BinariesError(f"{script} not found; set {override} to a folder of ready binaries")
    proc = subprocess.run(
        ["bash", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else None,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        detail = (proc.stderr or "")[-4000:] if quiet else "see the output above"
        raise BinariesError(f"{script} failed with exit code {proc.returncode}: {detail}")
    return proc.stdout.strip().splitlines()


def _ensure(script: str, override: str, names: tuple[str, ...], quiet: bool) -> Path:
    given = os.environ.get(override)
    if given and has_all_binaries(Path(given), names):
        return Path(given)
    path = build_script(script)
    lines = run_build_script(path, override, quiet=quiet)
    folder = Path(lines[-1]) if lines else None
    if folder is None or not has_all_binaries(folder, names):
        raise BinariesError(f"{path} printed no folder with {', '.join(names)}: {lines!r}")
    return folder


def ensure_binaries(*, quiet: bool = False) -> Path:
    """Return a folder holding all control-plane binaries, building them once.

    A cold build compiles Kubernetes and takes many minutes; later calls return
    the cached folder at once. Build progress goes to stderr unless ``quiet``.
    """
    return _ensure("build-controlplane.sh", "KUBEBUILDER_ASSETS", BINARIES, quiet)


def ensure_node_binaries(*, quiet: bool = False) -> Path:
    """The real node's kubelet, kube-proxy and CoreDNS, built once like the control plane."""
    return _ensure("build-node.sh", "LWS_NODE_BINARIES", NODE_BINARIES, quiet)
