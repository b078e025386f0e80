# Shared by the hack/build-*.sh scripts (sourced, not run): logging, versions read
# from go.mod files, the build cache and its lock, the Go build settings.
#
# Each build prints its result (a folder or a binary) as the last line on stdout
# and its progress on stderr, so that callers can take the path from stdout.

LOG_NAME="$(basename "${BASH_SOURCE[1]}" .sh)"
CACHE_ROOT="${LWS_CACHE_DIR:-$HOME/.cache/leaderworkerset}"

log() { printf '[%s] %s: %s\n' "$(date -u +%H:%M:%S)" "$LOG_NAME" "$*" >&2; }

# mod_version GO_MOD MODULE: the version GO_MOD requires of MODULE (empty if none).
mod_version() {
  awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m { print $2; exit }' "$1"
}

# has_all DIR: every file named in the NEEDED array is an executable in DIR.
has_all() {
  local name
  for name in "${NEEDED[@]}"; do [[ -x "$1/$name" ]] || return 1; done
}

go_version() { go version | awk '{print $3}'; }

# use_given VAR WHY CHECK...: when $VAR is set and `CHECK... $VAR` holds, print $VAR
# and exit; when it is set but fails the check, say WHY and go on to build.
use_given() {
  local name="$1" why="$2"
  shift 2
  local value="${!name:-}"
  [[ -n "$value" ]] || return 0
  if "$@" "$value"; then
    log "using $name=$value"
    echo "$value"
    exit 0
  fi
  log "$name=$value $why; building instead"
}

# reuse_or_lock LOCK RESULT CHECK...: print RESULT and exit when CHECK... holds;
# otherwise take LOCK (held on fd 9 until the script ends) and check again, as
# another process may have finished the same build meanwhile.
reuse_or_lock() {
  local lock="$1" result="$2"
  shift 2
  if "$@"; then
    log "cached: $result"
    echo "$result"
    exit 0
  fi
  mkdir -p "$CACHE_ROOT"
  exec 9>"$lock"
  log "waiting for build lock"
  flock 9
  if "$@"; then
    log "built by another process: $result"
    echo "$result"
    exit 0
  fi
}

# go_settings MOD: the environment of every go build here, with -mod=MOD, and JOBS.
go_settings() {
  # auto: the local Go is used when new enough, otherwise the toolchain named by
  # go.mod is fetched through the module proxy.
  export GOTOOLCHAIN="${LWS_GOTOOLCHAIN:-auto}"
  export CGO_ENABLED=0
  export GOFLAGS="-mod=$1 -buildvcs=false"
  JOBS="${LWS_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
}

# build_tmp DEST: TMP, an empty folder beside DEST, removed when the script ends.
build_tmp() {
  TMP="$1.tmp.$$"
  rm -rf "$TMP"
  mkdir -p "$TMP"
  trap 'rm -rf "$TMP"' EXIT
}

# k8s_version_ldflags MODULE_DIR VERSION: the -X flags that stamp a Kubernetes build
# with VERSION, as a release build is stamped. client-go carries its own copy of the
# version variables (used in its User-Agent), so both packages are stamped.
k8s_version_ldflags() {
  local dir="$1" version="$2" minor major build_date pkg flags=""
  minor="${version#v*.}"
  minor="${minor%%.*}"
  major="${version#v}"
  major="${major%%.*}"
  build_date="$(cd "$dir" && go list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)" || return 1
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitCommit=module-k8s.io/kubernetes@$version"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
  done
  printf '%s' "$flags"
}
