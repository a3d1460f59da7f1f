#!/usr/bin/env bash
# Builds the local hub's binaries (kube-apiserver, kube-controller-manager, kubectl, etcd) from the Go module proxy into a cache outside
# the repository, exactly as docs/local-hub.md–§4 describes. Idempotent: a complete cache is
# detected by running each binary's --version, so an interrupted build is redone rather than trusted.
#
# Output directory: $KUBEBUILDER_ASSETS if set, else ${XDG_CACHE_HOME:-$HOME/.cache}/acm-cluster-sp/bin/<versions>.
# Prints that directory as its last line (so Makefiles can capture it).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.10}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CACHE_ROOT=${ACM_SP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/acm-cluster-sp}
OUT=${KUBEBUILDER_ASSETS:-$CACHE_ROOT/bin/k8s-${K8S_VERSION#v}-etcd-${ETCD_VERSION#v}}
SCRATCH=$CACHE_ROOT/scratch

start=$(date +%s)
step() { printf '[tools %4ds] %s\n' "$(( $(date +%s) - start ))" "$*" >&2; }

# reports LINE CMD...: CMD's output holds LINE as a whole line. The output is captured in full before it is
# searched: piping CMD into a grep that quits at its first match fails at random under pipefail, since CMD then dies
# of SIGPIPE writing its next line (kubectl prints several).
reports() { local out; out=$("${@:2}" 2>/dev/null) || return 1; grep -qxF -- "$1" <<<"$out"; }
have_apiserver() { [ -x "$OUT/kube-apiserver" ] && [ "$("$OUT/kube-apiserver" --version 2>/dev/null)" = "Kubernetes $K8S_VERSION" ]; }
have_kubectl()   { [ -x "$OUT/kubectl" ] && reports "Client Version: $K8S_VERSION" "$OUT/kubectl" version --client; }
have_kcm()       { [ -x "$OUT/kube-controller-manager" ] && [ "$("$OUT/kube-controller-manager" --version 2>/dev/null)" = "Kubernetes $K8S_VERSION" ]; }
have_etcd()      { [ -x "$OUT/etcd" ] && reports "etcd Version: ${ETCD_VERSION#v}" "$OUT/etcd" --version; }

complete() { [ -f "$OUT/.complete" ] && have_apiserver && have_kubectl && have_kcm && have_etcd; }

# --check: only say whether the cache is complete (exit 0) or not (exit 1); never build. The tests run it against
# stub binaries, so a defect in these checks shows without a cold build.
if [ "${1:-}" = --check ]; then
  if complete; then step "hub binaries up to date in $OUT"; echo "$OUT"; exit 0; fi
  for b in apiserver kubectl kcm etcd; do have_$b || step "$b: missing or not the pinned version"; done
  exit 1
fi

if complete; then
  step "hub binaries up to date in $OUT"
  echo "$OUT"
  exit 0
fi
rm -f "$OUT/.complete"
mkdir -p "$OUT" "$SCRATCH"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod" GOTOOLCHAIN=local
step "building into $OUT (first time takes ~8 minutes on 2 cores; later runs are instant)"

if ! have_etcd; then
  d=$SCRATCH/etcd-${ETCD_VERSION#v}
  rm -rf "$d" && mkdir -p "$d"
  cat >"$d/go.mod" <<MOD
module kubebuild.local/etcd-${ETCD_VERSION#v}

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat >"$d/main.go" <<'GO'
// Command etcd is etcd's own server/main.go: the server built from the pinned module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  step "etcd $ETCD_VERSION: resolving modules"
  (cd "$d" && go mod tidy >/dev/null 2>&1) || (cd "$d" && go mod tidy)
  step "etcd $ETCD_VERSION: compiling"
  (cd "$d" && go build -trimpath -ldflags "-s -w" -o "$OUT/etcd.tmp" . && mv "$OUT/etcd.tmp" "$OUT/etcd")
  have_etcd || { step "etcd --version does not report $ETCD_VERSION"; exit 1; }
  step "etcd $ETCD_VERSION: ok"
else
  step "etcd $ETCD_VERSION: cached"
fi

if ! have_apiserver || ! have_kubectl || ! have_kcm; then
  d=$SCRATCH/k8s-${K8S_VERSION#v}
  rm -rf "$d" && mkdir -p "$d"
  step "kubernetes $K8S_VERSION: downloading k8s.io/kubernetes"
  gomod=$(cd "$d" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [ -f "$gomod" ] || { step "could not locate upstream go.mod"; exit 1; }
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  staging=v0.${minor}.${K8S_VERSION##*.}
  {
    echo "module kubebuild.local/k8s-${K8S_VERSION#v}"
    echo
    grep -E '^go [0-9]' "$gomod"
    grep -E '^godebug ' "$gomod" || true
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '^\s*k8s\.io/\S+ v0\.0\.0$' "$gomod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$d/go.mod"
  : >"$d/go.sum"
  step "kubernetes $K8S_VERSION: resolving modules ($(grep -c '=>' "$d/go.mod") staging replaces)"
  cmds="k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION"
  (cd "$d" && go get $cmds >/dev/null 2>&1) || (cd "$d" && go get $cmds)
  now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  vf=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    vf="$vf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$now"
  done
  step "kubernetes $K8S_VERSION: compiling kube-apiserver (the long step, ~5 minutes)"
  (cd "$d" && go build -trimpath -ldflags "-s -w $vf" -o "$OUT/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver && mv "$OUT/kube-apiserver.tmp" "$OUT/kube-apiserver")
  have_apiserver || { step "kube-apiserver --version does not report $K8S_VERSION"; exit 1; }
  step "kubernetes $K8S_VERSION: compiling kubectl"
  (cd "$d" && go build -trimpath -ldflags "-s -w $vf" -o "$OUT/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl && mv "$OUT/kubectl.tmp" "$OUT/kubectl")
  have_kubectl || { step "kubectl version does not report $K8S_VERSION"; exit 1; }
  step "kubernetes $K8S_VERSION: compiling kube-controller-manager (garbage collector for the capi-private tests)"
  (cd "$d" && go build -trimpath -ldflags "-s -w $vf" -o "$OUT/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager && mv "$OUT/kube-controller-manager.tmp" "$OUT/kube-controller-manager")
  have_kcm || { step "kube-controller-manager --version does not report $K8S_VERSION"; exit 1; }
  step "kubernetes $K8S_VERSION: ok"
else
  step "kubernetes $K8S_VERSION: cached"
fi

touch "$OUT/.complete"
step "hub binaries ready in $OUT"
echo "$OUT"
