#!/usr/bin/env bash
# Compiles one of upstream's e2e suites into a test binary, from the module at the
# version pinned in hack/upstream-lws/go.mod, fetched through the Go module proxy and
# checked against that go.sum. The binary goes to a cache outside the repo, keyed by
# suite and version, and its path is printed as the last line on stdout; a cached build
# is a no-op.
#
#   bash hack/build-upstream-e2e.sh                   the LeaderWorkerSet suite (test/e2e),
#                                                     for tests/e2e_real (`make e2e-real`)
#   bash hack/build-upstream-e2e.sh disaggregatedset  test/e2e/disaggregatedset, for
#                                                     tests/compat (`make compat`)
#
#   LWS_UPSTREAM_E2E_BIN  a ready LeaderWorkerSet suite binary (LWS_UPSTREAM_DS_E2E_BIN
#                         for the other); when executable, it is used and nothing is built.
#   LWS_CACHE_DIR         cache root (default ~/.cache/leaderworkerset).
#   LWS_BUILD_JOBS        go build -p (default: number of CPUs).
#
# A suite shells out to kubectl: run it with KUBECONFIG set and kubectl on PATH.
# Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PINS="$HERE/upstream-lws"
MODULE=sigs.k8s.io/lws
case "${1:-lws}" in
  lws) PACKAGE=./test/e2e NAME=e2e OVERRIDE=LWS_UPSTREAM_E2E_BIN ;;
  disaggregatedset)
    PACKAGE=./test/e2e/disaggregatedset NAME=ds-e2e OVERRIDE=LWS_UPSTREAM_DS_E2E_BIN ;;
  *) echo "usage: $0 [lws|disaggregatedset]" >&2; exit 2 ;;
esac
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

use_given "$OVERRIDE" "is not executable" test -x

VERSION="$(mod_version "$PINS/go.mod" "$MODULE")"
[[ -n "$VERSION" ]] || { log "cannot read the $MODULE version from $PINS/go.mod"; exit 1; }

DEST="$CACHE_ROOT/lws-$NAME-$VERSION"
BIN="$DEST/$(basename "$PACKAGE").test"
STAMP="$DEST/.complete"

built() { [[ -f "$STAMP" && -x "$BIN" ]]; }
reuse_or_lock "$CACHE_ROOT/.build-upstream-$NAME.lock" "$BIN" built

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
(cd "$TMP/src" && go test -c -p "$JOBS" -trimpath -o "$TMP/suite.test" "$PACKAGE")

mkdir -p "$DEST"
mv -f "$TMP/suite.test" "$BIN"
# The stamp is written last: a folder without it is a half-finished build.
printf 'lws=%s go=%s seconds=%s\n' "$VERSION" "$(go_version)" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $BIN"
echo "$BIN"
