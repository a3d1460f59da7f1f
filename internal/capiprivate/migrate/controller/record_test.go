package controller_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/controller"
	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

// The run's state is written to the migrator's record first and mirrored onto the HostedCluster after: when the
// mirroring write is lost (here, the HostedCluster's patch into Copying fails once, after the record took the
// phase), the next look finishes it from the record, and the run goes on to the end. The record is the
// migrator's own ConfigMap, named after the HostedCluster's UID, with no change left pending.
func TestInterruptedStateWriteIsFinished(t *testing.T) {
	t.Parallel()
	r := newRig(t, "mirror", 1, 1, map[string]string{plan.ScopeAnnotation: plan.ScopeLegacy})
	base, err := client.NewWithWatch(env.TokenConfig(env.AdminToken), client.Options{Scheme: controller.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var lost atomic.Bool
	c := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*hyperv1.HostedCluster); ok {
				if data, _ := p.Data(obj); bytes.Contains(data, []byte(`"`+string(plan.PhaseCopying)+`"`)) && lost.CompareAndSwap(false, true) {
					return errors.New("injected: the HostedCluster's write into Copying is lost")
				}
			}
			return c.Patch(ctx, obj, p, opts...)
		},
	})
	r.start(func(o *controller.RunOptions) { o.Client = c })
	r.waitAnnotations("migrated after a lost write of its state", runWithin, migrated)
	if !lost.Load() {
		t.Fatal("the migrator never wrote Copying onto the HostedCluster")
	}
	hc := &hyperv1.HostedCluster{}
	if err := harness.Client.Get(t.Context(), r.key, hc); err != nil {
		t.Fatal(err)
	}
	// The record's pending write is cleared after the HostedCluster's annotations show the run's end (the record
	// is written ahead of the HostedCluster and settled after it): wait for the migrator to settle it.
	cm := &corev1.ConfigMap{}
	var run plan.Record
	var readErr error
	settled := testwait.PollEvery(200*time.Millisecond, 30*time.Second, func() bool {
		cm = &corev1.ConfigMap{}
		if readErr = harness.Client.Get(t.Context(), client.ObjectKey{Namespace: r.ns, Name: controller.RecordName(hc.UID)}, cm); readErr != nil {
			return false
		}
		run = plan.Record{}
		readErr = json.Unmarshal([]byte(cm.Data["run"]), &run)
		return readErr == nil && !run.InRun() && cm.Data["pending"] == ""
	})
	if !settled || cm.Labels[controller.RecordLabel] != "true" || cm.Annotations[controller.RecordHostedClusterAnnotation] != r.ns+"/mirror" {
		t.Errorf("record after the run (settled within 30s: %v): %v %v %v (%v)", settled, cm.Labels, cm.Annotations, cm.Data, readErr)
	}
}
