#!/usr/bin/env bash
# Builds a release into one folder (`make release`; what is in it: hack/images/release.py,
# and docs/operations.md, "Publishing a release") and prints that folder last on stdout.
#
#   bash hack/release.sh VERSION REGISTRY [DIR]     (DIR: dist/release/VERSION)
#
# VERSION must be the one src/leaderworkerset/_version.py holds, with a CHANGELOG.md
# entry. REGISTRY is where the release will be pushed (the image as REGISTRY/lws:VERSION,
# the chart as oci://REGISTRY/charts/lws); the chart and manifests.yaml name it.
#
# Needs root (the images: mmdebstrap, chroot, mounts). The controller image is built for
# amd64 and arm64 (LWS_RELEASE_ARCHES changes the list), the one not this machine's
# under qemu-user (hack/build-images.sh, LWS_IMAGE_ARCH); each is cached by the hash of
# its inputs, so a release of unchanged sources only assembles the folder.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

(($# >= 2)) || { log "usage: $0 VERSION REGISTRY [DIR]"; exit 2; }
VERSION="$1"
REGISTRY="$2"
DIR="${3:-$HERE/../dist/release/$VERSION}"
ARCHES="${LWS_RELEASE_ARCHES:-amd64 arm64}"
PYTHON="${LWS_PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x "$HERE/../.venv/bin/python" ]]; then PYTHON="$HERE/../.venv/bin/python"; else PYTHON=python3.11; fi
fi

started=$SECONDS
archives=()
for arch in $ARCHES; do
  line="$(LWS_PYTHON="$PYTHON" LWS_IMAGE_ARCH="$arch" bash "$HERE/build-images.sh" controller | tail -n1)"
  archives+=("${line##* }")
done
tools="$(bash "$HERE/build-tools.sh" | tail -n1)"
log "images and tools ready in $((SECONDS - started))s; assembling $DIR"
"$PYTHON" "$HERE/images/release.py" --version "$VERSION" --registry "$REGISTRY" \
  --out "$DIR" --tools "$tools" --scratch "$CACHE_ROOT/release-scratch" "${archives[@]}"
log "release $VERSION in $((SECONDS - started))s"
