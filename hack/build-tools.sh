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

NEEDED=(kubectl helm)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"

use_given LWS_TOOLS_DIR "lacks kubectl or helm" has_all

K8S_VERSION="$(mod_version "$HERE/controlplane/go.mod" k8s.io/kubernetes)"
HELM_VERSION="$(mod_version "$HERE/helm/go.mod" helm.sh/helm/v4)"
[[ -n "$K8S_VERSION" && -n "$HELM_VERSION" ]] || { log "cannot read versions from $HERE"; exit 1; }

DEST="$CACHE_ROOT/tools-kubectl-$K8S_VERSION-helm-$HELM_VERSION"
STAMP="$DEST/.complete"

built() { [[ -f "$STAMP" ]] && has_all "$DEST"; }
# The same lock as the control-plane build: both compile client-go and much
# more, and one after the other the second reuses the first's build cache.
reuse_or_lock "$CACHE_ROOT/.build.lock" "$DEST" built

# readonly: the checked-in go.sum files must already cover every package.
go_settings readonly
build_tmp "$DEST"

started=$SECONDS
log "building kubectl $K8S_VERSION and helm $HELM_VERSION with $(go_version) -p $JOBS into $DEST"

# Stamped like the control plane so `kubectl version` reports the real version
# (and its skew warning compares like with like).
kubectl_flags="$(k8s_version_ldflags "$HERE/controlplane" "$K8S_VERSION")"

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

for t in "${NEEDED[@]}"; do
  [[ -x "$TMP/$t" ]] || { log "missing $t after build"; exit 1; }
done
mkdir -p "$DEST"
for t in "${NEEDED[@]}"; do mv -f "$TMP/$t" "$DEST/$t"; done
# The stamp is written last: a folder without it is a half-finished build.
printf 'kubectl=%s helm=%s go=%s seconds=%s\n' "$K8S_VERSION" "$HELM_VERSION" \
  "$(go_version)" "$((SECONDS - started))" >"$STAMP"
log "done in $((SECONDS - started))s: $DEST"
echo "$DEST"
