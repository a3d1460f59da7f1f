package capipods

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// machineSetObject is a MachineSet of cluster c1 in g, selecting set=<name>.
func machineSetObject(g Groups, ns, name string) *unstructured.Unstructured {
	ms := NewCAPIObject(g, "MachineSet")
	ms.SetNamespace(ns)
	ms.SetName(name)
	selector := map[string]any{"set": name}
	ms.Object["spec"] = map[string]any{
		"clusterName": "c1",
		"replicas":    int64(2),
		"selector":    map[string]any{"matchLabels": selector},
		"template": map[string]any{
			"metadata": map[string]any{"labels": selector},
			"spec":     machineSpec(g, name),
		},
	}
	return ms
}

func machineSpec(g Groups, name string) map[string]any {
	return map[string]any{
		"clusterName":       "c1",
		"bootstrap":         map[string]any{"dataSecretName": UserDataSecret(name)},
		"infrastructureRef": map[string]any{"apiGroup": g.Group(InfrastructureGroup), "kind": KubevirtMachineGVK.Kind, "name": name},
	}
}

// ownedMachine is a Machine controlled by the MachineSet owner, whose ownerReference names ownerAPIVersion (the
// apiVersion a correct write stores, or a wrong one).
func ownedMachine(g Groups, owner *unstructured.Unstructured, ownerAPIVersion, name string) *unstructured.Unstructured {
	m := NewCAPIObject(g, "Machine")
	m.SetNamespace(owner.GetNamespace())
	m.SetName(name)
	m.SetLabels(map[string]string{"set": owner.GetName()})
	m.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: ownerAPIVersion, Kind: "MachineSet", Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
	m.Object["spec"] = machineSpec(g, name)
	return m
}

func exists(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// TestGarbageCollectionPrivateGroups works on stored private objects. kube-controller-manager's real garbage collector
// never goes through the proxy, which is why refs are stored private: it follows ownerReferences in the private groups,
// so deleting a MachineSet collects its Machines, and a Secret owned by a Machine lives exactly as long as the Machine.
// The negative control is the same ownerReference written as cluster.x-k8s.io/v1beta2 (what an untranslated client
// would store): the GC looks the MachineSet up in the platform's standard CRD, finds nothing, and collects the Machine
// although its MachineSet lives. No controller runs in the namespace: every deletion here is the garbage collector's.
func TestGarbageCollectionPrivateGroups(t *testing.T) {
	gcScenario(t, harness.Client, PrivateGroups, true)
}

// TestGarbageCollectionThroughProxy: the same through the proxy. A client writes the MachineSet, its Machines and the
// Machine's Secret in the standard groups (ownerReferences cluster.x-k8s.io/v1beta2) and deletes the MachineSet,
// all through the proxy; the refs are stored private, so the real garbage collector collects the Machines and then
// the Secret.
func TestGarbageCollectionThroughProxy(t *testing.T) {
	gcScenario(t, viaProxy, StandardGroups, false)
}

// gcScenario writes with c in g (PrivateGroups directly, or StandardGroups through the proxy), checks what is
// stored directly, and lets the garbage collector work. negative adds the untranslated-ref control (direct only).
func gcScenario(t *testing.T, c client.Client, g Groups, negative bool) {
	ctx := t.Context()
	ns := env.NewNamespace(t, "gc")
	ms := machineSetObject(g, ns, "ms1")
	if err := c.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	written := g.APIVersion(ClusterGroup, "v1beta2")
	private := PrivateGroups.APIVersion(ClusterGroup, "v1beta2")
	m1, m2 := ownedMachine(g, ms, written, "ms1-a"), ownedMachine(g, ms, written, "ms1-b")
	for _, m := range []*unstructured.Unstructured{m1, m2} {
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: UserDataSecret(m1.GetName()),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: written, Kind: "Machine", Name: m1.GetName(), UID: m1.GetUID(), Controller: ptr.To(true)}},
	}}
	if err := c.Create(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	// Stored: private groups only, refs included (the garbage collector reads them directly).
	stored := NewCAPIObject(PrivateGroups, "Machine")
	if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(m1), stored); err != nil {
		t.Fatalf("Machine not stored in the private group: %v", err)
	}
	storedSecret := &corev1.Secret{}
	if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(bootstrap), storedSecret); err != nil {
		t.Fatal(err)
	}
	if got := stored.GetOwnerReferences()[0].APIVersion; got != private {
		t.Errorf("stored Machine's owner apiVersion %s, want %s", got, private)
	}
	if got := storedSecret.OwnerReferences[0].APIVersion; got != private {
		t.Errorf("stored Secret's owner apiVersion %s, want %s", got, private)
	}
	if items, err := ListCAPI(ctx, harness.Client, StandardGroups, "Machine", ns); err != nil || len(items) != 0 {
		t.Errorf("standard Machines stored in %s: %d (err %v)", ns, len(items), err)
	}

	if negative {
		// Created last, so the collector has processed the others before it deletes this one.
		wrong := ownedMachine(PrivateGroups, ms, StandardGroups.APIVersion(ClusterGroup, "v1beta2"), "ms1-untranslated-ref")
		if err := c.Create(ctx, wrong); err != nil {
			t.Fatal(err)
		}
		took := eventually(t, 2*time.Minute, "negative control: the Machine with a standard-group ref collected", func(ctx context.Context) (bool, string, error) {
			ok, err := exists(ctx, c, wrong)
			return !ok, "still there", err
		})
		t.Logf("negative control: a Machine whose ref says cluster.x-k8s.io/v1beta2 was collected %s after its creation while its MachineSet lives", took.Round(time.Millisecond))
		for _, o := range []client.Object{ms, m1, m2, bootstrap} {
			if ok, err := exists(ctx, c, o); !ok || err != nil {
				t.Fatalf("%T %s collected although its owner lives (err %v)", o, o.GetName(), err)
			}
		}
	}

	deleted := time.Now()
	if err := c.Delete(ctx, ms); err != nil {
		t.Fatal(err)
	}
	// Sample the Secret before the Machine: a missing Secret followed by an existing Machine means the Secret went
	// first.
	var machineGone time.Time
	eventually(t, time.Minute, "the MachineSet's Machines and the Machine's Secret collected", func(ctx context.Context) (bool, string, error) {
		secretThere, err := exists(ctx, c, bootstrap)
		if err != nil {
			return false, "", err
		}
		m1There, err := exists(ctx, c, m1)
		if err != nil {
			return false, "", err
		}
		m2There, err := exists(ctx, c, m2)
		if err != nil {
			return false, "", err
		}
		if !secretThere && m1There {
			t.Fatalf("the Secret owned by Machine %s was collected before the Machine", m1.GetName())
		}
		if !m1There && machineGone.IsZero() {
			machineGone = time.Now()
		}
		return !secretThere && !m1There && !m2There, fmt.Sprintf("secret %v, machines %v %v", secretThere, m1There, m2There), nil
	})
	t.Logf("MachineSet deleted: Machines collected %s and the Machine's Secret %s after the DELETE",
		machineGone.Sub(deleted).Round(time.Millisecond), time.Since(deleted).Round(time.Millisecond))
	if ok, _ := exists(ctx, c, ms); ok {
		t.Errorf("MachineSet %s still exists", types.NamespacedName{Namespace: ns, Name: ms.GetName()})
	}
}
