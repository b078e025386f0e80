"""The three images: what goes into each, the hash of those inputs (its cache key),
and how each is built.

    controller  docker.io/library/leaderworkerset:VERSION  Debian base + the package
                                                            (and its LICENSE)
    pause       localhost/lws-dev/pause:TAG                 Kubernetes' pause.c, static
    rendezvous  localhost/lws-dev/rendezvous:HASH12         Debian base + rendezvous.py
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import oci
import rootfs

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PYTHON_ENV = ["PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"]
NONROOT = f"{rootfs.NONROOT_UID}:{rootfs.NONROOT_UID}"
SITE_PACKAGES = "/usr/local/lib/python3.11/dist-packages"
# What of the repository goes into the controller's wheel (and its cache key).
PACKAGE_FILES = ("pyproject.toml", "README.md", "constraints.txt", "LICENSE")
VERSION_FILE = REPO / "src" / "leaderworkerset" / "_version.py"
# Where the image keeps the package's licence (Debian's place for a package's docs).
LICENSE_IN_IMAGE = "usr/share/doc/leaderworkerset/LICENSE"
# As the pause image's own Makefile builds it (build/pause/Makefile, CFLAGS).
PAUSE_CFLAGS = ("-Os", "-Wall", "-Werror", "-static")
RENDEZVOUS = HERE / "rendezvous" / "rendezvous.py"
ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}
# The platform tags pip may pick binary wheels of when the image's architecture is not
# this machine's (`pip download --platform` takes exactly the tags given): manylinux
# wheels up to Debian 12's glibc, 2.36.
GLIBC_MINOR = 36
PIP_MACHINES = {arch: machine for machine, arch in ARCHES.items()}


def package_version() -> str:
    """The release version, from the one place it is written."""
    found = re.search(r'^__version__ = "([^"]+)"$', VERSION_FILE.read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"build-images: no __version__ line in {VERSION_FILE}")
    return found.group(1)


def host_arch() -> str:
    machine = platform.machine()
    if machine not in ARCHES:
        raise SystemExit(f"build-images: unsupported machine {machine}")
    return ARCHES[machine]


def sha256(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big") + data)  # length-prefixed: no ambiguity
    return h.hexdigest()


def code(*names: str) -> bytes:
    """The build code itself is an input: a changed recipe makes a new key."""
    return b"".join((HERE / name).read_bytes() for name in names)


def tree_digest(root: Path) -> str:
    """Digest of every file's path and bytes under `root` (no caches)."""
    parts: list[str | bytes] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or any(p.endswith(".egg-info") for p in rel.parts):
            continue
        if path.is_file():
            parts += [str(rel), path.read_bytes()]
    return sha256(*parts)


@dataclass
class Context:
    cache: Path  # the images folder: archives, base-*, blobs
    # The images' architecture when not this machine's: Debian's packages of that
    # architecture run under qemu-user (binfmt) for their maintainer scripts, and pip
    # installs the binary wheels of that platform.
    target: str | None = None

    @cached_property
    def store(self) -> oci.BlobStore:
        return oci.BlobStore(self.cache)

    @cached_property
    def arch(self) -> str:
        if self.target is not None and self.target not in PIP_MACHINES:
            raise SystemExit(f"build-images: unsupported architecture {self.target}")
        return self.target or host_arch()

    @property
    def foreign(self) -> bool:
        return self.arch != host_arch()

    @cached_property
    def sources(self) -> list[str]:
        return rootfs.debian_sources()

    @cached_property
    def base_key(self) -> str:
        return self.base_key_of(rootfs.PACKAGES)

    def base_key_of(self, packages: tuple[str, ...]) -> str:
        """The cache key of the Debian base with `packages`."""
        return sha256(
            "base",
            rootfs.SUITE,
            *packages,
            *rootfs.DPKG_FILTERS,
            *self.sources,
            self.arch,
            code("rootfs.py", "oci.py"),
        )

    def base_folder(self, packages: tuple[str, ...] = rootfs.PACKAGES) -> Path:
        return self.cache / f"base-{self.base_key_of(packages)[:16]}"


