package clusters

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// Cluster is the API resource, in domain types; internal/sp/httpapi turns it into the wire type.
type Cluster struct {
	ID            string
	Spec          json.RawMessage // the normalized spec, exactly as stored at create
	Status        status.Status
	StatusMessage string
	// Why tells the causes of one status apart, for the vocabulary that reports them differently.
	Why              status.Why
	Platform         Platform
	Version          string // requested
	OpenShiftVersion string // resolved
	APIEndpoint      string
	ConsoleURL       string
	// Kubeconfig names the admin kubeconfig Secret when the cluster is READY and the Secret exists (zero otherwise);
	// its content is read only for callers allowed to see it.
	Kubeconfig   SecretRef
	ControlPlane NodeCount
	Workers      NodeCount
	Namespace    string
	CreateTime   time.Time
	UpdateTime   time.Time
	// RecheckAt is when the status may change with no object changing (a grace period or timeout expiring); zero
	// when none is pending. A cached resource is rebuilt then.
	RecheckAt time.Time
	// Build numbers this build of the resource from the caches (> 0, numbered by whoever caches builds): the copies
	// of one build are equal, so a layer may keep what it derives from a resource (its encoding) by ID and Build.
	// Zero for a resource that may not be taken from such a keep (built on demand, or a status of the moment).
	Build uint64
	// Operation is the latest day-2 operation (nil when none ever ran); its message is the live progress.
	Operation *operation.Record
	// ETag versions the spec and the operation (AEP-154): it changes when an update is accepted.
	ETag string
}

// ETag is the entity tag of a cluster's spec and latest operation.
func ETag(specJSON string, op *operation.Record) string {
	h := sha256.New()
	h.Write([]byte(specJSON))
	if op != nil {
		h.Write([]byte{0})
		h.Write([]byte(op.ID))
	}
	return `"` + hex.EncodeToString(h.Sum(nil))[:20] + `"`
}

// NodeCount is ready/total nodes of one kind.
type NodeCount struct{ Ready, Total int32 }

// Path is the AEP resource path, clusters/{id}.
func (c *Cluster) Path() string { return "clusters/" + c.ID }

// HasKubeconfig reports whether an admin kubeconfig can be served for the cluster.
func (c *Cluster) HasKubeconfig() bool { return c.Kubeconfig.Name != "" }

// ViewSettings are the inputs of BuildCluster besides the view.
type ViewSettings struct {
	Status             status.Settings
	DefaultWorkerCount int32
}

// storedSpec is the part of the stored spec the resource needs.
type storedSpec struct {
	Version string `json:"version"`
	Nodes   struct {
		Workers struct {
			Count *int32 `json:"count"`
		} `json:"workers"`
	} `json:"nodes"`
}

// BuildCluster assembles the resource of one cluster from its cached objects, with the one status function
// (docs/status-mapping.md decides which fields each status exposes). It is pure.
func BuildCluster(v View, now time.Time, s ViewSettings) Cluster {
	hc := v.HostedCluster
	r := status.Map(hc, v.NodePools, now, s.Status)
	specJSON := hc.Annotations[meta.AnnotationSpec]
	if specJSON == "" {
		specJSON = fmt.Sprintf(`{"metadata":{"name":%q}}`, hc.Name)
	}
	var spec storedSpec
	_ = json.Unmarshal([]byte(specJSON), &spec)
	p, _ := PlatformOf(hc.Spec.Platform.Type) // "" when not served: status.Map says so (FAILED)

	c := Cluster{
		ID:               v.ID,
		Spec:             json.RawMessage(specJSON),
		Status:           r.Status,
		StatusMessage:    r.Message,
		Why:              r.Why,
		Platform:         p,
		Version:          spec.Version,
		OpenShiftVersion: hc.Annotations[meta.AnnotationOpenShiftVersion],
		Namespace:        hc.Namespace,
		CreateTime:       hc.CreationTimestamp.UTC(),
		UpdateTime:       updateTime(hc, v.NodePools).UTC(),
		RecheckAt:        r.RecheckAt,
	}
	if c.OpenShiftVersion == "" && hc.Status.Version != nil && len(hc.Status.Version.History) > 0 {
		c.OpenShiftVersion = hc.Status.Version.History[0].Version
	}

	c.ControlPlane.Total = 3
	if hc.Spec.ControllerAvailabilityPolicy == hyperv1.SingleReplica {
		c.ControlPlane.Total = 1
	}
	if r.ControlPlaneAvailable {
		c.ControlPlane.Ready = c.ControlPlane.Total
	}
	if len(v.NodePools) > 0 {
		c.Workers.Ready, c.Workers.Total = status.Workers(v.NodePools)
	} else if spec.Nodes.Workers.Count != nil {
		c.Workers.Total = *spec.Nodes.Workers.Count
	} else {
		c.Workers.Total = s.DefaultWorkerCount
	}

	if r.Status == status.Ready || r.Status == status.Updating || r.Status == status.Unavailable {
		c.APIEndpoint, c.ConsoleURL = Endpoints(v)
	}
	if r.Status == status.Ready || r.Status == status.Updating {
		c.Kubeconfig = v.Kubeconfig // a SecretRef: the content is read on demand
	}
	if op := operation.Decode(hc); op != nil {
		if op.Open() && (r.Status == status.Updating || r.Status == status.Failed || r.Status == status.Unavailable) {
			op.Message = r.Message // the live progress (or the cause once the status says FAILED)
		}
		c.Operation = op
	}
	c.ETag = ETag(hc.Annotations[meta.AnnotationSpec], c.Operation)
	return c
}

