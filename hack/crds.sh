#!/usr/bin/env bash
# Regenerates the CustomResourceDefinition manifests of internal/devtest/sp/sphub/crds (the CRDs the local test hub's
# kube-apiserver is given) from pinned upstream Go modules, fetched through the Go module proxy.
#
# Usage: hack/crds.sh [OUTDIR]      (OUTDIR defaults to internal/devtest/sp/sphub/crds; relative to the current directory)
#
# Every module is fetched with `go mod download -json MODULE@VERSION` from a scratch module under
# ${XDG_CACHE_HOME:-$HOME/.cache}/acm-cluster-sp/scratch/crds, so the repository's go.mod is never touched. Files
# that need no fix-up are copied verbatim (less any leading blank or `---` lines); the others are transformed
# by hack/crdgen (`go run`, so its imports must be in the repository's go.mod). The output is deterministic: to
# check the committed files are current, run `hack/crds.sh "$tmp" && diff -r "$tmp" internal/devtest/sp/sphub/crds`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT/internal/devtest/sp/sphub/crds}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SCRATCH=${ACM_SP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/acm-cluster-sp}/scratch/crds
export GONOSUMDB=${GONOSUMDB-github.com/openshift/*} GOFLAGS=${GOFLAGS--buildvcs=false}

HYPERSHIFT=github.com/openshift/hypershift/api@v0.0.0-20251120083117-dea6d2f24af6
HIVE=github.com/openshift/hive@v0.0.0-20240904155057-b6cdaa9cb317
OCM=open-cluster-management.io/api@v1.2.0
KAC=github.com/stolostron/klusterlet-addon-controller@v0.0.0-20251011010713-c9f0c7b72224
ASSISTED=github.com/openshift/assisted-service@v1.0.10-0.20230830164851-6573b5d7021d
KUBEVIRT=kubevirt.io/kubevirt@v1.8.0
# What deploy/ ships besides the SP's own objects (the PrometheusRule and ServiceMonitor; the cert-manager
# component's Certificate; capi-private's PodMonitors and cert-manager Issuer), so make manifests-check and the
# deployed-RBAC tests can apply them.
PROMOP=github.com/prometheus-operator/prometheus-operator@v0.85.0
CERTMANAGER=github.com/cert-manager/cert-manager@v1.21.2

HS_DIR=hypershift/v1beta1/zz_generated.featuregated-crd-manifests
KV_GO=pkg/virt-operator/resource/generate/components/validations_generated.go

# output file | kind | module@version | path in the module | fix-up (none, strip-annotation, kubevirt)
SOURCES="
hostedclusters.hypershift.openshift.io.yaml|HostedCluster|$HYPERSHIFT|$HS_DIR/hostedclusters.hypershift.openshift.io/AAA_ungated.yaml|strip-annotation
nodepools.hypershift.openshift.io.yaml|NodePool|$HYPERSHIFT|$HS_DIR/nodepools.hypershift.openshift.io/AAA_ungated.yaml|strip-annotation
clusterimagesets.hive.openshift.io.yaml|ClusterImageSet|$HIVE|config/crds/hive.openshift.io_clusterimagesets.yaml|none
managedclusters.cluster.open-cluster-management.io.yaml|ManagedCluster|$OCM|cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml|none
klusterletaddonconfigs.agent.open-cluster-management.io.yaml|KlusterletAddonConfig|$KAC|deploy/agent.open-cluster-management.io_klusterletaddonconfigs_crd.yaml|none
agents.agent-install.openshift.io.yaml|Agent|$ASSISTED|config/crd/bases/agent-install.openshift.io_agents.yaml|none
infraenvs.agent-install.openshift.io.yaml|InfraEnv|$ASSISTED|config/crd/bases/agent-install.openshift.io_infraenvs.yaml|none
virtualmachines.kubevirt.io.yaml|VirtualMachine|$KUBEVIRT|$KV_GO|kubevirt
virtualmachineinstances.kubevirt.io.yaml|VirtualMachineInstance|$KUBEVIRT|$KV_GO|kubevirt
prometheusrules.monitoring.coreos.com.yaml|PrometheusRule|$PROMOP|example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml|none
servicemonitors.monitoring.coreos.com.yaml|ServiceMonitor|$PROMOP|example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml|none
podmonitors.monitoring.coreos.com.yaml|PodMonitor|$PROMOP|example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml|none
certificates.cert-manager.io.yaml|Certificate|$CERTMANAGER|deploy/crds/cert-manager.io_certificates.yaml|none
issuers.cert-manager.io.yaml|Issuer|$CERTMANAGER|deploy/crds/cert-manager.io_issuers.yaml|none
"

start=$(date +%s)
step() { printf '[crds %3ds] %s\n' "$(( $(date +%s) - start ))" "$*"; }

mkdir -p "$SCRATCH"
printf 'module crds.local/scratch\n\ngo 1.24\n' >"$SCRATCH/go.mod"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=hack/lib.sh
. "$ROOT/hack/lib.sh"

kubevirt_done=
while IFS='|' read -r file kind mod path fixup; do
  [ -n "$file" ] || continue
  module_dir "$mod"
  src=$DIR/$path
  [ -f "$src" ] || { step "$mod has no $path" >&2; exit 1; }
  case $fixup in
    none) body "$src" >"$tmp/$file.body" ;;
    strip-annotation)
      crdgen strip-annotation "$src" "$tmp/$file.raw"
      body "$tmp/$file.raw" >"$tmp/$file.body" ;;
    kubevirt)
      if [ -z "$kubevirt_done" ]; then
        mkdir -p "$tmp/kubevirt"
        crdgen kubevirt "$src" "$tmp/kubevirt"
        kubevirt_done=1
      fi
      [ -f "$tmp/kubevirt/$file" ] || { step "crdgen kubevirt wrote no $file" >&2; exit 1; }
      body "$tmp/kubevirt/$file" >"$tmp/$file.body" ;;
    *) step "unknown fix-up $fixup" >&2; exit 1 ;;
  esac
  grep -q '^kind: CustomResourceDefinition$' "$tmp/$file.body" || { step "$file: $src is not a CRD" >&2; exit 1; }
  {
    printf '# Generated by hack/crds.sh from %s %s. DO NOT EDIT.\n' "$mod" "$path"
    cat "$tmp/$file.body"
  } >"$tmp/$file"
  # Make sure the file ends in exactly one newline.
  [ -z "$(tail -c1 "$tmp/$file")" ] || echo >>"$tmp/$file"
  if cmp -s "$tmp/$file" "$OUT/$file"; then
    step "$file: unchanged ($kind, $fixup)"
  else
    cp "$tmp/$file" "$OUT/$file"
    step "$file: written ($kind, $fixup, $(wc -l <"$OUT/$file") lines)"
  fi
done <<<"$SOURCES"

{
  echo '# CustomResourceDefinitions of the local test hub'
  echo
  echo 'Generated by `hack/crds.sh` from pinned Go modules (through the Go module proxy); do not edit by hand.'
  echo 'Regenerate with `hack/crds.sh`; check with `hack/crds.sh "$tmp" && diff -r "$tmp" internal/devtest/sp/sphub/crds`.'
  echo
  echo 'Fix-ups: *none*: copied verbatim, less leading blank or `---` lines, with a header comment.'
  echo '*strip-annotation*: `hack/crdgen strip-annotation` deletes the annotation `feature-gate.release.openshift.io/`'
  echo '(empty name part; kube-apiserver rejects the whole CRD for it) and the then-empty annotations map.'
  echo '*kubevirt*: KubeVirt ships no CRD YAML; `hack/crdgen kubevirt` wraps the `virtualmachine` and'
  echo '`virtualmachineinstance` OpenAPI schemas of the `CRDsValidation` map as virt-operator'"'"'s'
  echo '`pkg/virt-operator/resource/generate/components/crds.go` does, with only version `v1` (the deprecated'
  echo '`v1alpha3` left out) and only the printer columns shown by default.'
  echo
  echo '| file | kind | source module@version | path | fix-up |'
  echo '|---|---|---|---|---|'
  while IFS='|' read -r file kind mod path fixup; do
    [ -n "$file" ] || continue
    printf '| `%s` | %s | `%s` | `%s` | %s |\n' "$file" "$kind" "$mod" "$path" "$fixup"
  done <<<"$SOURCES"
} >"$tmp/README.md"
if cmp -s "$tmp/README.md" "$OUT/README.md"; then step "README.md: unchanged"; else cp "$tmp/README.md" "$OUT/README.md"; step "README.md: written"; fi
# Generated files no longer in SOURCES.
for f in "$OUT"/*.yaml; do
  [ -f "$f" ] && [[ "$(head -n1 "$f")" == "# Generated by hack/crds.sh "* ]] || continue
  grep -q "^$(basename "$f")|" <<<"$SOURCES" || { rm -f "$f"; step "$(basename "$f"): removed (no longer generated)"; }
done
step "done: $OUT"
