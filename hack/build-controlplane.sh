#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
# Go modules (hack/controlplane) into a cache outside the repo, keyed by their
# versions, and prints that folder as the last line on stdout.
#
#   K8S_VERSION         the Kubernetes release to build, e.g. v1.34.4 (default: the
#                       one hack/controlplane/go.mod requires). Another release is
#                       built from a module generated for it in the cache
#                       (src-k8s-VERSION), so the committed go.mod stays as it is.
#   KUBEBUILDER_ASSETS  a folder of ready binaries (envtest convention); when it
#                       holds all four (of K8S_VERSION, when that is set), it is
#                       used and nothing is built.
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

# has_all_of_version VERSION DIR: DIR holds all the binaries and its kube-apiserver
# says it is VERSION.
has_all_of_version() {
  has_all "$2" && [[ "$("$2/kube-apiserver" --version 2>/dev/null)" == "Kubernetes $1" ]]
}

# k8s_module_for VERSION: prints the folder of a module that builds ./cmd against
# k8s.io/kubernetes VERSION, generating it in the cache on first use. Kubernetes
# points its staging modules (k8s.io/api, client-go, ...) at ./staging, which a
# consumer cannot follow; each one is pinned instead to the published tag of the
# same release, v0.MINOR.PATCH. The list of staging modules changes between
# releases, so it is read from that release's own go.mod, and so are its `go`
# and `godebug` lines, so the binaries behave as that release's were built to.
k8s_module_for() {
  local version="$1" dir="$CACHE_ROOT/src-k8s-$1" tmp upstream staging="v0.${1#v1.}"
  if [[ -f "$dir/go.sum" ]]; then
    echo "$dir"
    return
  fi
  log "generating the module for k8s.io/kubernetes $version in $dir"
  tmp="$dir.tmp.$$"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  cp -r "$SRC/cmd" "$tmp/"
  # One chain: errexit does not apply inside a subshell that `||` follows.
  (
    cd "$tmp" &&
      printf 'module github.com/leaderworkerset/leaderworkerset/hack/controlplane\n' >go.mod &&
      upstream="$(go mod download -json "k8s.io/kubernetes@$version" | awk -F'"' '$2 == "GoMod" { print $4 } $2 == "Error" { print $4 > "/dev/stderr" }')" &&
      [[ -f "$upstream" ]] &&
      {
        # Written anew: the download above may have added a `go` line of its own.
        printf 'module github.com/leaderworkerset/leaderworkerset/hack/controlplane\n\n'
        awk '$1 == "go" || ($1 == "godebug" && $2 != "(") { print }' "$upstream"
        printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$version"
        awk -v v="$staging" '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s %s\n", $1, $1, v }' "$upstream"
        printf ')\n'
      } >go.mod.new &&
      mv go.mod.new go.mod &&
      go mod tidy
  ) >&2 || {
    log "could not make a module for k8s.io/kubernetes@$version"
    rm -rf "$tmp"
    return 1
  }
  rm -rf "$dir"
  mv "$tmp" "$dir"
  echo "$dir"
}

# The versions come from the go.mod files, so bumping a module there is all
# it takes to get a fresh cache folder.
DEFAULT_K8S_VERSION="$(mod_version "$SRC/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$SRC/etcd/go.mod" go.etcd.io/etcd/server/v3)"
[[ -n "$DEFAULT_K8S_VERSION" && -n "$ETCD_VERSION" ]] || { log "cannot read versions from $SRC"; exit 1; }
K8S_VERSION="${K8S_VERSION:-}"
if [[ -n "$K8S_VERSION" ]]; then
  [[ "$K8S_VERSION" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { log "K8S_VERSION=$K8S_VERSION is not vMAJOR.MINOR.PATCH"; exit 1; }
  # Ready binaries of another release would start a cluster of the wrong version.
  use_given KUBEBUILDER_ASSETS "lacks some of ${NEEDED[*]} or is not $K8S_VERSION" \
    has_all_of_version "$K8S_VERSION"
else
  use_given KUBEBUILDER_ASSETS "lacks some of ${NEEDED[*]}" has_all
  K8S_VERSION="$DEFAULT_K8S_VERSION"
fi

DEST="$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
STAMP="$DEST/.complete"

built() { [[ -f "$STAMP" ]] && has_all "$DEST"; }
# Two callers (a dev shell and a test run) must not build into one folder.
reuse_or_lock "$CACHE_ROOT/.build.lock" "$DEST" built

go_settings mod
build_tmp "$DEST"
if [[ "$K8S_VERSION" != "$DEFAULT_K8S_VERSION" ]]; then
  SRC="$(k8s_module_for "$K8S_VERSION")"
fi

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
(cd "$HERE/controlplane/etcd" && go build -p "$JOBS" -trimpath \
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
