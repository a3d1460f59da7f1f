// Package crds holds capi-private's private CustomResourceDefinitions: the twins of the upstream Cluster API CRDs
// and of the infrastructure providers' (CAPK, CAPA, CAPZ, CAPG, CAPIBM, CAPO) in the private API groups, each
// labelled hypershift.openshift.io/private-capi: "true" (docs/capi-private.md).
//
//   - upstream/ holds the upstream YAML, vendored from pinned modules by hack/capi-crds.sh (package upstream, used
//     by tests, the test environment and the generator only, so it is not linked into the binary).
//   - Generate turns one upstream CRD into its private twin. It is pure; hack/capi-crds.sh runs it (through
//     hack/capicrds) to write private/, which is committed, embedded and checked by `make verify`.
//   - Install server-side applies the embedded private CRDs, waits until they are Established and probes the
//     conversion webhook.
package crds

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/groups"
)

// Names, labels and annotations of the private CRDs (see Generate).
const (
	// PrivateSuffix ends the name of every CRD capi-private writes; nothing else is ever written.
	PrivateSuffix = ".cluster.hypershift.openshift.io"
	// LabelPrivate marks a private CRD.
	LabelPrivate = "hypershift.openshift.io/private-capi"
	// LabelProvider is CAPI's provider label (clusterctl's `cluster.x-k8s.io/provider`), kept with its standard key.
	LabelProvider = "cluster.x-k8s.io/provider"
	// AnnotationSource names the upstream file a private CRD was generated from: <module>@<version>/<path>.
	AnnotationSource = "hypershift.openshift.io/private-capi-source"
)

// Pinned upstream modules (module@version): HyperShift's pins, recorded in hypershift-pins.txt, which
// hack/capi-crds.sh vendors (TestPinsAreHyperShifts keeps these equal to it).
const (
	CAPIModule   = "sigs.k8s.io/cluster-api@v1.13.4"
	CAPKModule   = "sigs.k8s.io/cluster-api-provider-kubevirt@v0.11.2"
	CAPAModule   = "sigs.k8s.io/cluster-api-provider-aws/v2@v2.13.0"
	CAPZModule   = "sigs.k8s.io/cluster-api-provider-azure@v1.26.0"
	CAPGModule   = "sigs.k8s.io/cluster-api-provider-gcp@v1.13.0"
	CAPIBMModule = "sigs.k8s.io/cluster-api-provider-ibmcloud@v0.13.1"
	CAPOModule   = "sigs.k8s.io/cluster-api-provider-openstack@v0.14.6"
	// PlatformModule provides the platform's standard CAPI CRDs of the test environment.
	PlatformModule = "sigs.k8s.io/cluster-api@v1.14.2"
	// HyperShiftModule provides the HostedCluster and HostedControlPlane CRDs of the test environment.
	HyperShiftModule = "github.com/openshift/hypershift/api@v0.0.0-20251120083117-dea6d2f24af6"
)

// Provider label values, as clusterctl sets them (core "cluster-api", infrastructure providers
// "infrastructure-<name>").
const (
	providerCore      = "cluster-api"
	providerKubevirt  = "infrastructure-kubevirt"
	providerAWS       = "infrastructure-aws"
	providerAzure     = "infrastructure-azure"
	providerGCP       = "infrastructure-gcp"
	providerIBMCloud  = "infrastructure-ibmcloud"
	providerOpenStack = "infrastructure-openstack"
)

// Source is one upstream CRD file that has a private twin.
type Source struct {
	// Module is module@version, e.g. sigs.k8s.io/cluster-api@v1.13.4.
	Module string
	// Path is the file's path inside the module.
	Path string
	// Provider is the value of the cluster.x-k8s.io/provider label.
	Provider string
	// Serve, when set, lists the versions the private CRD serves (the storage version among them); the others are
	// dropped. Nil serves every version upstream serves.
	Serve []string
}

// String is <module>@<version>/<path>, the value of AnnotationSource and the file's path under upstream/.
func (s Source) String() string { return s.Module + "/" + s.Path }

func capi(file string) Source {
	return Source{Module: CAPIModule, Path: "config/crd/bases/" + file, Provider: providerCore}
}

// infra is the Source of an infrastructure provider's CRD for plural in module's config/crd/bases.
func infra(module, provider, plural string, serve ...string) Source {
	return Source{Module: module, Path: "config/crd/bases/infrastructure.cluster.x-k8s.io_" + plural + ".yaml",
		Provider: provider, Serve: serve}
}

func infras(module, provider string, plurals ...string) []Source {
	out := make([]Source, 0, len(plurals))
	for _, p := range plurals {
		out = append(out, infra(module, provider, p))
	}
	return out
}

