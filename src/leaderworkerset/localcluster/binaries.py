"""Locate (building if needed) the control-plane binaries.

The cache layout and build live in ``hack/build-controlplane.sh`` alone; this
module only checks ``KUBEBUILDER_ASSETS`` itself so that a machine with ready
binaries needs neither the repository's ``hack`` folder nor Go.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


class BinariesError(RuntimeError):
    pass


def has_all_binaries(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in BINARIES)


def build_script() -> Path:
    """The build script of the checkout this package is imported from."""
    override = os.environ.get("LWS_REPO_ROOT")
    # src/leaderworkerset/localcluster/binaries.py -> repository root
    root = Path(override) if override else Path(__file__).resolve().parents[3]
    return root / "hack" / "build-controlplane.sh"


def ensure_binaries(*, quiet: bool = False) -> Path:
    """Return a folder holding all control-plane binaries, building them once.

    A cold build compiles Kubernetes and takes many minutes; later calls return
    the cached folder at once. Build progress goes to stderr unless ``quiet``.
    """
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets and has_all_binaries(Path(assets)):
        return Path(assets)
    script = build_script()
    if not script.is_file():
        raise BinariesError(
            f"{script} not found; set KUBEBUILDER_ASSETS to a folder with {', '.join(BINARIES)}"
        )
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
    lines = proc.stdout.strip().splitlines()
    folder = Path(lines[-1]) if lines else None
    if folder is None or not has_all_binaries(folder):
        raise BinariesError(f"{script} printed no folder with all binaries: {proc.stdout!r}")
    return folder
