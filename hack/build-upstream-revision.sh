#!/usr/bin/env bash
# Builds hack/upstream-lws/revision: a few lines of ours around upstream's own
# DisaggregatedSet ComputeRevision (module sigs.k8s.io/lws, at the version pinned in
# hack/upstream-lws/go.mod), into a cache outside the repo, and prints the binary's
# path as the last line on stdout. The migration tests (`make compat`) compare our
# revision hash with it; a cached build is a no-op.
#
#   LWS_UPSTREAM_REVISION_BIN  a ready binary; when executable, it is used and
#                              nothing is built.
#   LWS_CACHE_DIR              cache root (default ~/.cache/leaderworkerset).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/upstream-lws"
MODULE=sigs.k8s.io/lws
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

use_given LWS_UPSTREAM_REVISION_BIN "is not executable" test -x

VERSION="$(mod_version "$SRC/go.mod" "$MODULE")"
[[ -n "$VERSION" ]] || { log "cannot read the $MODULE version from $SRC/go.mod"; exit 1; }

DEST="$CACHE_ROOT/lws-revision-$VERSION"
BIN="$DEST/revision"
STAMP="$DEST/.complete"
SUM="$(sha256sum "$SRC/revision/main.go" | cut -c1-16)"

built() { [[ -f "$STAMP" && -x "$BIN" ]] && grep -q "source=$SUM" "$STAMP"; }
reuse_or_lock "$CACHE_ROOT/.build-upstream-revision.lock" "$BIN" built

# readonly: go.mod and go.sum are the checked-in pins; a build must not edit them.
go_settings readonly
build_tmp "$DEST"

started=$SECONDS
log "building $SRC/revision against $MODULE $VERSION with $(go_version)"
(cd "$SRC" && go build -p "$JOBS" -trimpath -o "$TMP/revision" ./revision)

mkdir -p "$DEST"
mv -f "$TMP/revision" "$BIN"
printf 'lws=%s go=%s source=%s seconds=%s\n' "$VERSION" "$(go_version)" "$SUM" \
  "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $BIN"
echo "$BIN"
