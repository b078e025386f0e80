#!/usr/bin/env bash
# What the package promises on each Python it supports besides .venv's 3.11
# (`make unit-pythons`; docs/testing.md): for each version, the unit suite (tests/unit)
# in a venv of that version, then `make install-check` (the plain `pip install .` starts)
# with that interpreter.
#
#   hack/unit-pythons.sh [VERSION...]   default: 3.12 3.13
#
#   PYTEST_ARGS      what pytest is given (default: -q tests/unit)
#   LWS_PYTHON_X_Y   the interpreter for X.Y (LWS_PYTHON_3_13 for 3.13); else the first
#                    that runs and is X.Y of: pythonX.Y on PATH, the newest
#                    ~/.pyenv/versions/X.Y.*, /usr/bin/pythonX.Y. None is an error: the
#                    suite must run on every version.
#   LWS_CACHE_DIR    cache root (default ~/.cache/leaderworkerset)
#
# The venvs live in the cache, outside the checkout, so a fresh clone (CI's) reuses them:
# venvs/X.Y-KEY, installed like `make setup` installs .venv (the dependencies pinned by
# constraints.txt, the dev and bench extras, the package and the local cluster editable).
# KEY hashes constraints.txt, the [build-system] and [project] tables of both
# pyproject.toml files and the interpreter (its path and full version): when one changes,
# the venv is built afresh and the old one removed. A venv serves one checkout at a time:
# its editable install is pointed at this checkout when another had it (a few seconds),
# and a lock per version, held until its checks end, makes a second run wait.
#
# Every version is checked even when one fails, side by side; the exit status is non-zero when any
# failed. Each version's times are printed at the end.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "$HERE/lib.sh"
cd "$HERE/.."
CHECKOUT="$PWD"
VENVS="$CACHE_ROOT/venvs"

VERSIONS=("$@")
[[ ${#VERSIONS[@]} -gt 0 ]] || VERSIONS=(3.12 3.13)
read -r -a PYTEST_ARGS <<<"${PYTEST_ARGS:--q tests/unit}"

# is_version PYTHON X.Y: PYTHON runs and is Python X.Y.
is_version() {
  "$1" -c "import sys; sys.exit('%d.%d' % sys.version_info[:2] != '$2')" 2>/dev/null
}

find_python() {
  local version="$1" override="LWS_PYTHON_${1//./_}" candidate
  local candidates=()
  [[ -z "${!override:-}" ]] || candidates+=("${!override}")
  candidates+=("python$version")
  # The newest patch release first.
  while IFS= read -r candidate; do candidates+=("$candidate/bin/python$version"); done < <(
    compgen -G "$HOME/.pyenv/versions/$version.*" | sort -rV
  )
  candidates+=("/usr/bin/python$version")
  for candidate in "${candidates[@]}"; do
    if is_version "$candidate" "$version"; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

# venv_key PYTHON: what the venv's contents depend on, hashed.
venv_key() {
  "$1" - <<'EOF'
import hashlib, json, sys, tomllib

digest = hashlib.sha256()
with open("constraints.txt", "rb") as f:
    digest.update(f.read())
for path in ("pyproject.toml", "localcluster/pyproject.toml"):
    with open(path, "rb") as f:
        data = tomllib.load(f)
    tables = {name: data.get(name) for name in ("build-system", "project")}
    digest.update(json.dumps(tables, sort_keys=True).encode())
digest.update(f"{sys.executable}\n{sys.version}".encode())
print(digest.hexdigest()[:16])
EOF
}

# ensure_venv VERSION PYTHON: prints the venv's folder, built (or pointed at this
# checkout) when needed. The caller holds the version's lock.
ensure_venv() {
  local version="$1" python="$2" key venv old
  key="$(venv_key "$python")" && [[ -n "$key" ]] || return 1
  venv="$VENVS/$version-$key"
  if [[ ! -f "$venv/.installed" ]]; then
    for old in "$VENVS/$version"-*/; do
      [[ -d "$old" && "${old%/}" != "$venv" ]] || continue
      log "removing $(basename "$old") (built from other constraints or another interpreter)"
      rm -rf "$old"
    done
    log "building $venv from $python ($("$python" -V))"
    rm -rf "$venv"
    # Called where a failure does not stop the script (set -e is off): each step says.
    "$python" -m venv "$venv" \
      && "$venv/bin/pip" install -q --upgrade pip >&2 \
      && "$venv/bin/pip" install -q -c constraints.txt -e '.[dev,bench]' -e ./localcluster >&2 \
      && echo "$CHECKOUT" >"$venv/.checkout" \
      && touch "$venv/.installed" \
      || return 1
  elif [[ "$(cat "$venv/.checkout")" != "$CHECKOUT" ]]; then
    log "$(basename "$venv"): pointing its editable install at $CHECKOUT"
    "$venv/bin/pip" install -q --no-deps -e . -e ./localcluster >&2 \
      && echo "$CHECKOUT" >"$venv/.checkout" \
      || return 1
  else
    log "$(basename "$venv"): reused"
  fi
  echo "$venv"
}

# check VERSION PYTHON: the unit suite, then the plain install; the lock held throughout.
check() {
  local version="$1" python="$2" venv start built tests
  mkdir -p "$VENVS"
  exec 8>"$VENVS/$version.lock"
  if ! flock -n 8; then
    log "waiting for another run on Python $version"
    flock 8
  fi
  start=$SECONDS
  if ! venv="$(ensure_venv "$version" "$python")"; then
    echo "Python $version: FAILED to build its venv" >"$OUT/$version.summary"
    return 1
  fi
  built=$((SECONDS - start))
  log "Python $version: pytest ${PYTEST_ARGS[*]}"
  start=$SECONDS
  local status=0
  "$venv/bin/pytest" "${PYTEST_ARGS[@]}" || status=1
  tests=$((SECONDS - start))
  exec 8>&-
  start=$SECONDS
  log "Python $version: make install-check"
  make --no-print-directory install-check PYTHON="$python" || status=1
  local outcome=passed
  [[ $status == 0 ]] || outcome=FAILED
  echo "Python $version: $outcome; venv $built s, tests $tests s, install-check $((SECONDS - start)) s" \
    >"$OUT/$version.summary"
  return $status
}

# The versions run side by side (one core each on a two-core machine: about half the
# time), each into its own log, printed whole in order once all have ended.
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
failed=()
summary=()
pids=()
for version in "${VERSIONS[@]}"; do
  if ! python="$(find_python "$version")"; then
    log "Python $version not found: install it (pyenv install $version) or set LWS_PYTHON_${version//./_}"
    failed+=("$version")
    summary+=("Python $version: not found")
    continue
  fi
  log "Python $version: started (its output follows when every version has ended)"
  check "$version" "$python" >"$OUT/$version.log" 2>&1 &
  pids+=("$version:$!")
done
for entry in "${pids[@]}"; do
  version="${entry%%:*}"
  wait "${entry#*:}" || failed+=("$version")
  cat "$OUT/$version.log" >&2
  summary+=("$(cat "$OUT/$version.summary" 2>/dev/null || echo "Python $version: FAILED")")
done

for line in "${summary[@]}"; do log "$line"; done
if [[ ${#failed[@]} -gt 0 ]]; then
  log "failed on Python ${failed[*]}"
  exit 1
fi
