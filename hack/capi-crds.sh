#!/usr/bin/env bash
# Vendors capi-private's upstream CustomResourceDefinitions from pinned Go modules (fetched through the Go module
# proxy) into internal/capiprivate/crds/upstream/<module>@<version>/<path>, then generates the private CRDs
# (internal/capiprivate/crds/private/) from them with crds.Generate. See docs/capi-private.md
#
# Usage: hack/capi-crds.sh [OUTDIR]   (OUTDIR defaults to internal/capiprivate/crds; writes OUTDIR/upstream and
#                                      OUTDIR/private; relative to the current directory)
#
# Same pattern as hack/crds.sh (shared helpers in hack/lib.sh): every module is fetched with
# `go mod download -json MODULE@VERSION` from a scratch module under
# ${XDG_CACHE_HOME:-$HOME/.cache}/acm-cluster-sp/scratch/capi-crds, so the repository's go.mod is never touched. Files that need no fix-up are copied verbatim (less any leading blank or `---` lines) under a
# header comment; the others go through hack/crdgen or hack/capicrds (`go run`, -mod=readonly). The output is
# deterministic: `make verify` regenerates into a temporary directory and diffs.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/internal/capiprivate/crds}
mkdir -p "$OUT/upstream" "$OUT/private"
OUT=$(cd "$OUT" && pwd)
SCRATCH=${ACM_SP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/acm-cluster-sp}/scratch/capi-crds
export GONOSUMDB=${GONOSUMDB-github.com/openshift/*} GOFLAGS=${GOFLAGS--buildvcs=false}

# The upstream modules are HyperShift's pins, recorded in internal/capiprivate/crds/hypershift-pins.txt (the module
# constants of internal/capiprivate/crds are checked against it by a test there).
PINS=$ROOT/internal/capiprivate/crds/hypershift-pins.txt
pin() {
  local v
  v=$(awk -v m="$1" '$1 == m { print $2 }' "$PINS")
  [[ -n $v ]] || { echo "capi-crds: $1 is not pinned in $PINS" >&2; exit 1; }
  echo "$1@$v"
}
CAPI=$(pin sigs.k8s.io/cluster-api)
CAPK=$(pin sigs.k8s.io/cluster-api-provider-kubevirt)
CAPA=$(pin sigs.k8s.io/cluster-api-provider-aws/v2)
CAPZ=$(pin sigs.k8s.io/cluster-api-provider-azure)
CAPG=$(pin sigs.k8s.io/cluster-api-provider-gcp)
CAPIBM=$(pin sigs.k8s.io/cluster-api-provider-ibmcloud)
CAPO=$(pin sigs.k8s.io/cluster-api-provider-openstack)
PLATFORM=sigs.k8s.io/cluster-api@v1.14.2
HYPERSHIFT=github.com/openshift/hypershift/api@v0.0.0-20251120083117-dea6d2f24af6

HS_DIR=hypershift/v1beta1/zz_generated.featuregated-crd-manifests
CORE_KINDS="cluster.x-k8s.io_clusters cluster.x-k8s.io_clusterclasses cluster.x-k8s.io_machines cluster.x-k8s.io_machinesets
cluster.x-k8s.io_machinedeployments cluster.x-k8s.io_machinehealthchecks cluster.x-k8s.io_machinepools
cluster.x-k8s.io_machinedrainrules addons.cluster.x-k8s.io_clusterresourcesets
addons.cluster.x-k8s.io_clusterresourcesetbindings ipam.cluster.x-k8s.io_ipaddresses ipam.cluster.x-k8s.io_ipaddressclaims"

# Infrastructure kinds per provider: the ones HyperShift installs (its cmd/install/assets/crds), identities included.
# The contract label cluster.x-k8s.io/v1beta1 is what the provider's own config/crd kustomization adds at deploy
# time (commonLabels or per-CRD capicontract patches), so CAPI finds the version of a ref's kind. Two corrections:
# CAPA's older contract labels (v1alpha3, v1alpha4) are left out, since no Cluster API this product runs reads
# them; CAPO labels every CRD v1beta1, also the three that serve only v1alpha1, which get v1alpha1 (as HyperShift's
# installer labels them), so a contract lookup never answers a version the CRD does not serve.
CAPK_KINDS="kubevirtclusters kubevirtclustertemplates kubevirtmachines kubevirtmachinetemplates"
CAPA_KINDS="awsclustercontrolleridentities awsclusterroleidentities awsclusters awsclusterstaticidentities
awsclustertemplates awsmachinepools awsmachines awsmachinetemplates"
CAPZ_KINDS="azureasomanagedclusters azureasomanagedclustertemplates azureasomanagedcontrolplanes
azureasomanagedcontrolplanetemplates azureasomanagedmachinepools azureasomanagedmachinepooltemplates
azureclusteridentities azureclusters azureclustertemplates azuremachines azuremachinetemplates"
CAPG_KINDS="gcpclusters gcpclustertemplates gcpmachines gcpmachinetemplates"
CAPIBM_KINDS="ibmpowervsclusters ibmpowervsclustertemplates ibmpowervsimages ibmpowervsmachines
ibmpowervsmachinetemplates ibmvpcclusters ibmvpcclustertemplates ibmvpcmachines ibmvpcmachinetemplates"
CAPO_KINDS="openstackclusters openstackclustertemplates openstackmachines openstackmachinetemplates"
CAPO_ALPHA_KINDS="openstackclusteridentities openstackfloatingippools openstackservers"
C=cluster.x-k8s.io

# infra MODULE FIXUP KINDS: the SOURCES lines of a provider's infrastructure CRDs.
infra() {
  local k
  for k in $3; do echo "$1|config/crd/bases/infrastructure.cluster.x-k8s.io_$k.yaml|$2|private source"; done
}

# module@version | path in the module | fix-up | role. Fix-ups: none; labels:K=V[,K=V] (deploy-time labels);
# platform; hostedcluster; hostedcontrolplane.
SOURCES=$(
  for k in $CORE_KINDS; do echo "$CAPI|config/crd/bases/$k.yaml|none|private source"; done
  for k in $CAPK_KINDS; do echo "$CAPK|config/crd/bases/infrastructure.cluster.x-k8s.io_$k.yaml|labels:$C/v1beta1=v1alpha1|private source; standard CAPK (tests)"; done
  infra "$CAPA" "labels:$C/v1beta1=v1beta1_v1beta2" "$CAPA_KINDS"
  infra "$CAPZ" "labels:$C/v1beta1=v1beta1" "$CAPZ_KINDS"
  infra "$CAPG" "labels:$C/v1beta1=v1beta1" "$CAPG_KINDS"
  infra "$CAPIBM" "labels:$C/v1beta1=v1beta1_v1beta2" "$CAPIBM_KINDS"
  infra "$CAPO" "labels:$C/v1beta1=v1beta1" "$CAPO_KINDS"
  infra "$CAPO" "labels:$C/v1beta1=v1alpha1" "$CAPO_ALPHA_KINDS"
  for k in $CORE_KINDS; do echo "$PLATFORM|core/config/crd/bases/$k.yaml|platform|platform set (tests)"; done
  echo "$HYPERSHIFT|$HS_DIR/hostedclusters.hypershift.openshift.io/AAA_ungated.yaml|hostedcluster|tests"
  echo "$HYPERSHIFT|$HS_DIR/hostedcontrolplanes.hypershift.openshift.io/AAA_ungated.yaml|hostedcontrolplane|tests"
)

start=$(date +%s)
step() { printf '[capi-crds %3ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }

mkdir -p "$SCRATCH"
printf 'module capicrds.local/scratch\n\ngo 1.24\n' >"$SCRATCH/go.mod"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=hack/lib.sh
. "$ROOT/hack/lib.sh"
capicrds() { (cd "$ROOT" && go run -mod=readonly ./hack/capicrds "$@"); }

mkdir -p "$tmp/upstream" "$tmp/private"
while IFS='|' read -r mod path fixup role; do
  [ -n "$mod" ] || continue
  module_dir "$mod"
  src=$DIR/$path
  [ -f "$src" ] || { step "$mod has no $path" >&2; exit 1; }
  rel=$mod/$path
  mkdir -p "$(dirname "$tmp/upstream/$rel")"
  rm -f "$tmp/raw" "$tmp/stripped"
  case $fixup in
    none) ln -s "$src" "$tmp/raw" ;;
    # Labels the provider's config/crd kustomization adds at deploy time: the contract label CAPI looks up.
    # shellcheck disable=SC2046 # one KEY=VALUE argument per comma-separated pair
    labels:*) capicrds label "$src" "$tmp/raw" $(tr ',' ' ' <<<"${fixup#labels:}") ;;
    # The platform's CAPI: only v1beta2, conversion None (a platform without a conversion webhook for v1beta1).
    platform) capicrds served-only "$src" "$tmp/raw" v1beta2 ;;
    hostedcluster) crdgen strip-annotation "$src" "$tmp/raw" ;;
    # HyperShift's cmd/install/assets/crds labels HostedControlPlane with its contract version.
    hostedcontrolplane)
      crdgen strip-annotation "$src" "$tmp/stripped"
      capicrds label "$tmp/stripped" "$tmp/raw" cluster.x-k8s.io/v1beta1=v1beta1 ;;
    *) step "unknown fix-up $fixup" >&2; exit 1 ;;
  esac
  body "$tmp/raw" >"$tmp/body"
  grep -q '^kind: CustomResourceDefinition$' "$tmp/body" || { step "$rel is not a CRD" >&2; exit 1; }
  {
    printf '# Generated by hack/capi-crds.sh from %s %s (fix-up: %s). DO NOT EDIT.\n' "$mod" "$path" "$fixup"
    cat "$tmp/body"
  } >"$tmp/upstream/$rel"
  [ -z "$(tail -c1 "$tmp/upstream/$rel")" ] || echo >>"$tmp/upstream/$rel"
done <<<"$SOURCES"
step "vendored $(grep -c . <<<"$SOURCES") upstream CRDs"

capicrds private "$tmp/upstream" "$tmp/private"
step "generated $(ls "$tmp/private" | wc -l) private CRDs"

{
  echo '# Upstream CustomResourceDefinitions of capi-private'
  echo
  echo 'Vendored by `hack/capi-crds.sh` from pinned Go modules (through the Go module proxy); do not edit by hand.'
  echo 'Regenerate with `make capi-crds`; `make verify` fails when these files or `../private/` are stale.'
  echo 'Each file sits at `<module>@<version>/<path in the module>`.'
  echo
  echo 'Fix-ups: *none*: copied verbatim, less leading blank or `---` lines, with a header comment.'
  echo '*labels:K=V,...*: adds the labels the provider'"'"'s `config/crd` kustomization adds at deploy time (the CAPI'
  echo 'contract label, e.g. `cluster.x-k8s.io/v1beta1: v1alpha1` for CAPK). *platform*: keeps only version `v1beta2`,'
  echo 'conversion `None` (the platform set of the tests).'
  echo '*hostedcluster*: `hack/crdgen strip-annotation` (as `hack/crds.sh`). *hostedcontrolplane*: the same, plus the'
  echo 'label `cluster.x-k8s.io/v1beta1: v1beta1` (as HyperShift'"'"'s `cmd/install/assets/crds` sets it).'
  echo 'Fixed-up files are re-rendered by `sigs.k8s.io/yaml` (keys sorted).'
  echo
  echo '| module@version | path | fix-up | role |'
  echo '|---|---|---|---|'
  while IFS='|' read -r mod path fixup role; do
    [ -n "$mod" ] || continue
    printf '| `%s` | `%s` | %s | %s |\n' "$mod" "$path" "$fixup" "$role"
  done <<<"$SOURCES"
} >"$tmp/upstream/README.md"

# sync SRC DST: make DST's generated files equal SRC's, reporting each change; non-generated files (Go sources)
# are left alone.
sync() {
  local f rel
  while IFS= read -r f; do
    rel=${f#"$1"/}
    if cmp -s "$f" "$2/$rel"; then continue; fi
    mkdir -p "$(dirname "$2/$rel")"
    cp "$f" "$2/$rel"
    step "${2#"$OUT"/}/$rel: written"
  done < <(find "$1" -type f | sort)
  while IFS= read -r f; do
    rel=${f#"$2"/}
    [ -f "$1/$rel" ] && continue
    rm -f "$f"
    step "${2#"$OUT"/}/$rel: removed (no longer generated)"
  done < <(find "$2" -type f \( -name '*.yaml' -o -name README.md \) | sort)
  find "$2" -mindepth 1 -type d -empty -delete
}
sync "$tmp/upstream" "$OUT/upstream"
sync "$tmp/private" "$OUT/private"
step "done: $OUT"