// Sources is the closed list of upstream CRDs with a private twin: core Cluster API and, per infrastructure
// provider, the kinds HyperShift installs (its cmd/install/assets/crds), identity kinds included.
//
// Served versions follow the provider version HyperShift pins. CAPZ's AzureASOManaged* kinds also serve a
// deprecated v1alpha1 upstream, converted by CAPZ's own webhook; HyperShift serves v1beta1 alone and CAPZ's
// converters do not link at this module's Cluster API version, so the private twins serve v1beta1 alone
// (conversion None). Every other multi-version kind (core, CAPIBM) converts in capi-private's webhook.
var Sources = slices.Concat(
	[]Source{
		capi("cluster.x-k8s.io_clusters.yaml"),
		capi("cluster.x-k8s.io_clusterclasses.yaml"),
		capi("cluster.x-k8s.io_machines.yaml"),
		capi("cluster.x-k8s.io_machinesets.yaml"),
		capi("cluster.x-k8s.io_machinedeployments.yaml"),
		capi("cluster.x-k8s.io_machinehealthchecks.yaml"),
		capi("cluster.x-k8s.io_machinepools.yaml"),
		capi("cluster.x-k8s.io_machinedrainrules.yaml"),
		capi("addons.cluster.x-k8s.io_clusterresourcesets.yaml"),
		capi("addons.cluster.x-k8s.io_clusterresourcesetbindings.yaml"),
		capi("ipam.cluster.x-k8s.io_ipaddresses.yaml"),
		capi("ipam.cluster.x-k8s.io_ipaddressclaims.yaml"),
	},
	infras(CAPKModule, providerKubevirt, "kubevirtclusters", "kubevirtclustertemplates", "kubevirtmachines",
		"kubevirtmachinetemplates"),
	infras(CAPAModule, providerAWS, "awsclustercontrolleridentities", "awsclusterroleidentities", "awsclusters",
		"awsclusterstaticidentities", "awsclustertemplates", "awsmachinepools", "awsmachines", "awsmachinetemplates"),
	[]Source{
		infra(CAPZModule, providerAzure, "azureasomanagedclusters", "v1beta1"),
		infra(CAPZModule, providerAzure, "azureasomanagedclustertemplates", "v1beta1"),
		infra(CAPZModule, providerAzure, "azureasomanagedcontrolplanes", "v1beta1"),
		infra(CAPZModule, providerAzure, "azureasomanagedcontrolplanetemplates", "v1beta1"),
		infra(CAPZModule, providerAzure, "azureasomanagedmachinepools", "v1beta1"),
		infra(CAPZModule, providerAzure, "azureasomanagedmachinepooltemplates", "v1beta1"),
	},
	infras(CAPZModule, providerAzure, "azureclusteridentities", "azureclusters", "azureclustertemplates",
		"azuremachines", "azuremachinetemplates"),
	infras(CAPGModule, providerGCP, "gcpclusters", "gcpclustertemplates", "gcpmachines", "gcpmachinetemplates"),
	infras(CAPIBMModule, providerIBMCloud, "ibmpowervsclusters", "ibmpowervsclustertemplates", "ibmpowervsimages",
		"ibmpowervsmachines", "ibmpowervsmachinetemplates", "ibmvpcclusters", "ibmvpcclustertemplates",
		"ibmvpcmachines", "ibmvpcmachinetemplates"),
	infras(CAPOModule, providerOpenStack, "openstackclusteridentities", "openstackclusters",
		"openstackclustertemplates", "openstackfloatingippools", "openstackmachines", "openstackmachinetemplates",
		"openstackservers"),
)

// Webhook service of the committed manifests: the conversion webhook's Service in capi-private's own namespace,
// where deploy/capi-private installs it (not HyperShift's: the private operator's namespace is marked for sidecar
// injection, and the injector must never run in a marked namespace). Install and `capi-private crds
// generate|install` take another client config (a URL in tests).
const (
	DefaultServiceNamespace = "capi-private"
	DefaultServiceName      = "capi-private-webhook"
	ConvertPath             = "/convert"
)

// DefaultClientConfig is the conversion webhook client config of the committed private CRDs: the Service
// DefaultServiceNamespace/DefaultServiceName, port 443, path /convert, no caBundle (injected at install).
func DefaultClientConfig() apiextensionsv1.WebhookClientConfig {
	path := ConvertPath
	port := int32(443)
	return apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
		Namespace: DefaultServiceNamespace, Name: DefaultServiceName, Path: &path, Port: &port,
	}}
}

// Generate turns the upstream CRD file data of src into its private twin, rendered as the committed file
// (a header comment, then YAML with sorted keys). It is pure:
//
//  1. metadata.name becomes <plural>.<private group> and spec.group the private group; nothing else is
//     renamed (the group appears elsewhere only in descriptions) and schemas are never edited;
//  2. spec.names stay as they are;
//  3. versions with served: false are dropped, and so are versions outside src.Serve when it is set; the storage
//     version must be served and stays the storage version;
//  4. labels: upstream's (contract labels keep their standard keys) plus cluster.x-k8s.io/provider and
//     hypershift.openshift.io/private-capi: "true";
//  5. annotation hypershift.openshift.io/private-capi-source: <module>@<version>/<path>;
//  6. conversion: Webhook (conversionReviewVersions ["v1"], clientConfig cc) with more than one served
//     version, else None.
//
// It returns the private CRD's name and the file.
func Generate(src Source, data []byte, cc apiextensionsv1.WebhookClientConfig) (string, []byte, error) {
	crd, err := parseCRD(data)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", src, err)
	}
	name, err := privatize(crd, src, cc)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", src, err)
	}
	body, err := marshalCRD(crd)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", src, err)
	}
	header := fmt.Sprintf("# Generated by hack/capi-crds.sh (crds.Generate) from %s. DO NOT EDIT.\n", src)
	return name, append([]byte(header), body...), nil
}

