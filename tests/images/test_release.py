"""The release folder `make release` writes (hack/release.sh, hack/images/release.py),
checked file by file: every artefact is there and SHA256SUMS verifies it; each image
archive is an OCI layout of its platform whose blobs match their digests; the index
covers both platforms with those same manifests; the SBOMs name what is inside; the
LICENSE is in the wheel, the sdist and both images; the chart and manifests.yaml name
the released image; and the arm64 image runs (under qemu).

The release is built once per input and cached (tests/toolkit/release.py): cold, about
9 minutes (the arm64 image under qemu), then about 40 s after a change to the package
or the chart, and nothing when unchanged. Root only, as the image build is.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from leaderworkerset._version import __version__
from tests.images.containerd import Containerd, private_containerd
from tests.toolkit.install_tools import ensure_tools
from tests.toolkit.paths import REPO
from tests.toolkit.registry import PREFERRED_PORT
from tests.toolkit.release import ARCHES, BUILD_WITHIN, Release, built_release
from tests.toolkit.render import Renderer, by_key

pytestmark = [
    pytest.mark.images,
    pytest.mark.timeout(BUILD_WITHIN + 300),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the image build does"),
]

# The registry tests/realnode pushes to (when its port is free), so that both suites
# share one cached release.
REGISTRY = f"127.0.0.1:{PREFERRED_PORT}/lws"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
LICENSE_IN_IMAGE = "usr/share/doc/leaderworkerset/LICENSE"


@pytest.fixture(scope="module")
def release(pytestconfig: pytest.Config) -> Release:
    return built_release(pytestconfig, REGISTRY)


@pytest.fixture(scope="module")
def renderer(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Renderer:
    return Renderer(ensure_tools(pytestconfig), tmp_path_factory.mktemp("helm"))


class Layout:
    """An OCI archive's files, with its blobs checked against their names."""

    def __init__(self, archive: Path) -> None:
        with tarfile.open(archive) as tar:
            self.files = {
                m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers()
                if m.isfile()
            }
        for name, data in self.files.items():
            if name.startswith("blobs/sha256/"):
                assert hashlib.sha256(data).hexdigest() == name.rpartition("/")[2], name

    def json(self, name: str) -> Any:
        return json.loads(self.files[name])

    def blob(self, digest: str) -> bytes:
        return self.files[f"blobs/sha256/{digest.removeprefix('sha256:')}"]

    def blob_json(self, digest: str) -> Any:
        return json.loads(self.blob(digest))

    def layer_files(self, manifest: Any) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for layer in manifest["layers"]:
            raw = gzip.decompress(self.blob(layer["digest"]))
            with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
                for member in tar.getmembers():
                    if member.isfile() and member.name in (LICENSE_IN_IMAGE,):
                        found[member.name] = tar.extractfile(member).read()  # type: ignore[union-attr]
        return found


