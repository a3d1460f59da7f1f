# Shell helpers shared by hack/crds.sh and hack/capi-crds.sh (source it; not executable on its own).
#
# The sourcing script defines step (a progress printer) and SCRATCH (a directory for a scratch module, created
# with a go.mod, so `go mod download` never touches the repository's go.mod).

# module_dir MODULE@VERSION: sets DIR to the module's directory in the module cache, downloading it through the Go
# module proxy if needed.
declare -A DIRS=()
module_dir() {
  if [ -z "${DIRS[$1]:-}" ]; then
    local json dir
    if ! json=$(cd "$SCRATCH" && GOWORK=off go mod download -json "$1" 2>&1); then
      step "go mod download $1 failed: $json" >&2
      exit 1
    fi
    dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
    [ -n "$dir" ] && [ -d "$dir" ] || { step "no Dir for $1 in: $json" >&2; exit 1; }
    DIRS[$1]=$dir
    step "module $1: $(du -sh "$dir" | cut -f1) in the module cache"
  fi
  DIR=${DIRS[$1]}
}

# body FILE: the one non-empty YAML document of FILE (documents holding only blank or comment lines, such as
# what precedes a leading `---`, are dropped), without CRs. Fails unless there is exactly one.
body() {
  tr -d '\r' <"$1" | awk -v f="$1" '
    BEGIN { n = 0; kept = 0 }
    /^---([[:space:]].*)?$/ { n++; next }
    { doc[n] = doc[n] $0 "\n" }
    !/^[[:space:]]*(#.*)?$/ { content[n] = 1 }
    END {
      for (i = 0; i <= n; i++) if (content[i]) { kept++; out = doc[i] }
      if (kept != 1) { printf "%s: %d non-empty YAML documents, want 1\n", f, kept > "/dev/stderr"; exit 1 }
      sub(/\n([[:space:]]*\n)*$/, "\n", out)   # no trailing blank lines
      printf "%s", out
    }'
}

# crdgen ARGS...: hack/crdgen, run from the repository root ($ROOT) with -mod=readonly, so go.mod is never changed.
crdgen() { (cd "$ROOT" && go run -mod=readonly ./hack/crdgen "$@"); }
