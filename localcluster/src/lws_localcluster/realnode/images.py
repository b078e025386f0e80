"""Images for the real node: built here by ``hack/build-images.sh`` (no registry is
reachable) and imported into the node's containerd, where pods use them by name.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from lws_localcluster.binaries import BinariesError, build_script
from lws_localcluster.realnode import layout as n

# The containerd namespace of the kubelet's CRI.
K8S_NAMESPACE = "k8s.io"


@dataclass(frozen=True)
class BuiltImage:
    name: str
    ref: str
    archive: Path

    def manifest_digest(self) -> str:
        """The digest ``ctr images ls`` shows for this image once imported."""
        with tarfile.open(self.archive) as archive:
            member = archive.extractfile("index.json")
            if member is None:
                raise BinariesError(f"{self.archive} has no index.json")
            index = json.load(member)
        digest: str = index["manifests"][0]["digest"]
        return digest


def ensure_images(
    *names: str, python: str | None = None, timeout: float | None = None
) -> dict[str, BuiltImage]:
    """Build (or find cached) the named images; each one's reference and archive.
    ``python`` builds the controller's wheels (the script's default: the checkout's
    .venv, else python3.11)."""
    script = build_script("build-images.sh")
    if not script.is_file():
        raise BinariesError(f"{script} not found: the images are built from a checkout")
    env = {**os.environ, "LWS_PYTHON": python} if python else None
    proc = subprocess.run(
        ["bash", str(script), *names],
        stdout=subprocess.PIPE,
        text=True,
        check=False,
        env=env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise BinariesError(f"{script} {' '.join(names)} failed with exit code {proc.returncode}")
    built = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] in names:
            built[fields[0]] = BuiltImage(fields[0], fields[1], Path(fields[2]))
    missing = set(names) - set(built)
    if missing:
        raise BinariesError(f"{script} did not report {sorted(missing)}: {proc.stdout!r}")
    return built


def ctr(*args: str) -> str:
    proc = subprocess.run(
        ["ctr", "--address", str(n.CONTAINERD_SOCKET), "--namespace", K8S_NAMESPACE, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise BinariesError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def imported_digests() -> dict[str, str]:
    """Reference -> manifest digest of every image the node's containerd holds."""
    digests = {}
    for line in ctr("images", "ls").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            digests[fields[0]] = fields[2]
    return digests


def import_images(images: list[BuiltImage]) -> list[str]:
    """Import the images containerd does not hold at that digest; the refs imported."""
    held = imported_digests()
    imported = []
    for image in images:
        if held.get(image.ref) != image.manifest_digest():
            ctr("images", "import", str(image.archive))
            imported.append(image.ref)
    return imported
