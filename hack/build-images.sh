#!/usr/bin/env bash
# Builds the container images, with no container engine and no registry, into OCI
# archives in a cache outside the repo, each named by the hash of its inputs (an
# unchanged image is not rebuilt), and prints one line per image on stdout:
#
#   NAME REF ARCHIVE
#   controller docker.io/library/leaderworkerset:0.1.0 ~/.cache/leaderworkerset/images/controller-<hash>.oci.tar
#   pause      localhost/lws-dev/pause:3.10.2           .../pause-<hash>.oci.tar
#   rendezvous localhost/lws-dev/rendezvous:<hash12>    .../rendezvous-<hash>.oci.tar
#
#   bash hack/build-images.sh [NAME...]     (default: these three)
#   ctr -n k8s.io images import ARCHIVE     (what a node does with one)
#
# tests/e2e_real names three more (hack/images/e2e_images.py): `upstream`, upstream's
# manager as registry.k8s.io/lws/lws:<pinned version> (hack/build-upstream-lws.sh builds
# it first), and the stand-ins `nginx-standin` and `curl-standin`, under the names
# upstream's e2e suite pulls.
#
# The recipes are hack/images/recipes.py and e2e_images.py. Needs root (mmdebstrap's root mode, chroot,
# overlay mounts), Go (to fetch pause.c from the k8s.io/kubernetes module), network
# access to a Debian mirror and to PyPI (or pip's cache).
#
#   LWS_CACHE_DIR       cache root (default ~/.cache/leaderworkerset); images/ in it.
#   LWS_PYTHON          Python 3.11 with pip (default: the repo's .venv, else python3.11);
#                       it builds the wheels and its pip installs them in the image.
#   LWS_DEBIAN_MIRROR   a Debian mirror URL (default: this machine's apt sources when
#                       they list bookworm, else deb.debian.org).
#   LWS_IMAGE_ARCH      amd64 or arm64: build for that architecture (default: this
#                       machine's). Another one than this machine's is built into
#                       images/ARCH/ (the controller by default; only images made of
#                       Debian packages and Python), with Debian's qemu-user-static
#                       and binfmt-support running its programs (installed, with
#                       arch-test, which mmdebstrap asks for, and
#                       enabled here: binfmt_misc is mounted when it is not).
#
# Progress and each image's sizes go to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

IMAGES="$CACHE_ROOT/images"
PYTHON="${LWS_PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x "$HERE/../.venv/bin/python" ]]; then PYTHON="$HERE/../.venv/bin/python"; else PYTHON=python3.11; fi
fi

case "$(uname -m)" in
  x86_64) HOST_ARCH=amd64 ;;
  aarch64) HOST_ARCH=arm64 ;;
  *) HOST_ARCH="$(uname -m)" ;;
esac
ARCH="${LWS_IMAGE_ARCH:-$HOST_ARCH}"
ARCH_ARGS=()
if [[ "$ARCH" != "$HOST_ARCH" ]]; then
  # Their own folder: each architecture's archives, bases and blobs are pruned apart.
  IMAGES="$IMAGES/$ARCH"
  ARCH_ARGS=(--arch "$ARCH")
fi

images() { "$PYTHON" "$HERE/images/build.py" --cache "$IMAGES" "${ARCH_ARGS[@]}" "$@"; }

# enable_foreign ARCH: the kernel runs ARCH's programs through qemu-user-static. Needs
# binfmt_misc mounted (a container may not have it, and no systemd mounts it here) and
# Debian's qemu entry enabled; the F flag it carries lets a chroot run them without a
# copy of qemu inside.
enable_foreign() {
  local qemu
  case "$1" in
    arm64) qemu=qemu-aarch64 ;;
    amd64) qemu=qemu-x86_64 ;;
    *) log "no qemu for $1"; return 1 ;;
  esac
  bash "$HERE/debian-packages.sh" qemu-user-static binfmt-support arch-test
  if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  fi
  if ! grep -qx enabled "/proc/sys/fs/binfmt_misc/$qemu" 2>/dev/null; then
    update-binfmts --enable "$qemu"
  fi
}

# Built already: no lock, no root needed. 3 is "not built yet"; anything else failed.
status=0
images --check "$@" || status=$?
case "$status" in
  0) exit 0 ;;
  3) ;;
  *) exit "$status" ;;
esac

# The package installs on 3.11 to 3.13, but the wheels built here must fit the image's
# python3, Debian 12's 3.11: a .venv made with another Python would build ones pip then
# cannot install there.
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  log "$PYTHON is not Python 3.11, the image's (Debian 12's python3); set LWS_PYTHON to one"
  exit 1
fi
((EUID == 0)) || { log "building the images needs root (mmdebstrap, chroot, mount)"; exit 1; }
bash "$HERE/debian-packages.sh" mmdebstrap debian-archive-keyring gcc libc6-dev binutils
if [[ "$ARCH" != "$HOST_ARCH" ]]; then enable_foreign "$ARCH"; fi

mkdir -p "$IMAGES"
exec 9>"$IMAGES/.lock"
log "waiting for the images lock"
flock 9
started=$SECONDS
images "$@"
log "done in $((SECONDS - started))s"
