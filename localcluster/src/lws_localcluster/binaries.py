"""Locate (building if needed) the control-plane binaries and the real node's.

The cache layout and builds live in the ``hack/build-*.sh`` scripts alone; this
module only checks the override variables itself (``KUBEBUILDER_ASSETS`` for the
control plane, ``LWS_NODE_BINARIES`` for the node) so that a machine with ready
binaries needs neither the repository's ``hack`` folder nor Go.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
# The Kubernetes release of the control plane when none is passed (e.g. v1.34.4); unset:
# the one hack/controlplane/go.mod requires. Read by ensure_binaries, so that every local
# cluster (`lws dev up`, the test sessions, `make compat-k8s`) can be of another release.
K8S_VERSION_ENV = "LWS_K8S_VERSION"
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


def run_build_script(
    script: Path, override: str, *, quiet: bool, env: dict[str, str] | None = None
) -> list[str]:
    """Run one of the hack/ build scripts (with ``env`` added to this process's
    environment); the lines it printed on stdout."""
    if not script.is_file():
        raise BinariesError(f"{script} not found; set {override} to a folder of ready binaries")
    proc = subprocess.run(
        ["bash", str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else None,
        text=True,
        check=False,
        env={**os.environ, **env} if env else None,
    )
    if proc.returncode != 0:
        detail = (proc.stderr or "")[-4000:] if quiet else "see the output above"
        raise BinariesError(f"{script} failed with exit code {proc.returncode}: {detail}")
    return proc.stdout.strip().splitlines()


def _ensure(
    script: str,
    override: str,
    names: tuple[str, ...],
    quiet: bool,
    env: dict[str, str] | None = None,
) -> Path:
    given = os.environ.get(override)
    # With a version asked for, the script decides whether the folder given is of it.
    if given and not env and has_all_binaries(Path(given), names):
        return Path(given)
    path = build_script(script)
    lines = run_build_script(path, override, quiet=quiet, env=env)
    folder = Path(lines[-1]) if lines else None
    if folder is None or not has_all_binaries(folder, names):
        raise BinariesError(f"{path} printed no folder with {', '.join(names)}: {lines!r}")
    return folder


def ensure_binaries(*, quiet: bool = False, version: str | None = None) -> Path:
    """Return a folder holding all control-plane binaries, building them once.

    A cold build compiles Kubernetes and takes many minutes; later calls return
    the cached folder at once. Build progress goes to stderr unless ``quiet``.
    ``version`` (e.g. ``v1.34.4``; default ``$LWS_K8S_VERSION``) asks for that
    Kubernetes release instead of the one hack/controlplane/go.mod requires (the build
    script's K8S_VERSION).
    """
    version = version or os.environ.get(K8S_VERSION_ENV) or None
    env = {"K8S_VERSION": version} if version else None
    return _ensure("build-controlplane.sh", "KUBEBUILDER_ASSETS", BINARIES, quiet, env)


_VERSION = re.compile(r"\bv(\d+)\.(\d+)\.(\d+)")


def parse_kubernetes_version(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of the first ``vX.Y.Z`` in ``text`` (``Kubernetes v1.34.4``,
    as ``--version`` prints it), None without one."""
    found = _VERSION.search(text)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def kubernetes_version(folder: Path) -> tuple[int, int, int] | None:
    """The release the folder's kube-apiserver says it is, None if it does not say: what a
    local cluster's flags depend on (see controlplane.flags)."""
    try:
        proc = subprocess.run(
            [str(folder / "kube-apiserver"), "--version"],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_kubernetes_version(proc.stdout) if proc.returncode == 0 else None


def ensure_node_binaries(*, quiet: bool = False) -> Path:
    """The real node's kubelet, kube-proxy and CoreDNS, built once like the control plane."""
    return _ensure("build-node.sh", "LWS_NODE_BINARIES", NODE_BINARIES, quiet)
