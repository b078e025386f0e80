"""The Debian root filesystem under the controller and rendezvous images, and the
mounts used to install into a copy-on-write view of it (an overlayfs whose upper
folder becomes the next layer). Needs root: mmdebstrap's root mode, chroot, mount.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

SUITE = "bookworm"
# The base of the controller and rendezvous images (and of the HTTP stand-in).
PACKAGES = ("python3", "ca-certificates", "netbase")
# The base of the curl stand-in: Debian's curl, with the shell every base has.
CURL_PACKAGES = ("curl", "ca-certificates", "netbase")
# Left out at unpack time (dpkg path filters; mmdebstrap also writes them into the
# image's /etc/dpkg/dpkg.cfg.d, so a derived image's apt-get installs stay small). The
# copyright files stay: they are the licences of what the image ships.
DPKG_FILTERS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)
# Where Python modules live in the image; all are compiled when the layer is made.
PYTHON_DIRS = ("/usr/lib/python3.11", "/usr/lib/python3/dist-packages")
DEFAULT_MIRRORS = ("http://deb.debian.org/debian", "http://deb.debian.org/debian-security")
# The user the images run as (distroless' "nonroot"); named so that tools which look
# the user up (getpass, ssh, `id`) find one.
NONROOT_UID = 65532
# Left empty in the layer: the runtime mounts its own (devices, proc, sysfs, tmpfs).
EMPTY_IN_LAYER = frozenset({"dev", "proc", "sys", "tmp", "var/tmp"})
# Bytecode that never goes stale by mtime: the layers' mtimes are all the epoch, and a
# read-only root filesystem could not take a rewritten .pyc anyway.
COMPILE = ("-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash")


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S", time.gmtime())
    print(f"[{stamp}] build-images: {message}", file=sys.stderr, flush=True)


def run(args: Sequence[str | Path], **kwargs: object) -> None:
    subprocess.run([str(a) for a in args], check=True, **kwargs)  # type: ignore[call-overload]


def debian_sources(etc: Path = Path("/etc/apt")) -> list[str]:
    """One-line sources for SUITE, SUITE-updates and SUITE-security, main component:
    from this machine's apt sources when they name them (a local or snapshot mirror is
    kept), else deb.debian.org. LWS_DEBIAN_MIRROR=URL replaces the main archive."""
    override = os.environ.get("LWS_DEBIAN_MIRROR")
    if override:
        return [f"deb {override} {SUITE} main", f"deb {override} {SUITE}-updates main"]
    wanted = {SUITE, f"{SUITE}-updates", f"{SUITE}-security"}
    found: list[str] = []
    for uri, suites, components in _apt_entries(etc):
        for suite in suites:
            line = f"deb {uri} {suite} main"
            if suite in wanted and "main" in components and line not in found:
                found.append(line)
    if any(line.split()[2] == SUITE for line in found):
        return found
    main, security = DEFAULT_MIRRORS
    return [
        f"deb {main} {SUITE} main",
        f"deb {main} {SUITE}-updates main",
        f"deb {security} {SUITE}-security main",
    ]


def _apt_entries(etc: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """(URI, suites, components) of every `deb` entry in both source formats."""
    files = [etc / "sources.list", *sorted((etc / "sources.list.d").glob("*.list"))]
    for path in files:
        if not path.is_file():
            continue
        for raw in path.read_text().splitlines():
            words = raw.split("#", 1)[0].split()
            if words[:1] != ["deb"]:
                continue
            if len(words) > 1 and words[1].startswith("["):  # [signed-by=... arch=...]
                while words and not words[1].endswith("]"):
                    del words[1]
                del words[1]
            if len(words) >= 4:
                yield words[1], [words[2]], words[3:]
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = _deb822(stanza)
            if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"]) != ["no"]:
                for uri in fields.get("uris", []):
                    yield uri, fields.get("suites", []), fields.get("components", [])


def _deb822(stanza: str) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    key = ""
    for line in stanza.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line[0].isspace() and key:  # a continuation line
            fields[key] += line.split()
            continue
        key, _, value = line.partition(":")
        key = key.strip().lower()
        fields[key] = value.split()
    return fields


def mmdebstrap_args(
    dest: Path, sources: list[str], packages: Sequence[str] = PACKAGES, arch: str | None = None
) -> list[str]:
    # essential: only the Essential:yes packages besides ours (no apt, no init); the
    # merged-usr hook installs usr-is-merged instead of usrmerge, which pulls in perl.
    # Another architecture's maintainer scripts run under qemu-user through binfmt_misc
    # (qemu-user-static, binfmt-support: hack/build-images.sh enables them).
    return [
        "mmdebstrap",
        "--mode=root",
        *([f"--architectures={arch}"] if arch else []),
        "--variant=essential",
        "--format=directory",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        '--aptopt=APT::Install-Recommends "false"',
        f"--include={','.join(packages)}",
        *(f"--dpkgopt={rule}" for rule in DPKG_FILTERS),
        SUITE,
        str(dest),
        *sources,
    ]


def build_base(
    dest: Path, sources: list[str], packages: Sequence[str] = PACKAGES, arch: str | None = None
) -> None:
    """A Debian SUITE root filesystem with `packages` at `dest` (which must not exist),
    trimmed, with the nonroot user, and all its Python modules compiled when it has
    Python."""
    # SOURCE_DATE_EPOCH: mmdebstrap then removes the files that differ run to run
    # (ld.so aux-cache, debconf and dpkg backups) and dates what it writes.
    env = {**os.environ, "SOURCE_DATE_EPOCH": "0", "DEBIAN_FRONTEND": "noninteractive"}
    run(mmdebstrap_args(dest, sources, packages, arch), env=env, stdout=sys.stderr)
    _trim(dest)
    _add_nonroot(dest)
    if "python3" in packages:
        chroot(dest, ["/usr/bin/python3", *COMPILE, *PYTHON_DIRS])


def _trim(root: Path) -> None:
    # The build host's name and resolver must not leak into the image; the runtime
    # mounts its own over these (kubelet does for every pod).
    (root / "etc/hostname").write_text("")
    (root / "etc/resolv.conf").write_text("")
    (root / "etc/hostname").chmod(0o644)
    (root / "etc/resolv.conf").chmod(0o644)
    (root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n")
    for log_file in (root / "var/log").rglob("*"):
        if log_file.is_file():
            log_file.unlink()
    for pattern in ("var/cache/debconf/*-old", "var/lib/dpkg/*-old"):
        for stale in root.glob(pattern):
            stale.unlink()
    # apt's download folders (the image has no apt): their owner varies run to run.
    for partial in ("var/cache/apt/archives/partial", "var/lib/apt/lists/partial"):
        if (root / partial).is_dir():
            (root / partial).rmdir()


def _add_nonroot(root: Path) -> None:
    uid = NONROOT_UID
    with (root / "etc/passwd").open("a") as f:
        f.write(f"nonroot:*:{uid}:{uid}:nonroot:/nonexistent:/usr/sbin/nologin\n")
    with (root / "etc/group").open("a") as f:
        f.write(f"nonroot:*:{uid}:\n")


def chroot(root: Path, args: Sequence[str], env: dict[str, str] | None = None) -> None:
    """Run `args` inside `root` with a clean environment."""
    base = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    run(["chroot", root, *args], env={**base, **(env or {})}, stdout=sys.stderr)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below `path`, from /proc/self/mountinfo."""
    prefix = str(path.resolve())
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            found.append(point)
    return found


