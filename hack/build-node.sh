#!/usr/bin/env bash
# Builds what the local cluster's real node runs besides containerd: kubelet and
# kube-proxy from the control plane's k8s.io/kubernetes module (hack/controlplane),
# and CoreDNS from hack/coredns, into a cache outside the repo keyed by their
# versions, and prints that folder as the last line on stdout.
#
#   LWS_NODE_BINARIES   a folder holding kubelet, kube-proxy and coredns; when it
#                       holds all three, it is used and nothing is built.
#   LWS_CACHE_DIR       cache root (default ~/.cache/leaderworkerset).
#   LWS_BUILD_JOBS      go build -p (default: number of CPUs).
set -euo pipefail

NEEDED=(kubelet kube-proxy coredns)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

use_given LWS_NODE_BINARIES "lacks some of ${NEEDED[*]}" has_all

K8S_VERSION="$(mod_version "$HERE/controlplane/go.mod" k8s.io/kubernetes)"
COREDNS_VERSION="$(mod_version "$HERE/coredns/go.mod" github.com/coredns/coredns)"
[[ -n "$K8S_VERSION" && -n "$COREDNS_VERSION" ]] || { log "cannot read versions from $HERE"; exit 1; }

DEST="$CACHE_ROOT/node-k8s-$K8S_VERSION-coredns-$COREDNS_VERSION"
STAMP="$DEST/.complete"

built() { [[ -f "$STAMP" ]] && has_all "$DEST"; }
reuse_or_lock "$CACHE_ROOT/.build-node.lock" "$DEST" built

go_settings readonly
build_tmp "$DEST"

started=$SECONDS
log "building kubelet and kube-proxy $K8S_VERSION, coredns $COREDNS_VERSION with $(go_version) -p $JOBS"
k8s_flags="$(k8s_version_ldflags "$HERE/controlplane" "$K8S_VERSION")"
log "go build kubelet kube-proxy (cold: ~4 min on 2 cores)"
(cd "$HERE/controlplane" && go build -p "$JOBS" -trimpath -ldflags "-s -w$k8s_flags" \
  -o "$TMP/" k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
log "kubelet and kube-proxy done after $((SECONDS - started))s"

log "go build coredns"
(cd "$HERE/coredns" && go build -p "$JOBS" -trimpath \
  -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=module-$COREDNS_VERSION" \
  -o "$TMP/coredns" .)

for b in "${NEEDED[@]}"; do
  [[ -x "$TMP/$b" ]] || { log "missing $b after build"; exit 1; }
done
mkdir -p "$DEST"
for b in "${NEEDED[@]}"; do mv -f "$TMP/$b" "$DEST/$b"; done
printf 'k8s=%s coredns=%s go=%s seconds=%s\n' "$K8S_VERSION" "$COREDNS_VERSION" \
  "$(go_version)" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $DEST"
echo "$DEST"
