#!/usr/bin/env bash
# Compares the SP built from BASE with the SP built from the work tree, under one benchmark harness (this tree's
# internal/sp/app benchmarks, compiled once): the two binaries run alternately in one run (ABBA order, so a drift of
# the machine falls on both), ROUNDS times each, every round on a freshly seeded hub; benchstat then prints each
# figure's change with its significance (bin/bench-compare/benchstat.txt).
#
# Usage: hack/bench-compare.sh BASE [ROUNDS]   (make bench-compare BASE=<commit>; ROUNDS default 5)
#   BENCH_COMPARE_CLUSTERS  cluster count (default 1000)
#   BENCH_COMPARE_PATTERN   the benchmarks (default: start, closed- and open-loop GET and LIST, creates)
#   BENCH_COMPARE_TIME      -benchtime of each (default 3s)
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:?usage: hack/bench-compare.sh BASE [ROUNDS]}
rounds=${2:-5}
out=$PWD/bin/bench-compare
# -bench matches each level of a sub-benchmark's name separately: BenchmarkAtScale/n=1000/GET/c=8.
pattern=${BENCH_COMPARE_PATTERN:-'BenchmarkAtScale/^n=[0-9]+$/^(start-to-readyz|GET|LIST50|open-loop|create)$'}
base_rev=$(git rev-parse --short "$base^{commit}")
head_rev=$(git describe --always --dirty)

rm -rf "$out"
mkdir -p "$out/base" "$out/head"
wt=$(mktemp -d)
trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' EXIT
git worktree add --detach -q "$wt" "$base_rev"
echo "bench-compare: base $base_rev, head $head_rev; $rounds rounds each; logs in $out"
(cd "$wt" && go build -trimpath -o "$out/base/acm-cluster-sp" ./cmd/acm-cluster-sp)
go build -trimpath -o "$out/head/acm-cluster-sp" ./cmd/acm-cluster-sp
go test -c -o "$out/app.test" ./internal/sp/app/

run() { # run base|head round
  echo "  round $2: $1"
  (cd internal/sp/app && BENCH_SP_BIN="$out/$1/acm-cluster-sp" BENCH_CLUSTERS="${BENCH_COMPARE_CLUSTERS:-1000}" BENCH_MEMLIMIT=off \
    "$out/app.test" -test.run '^$' -test.bench "$pattern" -test.benchtime "${BENCH_COMPARE_TIME:-3s}" -test.timeout 60m \
    >"$out/$1.round$2.log" 2>&1) || { tail -30 "$out/$1.round$2.log"; exit 1; }
  grep -E '^(Benchmark|goos|goarch|pkg|cpu)' "$out/$1.round$2.log" >>"$out/$1.txt" ||
    { echo "no benchmark matched $pattern"; exit 1; }
}
for i in $(seq 1 "$rounds"); do
  if ((i % 2)); then run base "$i"; run head "$i"; else run head "$i"; run base "$i"; fi
done
go tool -modfile=tools/go.mod benchstat "base=$out/base.txt" "head=$out/head.txt" | tee "$out/benchstat.txt"
