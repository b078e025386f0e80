#!/usr/bin/env bash
# Builds the install tools, kubectl and helm, from Go modules into a cache
# outside the repo keyed by their versions, and prints that folder as the last
# line on stdout.
#
#   kubectl  k8s.io/kubernetes/cmd/kubectl from hack/controlplane, so it is the
#            same Kubernetes version, with the same dependencies, as the local
#            control plane (and shares its Go build cache).
#   helm     helm.sh/helm/v4/cmd/helm from hack/helm.
#
#   LWS_TOOLS_DIR    a folder with ready kubectl and helm binaries; when it
#                    holds both, it is used and nothing is built.
#   LWS_CACHE_DIR    cache root (default ~/.cache/leaderworkerset).
#   LWS_BUILD_JOBS   go build -p (default: number of CPUs).
#
# Progress goes to stderr so that callers can take the path from stdout.
set -euo pipefail

TOOLS=(kubectl helm)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { printf '[%s] build-tools: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

has_all() {
  local t
  for t in "${TOOLS[@]}"; do [[ -x "$1/$t" ]] || return 1; done
}

if [[ -n "${LWS_TOOLS_DIR:-}" ]]; then
  if has_all "$LWS_TOOLS_DIR"; then
    log "using LWS_TOOLS_DIR=$LWS_TOOLS_DIR"
    echo "$LWS_TOOLS_DIR"
    exit 0
  fi
  log "LWS_TOOLS_DIR=$LWS_TOOLS_DIR lacks kubectl or helm; building instead"
fi

mod_version() {
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m { print $2; exit }' "$1"
}
K8S_VERSION="$(mod_version "$HERE/controlplane/go.mod" k8s.io/kubernetes)"
HELM_VERSION="$(mod_version "$HERE/helm/go.mod" helm.sh/helm/v4)"
[[ -n "$K8S_VERSION" && -n "$HELM_VERSION" ]] || { log "cannot read versions from $HERE"; exit 1; }

CACHE_ROOT="${LWS_CACHE_DIR:-$HOME/.cache/leaderworkerset}"
DEST="$CACHE_ROOT/tools-kubectl-$K8S_VERSION-helm-$HELM_VERSION"
STAMP="$DEST/.complete"

if [[ -f "$STAMP" ]] && has_all "$DEST"; then
  log "cached: $DEST"
  echo "$DEST"
  exit 0
fi

mkdir -p "$CACHE_ROOT"
# The same lock as the control-plane build: both compile client-go and much
# more, and one after the other the second reuses the first's build cache.
exec 9>"$CACHE_ROOT/.build.lock"
log "waiting for build lock"
flock 9
if [[ -f "$STAMP" ]] && has_all "$DEST"; then
  log "built by another process: $DEST"
  echo "$DEST"
  exit 0
fi

export GOTOOLCHAIN="${LWS_GOTOOLCHAIN:-auto}"
export CGO_ENABLED=0
# readonly: the checked-in go.sum files must already cover every package.
export GOFLAGS="-mod=readonly -buildvcs=false"
JOBS="${LWS_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

TMP="$DEST.tmp.$$"
rm -rf "$TMP"
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT

started=$SECONDS
log "building kubectl $K8S_VERSION and helm $HELM_VERSION with $(go version | awk '{print $3}') -p $JOBS into $DEST"

minor="${K8S_VERSION#v*.}"
minor="${minor%%.*}"
major="${K8S_VERSION#v}"
major="${major%%.*}"
build_date="$(cd "$HERE/controlplane" && go list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)"
kubectl_flags=""
# Stamped like the control plane so `kubectl version` reports the real version
# (and its skew warning compares like with like).
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kubectl_flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  kubectl_flags+=" -X $pkg.gitCommit=module-k8s.io/kubernetes@$K8S_VERSION"
  kubectl_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

log "go build kubectl (cold: several minutes on 2 cores)"
(cd "$HERE/controlplane" && go build -p "$JOBS" -trimpath -ldflags "-s -w$kubectl_flags" \
  -o "$TMP/kubectl" k8s.io/kubernetes/cmd/kubectl)
log "kubectl done after $((SECONDS - started))s"

log "go build helm"
helm_flags="-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
helm_flags+=" -X helm.sh/helm/v4/internal/version.metadata="
helm_flags+=" -X helm.sh/helm/v4/internal/version.gitCommit=module-helm.sh/helm/v4@$HELM_VERSION"
helm_flags+=" -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
(cd "$HERE/helm" && go build -p "$JOBS" -trimpath -ldflags "-s -w $helm_flags" \
  -o "$TMP/helm" helm.sh/helm/v4/cmd/helm)

for t in "${TOOLS[@]}"; do
  [[ -x "$TMP/$t" ]] || { log "missing $t after build"; exit 1; }
done
mkdir -p "$DEST"
for t in "${TOOLS[@]}"; do mv -f "$TMP/$t" "$DEST/$t"; done
# The stamp is written last: a folder without it is a half-finished build.
printf 'kubectl=%s helm=%s go=%s seconds=%s\n' "$K8S_VERSION" "$HELM_VERSION" \
  "$(go version | awk '{print $3}')" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $DEST"
echo "$DEST"