@dataclass(frozen=True)
class Base:
    rootfs: Path
    layer: oci.Layer


def ensure_base(ctx: Context, packages: tuple[str, ...] = rootfs.PACKAGES) -> Base:
    """The base root filesystem with `packages` and its layer, built once per key."""
    folder = ctx.base_folder(packages)
    stamp = folder / "layer.json"
    if stamp.is_file() and (folder / "rootfs").is_dir():
        return Base(folder / "rootfs", oci.Layer.from_json(json.loads(stamp.read_text())))
    rootfs.remove_tree(folder)
    folder.mkdir(parents=True)
    rootfs.log(f"mmdebstrap {rootfs.SUITE} ({', '.join(packages)}) from {ctx.sources[0]}")
    rootfs.build_base(folder / "rootfs", ctx.sources, packages, ctx.arch)
    rootfs.log("writing the base layer")
    layer = ctx.store.put_layer(
        lambda tar: oci.add_tree(tar, folder / "rootfs", empty=rootfs.EMPTY_IN_LAYER)
    )
    stamp.write_text(json.dumps(layer.to_json()))  # last: a folder without it is unfinished
    return Base(folder / "rootfs", layer)


@dataclass(frozen=True)
class Recipe:
    name: str
    ref: str
    key: str
    build: Callable[[Context], oci.Image]


def controller(ctx: Context) -> Recipe:
    version = package_version()
    pip_version = importlib.metadata.version("pip")
    key = sha256(
        "controller",
        ctx.base_key,
        *(sha256(name, (REPO / name).read_bytes()) for name in PACKAGE_FILES),
        tree_digest(REPO / "src"),
        pip_version,
        f"{sys.version_info.major}.{sys.version_info.minor}",
        code("recipes.py"),
    )
    ref = f"docker.io/library/leaderworkerset:{version}"
    return Recipe(
        "controller", ref, key, lambda ctx: _build_controller(ctx, ref, version, pip_version)
    )


def _build_controller(ctx: Context, ref: str, version: str, pip_version: str) -> oci.Image:
    base = ensure_base(ctx)
    with rootfs.scratch(ctx.cache, "controller.") as tmp:
        wheels = tmp / "wheels"
        pip_wheel = _wheels(tmp, wheels, pip_version, ctx.arch if ctx.foreign else None)
        layer = _install_layer(ctx, base.rootfs, tmp / "overlay", wheels, pip_wheel)
    spec = oci.ImageSpec(
        user=NONROOT,
        entrypoint=["lws"],
        cmd=["controller"],
        env=[PATH_ENV, *PYTHON_ENV],
        exposed_ports=[9443, 8443, 8081],  # webhooks, metrics, health probes
        labels={
            "org.opencontainers.image.title": "leaderworkerset",
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.licenses": "Apache-2.0",
            "org.opencontainers.image.description": (
                "LeaderWorkerSet controller (Python implementation); "
                f"licence at /{LICENSE_IN_IMAGE}"
            ),
        },
    )
    history = [
        base_history(),
        "pip install leaderworkerset (constraints.txt), compiled; "
        f"COPY LICENSE /{LICENSE_IN_IMAGE}",
    ]
    return oci.assemble(ctx.store, ref, spec, [base.layer, layer], history, ctx.arch)


