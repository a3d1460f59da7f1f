#!/usr/bin/env bash
# Runs each package that starts a real hub RUNS times in a row with the race detector, while a second full
# `go test` of the repository runs beside it on the same machine, and prints a table of the failures. It is how
# the suite shows it is not red by chance on a loaded machine (make stress).
#
# Usage: hack/stress.sh [RUNS]   (default 5; STRESS_PKGS overrides the packages, STRESS_LOAD=0 runs without the load)
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-5}
out=${STRESS_OUT:-bin/stress}
mkdir -p "$out"
flags=(-race -count=1 -timeout 25m -parallel 6)

# The packages whose tests start a hub (localhub, through sphub or capihub).
if [ -n "${STRESS_PKGS:-}" ]; then
  read -r -a pkgs <<<"$STRESS_PKGS"
else
  mapfile -t pkgs < <(go list -test -f '{{.ImportPath}} {{join .Deps " "}}' ./... |
    awk '$1 ~ /\.test$/ && / github.com\/dcm-sp\/acm-cluster-sp\/internal\/devtest\/localhub( |$)/ {sub(/\.test$/, "", $1); print $1}' | sort -u)
fi
echo "stress: ${#pkgs[@]} packages × $runs runs; load: ${STRESS_LOAD:-1}; logs in $out"

load_pid=""
if [ "${STRESS_LOAD:-1}" != 0 ]; then
  # The load: the whole suite, again and again, until the stress runs end. Each pass appends to load.log under a
  # heading, so that a failure of the load (a test under even more load than the stress runs') is kept too.
  : >"$out/load.log"
  setsid bash -c 'for pass in $(seq 1 1000); do echo "== load pass $pass, $(date -u +%FT%TZ)"; go test "$@" ./... 2>&1 || true; done >>"'"$out"'/load.log"' load "${flags[@]}" &
  load_pid=$!
  go build -o "$out/reaphubs" ./hack/reaphubs
  # stop_load kills the load and then the hubs its killed test binaries leave behind (they run in their own process
  # groups): it waits, at most 30 s, for the load's processes to be gone, so that their hubs are orphans by then.
  stop_load() {
    kill -- -"$load_pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 -- -"$load_pid" 2>/dev/null || break; sleep 0.2; done
    "$out/reaphubs" || true
  }
  trap stop_load EXIT
fi

failures=0
printf '| run | package | result | seconds | failed tests |\n|---|---|---|---|---|\n' >"$out/table.md"
for run in $(seq 1 "$runs"); do
  for pkg in "${pkgs[@]}"; do
    short=${pkg#github.com/dcm-sp/acm-cluster-sp/}
    log="$out/run$run-${short//\//_}.json"
    began=$(date +%s)
    result=pass
    go test "${flags[@]}" -json "$pkg" >"$log" 2>&1 || result=FAIL
    failed=$(grep -o '"Action":"fail","Package":"[^"]*","Test":"[^"]*"' "$log" | sed 's/.*"Test":"//; s/"$//' | sort -u | tr '\n' ' ' || true)
    [ "$result" = pass ] || failures=$((failures + 1))
    printf '| %d | %s | %s | %d | %s |\n' "$run" "$short" "$result" $(( $(date +%s) - began )) "$failed" | tee -a "$out/table.md"
  done
done
echo "stress: $failures failed package runs (table in $out/table.md)"
if grep -q '^--- FAIL' "$out/load.log" 2>/dev/null; then
  echo "the load beside them failed too (kept in $out/load.log):"
  grep -E '^(== load pass|--- FAIL|FAIL)' "$out/load.log" | grep -B1 -E '^(--- FAIL|FAIL)' || true
fi
[ "$failures" -eq 0 ]