// Endpoints are a cluster's API endpoint and console URL as far as its objects tell them.
func Endpoints(v View) (api, console string) { return apiEndpoint(v.HostedCluster), consoleURL(v) }

// Output is what a cluster produced, for the status events' output_spec: its endpoints once the installation
// completed (they work from then on), until its deletion starts.
func Output(v View) status.Output {
	hc := v.HostedCluster
	if hc == nil || hc.DeletionTimestamp != nil || status.CompletedVersion(hc) == "" {
		return status.Output{}
	}
	api, console := Endpoints(v)
	return status.Output{APIEndpoint: api, ConsoleURL: console}
}

func apiEndpoint(hc *hyperv1.HostedCluster) string {
	ep := hc.Status.ControlPlaneEndpoint
	if ep.Host == "" {
		return ""
	}
	if ep.Port == 0 {
		return "https://" + ep.Host
	}
	return fmt.Sprintf("https://%s:%d", ep.Host, ep.Port)
}

// ConsoleURLClaim is the claim in which ACM's klusterlet reports a managed cluster's console URL (a ManagedCluster's
// status.clusterClaims): the one thing the SP reads of a ManagedCluster's status.
const ConsoleURLClaim = "consoleurl.cluster.open-cluster-management.io"

// consoleURL prefers ACM's claim on the ManagedCluster, then derives the URL from the cluster's ingress domain
// (docs/hypershift-objects.md). Under base-domain passthrough it is derived only once the operator has filled in the domain.
func consoleURL(v View) string {
	if mc := v.ManagedCluster; mc != nil {
		for _, c := range mc.Status.ClusterClaims {
			if c.Name == ConsoleURLClaim && c.Value != "" {
				return c.Value
			}
		}
	}
	hc := v.HostedCluster
	if cfg := hc.Spec.Configuration; cfg != nil && cfg.Ingress != nil {
		if d := cfg.Ingress.AppsDomain; d != "" {
			return "https://console-openshift-console." + d
		}
		if d := cfg.Ingress.Domain; d != "" {
			return "https://console-openshift-console." + d
		}
	}
	base := hc.Spec.DNS.BaseDomain
	if base == "" {
		return ""
	}
	prefix := hc.Name
	if p := hc.Spec.DNS.BaseDomainPrefix; p != nil {
		prefix = *p
	}
	apps := "apps." + base
	if prefix != "" {
		apps = "apps." + prefix + "." + base
	}
	return "https://console-openshift-console." + strings.TrimSuffix(apps, ".")
}

// updateTime is the latest of creation, any HostedCluster or NodePool condition transition, and deletion.
func updateTime(hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool) time.Time {
	t := hc.CreationTimestamp.Time
	later := func(x time.Time) {
		if x.After(t) {
			t = x
		}
	}
	for _, c := range hc.Status.Conditions {
		later(c.LastTransitionTime.Time)
	}
	for _, np := range nps {
		for _, c := range np.Status.Conditions {
			later(c.LastTransitionTime.Time)
		}
	}
	if hc.DeletionTimestamp != nil {
		later(hc.DeletionTimestamp.Time)
	}
	return t
}
