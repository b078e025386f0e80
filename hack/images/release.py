"""Assembles a release into one folder (`make release`; hack/release.sh builds the
images first and runs this):

    leaderworkerset-V-py3-none-any.whl, leaderworkerset-V.tar.gz   the wheel and sdist
    leaderworkerset-V.sbom.cdx.json          the wheel's SBOM (CycloneDX)
    lws-V-linux-ARCH.oci.tar                 the controller image of one architecture
    lws-V-linux-ARCH.sbom.cdx.json           its SBOM
    lws-V.oci.tar                            every architecture under one image index
    manifests.yaml                           config/default with the image REGISTRY/lws:V
    lws-V.tgz                                the chart, version V, image REGISTRY/lws
    release.json                             the references and digests, for tools
    SHA256SUMS                               `sha256sum -c SHA256SUMS` checks the rest

    python3 hack/images/release.py --version V --registry REGISTRY --out DIR \\
        --tools DIR --scratch DIR ARCHIVE...

ARCHIVE: a controller image archive of hack/build-images.sh per architecture. The
image is pushed as REGISTRY/lws:V and the chart as oci://REGISTRY/charts/lws, the
layout of upstream's registry.k8s.io/lws.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oci
import recipes
import rootfs
import sbom
import yaml

NAME = "lws"
# `python -m build` makes the sdist and the wheel from it, each in an isolated
# environment; pinned here, as it is not one of the package's tools.
BUILD_TOOL = ("build==1.6.1", "pyproject_hooks==1.2.0")
CHANGELOG = recipes.REPO / "CHANGELOG.md"
# Where the committed chart leaves the repository empty (values.yaml says why).
EMPTY_REPOSITORY = re.compile(r'^(image:\n  manager:\n(?:    #.*\n)*    repository: )""$', re.M)


@dataclass(frozen=True)
class Release:
    version: str
    registry: str
    out: Path  # the folder being written (renamed to the final one at the end)
    tools: Path  # kubectl and helm
    scratch: Path

    @property
    def repository(self) -> str:
        return f"{self.registry}/{NAME}"

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.version}"


def check_inputs(version: str, registry: str) -> None:
    written = recipes.package_version()
    if version != written:
        raise SystemExit(
            f"release: VERSION={version}, but {recipes.VERSION_FILE.relative_to(recipes.REPO)} "
            f"says {written}: set it there (the one place), with a CHANGELOG.md entry"
        )
    if not re.search(rf"^## \[{re.escape(version)}\]", CHANGELOG.read_text(), re.M):
        raise SystemExit(f"release: CHANGELOG.md has no `## [{version}]` entry")
    if not re.fullmatch(r"[a-z0-9.:-]+(/[a-z0-9._-]+)*", registry):
        raise SystemExit(
            f"release: REGISTRY={registry!r} is not a registry host with an optional path "
            "(lower case, no scheme), e.g. registry.example.com/lws or localhost:5000/lws"
        )


def tool(rel: Release, name: str, *args: str | Path) -> str:
    env = {**os.environ}
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        env[var] = str(rel.scratch / "helm" / var.lower())
    done = subprocess.run(
        [str(rel.tools / name), *map(str, args)], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise SystemExit(f"release: {name} {' '.join(map(str, args))} failed:\n{done.stderr}")
    return done.stdout


def python_dists(rel: Release) -> Path:
    """The sdist and the wheel, built from a copy of what the package is made of (as
    the image's wheel is); returns the wheel."""
    src = rel.scratch / "src"
    src.mkdir()
    for name in recipes.PACKAGE_FILES:
        shutil.copy2(recipes.REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(recipes.REPO / "src", src / "src", ignore=ignore)
    venv = rel.scratch / "build-venv"
    rootfs.run([sys.executable, "-m", "venv", venv])
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "-q", "--disable-pip-version-check"]
    rootfs.run([*pip, "install", *BUILD_TOOL], stdout=sys.stderr)
    rootfs.log("python -m build (sdist, then the wheel from it)")
    build: list[str | Path] = [python, "-m", "build", "--outdir", rel.out, src]
    rootfs.run(build, stdout=sys.stderr)
    (wheel,) = rel.out.glob(f"leaderworkerset-{rel.version}-*.whl")
    if not list(rel.out.glob(f"leaderworkerset-{rel.version}.tar.gz")):
        raise SystemExit("release: python -m build made no sdist")
    return wheel


def images(rel: Release, archives: list[Path]) -> tuple[list[oci.Image], oci.Blob]:
    """Each architecture's archive under the release's name, their index, and the
    SBOM of each; returns the images and the index."""
    store = oci.BlobStore(rel.scratch / "oci")
    built = [oci.retag(oci.read_archive(store, archive), rel.ref) for archive in archives]
    arches = [image.arch for image in built]
    if len(set(arches)) != len(arches):
        raise SystemExit(f"release: two archives of one architecture: {arches}")
    for image in built:
        stem = f"{NAME}-{rel.version}-linux-{image.arch}"
        rootfs.log(f"writing {stem}.oci.tar")
        oci.write_archive(store, image, rel.out / f"{stem}.oci.tar")
        contents = sbom.Contents().read(store, image)
        document = sbom.image_sbom(contents, image, rel.repository, rel.version)
        write_json(rel.out / f"{stem}.sbom.cdx.json", document)
    rootfs.log(f"writing {NAME}-{rel.version}.oci.tar ({', '.join(arches)})")
    multi = rel.out / f"{NAME}-{rel.version}.oci.tar"
    index = oci.write_index_archive(store, rel.ref, built, multi)
    return built, index


def wheel_bom(rel: Release, wheel: Path, image: oci.Image) -> None:
    store = oci.BlobStore(rel.scratch / "oci")
    installed = sbom.Contents().read(store, image).python()
    document = sbom.wheel_sbom(wheel.read_bytes(), wheel.name, installed)
    write_json(rel.out / f"leaderworkerset-{rel.version}.sbom.cdx.json", document)


def manifests(rel: Release) -> None:
    """config/default, with the release's image set as a user's overlay would set it."""
    manager = yaml.safe_load((recipes.REPO / "config/manager/kustomization.yaml").read_text())
    (entry,) = [i for i in manager["images"] if i["name"] == "controller"]
    overlay = rel.scratch / "overlay"
    overlay.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(recipes.REPO / "config" / "default", overlay)],
        # config/manager has already named the image `controller` its own.
        "images": [{"name": entry["newName"], "newName": rel.repository, "newTag": rel.version}],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    rendered = tool(rel, "kubectl", "kustomize", overlay)
    if f"image: {rel.ref}\n" not in rendered:
        raise SystemExit(f"release: manifests.yaml does not name {rel.ref}")
    header = (
        f"# leaderworkerset {rel.version}: kubectl apply --server-side -f manifests.yaml\n"
        f"# (config/default with the image {rel.ref})\n"
    )
    (rel.out / "manifests.yaml").write_text(header + rendered)


