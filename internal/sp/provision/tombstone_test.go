package provision

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// forgedTombstone is a ConfigMap under id's deletion record name, as the SP writes one but with mutate applied.
func forgedTombstone(id string, expires time.Time, mutate func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: tombstoneName(testProvider, id),
		Labels: map[string]string{meta.LabelProvider: testProvider, meta.LabelManagedBy: meta.ManagedByValue, meta.LabelTombstone: "true"},
		Annotations: map[string]string{meta.AnnotationTombstoneOf: id, meta.AnnotationDeleteKeys: `["del-1"]`,
			meta.AnnotationExpiresAt: expires.UTC().Format(time.RFC3339)}}}
	if mutate != nil {
		mutate(cm)
	}
	return cm
}

func TestUntrustedTombstone(t *testing.T) {
	now, retention := testEpoch, 24*time.Hour
	for _, c := range []struct {
		name    string
		mutate  func(*corev1.ConfigMap)
		expires time.Time
		trusted bool
	}{
		{name: "as the SP writes it", expires: now.Add(retention), trusted: true},
		{name: "expired (trusted: the caller ignores it as expired)", expires: now.Add(-time.Hour), trusted: true},
		{name: "within the clock skew", expires: now.Add(retention + 30*time.Second), trusted: true},
		{name: "no labels", expires: now.Add(time.Hour), mutate: func(cm *corev1.ConfigMap) { cm.Labels = nil }},
		{name: "another provider's", expires: now.Add(time.Hour), mutate: func(cm *corev1.ConfigMap) { cm.Labels[meta.LabelProvider] = "other" }},
		{name: "not managed by the SP", expires: now.Add(time.Hour), mutate: func(cm *corev1.ConfigMap) { delete(cm.Labels, meta.LabelManagedBy) }},
		{name: "names another instance", expires: now.Add(time.Hour), mutate: func(cm *corev1.ConfigMap) { cm.Annotations[meta.AnnotationTombstoneOf] = id2 }},
		{name: "no expiry", expires: now, mutate: func(cm *corev1.ConfigMap) { delete(cm.Annotations, meta.AnnotationExpiresAt) }},
		{name: "expires beyond the retention", expires: now.Add(100 * 365 * 24 * time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			why := untrustedTombstone(forgedTombstone(id1, c.expires, c.mutate), testProvider, id1, now, retention)
			if (why == "") != c.trusted {
				t.Fatalf("untrusted %q, want trusted %v", why, c.trusted)
			}
		})
	}
}

// A ConfigMap under a deletion record's name that the SP did not write answers nothing: a keyed DELETE of an id the
// SP never had stays a 404, a keyed create is not refused, and the sweep leaves it alone; one as the SP writes it
// does all three.
func TestForgedTombstoneIsIgnored(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	now := f.svc.Writer.now()
	forever := forgedTombstone(id1, now.Add(100*365*24*time.Hour), nil)
	unlabelled := forgedTombstone(id2, now.Add(time.Hour), func(cm *corev1.ConfigMap) { delete(cm.Labels, meta.LabelManagedBy) })
	keyed := clusters.KeyID("key-1")
	blocker := forgedTombstone(keyed, now.Add(100*365*24*time.Hour), nil)
	f.seed(forever, unlabelled, blocker)

	for _, id := range []string{id1, id2} {
		if err := f.svc.Delete(ctx, id, "del-1"); clusters.KindOf(err) != clusters.KindNotFound {
			t.Errorf("keyed DELETE of %s with a forged record: %v, want a 404", id, err)
		}
	}
	if _, created, err := f.svc.Create(ctx, "", "key-1", []byte(kubevirtBody("alpha", 2))); err != nil || !created {
		t.Fatalf("keyed create with a forged record: created %v, %v (want created, not a 409)", created, err)
	}
	f.svc.Converger.now = func() time.Time { return now.Add(200 * 365 * 24 * time.Hour) }
	f.svc.SweepOrphans(ctx, func(string) bool { return false }, time.Hour)
	if !f.exists(&corev1.ConfigMap{}, testNS, unlabelled.Name) {
		t.Error("the sweep removed a ConfigMap the SP did not write")
	}

	// The SP's own record of id2 (the DELETE below writes over the forged one) answers its replay.
	trusted := forgedTombstone(id2, now.Add(time.Hour), nil)
	if err := f.get(&corev1.ConfigMap{}, testNS, trusted.Name); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Delete(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	f.seed(trusted)
	if err := f.svc.Delete(ctx, id2, "del-1"); err != nil {
		t.Errorf("keyed DELETE replay with the SP's record: %v, want 204", err)
	}
}
