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
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

use_given LWS_UPSTREAM_BIN "is not executable" test -x

VERSION="$(mod_version "$SRC/go.mod" "$MODULE")"
[[ -n "$VERSION" ]] || { log "cannot read the $MODULE version from $SRC/go.mod"; exit 1; }

DEST="$CACHE_ROOT/lws-go-$VERSION"
BIN="$DEST/manager"
STAMP="$DEST/.complete"

built() { [[ -f "$STAMP" && -x "$BIN" ]]; }
# Own lock file: the control-plane build holds .build.lock for minutes and the
# two builds do not share an output folder.
reuse_or_lock "$CACHE_ROOT/.build-upstream-lws.lock" "$BIN" built

# readonly: go.mod and go.sum are the checked-in pins; a build must not edit them.
go_settings readonly
build_tmp "$DEST"

started=$SECONDS
log "building $MODULE/cmd $VERSION with $(go_version) -p $JOBS into $DEST (cold: a few minutes on 2 cores)"
# The version variables are what the manager logs at start and sends in its
# User-Agent, so a log line tells which build ran.
ldflags="-s -w -X $MODULE/pkg/version.GitVersion=$VERSION -X $MODULE/pkg/version.GitCommit=module-$MODULE@$VERSION"
(cd "$SRC" && go build -p "$JOBS" -trimpath -ldflags "$ldflags" -o "$TMP/manager" "$MODULE/cmd")

mkdir -p "$DEST"
mv -f "$TMP/manager" "$BIN"
# The stamp is written last: a folder without it is a half-finished build.
printf 'lws=%s go=%s seconds=%s\n' "$VERSION" "$(go_version)" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $BIN"
echo "$BIN"