def chart(rel: Release) -> None:
    """charts/lws packaged at the release's version, naming the release's image."""
    folder = rel.scratch / "chart" / NAME
    shutil.copytree(recipes.REPO / "charts" / NAME, folder)
    values = folder / "values.yaml"
    text, count = EMPTY_REPOSITORY.subn(rf"\g<1>{rel.repository}", values.read_text())
    if count != 1:
        raise SystemExit(f"release: charts/{NAME}/values.yaml: no empty image.manager.repository")
    values.write_text(text)
    tool(rel, "helm", "package", folder, "--destination", rel.out,
         "--version", rel.version, "--app-version", rel.version)  # fmt: skip
    packaged = rel.out / f"{NAME}-{rel.version}.tgz"
    rendered = tool(rel, "helm", "template", NAME, packaged)
    if f"image: {rel.ref}\n" not in rendered:
        raise SystemExit(f"release: the packaged chart does not install {rel.ref}")


def write_json(path: Path, document: Any) -> None:
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def checksums(out: Path) -> None:
    lines = [
        f"{sha256_file(path)}  {path.name}\n"
        for path in sorted(out.iterdir())
        if path.name != "SHA256SUMS"
    ]
    (out / "SHA256SUMS").write_text("".join(lines))


def describe(rel: Release, built: list[oci.Image], index: oci.Blob) -> None:
    write_json(
        rel.out / "release.json",
        {
            "version": rel.version,
            "image": rel.ref,
            "index": index.digest,
            "manifests": {image.arch: image.manifest.digest for image in built},
            "chart": f"oci://{rel.registry}/charts/{NAME}",
        },
    )


def replace_folder(new: Path, final: Path) -> None:
    """`final` becomes `new`; an earlier release there goes, anything else stays."""
    if final.exists():
        if any(final.iterdir()) and not (final / "SHA256SUMS").is_file():
            raise SystemExit(f"release: {final} holds something else than a release; kept")
        shutil.rmtree(final)
    new.replace(final)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--registry", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tools", type=Path, required=True, help="holds kubectl and helm")
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("archives", nargs="+", type=Path)
    args = parser.parse_args(argv)
    check_inputs(args.version, args.registry)
    final = args.out.resolve()
    final.parent.mkdir(parents=True, exist_ok=True)
    with rootfs.scratch(args.scratch, "release.") as scratch:
        staging = final.with_name(f".{final.name}.tmp{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            rel = Release(args.version, args.registry, staging, args.tools, scratch)
            wheel = python_dists(rel)
            built, index = images(rel, args.archives)
            wheel_bom(rel, wheel, built[0])
            manifests(rel)
            chart(rel)
            describe(rel, built, index)
            checksums(staging)
            replace_folder(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    for path in sorted(final.iterdir()):
        rootfs.log(f"{path.stat().st_size / 2**20:8.1f} MiB  {path.name}")
    print(final)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
