package hub

import (
	"unique"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
)

// The cached objects of thousands of clusters repeat the same short strings: label keys and values, annotation
// keys, finalizers, owners' kinds and API versions, condition types, statuses, reasons and most messages, release
// images and versions. Decoding gives every occurrence its own copy; interning keeps one (package unique), so the
// informers' memory grows with what differs between clusters rather than with what they share.

// maxInterned bounds what is interned: longer strings (a stored spec, a kubeconfig reference's long message) are
// rarely shared, and interning them would only fill the table.
const maxInterned = 256

func intern(s string) string {
	if s == "" || len(s) > maxInterned {
		return s
	}
	return unique.Make(s).Value()
}

func internAs[S ~string](s S) S { return S(intern(string(s))) }

// internObject interns the strings of a cached object the SP keeps: its metadata, and the conditions and versions
// of the kinds that carry them.
func internObject(obj any) {
	if o, ok := obj.(metav1.Object); ok {
		internMeta(o)
	}
	switch o := obj.(type) {
	case *hyperv1.HostedCluster:
		internConditions(o.Status.Conditions)
		o.Spec.Release.Image = intern(o.Spec.Release.Image)
		if v := o.Status.Version; v != nil {
			v.Desired.Version, v.Desired.Image = intern(v.Desired.Version), intern(v.Desired.Image)
			for i := range v.History {
				h := &v.History[i]
				h.State, h.Version, h.Image = internAs(h.State), intern(h.Version), intern(h.Image)
			}
		}
	case *hyperv1.NodePool:
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			c.Type, c.Status, c.Severity = intern(c.Type), internAs(c.Status), intern(c.Severity)
			c.Reason, c.Message = intern(c.Reason), intern(c.Message)
		}
		o.Spec.Release.Image, o.Status.Version = intern(o.Spec.Release.Image), intern(o.Status.Version)
	case *clusterv1.ManagedCluster:
		internConditions(o.Status.Conditions)
		for i := range o.Status.ClusterClaims {
			o.Status.ClusterClaims[i].Name = intern(o.Status.ClusterClaims[i].Name)
		}
	}
}

func internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason, c.Message = intern(c.Type), internAs(c.Status), intern(c.Reason), intern(c.Message)
	}
}

func internMeta(m metav1.Object) {
	m.SetNamespace(intern(m.GetNamespace()))
	if l := m.GetLabels(); len(l) > 0 {
		out := make(map[string]string, len(l))
		for k, v := range l {
			out[intern(k)] = intern(v)
		}
		m.SetLabels(out)
	}
	if a := m.GetAnnotations(); len(a) > 0 {
		out := make(map[string]string, len(a))
		for k, v := range a {
			out[intern(k)] = intern(v)
		}
		m.SetAnnotations(out)
	}
	fs := m.GetFinalizers()
	for i := range fs {
		fs[i] = intern(fs[i])
	}
	refs := m.GetOwnerReferences()
	for i := range refs {
		refs[i].APIVersion, refs[i].Kind = intern(refs[i].APIVersion), intern(refs[i].Kind)
	}
}