def remove_tree(path: Path) -> None:
    """rm -rf that refuses to follow a mount into the host (a failed build may have
    left one behind)."""
    if not path.exists() and not path.is_symlink():
        return
    busy = mounts_under(path)
    if busy:
        raise RuntimeError(f"not removing {path}: still mounted at {', '.join(busy)}")
    shutil.rmtree(path)


@contextlib.contextmanager
def scratch(parent: Path, prefix: str) -> Iterator[Path]:
    """A temporary folder under `parent`, removed afterwards unless something is still
    mounted in it (then it is left, with an error, rather than deleted through)."""
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=parent, prefix=prefix))
    try:
        yield folder
    finally:
        remove_tree(folder)


@contextlib.contextmanager
def mounted(args: Sequence[str | Path], target: Path) -> Iterator[Path]:
    """`mount ARGS TARGET` for the duration of the block."""
    run(["mount", *args, target])
    try:
        yield target
    finally:
        run(["umount", target])


@contextlib.contextmanager
def overlay(lower: Path, scratch: Path) -> Iterator[tuple[Path, Path]]:
    """A writable view of `lower` whose changes land in SCRATCH/upper (with the
    overlay's whiteouts for deletions); yields (merged root, upper folder)."""
    upper, work, merged = scratch / "upper", scratch / "work", scratch / "merged"
    for folder in (upper, work, merged):
        folder.mkdir(parents=True)
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    with mounted(["-t", "overlay", "overlay", "-o", options], merged):
        yield merged, upper
