#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed yet, with
# apt-get (after an apt-get update). Installs nothing, and needs no root, when all
# are there.
#
#   bash hack/debian-packages.sh mmdebstrap gcc libc6-dev
set -euo pipefail

log() { printf '[%s] debian-packages: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

(($# > 0)) || { log "usage: $0 PACKAGE..."; exit 2; }

missing=()
for pkg in "$@"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
((${#missing[@]} > 0)) || exit 0

if ! command -v apt-get >/dev/null; then
  log "missing ${missing[*]}, and this is not a Debian-based system (no apt-get): install them by hand"
  exit 1
fi
if ((EUID != 0)); then
  log "missing ${missing[*]}; installing them needs root: sudo apt-get install ${missing[*]}"
  exit 1
fi
log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