def test_every_artefact_is_there_and_the_sums_verify(release: Release) -> None:
    v = __version__
    expected = {
        f"leaderworkerset-{v}-py3-none-any.whl",
        f"leaderworkerset-{v}.tar.gz",
        f"leaderworkerset-{v}.sbom.cdx.json",
        *(f"lws-{v}-linux-{arch}.oci.tar" for arch in ARCHES),
        *(f"lws-{v}-linux-{arch}.sbom.cdx.json" for arch in ARCHES),
        f"lws-{v}.oci.tar",
        f"lws-{v}.tgz",
        "manifests.yaml",
        "release.json",
        "SHA256SUMS",
    }
    assert {p.name for p in release.folder.iterdir()} == expected
    listed = {line.split()[1] for line in (release.folder / "SHA256SUMS").read_text().splitlines()}
    assert listed == expected - {"SHA256SUMS"}
    check = subprocess.run(
        ["sha256sum", "--check", "--strict", "SHA256SUMS"],
        cwd=release.folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert release.image == f"{REGISTRY}/lws:{v}"
    sizes = {p.name: p.stat().st_size for p in release.folder.iterdir()}
    print(
        "\n" + "\n".join(f"{size / 2**20:8.1f} MiB  {name}" for name, size in sorted(sizes.items()))
    )


@pytest.mark.parametrize("arch", ARCHES)
def test_each_archive_is_an_oci_image_of_its_platform(release: Release, arch: str) -> None:
    layout = Layout(release.archive(arch))
    assert layout.json("oci-layout") == {"imageLayoutVersion": "1.0.0"}
    (descriptor,) = layout.json("index.json")["manifests"]
    assert descriptor["mediaType"] == OCI_MANIFEST
    assert descriptor["platform"] == {"architecture": arch, "os": "linux"}
    assert descriptor["annotations"]["io.containerd.image.name"] == release.image
    assert descriptor["annotations"]["org.opencontainers.image.ref.name"] == __version__
    assert descriptor["digest"] == release.description["manifests"][arch]
    manifest = layout.blob_json(descriptor["digest"])
    config = layout.blob_json(manifest["config"]["digest"])
    assert (config["architecture"], config["os"]) == (arch, "linux")
    assert config["config"]["Entrypoint"] == ["lws"] and config["config"]["Cmd"] == ["controller"]
    assert config["config"]["User"] == "65532:65532"
    labels = config["config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert len(config["rootfs"]["diff_ids"]) == len(manifest["layers"]) == 2
    # The licence ships in the image, in Debian's place for a package's documents.
    files = layout.layer_files(manifest)
    assert files[LICENSE_IN_IMAGE] == (REPO / "LICENSE").read_bytes()


def test_the_index_covers_both_platforms_with_the_same_manifests(release: Release) -> None:
    layout = Layout(release.index_archive)
    (outer,) = layout.json("index.json")["manifests"]
    assert outer["mediaType"] == OCI_INDEX
    assert outer["digest"] == release.description["index"]
    assert outer["annotations"]["io.containerd.image.name"] == release.image
    index = layout.blob_json(outer["digest"])
    platforms = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
    assert platforms == release.description["manifests"]
    assert set(platforms) == set(ARCHES)
    for digest in platforms.values():
        assert layout.blob_json(digest)["mediaType"] == OCI_MANIFEST


@pytest.mark.parametrize("arch", ARCHES)
def test_each_image_sbom_names_the_package_and_what_it_runs_on(release: Release, arch: str) -> None:
    bom = json.loads(release.image_sbom(arch).read_text())
    assert (bom["bomFormat"], bom["specVersion"]) == ("CycloneDX", "1.5")
    subject = bom["metadata"]["component"]
    assert (subject["type"], subject["name"], subject["version"]) == (
        "container", release.repository, __version__,
    )  # fmt: skip
    properties = {p["name"]: p["value"] for p in subject["properties"]}
    assert properties["oci:architecture"] == arch
    assert properties["oci:manifest"] == release.description["manifests"][arch]
    purls = {c.get("purl", "").split("?")[0] for c in bom["components"]}
    assert f"pkg:pypi/leaderworkerset@{__version__}" in purls
    debs = [c for c in bom["components"] if c.get("purl", "").startswith("pkg:deb/debian/python3")]
    assert debs and all(f"arch={arch}" in c["purl"] or "arch=all" in c["purl"] for c in debs)
    ours = next(c for c in bom["components"] if c["name"] == "leaderworkerset")
    assert ours["licenses"] == [{"expression": "Apache-2.0"}]
    assert any(c["type"] == "operating-system" and c["version"] == "12" for c in bom["components"])


def test_the_wheel_sbom_names_the_wheel_and_its_pinned_dependencies(release: Release) -> None:
    bom = json.loads(release.wheel_sbom.read_text())
    subject = bom["metadata"]["component"]
    assert (subject["name"], subject["version"]) == ("leaderworkerset", __version__)
    assert subject["hashes"] == [
        {"alg": "SHA-256", "content": hashlib.sha256(release.wheel.read_bytes()).hexdigest()}
    ]
    pins = dict(
        line.split("==", 1) for line in (REPO / "constraints.txt").read_text().splitlines()
        if "==" in line and ";" not in line
    )  # fmt: skip
    names = {c["name"]: c["version"] for c in bom["components"]}
    for dependency in ("aiohttp", "cryptography", "lightkube", "orjson", "uvloop"):
        assert names[dependency] == pins[dependency], dependency
    (own,) = [d for d in bom["dependencies"] if d["ref"] == subject["bom-ref"]]
    assert f"pkg:pypi/aiohttp@{pins['aiohttp']}" in own["dependsOn"]


def test_the_wheel_and_the_sdist_carry_the_license(release: Release) -> None:
    license_text = (REPO / "LICENSE").read_bytes()
    with zipfile.ZipFile(release.wheel) as wheel:
        info = f"leaderworkerset-{__version__}.dist-info"
        assert wheel.read(f"{info}/licenses/LICENSE") == license_text
        metadata = wheel.read(f"{info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
    assert f"Version: {__version__}" in metadata
    with tarfile.open(release.sdist) as sdist:
        member = sdist.extractfile(f"leaderworkerset-{__version__}/LICENSE")
        assert member is not None and member.read() == license_text


def test_the_chart_and_the_manifests_install_the_released_image(
    release: Release, renderer: Renderer
) -> None:
    with tarfile.open(release.chart) as chart:
        meta = yaml.safe_load(chart.extractfile("lws/Chart.yaml").read())  # type: ignore[union-attr]
    assert meta["version"] == meta["appVersion"] == __version__
    # As a user installs it: no image values given.
    objs = renderer.helm_template(chart=release.chart, image=False)
    deployment = objs["Deployment", "lws-controller-manager"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == release.image
    manifests = by_key(release.manifests.read_text())
    deployment = manifests["Deployment", "lws-controller-manager"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == release.image
    assert ("CustomResourceDefinition", "leaderworkersets.leaderworkerset.x-k8s.io") in manifests


@pytest.fixture(scope="module")
def containerd(release: Release) -> Iterator[Containerd]:
    with private_containerd() as daemon:
        daemon.ctr("images", "import", "--all-platforms", str(release.index_archive), timeout=300)
        yield daemon


def test_the_arm64_image_runs_under_qemu(release: Release, containerd: Containerd) -> None:
    # binfmt_misc's qemu-aarch64 entry, which the release build enabled, runs it here.
    args = containerd.run(release.image, "lws-arm64", "--rm", "--platform", "linux/arm64")
    out = containerd.ctr(*args, "lws", "--version", timeout=120).stdout
    assert __version__ in out
    arch = containerd.ctr(*args, "python3", "-c", "import platform; print(platform.machine())")
    assert arch.stdout.strip() == "aarch64"