def _wheels(tmp: Path, wheels: Path, pip_version: str, foreign: str | None) -> str:
    """Wheels of the package and its pinned dependencies, built on this host (Python
    3.11 like the image's, so its cp311 wheels fit), and pip's own wheel, which runs
    the install in the image and stays out of it. Returns pip's wheel's name.

    For a `foreign` architecture only the package's own (pure) wheel is built here;
    its dependencies are the binary wheels PyPI has for that platform, at the same
    pins: no compiler for it is needed."""
    src = tmp / "src"  # a copy: building in the repo would leave build/ and egg-info
    src.mkdir()
    for name in PACKAGE_FILES:
        shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO / "src", src / "src", ignore=ignore)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    constraints = src / "constraints.txt"
    if foreign is None:
        rootfs.log("pip wheel -c constraints.txt (the package and its dependencies)")
        rootfs.run([*pip, "wheel", "-c", constraints, "-w", wheels, src], stdout=sys.stderr)
    else:
        rootfs.log(f"pip wheel (the package), pip download --platform (its {foreign} dependencies)")
        rootfs.run([*pip, "wheel", "--no-deps", "-w", wheels, src], stdout=sys.stderr)
        (own,) = wheels.glob("leaderworkerset-*.whl")
        rootfs.run(
            [*pip, "download", *foreign_platform(foreign), "-c", constraints, "-d", wheels, own],
            stdout=sys.stderr,
        )
    shutil.copy2(src / "constraints.txt", wheels / "constraints.txt")
    tools = tmp / "tools"
    rootfs.run(
        [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", tools, f"pip=={pip_version}"],
        stdout=sys.stderr,
    )
    (found,) = tools.glob("pip-*.whl")
    shutil.copy2(found, wheels / found.name)
    return found.name


def foreign_platform(arch: str) -> list[str]:
    """pip's options for the binary wheels of Debian 12's CPython 3.11 on `arch`."""
    machine = PIP_MACHINES[arch]
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(17, GLIBC_MINOR + 1)]
    tags.append(f"manylinux2014_{machine}")
    platforms = [f"--platform={tag}" for tag in tags]
    abis = ("--abi=cp311", "--abi=abi3", "--abi=none")
    python = ("--python-version=3.11", "--implementation=cp")
    return ["--only-binary=:all:", *platforms, *python, *abis]


def _install_layer(
    ctx: Context, base: Path, scratch: Path, wheels: Path, pip_wheel: str
) -> oci.Layer:
    """The layer pip adds: installed in a chroot on an overlay of the base, with the
    image's own python3, the wheels on a tmpfs at /tmp (so they stay out of it)."""
    pip = ["/usr/bin/python3", f"/tmp/wheels/{pip_wheel}/pip"]
    install = [
        *("install", "--no-index", "--find-links", "/tmp/wheels"),
        *("-c", "/tmp/wheels/constraints.txt", "--no-compile", "--no-cache-dir"),
        *("--disable-pip-version-check", "--root-user-action=ignore"),
        # Debian marks its Python as apt-managed; /usr/local is pip's by its own rules.
        "--break-system-packages",
        "leaderworkerset",
    ]
    with rootfs.overlay(base, scratch) as (merged, upper):
        tmp = merged / "tmp"
        with rootfs.mounted(["-t", "tmpfs", "-o", "mode=1777", "tmpfs"], tmp):
            shutil.copytree(wheels, tmp / "wheels")
            rootfs.log("pip install in the image (chroot)")
            rootfs.chroot(merged, [*pip, *install])
            rootfs.chroot(merged, ["/usr/bin/python3", *rootfs.COMPILE, SITE_PACKAGES])
        licence = merged / LICENSE_IN_IMAGE
        licence.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        shutil.copyfile(REPO / "LICENSE", licence)
        licence.chmod(0o644)
    rootfs.log("writing the package layer")
    return ctx.store.put_layer(lambda tar: oci.add_tree(tar, upper))


def base_history(packages: tuple[str, ...] = rootfs.PACKAGES) -> str:
    return f"mmdebstrap --variant=essential {rootfs.SUITE} + {' '.join(packages)}"


@dataclass(frozen=True)
class PauseSource:
    k8s_version: str
    source: Path  # pause.c in the module cache
    tag: str  # the pause image's version, from its Makefile


