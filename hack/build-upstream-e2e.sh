#!/usr/bin/env bash
# Compiles upstream LeaderWorkerSet's e2e suite (the Go package sigs.k8s.io/lws/test/e2e,
# not test/e2e/disaggregatedset) into a test binary, from the module at the version
# pinned in hack/upstream-lws/go.mod, fetched through the Go module proxy and checked
# against that go.sum. The binary goes to a cache outside the repo, keyed by that
# version, and its path is printed as the last line on stdout. Used by
# tests/e2e_real/test_upstream_e2e.py (`make e2e-real`); a cached build is a no-op.
#
#   LWS_UPSTREAM_E2E_BIN  a ready test binary; when executable, it is used and nothing
#                         is built.
#   LWS_CACHE_DIR         cache root (default ~/.cache/leaderworkerset).
#   LWS_BUILD_JOBS        go build -p (default: number of CPUs).
#
# The suite is run as `e2e.test --ginkgo.skip ...` with KUBECONFIG set and kubectl on
# PATH (it shells out to kubectl). Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PINS="$HERE/upstream-lws"
MODULE=sigs.k8s.io/lws
PACKAGE=./test/e2e
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

use_given LWS_UPSTREAM_E2E_BIN "is not executable" test -x

VERSION="$(mod_version "$PINS/go.mod" "$MODULE")"
[[ -n "$VERSION" ]] || { log "cannot read the $MODULE version from $PINS/go.mod"; exit 1; }

DEST="$CACHE_ROOT/lws-e2e-$VERSION"
BIN="$DEST/e2e.test"
STAMP="$DEST/.complete"

built() { [[ -f "$STAMP" && -x "$BIN" ]]; }
reuse_or_lock "$CACHE_ROOT/.build-upstream-e2e.lock" "$BIN" built

# readonly: upstream's own go.mod and go.sum pin the suite's dependencies (ginkgo,
# gomega, controller-runtime); nothing may change them.
go_settings readonly
build_tmp "$DEST"

started=$SECONDS
# The module as the proxy serves it, verified against the pinned go.sum; its folder in
# the module cache is read-only, so the build runs in a copy, where upstream's go.mod
# makes it the main module (test dependencies are only resolved for the main module).
module_dir="$(cd "$PINS" && go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d "$module_dir" ]] || { log "go mod download $MODULE@$VERSION gave no folder"; exit 1; }
cp -R "$module_dir" "$TMP/src"
chmod -R u+w "$TMP/src"

log "go test -c $MODULE/${PACKAGE#./} $VERSION with $(go_version) -p $JOBS into $DEST (cold: several minutes on 2 cores)"
(cd "$TMP/src" && go test -c -p "$JOBS" -trimpath -o "$TMP/e2e.test" "$PACKAGE")

mkdir -p "$DEST"
mv -f "$TMP/e2e.test" "$BIN"
# The stamp is written last: a folder without it is a half-finished build.
printf 'lws=%s go=%s seconds=%s\n' "$VERSION" "$(go_version)" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $BIN"
echo "$BIN"
