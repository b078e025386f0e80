#!/usr/bin/env bash
# `make compat-k8s`: the Kubernetes matrix. For each release given (vMAJOR.MINOR.PATCH),
# builds its control plane (hack/build-controlplane.sh, cached per release), then runs
# tests/compat_k8s against a local cluster of it; at the end prints the result table
# (tests/compat_k8s/results.py) and exits non-zero if any release failed.
#
#   LWS_PYTHON       the interpreter with the project installed (default .venv's).
#   LWS_COMPAT_OUT   where each release's build log, test log and results go
#                    (default: a new temporary folder, printed).
#
# One release after another: each starts a control plane of its own, and a machine
# runs one at a time.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PYTHON="${LWS_PYTHON:-$REPO/.venv/bin/python}"
OUT="${LWS_COMPAT_OUT:-$(mktemp -d -t lws-compat-k8s.XXXXXX)}"
mkdir -p "$OUT"
[[ $# -gt 0 ]] || { echo "usage: $0 VERSION..." >&2; exit 2; }
echo "compat-k8s: logs and results in $OUT" >&2

status=0
results=()
for version in "$@"; do
  result="$OUT/$version.json"
  results+=("$result")
  rm -f "$result"
  started=$SECONDS
  echo "compat-k8s: $version: building the control plane (cold: several minutes)" >&2
  if ! K8S_VERSION="$version" bash "$HERE/build-controlplane.sh" \
    >"$OUT/$version.build.out" 2>"$OUT/$version.build.log"; then
    echo "compat-k8s: $version: the build failed; its log ends:" >&2
    tail -n 20 "$OUT/$version.build.log" >&2
    printf '{"version": "%s", "build": "failed", "steps": {}}\n' "$version" >"$result"
    status=1
    continue
  fi
  build="$((SECONDS - started))"
  # A build that found its folder done says so; its seconds would say nothing.
  if grep -q -e 'cached:' -e 'built by another process:' "$OUT/$version.build.log"; then
    build=cached
  fi
  echo "compat-k8s: $version: testing" >&2
  # The tests' own environment picks the release; the build above made it, so the
  # session's fixture finds it cached.
  if ! (cd "$REPO" && LWS_K8S_VERSION="$version" LWS_COMPAT_BUILD="$build" \
    LWS_COMPAT_RESULTS="$result" "$PYTHON" -m pytest -q -p no:cacheprovider \
    tests/compat_k8s 2>&1 | tee "$OUT/$version.test.log"); then
    status=1
  fi
  # A session that died before its end wrote nothing: say so in the table.
  [[ -f "$result" ]] || printf '{"version": "%s", "build": "%s", "steps": {}}\n' \
    "$version" "$build" >"$result"
done

(cd "$REPO" && "$PYTHON" -m tests.compat_k8s.results "${results[@]}") || status=1
exit "$status"