def pause_source() -> PauseSource:
    """build/pause of the k8s.io/kubernetes module hack/controlplane requires, from the
    Go module cache (`go mod download` fetches it through the proxy, checked against
    go.sum)."""
    try:
        out = subprocess.run(
            ["go", "mod", "download", "-json", "k8s.io/kubernetes"],
            cwd=REPO / "hack" / "controlplane",
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except FileNotFoundError:
        raise SystemExit(
            "build-images: `go` is needed to fetch pause.c (k8s.io/kubernetes)"
        ) from None
    except subprocess.CalledProcessError as err:
        why = err.stderr.strip()
        raise SystemExit(f"build-images: go mod download k8s.io/kubernetes failed: {why}") from None
    module = json.loads(out)
    pause = Path(module["Dir"]) / "build" / "pause"
    found = re.search(r"^TAG \?= (\S+)$", (pause / "Makefile").read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"build-images: no `TAG ?=` line in {pause / 'Makefile'}")
    return PauseSource(module["Version"], pause / "linux" / "pause.c", found.group(1))


def pause(ctx: Context) -> Recipe:
    src = pause_source()
    key = sha256(
        "pause", src.k8s_version, src.tag, src.source.read_bytes(), gcc_version(),
        *platform.libc_ver(), *PAUSE_CFLAGS, code("recipes.py", "oci.py"),
    )  # fmt: skip
    ref = f"localhost/lws-dev/pause:{src.tag}"
    return Recipe("pause", ref, key, lambda ctx: _build_pause(ctx, ref, src))


def gcc_version() -> str:
    """`gcc --version`'s first line; "no gcc" before hack/debian-packages.sh installs it
    (the key then names no archive, and the build computes it again)."""
    try:
        out = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "no gcc"
    return out.splitlines()[0] if out else "no gcc"


def _build_pause(ctx: Context, ref: str, src: PauseSource) -> oci.Image:
    with rootfs.scratch(ctx.cache, "pause.") as tmp:
        binary = tmp / "pause"
        version = f"-DVERSION=v{src.tag}-k8s-{src.k8s_version}"
        rootfs.log(f"gcc {' '.join(PAUSE_CFLAGS)} {src.source}")
        rootfs.run(["gcc", *PAUSE_CFLAGS, version, "-o", binary, src.source])
        rootfs.run(["strip", binary])
        data = binary.read_bytes()
    layer = ctx.store.put_layer(lambda tar: oci.add_file(tar, "pause", data, 0o755))
    spec = oci.ImageSpec(user="65535:65535", entrypoint=["/pause"])
    history = [f"gcc {' '.join(PAUSE_CFLAGS)} k8s.io/kubernetes@{src.k8s_version}/build/pause"]
    return oci.assemble(ctx.store, ref, spec, [layer], history, ctx.arch)


def rendezvous(ctx: Context) -> Recipe:
    program = RENDEZVOUS.read_bytes()
    key = sha256("rendezvous", ctx.base_key, program, code("recipes.py"))
    ref = f"localhost/lws-dev/rendezvous:{hashlib.sha256(program).hexdigest()[:12]}"
    return Recipe("rendezvous", ref, key, lambda ctx: _build_rendezvous(ctx, ref, program))


def _build_rendezvous(ctx: Context, ref: str, program: bytes) -> oci.Image:
    base = ensure_base(ctx)
    layer = ctx.store.put_layer(lambda tar: oci.add_file(tar, "rendezvous.py", program, 0o644))
    spec = oci.ImageSpec(
        user=NONROOT, entrypoint=["python3", "/rendezvous.py"], env=[PATH_ENV, *PYTHON_ENV]
    )
    history = [base_history(), "COPY rendezvous.py /rendezvous.py"]
    return oci.assemble(ctx.store, ref, spec, [base.layer, layer], history, ctx.arch)


# What `make image` builds (hack/build-images.sh with no names); e2e_images.py has more.
RECIPES: dict[str, Callable[[Context], Recipe]] = {
    "controller": controller,
    "pause": pause,
    "rendezvous": rendezvous,
}
