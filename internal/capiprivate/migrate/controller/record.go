package controller

import (
	"context"
	"encoding/json"
	"fmt"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// The migrator's records: one ConfigMap per HostedCluster it has written a run for, in Options.StateNamespace
// (capi-private's own namespace, which tenants cannot write), named after the HostedCluster's UID. A record holds
// the run keys (plan.RunKeys) as the migrator last wrote them — the state it decides from — and, while an
// annotation change is being mirrored onto the HostedCluster, that change: a crash between the record's write and
// the HostedCluster's is finished by the next look (settle).
const (
	// RecordLabel ("true") marks a record.
	RecordLabel = "capi-private.hypershift.openshift.io/migration-record"
	// RecordNamespaceLabel is the namespace of the record's HostedCluster (a migrator scoped to one namespace
	// lists and collects only its records).
	RecordNamespaceLabel = "capi-private.hypershift.openshift.io/hostedcluster-namespace"
	// RecordHostedClusterAnnotation is the record's HostedCluster, "namespace/name" (for people).
	RecordHostedClusterAnnotation = "capi-private.hypershift.openshift.io/hostedcluster"
	// DefaultStateNamespace is where the install runs the migrator.
	DefaultStateNamespace = "capi-private"

	recordRunKey, recordPendingKey = "run", "pending"
)

// RecordRules are the migrator's grants on its records, in Options.StateNamespace (a Role there).
func RecordRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "delete"}}}
}

// RecordName is the name of the record of the HostedCluster with this UID.
func RecordName(uid types.UID) string { return "migration-" + string(uid) }

// runRecord is a HostedCluster's record as read (cm nil: none written yet).
type runRecord struct {
	cm      *corev1.ConfigMap
	run     plan.Record
	pending *plan.Changes
}

func decodeRecord(cm *corev1.ConfigMap) (*runRecord, error) {
	r := &runRecord{cm: cm, run: plan.Record{}}
	if v := cm.Data[recordRunKey]; v != "" {
		if err := json.Unmarshal([]byte(v), &r.run); err != nil {
			return nil, fmt.Errorf("record %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	if v := cm.Data[recordPendingKey]; v != "" {
		r.pending = &plan.Changes{}
		if err := json.Unmarshal([]byte(v), r.pending); err != nil {
			return nil, fmt.Errorf("record %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return r, nil
}

// records lists the records of the HostedClusters in the migrator's scope, by HostedCluster UID.
func (m *Migrator) records(ctx context.Context) (map[types.UID]*runRecord, error) {
	sel := client.MatchingLabels{RecordLabel: "true"}
	if m.opts.Namespace != "" {
		sel[RecordNamespaceLabel] = m.opts.Namespace
	}
	list := &corev1.ConfigMapList{}
	if err := m.c.List(ctx, list, client.InNamespace(m.opts.StateNamespace), sel); err != nil {
		return nil, fmt.Errorf("listing the migration records: %w", err)
	}
	out := map[types.UID]*runRecord{}
	for i := range list.Items {
		r, err := decodeRecord(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out[types.UID(list.Items[i].Name[len(RecordName("")):])] = r
	}
	return out, nil
}

// recordOf reads hc's record (an empty one when none is written).
func (m *Migrator) recordOf(ctx context.Context, hc *hyperv1.HostedCluster) (*runRecord, error) {
	cm := &corev1.ConfigMap{}
	err := m.c.Get(ctx, types.NamespacedName{Namespace: m.opts.StateNamespace, Name: RecordName(hc.UID)}, cm)
	if apierrors.IsNotFound(err) {
		return &runRecord{run: plan.Record{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the migration record of %s/%s: %w", hc.Namespace, hc.Name, err)
	}
	return decodeRecord(cm)
}

// writeRecord stores run and pending as hc's record (created on the first write; later writes are optimistic: a
// concurrent writer makes this one fail and the pass retry) and updates r.
func (m *Migrator) writeRecord(ctx context.Context, hc *hyperv1.HostedCluster, r *runRecord, run plan.Record, pending *plan.Changes) error {
	data := map[string]string{}
	b, err := json.Marshal(run)
	if err != nil {
		return err
	}
	data[recordRunKey] = string(b)
	if pending != nil {
		if b, err = json.Marshal(pending); err != nil {
			return err
		}
		data[recordPendingKey] = string(b)
	}
	if r.cm == nil {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.opts.StateNamespace, Name: RecordName(hc.UID),
			Labels:      map[string]string{RecordLabel: "true", RecordNamespaceLabel: hc.Namespace},
			Annotations: map[string]string{RecordHostedClusterAnnotation: hc.Namespace + "/" + hc.Name}}, Data: data}
		if err := m.c.Create(ctx, cm); err != nil {
			return fmt.Errorf("writing the migration record of %s/%s: %w", hc.Namespace, hc.Name, err)
		}
		r.cm = cm
	} else {
		cm := r.cm.DeepCopy()
		cm.Data = data
		if err := m.c.Update(ctx, cm); err != nil {
			return fmt.Errorf("writing the migration record of %s/%s: %w", hc.Namespace, hc.Name, err)
		}
		r.cm = cm
	}
	r.run, r.pending = run, pending
	return nil
}

// settle finishes a mirroring a crash interrupted: it writes r's pending change onto hc (unless hc already shows
// it), then clears it from the record.
func (m *Migrator) settle(ctx context.Context, hc *hyperv1.HostedCluster, r *runRecord) error {
	if r.pending == nil {
		return nil
	}
	if !r.pending.Mirrored(hc.Annotations) {
		m.opts.Log.Info("finishing an interrupted write of the migration state", "hostedcluster", hc.Namespace+"/"+hc.Name)
		body := map[string]any{"metadata": map[string]any{"annotations": r.pending.MergePatch()}}
		if err := m.c.Patch(ctx, hc, rawMerge(body)); err != nil {
			return err
		}
	}
	return m.writeRecord(ctx, hc, r, r.run, nil)
}

// trusted is the state the migrator decides hc's migration from (plan.Trusted), and why hc is refused ("" when
// it is not).
func trusted(hc *hyperv1.HostedCluster, r *runRecord) (plan.State, string) {
	a, why := plan.Trusted(hc.Annotations, r.run)
	return stateOf(hc, a), why
}

func stateOf(hc *hyperv1.HostedCluster, annotations map[string]string) plan.State {
	return plan.ReadState(annotations, hc.DeletionTimestamp != nil)
}

// collectRecords deletes the records whose HostedCluster is gone (exists holds the UIDs of every HostedCluster
// in the migrator's scope).
func (m *Migrator) collectRecords(ctx context.Context, recs map[types.UID]*runRecord, exists map[types.UID]bool) error {
	for uid, r := range recs {
		if exists[uid] || r.cm == nil {
			continue
		}
		if err := m.c.Delete(ctx, r.cm, client.Preconditions{ResourceVersion: &r.cm.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the migration record of a gone HostedCluster (%s): %w", r.cm.Annotations[RecordHostedClusterAnnotation], err)
		}
		delete(recs, uid)
	}
	return nil
}
