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

BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/controlplane"

log() { printf '[%s] build-controlplane: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

has_all() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$1/$b" ]] || return 1; done
}

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if has_all "$KUBEBUILDER_ASSETS"; then
    log "using KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks some of ${BINARIES[*]}; building instead"
fi

# The versions come from the go.mod files, so bumping a module there is all
# it takes to get a fresh cache folder.
mod_version() {
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m { print $2; exit }' "$1"
}
K8S_VERSION="$(mod_version "$SRC/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(mod_version "$SRC/etcd/go.mod" go.etcd.io/etcd/server/v3)"
[[ -n "$K8S_VERSION" && -n "$ETCD_VERSION" ]] || { log "cannot read versions from $SRC"; exit 1; }

CACHE_ROOT="${LWS_CACHE_DIR:-$HOME/.cache/leaderworkerset}"
DEST="$CACHE_ROOT/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
STAMP="$DEST/.complete"

if [[ -f "$STAMP" ]] && has_all "$DEST"; then
  log "cached: $DEST"
  echo "$DEST"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
# Two callers (a dev shell and a test run) must not build into one folder.
exec 9>"$CACHE_ROOT/.build.lock"
log "waiting for build lock"
flock 9
if [[ -f "$STAMP" ]] && has_all "$DEST"; then
  log "built by another process: $DEST"
  echo "$DEST"
  exit 0
fi

# auto: the local Go is used when new enough, otherwise the toolchain named by
# go.mod is fetched through the module proxy.
export GOTOOLCHAIN="${LWS_GOTOOLCHAIN:-auto}"
export CGO_ENABLED=0
export GOFLAGS="-mod=mod -buildvcs=false"
JOBS="${LWS_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

TMP="$DEST.tmp.$$"
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

started=$SECONDS
log "building k8s $K8S_VERSION and etcd $ETCD_VERSION with $(go version | awk '{print $3}') -p $JOBS into $DEST"

minor="${K8S_VERSION#v*.}"
minor="${minor%%.*}"
major="${K8S_VERSION#v}"
major="${major%%.*}"
build_date="$(cd "$SRC" && go list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)"
version_flags=""
# client-go carries its own copy of the version variables (used in its
# User-Agent), so both packages are stamped.
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  version_flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  version_flags+=" -X $pkg.gitCommit=module-k8s.io/kubernetes@$K8S_VERSION"
  version_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

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

for b in "${BINARIES[@]}"; do
  [[ -x "$TMP/$b" ]] || { log "missing $b after build"; exit 1; }
done
mkdir -p "$DEST"
for b in "${BINARIES[@]}"; do mv -f "$TMP/$b" "$DEST/$b"; done
# The stamp is written last: a folder without it is a half-finished build.
printf 'k8s=%s etcd=%s go=%s seconds=%s\n' "$K8S_VERSION" "$ETCD_VERSION" \
  "$(go version | awk '{print $3}')" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $DEST"
echo "$DEST"
