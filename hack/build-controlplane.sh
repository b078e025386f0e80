#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
# Go modules (hack/controlplane) into a cache outside the repo, keyed by their
# versions, and prints that folder as the last line on stdout.
#
#   KUBEBUILDER_ASSETS  a folder of ready binaries (envtest convention); when it
#                       holds all four, it is used and nothing is built.
#   LWS_CACHE_DIR       cache root (default ~/.cache/leaderworkerset).
#   LWS_BUILD_JOBS      go build -p (default: number of CPUs).
#
# Progress goes to stderr so that callers can take the path from stdout.
set -euo pipefail

NEEDED=(etcd kube-apiserver kube-controller-manager kube-scheduler)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/controlplane"
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

use_given KUBEBUILDER_ASSETS "lacks some of ${NEEDED[*]}" has_all

# The versions come from the go.mod files, so bumping a module there is all
# it takes to get a fresh cache folder.
K8S_VERSION="$(mod_version "$SRC/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$SRC/etcd/go.mod" go.etcd.io/etcd/server/v3)"
[[ -n "$K8S_VERSION" && -n "$ETCD_VERSION" ]] || { log "cannot read versions from $SRC"; exit 1; }

DEST="$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
STAMP="$DEST/.complete"

built() { [[ -f "$STAMP" ]] && has_all "$DEST"; }
# Two callers (a dev shell and a test run) must not build into one folder.
reuse_or_lock "$CACHE_ROOT/.build.lock" "$DEST" built

go_settings mod
build_tmp "$DEST"

started=$SECONDS
log "building k8s $K8S_VERSION and etcd $ETCD_VERSION with $(go_version) -p $JOBS into $DEST"
version_flags="$(k8s_version_ldflags "$SRC" "$K8S_VERSION")"

# go build fetches only the modules these packages need; `go mod download`
# would fetch kubernetes' whole module graph.
log "go build kube-apiserver kube-controller-manager kube-scheduler (cold: ~6 min on 2 cores)"
(cd "$SRC" && go build -p "$JOBS" -trimpath -ldflags "-s -w$version_flags" -o "$TMP/" \
  ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler)
log "kubernetes binaries done after $((SECONDS - started))s"

log "go build etcd"
(cd "$SRC/etcd" && go build -p "$JOBS" -trimpath \
  -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ETCD_VERSION" \
  -o "$TMP/etcd" ./cmd/etcd)

for b in "${NEEDED[@]}"; do
  [[ -x "$TMP/$b" ]] || { log "missing $b after build"; exit 1; }
done
mkdir -p "$DEST"
for b in "${NEEDED[@]}"; do mv -f "$TMP/$b" "$DEST/$b"; done
# The stamp is written last: a folder without it is a half-finished build.
printf 'k8s=%s etcd=%s go=%s seconds=%s\n' "$K8S_VERSION" "$ETCD_VERSION" \
  "$(go_version)" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $DEST"
echo "$DEST"
