#!/usr/bin/env bash
# Builds the upstream Go LeaderWorkerSet manager (module sigs.k8s.io/lws, main
# package sigs.k8s.io/lws/cmd) from the Go module proxy, at the version pinned
# in hack/upstream-lws/go.mod, into a cache outside the repo, and prints the
# binary's path as the last line on stdout. Used by the migration tests
# (`make compat`); a cached build is a no-op.
#
#   LWS_UPSTREAM_BIN    a ready manager binary; when executable, it is used
#                       and nothing is built.
#   LWS_CACHE_DIR       cache root (default ~/.cache/leaderworkerset).
#   LWS_BUILD_JOBS      go build -p (default: number of CPUs).
#
# Progress goes to stderr so that callers can take the path from stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/upstream-lws"
MODULE=sigs.k8s.io/lws

log() { printf '[%s] build-upstream-lws: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if [[ -n "${LWS_UPSTREAM_BIN:-}" ]]; then
  if [[ -x "$LWS_UPSTREAM_BIN" ]]; then
    log "using LWS_UPSTREAM_BIN=$LWS_UPSTREAM_BIN"
    echo "$LWS_UPSTREAM_BIN"
    exit 0
  fi
  log "LWS_UPSTREAM_BIN=$LWS_UPSTREAM_BIN is not executable; building instead"
fi

VERSION="$(awk -v m="$MODULE" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m { print $2; exit }' "$SRC/go.mod")"
[[ -n "$VERSION" ]] || { log "cannot read the $MODULE version from $SRC/go.mod"; exit 1; }

CACHE_ROOT="${LWS_CACHE_DIR:-$HOME/.cache/leaderworkerset}"
DEST="$CACHE_ROOT/lws-go-$VERSION"
BIN="$DEST/manager"
STAMP="$DEST/.complete"

if [[ -f "$STAMP" && -x "$BIN" ]]; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
# Own lock file: the control-plane build holds .build.lock for minutes and the
# two builds do not share an output folder.
exec 9>"$CACHE_ROOT/.build-upstream-lws.lock"
log "waiting for build lock"
flock 9
if [[ -f "$STAMP" && -x "$BIN" ]]; then
  log "built by another process: $BIN"
  echo "$BIN"
  exit 0
fi

export GOTOOLCHAIN="${LWS_GOTOOLCHAIN:-auto}"
export CGO_ENABLED=0
# readonly: go.mod and go.sum are the checked-in pins; a build must not edit them.
export GOFLAGS="-mod=readonly -buildvcs=false"
JOBS="${LWS_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

TMP="$DEST.tmp.$$"
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

started=$SECONDS
log "building $MODULE/cmd $VERSION with $(go version | awk '{print $3}') -p $JOBS into $DEST (cold: a few minutes on 2 cores)"
# The version variables are what the manager logs at start and sends in its
# User-Agent, so a log line tells which build ran.
ldflags="-s -w -X $MODULE/pkg/version.GitVersion=$VERSION -X $MODULE/pkg/version.GitCommit=module-$MODULE@$VERSION"
(cd "$SRC" && go build -p "$JOBS" -trimpath -ldflags "$ldflags" -o "$TMP/manager" "$MODULE/cmd")

mkdir -p "$DEST"
mv -f "$TMP/manager" "$BIN"
# The stamp is written last: a folder without it is a half-finished build.
printf 'lws=%s go=%s seconds=%s\n' "$VERSION" "$(go version | awk '{print $3}')" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $BIN"
echo "$BIN"
