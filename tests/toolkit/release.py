"""A release as `make release` builds it (hack/release.sh), for the tests that check its
archives and install it through a registry.

Building one takes minutes cold (the arm64 image runs under qemu) and about 40 s with
the images cached, so it is kept like the images are: in the cache
(`~/.cache/leaderworkerset/release/`), in a folder named by the hash of everything it is
made of (the package, the chart, config/, the build code) and the registry it names.
An unchanged tree finds it there and builds nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from lws_localcluster.controlplane import cache_root

from leaderworkerset._version import __version__
from tests.toolkit.paths import REPO

# What a release is made of; a change to any of them makes a new one.
INPUTS = (
    "src/leaderworkerset",
    "charts/lws",
    "config",
    "hack/images",
    "hack/release.sh",
    "hack/build-images.sh",
    "pyproject.toml",
    "constraints.txt",
    "README.md",
    "LICENSE",
    "CHANGELOG.md",
)
ARCHES = ("amd64", "arm64")
BUILD_WITHIN = 1800  # cold: both images (the arm64 one under qemu, about 7 minutes)


def input_digest(registry: str) -> str:
    h = hashlib.sha256(registry.encode())
    for name in INPUTS:
        root = REPO / name
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in paths:
            if "__pycache__" in path.parts or path.name.endswith(".pyc"):
                continue
            h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Release:
    folder: Path

    @cached_property
    def description(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.folder / "release.json").read_text())
        return data

    @property
    def version(self) -> str:
        return str(self.description["version"])

    @property
    def image(self) -> str:
        return str(self.description["image"])

    @property
    def repository(self) -> str:
        return self.image.rpartition(":")[0]

    @property
    def index_archive(self) -> Path:
        return self.folder / f"lws-{self.version}.oci.tar"

    def archive(self, arch: str) -> Path:
        return self.folder / f"lws-{self.version}-linux-{arch}.oci.tar"

    def image_sbom(self, arch: str) -> Path:
        return self.folder / f"lws-{self.version}-linux-{arch}.sbom.cdx.json"

    @property
    def chart(self) -> Path:
        return self.folder / f"lws-{self.version}.tgz"

    @property
    def manifests(self) -> Path:
        return self.folder / "manifests.yaml"

    @property
    def wheel(self) -> Path:
        (wheel,) = self.folder.glob(f"leaderworkerset-{self.version}-*.whl")
        return wheel

    @property
    def sdist(self) -> Path:
        return self.folder / f"leaderworkerset-{self.version}.tar.gz"

    @property
    def wheel_sbom(self) -> Path:
        return self.folder / f"leaderworkerset-{self.version}.sbom.cdx.json"


def built_release(pytestconfig: pytest.Config, registry: str) -> Release:
    """The release naming `registry`, from the cache or built now (its progress
    reaches the terminal)."""
    slug = re.sub(r"[^a-z0-9]+", "-", registry.lower()).strip("-")
    parent = cache_root() / "release"
    folder = parent / f"{slug}-{input_digest(registry)[:16]}"
    if not (folder / "SHA256SUMS").is_file():
        capture = pytestconfig.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            done = subprocess.run(
                ["bash", str(REPO / "hack" / "release.sh"), __version__, registry, str(folder)],
                env={**os.environ, "LWS_PYTHON": sys.executable},
                check=False,
                timeout=BUILD_WITHIN,
            )
        if done.returncode != 0:
            pytest.fail(f"hack/release.sh failed with exit code {done.returncode} (see above)")
        for old in parent.glob(f"{slug}-*"):
            if old != folder:
                shutil.rmtree(old, ignore_errors=True)
    return Release(folder)