// FileName is the name of the private twin's file under private/: <metadata.name>.yaml.
func FileName(crdName string) string { return crdName + ".yaml" }

// parseCRD reads one CRD as a generic map: numbers stay json.Number, so schemas survive byte-for-byte in meaning.
func parseCRD(data []byte) (map[string]any, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd, func(d *json.Decoder) *json.Decoder { d.UseNumber(); return d }); err != nil {
		return nil, err
	}
	if crd["apiVersion"] != "apiextensions.k8s.io/v1" || crd["kind"] != "CustomResourceDefinition" {
		return nil, fmt.Errorf("not an apiextensions.k8s.io/v1 CustomResourceDefinition: apiVersion %v, kind %v", crd["apiVersion"], crd["kind"])
	}
	return crd, nil
}

// marshalCRD renders crd as YAML after checking it is a strict apiextensions.k8s.io/v1 CRD.
func marshalCRD(crd map[string]any) ([]byte, error) {
	body, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	var typed apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(body, &typed); err != nil {
		return nil, fmt.Errorf("not a strict apiextensions.k8s.io/v1 CRD: %w", err)
	}
	return body, nil
}

func privatize(crd map[string]any, src Source, cc apiextensionsv1.WebhookClientConfig) (string, error) {
	meta, _ := crd["metadata"].(map[string]any)
	spec, _ := crd["spec"].(map[string]any)
	if meta == nil || spec == nil {
		return "", fmt.Errorf("no metadata or spec")
	}
	group, _ := spec["group"].(string)
	private, ok := groups.Default.ToPrivate(group)
	if !ok {
		return "", fmt.Errorf("group %q has no private group", group)
	}
	names, _ := spec["names"].(map[string]any)
	plural, _ := names["plural"].(string)
	if plural == "" {
		return "", fmt.Errorf("no spec.names.plural")
	}
	if meta["name"] != plural+"."+group {
		return "", fmt.Errorf("metadata.name %v, want %s.%s", meta["name"], plural, group)
	}
	meta["name"] = plural + "." + private
	spec["group"] = private

	served, err := servedVersions(spec, src.Serve)
	if err != nil {
		return "", err
	}
	spec["versions"] = served

	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	labels[LabelProvider] = src.Provider
	labels[LabelPrivate] = "true"
	meta["labels"] = labels
	annotations, _ := meta["annotations"].(map[string]any)
	if annotations == nil {
		annotations = map[string]any{}
	}
	annotations[AnnotationSource] = src.String()
	meta["annotations"] = annotations

	if len(served) > 1 {
		ccMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cc)
		if err != nil {
			return "", err
		}
		spec["conversion"] = map[string]any{
			"strategy": string(apiextensionsv1.WebhookConverter),
			"webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig":             ccMap,
			},
		}
	} else {
		spec["conversion"] = map[string]any{"strategy": string(apiextensionsv1.NoneConverter)}
	}
	return meta["name"].(string), nil
}

// servedVersions returns the versions of spec the private CRD serves: those upstream serves, limited to serve
// when it is set. The storage version must be among them.
func servedVersions(spec map[string]any, serve []string) ([]any, error) {
	versions, _ := spec["versions"].([]any)
	var served []any
	storage, found := "", 0
	for _, v := range versions {
		v, _ := v.(map[string]any)
		name, _ := v["name"].(string)
		keep := v["served"] == true && (serve == nil || slices.Contains(serve, name))
		if v["storage"] == true {
			storage = name
			if !keep {
				return nil, fmt.Errorf("storage version %s is not served", storage)
			}
		}
		if keep {
			served = append(served, v)
			if slices.Contains(serve, name) {
				found++
			}
		}
	}
	if storage == "" {
		return nil, fmt.Errorf("no storage version")
	}
	if found != len(serve) {
		return nil, fmt.Errorf("versions %v to serve are not all served upstream", serve)
	}
	return served, nil
}

// hasPrivateSuffix reports whether name is a private CRD name (the only names Install writes): it ends in
// PrivateSuffix and its group is a private group of the table.
func hasPrivateSuffix(name string) bool {
	_, g, ok := groups.SplitCRDName(name)
	return ok && strings.HasSuffix(name, PrivateSuffix) && groups.Default.IsPrivate(g)
}
