package hubtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/inject"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/capi/injecttest"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testwait"
)

func allComponents() []string {
	return append(slices.Clone(injecttest.ControlPlaneComponents), injecttest.Operator)
}

// Each component's Pod, created from HyperShift's recorded Deployment, is admitted by the real kube-apiserver
// (ServiceAccount admission, then the registered webhook): in a marked namespace it carries the sidecar and
// the rerouting on exactly the right containers; the same Pod in an unmarked namespace is stored as sent.
func TestInjectedOnHub(t *testing.T) {
	for _, comp := range allComponents() {
		t.Run(comp, func(t *testing.T) {
			plain := namespace(t, comp, main.name, false)
			marked := namespace(t, comp, main.name, true)
			before, err := createPodAs(t, comp, marked, plain, comp+"-before")
			if err != nil {
				t.Fatal(err)
			}
			if inject.PodInjected(before) || before.Annotations[inject.InjectedAnnotation] != "" {
				t.Fatal("a Pod of an unmarked namespace was injected")
			}
			after, err := createPod(t, comp, marked, comp+"-after")
			if err != nil {
				t.Fatal(err)
			}
			injecttest.CheckInjected(t, aligned(t, before, after), after, &main.Config, injecttest.Rerouted[comp])
		})
	}
}

// aligned is before (admitted without injection) as it would have been in after's namespace: the
// ServiceAccount plugin's volume carries a random suffix.
func aligned(t *testing.T, before, after *corev1.Pod) *corev1.Pod {
	t.Helper()
	out := before.DeepCopy()
	out.Namespace = after.Namespace
	from, to := saVolumeOf(before.Spec.Containers[0]), ""
	for _, v := range after.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") {
			to = v.Name
		}
	}
	if !strings.HasPrefix(from, "kube-api-access-") || !strings.HasPrefix(to, "kube-api-access-") {
		t.Fatalf("service-account volumes %q and %q: the ServiceAccount admission plugin did not run", from, to)
	}
	for i := range out.Spec.Volumes {
		if out.Spec.Volumes[i].Name == from {
			out.Spec.Volumes[i].Name = to
		}
	}
	for _, list := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			for j := range list[i].VolumeMounts {
				if list[i].VolumeMounts[j].Name == from {
					list[i].VolumeMounts[j].Name = to
				}
			}
		}
	}
	return out
}

func saVolumeOf(c corev1.Container) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath == inject.ServiceAccountMountPath {
			return m.Name
		}
	}
	return ""
}

// podCalls sums the injector's admissions of every component and result.
func podCalls(t *testing.T, in *injector) float64 {
	t.Helper()
	var sum float64
	for _, comp := range append(allComponents(), inject.OperatorComponent, "") {
		for _, r := range []inject.Result{inject.NotTarget, inject.AlreadyInjected, inject.Injected, inject.Refused} {
			sum += in.counter(t, `capi_private_inject_pods_total{component="`+comp+`",result="`+string(r)+`"}`)
		}
	}
	return sum
}

// Pods that are not a configured component's, or not in a marked namespace, never reach the injector (its
// counters do not move) and are stored as sent; a matched Pod created right after them is injected, so the
// webhook was in place all along.
func TestUnmatchedPodsNeverReachTheInjector(t *testing.T) {
	marked := namespace(t, "unmatched", main.name, true)
	plain := namespace(t, "unmatched-plain", main.name, false)
	calls := podCalls(t, main)

	etcd, _ := injecttest.Load("cluster-api", marked)
	etcdPod := etcd.Pod("etcd-like")
	etcdPod.Labels[inject.DefaultComponentLabel] = "etcd"
	create(t, etcd.ServiceAccount)
	create(t, etcdPod)
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: marked, Name: "bare"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/x"}}}}
	waitDefaultServiceAccount(t, marked)
	create(t, bare)
	unmarked, err := createPod(t, "cluster-api", plain, "cluster-api")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{etcdPod, bare, unmarked} {
		if inject.PodInjected(p) || p.Annotations[inject.InjectedAnnotation] != "" {
			t.Fatalf("pod %s/%s was injected", p.Namespace, p.Name)
		}
	}
	if got := podCalls(t, main); got != calls {
		t.Fatalf("the injector was called %v times for Pods it must never see", got-calls)
	}
	matched, err := createPod(t, "cluster-api", marked, "cluster-api")
	if err != nil || !inject.PodInjected(matched) {
		t.Fatalf("the matched Pod after them: err %v, injected %v", err, inject.PodInjected(matched))
	}
	if got := podCalls(t, main); got != calls+1 {
		t.Fatalf("injector calls %v, want one more than %v", got, calls)
	}
}

// With its injector down, a matched Pod is refused (failurePolicy Fail), while Pods it does not match — in the
// same namespace, in unmarked namespaces, and of other injectors' namespaces — are admitted.
func TestInjectorDownRefusesOnlyMatchedPods(t *testing.T) {
	ctx := context.Background()
	down, err := startInjector(ctx, "down", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteRegistration(t, down) })
	if err := down.Stop(); err != nil {
		t.Fatal(err)
	}
	marked := namespace(t, "down", down.name, true)
	plain := namespace(t, "down-plain", down.name, false)
	for _, comp := range []string{"cluster-api", injecttest.Operator} {
		_, err := createPod(t, comp, marked, comp)
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatalf("%s Pod with the injector down: %v, want a refusal by the webhook", comp, err)
		}
	}
	f, _ := injecttest.Load("cluster-api", marked)
	other := f.Pod("etcd-like")
	other.Labels[inject.DefaultComponentLabel] = "etcd"
	create(t, other)
	if p, err := createPod(t, "cluster-api", plain, "cluster-api"); err != nil || inject.PodInjected(p) {
		t.Fatalf("matched Pod of an unmarked namespace: err %v", err)
	}
	elsewhere := namespace(t, "up", main.name, true)
	if p, err := createPod(t, "cluster-api", elsewhere, "cluster-api"); err != nil || !inject.PodInjected(p) {
		t.Fatalf("another injector's Pod: err %v", err)
	}
}

func deleteRegistration(t *testing.T, in *injector) {
	t.Helper()
	wh := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "capi-private-inject-" + in.name}}
	if err := env.Client.Delete(context.Background(), wh); client.IgnoreNotFound(err) != nil {
		t.Error(err)
	}
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := env.Client.Create(context.Background(), o); err != nil {
		t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
	}
}

func waitDefaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	testwait.For(t, 30*time.Second, "the service-account controller's default ServiceAccount in "+ns, func() bool {
		return env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{}) == nil
	})
}

// loopbackSecret waits until ns's LoopbackSecret satisfies ok and returns it.
func loopbackSecret(t *testing.T, ns, what string, ok func(*corev1.Secret) bool) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	testwait.For(t, 30*time.Second, what, func() bool {
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: inject.LoopbackSecret}, &s)
		return err == nil && ok(&s)
	})
	return &s
}

// servesLoopback reports whether the Secret's key pair is a serving certificate for 127.0.0.1 that its ca.crt
// verifies now, with the key matching.
func servesLoopback(s *corev1.Secret) bool { return servesLoopbackAt(s, time.Now()) }

func servesLoopbackAt(s *corev1.Secret, at time.Time) bool {
	pair, err := tls.X509KeyPair(s.Data[inject.CertKey], s.Data[inject.KeyKey])
	if err != nil {
		return false
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data[inject.CABundleKey]) {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", CurrentTime: at})
	return err == nil
}

// The certificate controller, running as exactly inject.Rules() (and inject.KeyRules() in its own namespace),
// gives each marked namespace its Secret (and no unmarked one) with no CA key in it — the certificates and the key
// are kept in the injector's namespace, and the namespace's Secret projects them — renews the serving certificate
// from the same CA when its clock says so, recreates a deleted Secret and repairs a broken one from the kept
// certificates (the CA stays), and adopts a Secret written with its key before the keys moved.
func TestLoopbackSecret(t *testing.T) {
	ctx := context.Background()
	plain := namespace(t, "certs-plain", main.name, false)
	ns := namespace(t, "certs", main.name, true)
	first := loopbackSecret(t, ns, "the loopback Secret", servesLoopback)
	if first.Labels[inject.ManagedByLabel] != "capi-private" {
		t.Fatalf("labels %v", first.Labels)
	}
	checkKeyKeptOut(t, ns, first)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: plain, Name: inject.LoopbackSecret}, &corev1.Secret{}); err == nil {
		t.Fatal("an unmarked namespace got a loopback Secret")
	}

	clockOffset.Store(int64(21 * 24 * time.Hour))
	t.Cleanup(func() { clockOffset.Store(0) })
	touch(t, ns)
	renewed := loopbackSecret(t, ns, "a renewed serving certificate", func(s *corev1.Secret) bool {
		return string(s.Data[inject.CertKey]) != string(first.Data[inject.CertKey])
	})
	if string(renewed.Data[inject.CABundleKey]) != string(first.Data[inject.CABundleKey]) || !servesLoopbackAt(renewed, time.Now().Add(21*24*time.Hour)) {
		t.Fatal("renewing the serving certificate changed the CA or broke the pair")
	}
	clockOffset.Store(0)

	if err := env.Client.Delete(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	loopbackSecret(t, ns, "the Secret recreated after a delete", func(s *corev1.Secret) bool { return s.UID != renewed.UID && servesLoopback(s) })
	broken := loopbackSecret(t, ns, "", servesLoopback)
	broken.Data[inject.KeyKey] = []byte("not a key")
	if err := env.Client.Update(ctx, broken); err != nil {
		t.Fatal(err)
	}
	repaired := loopbackSecret(t, ns, "the broken Secret repaired", servesLoopback)
	if string(repaired.Data[inject.CABundleKey]) != string(first.Data[inject.CABundleKey]) {
		t.Error("recreating or repairing the namespace's Secret changed the CA: it is projected from the kept one")
	}
	checkKeyKeptOut(t, ns, repaired)

	// A Secret as written before the keys moved (the CA key in the namespace, nothing kept), in a namespace marked
	// only afterwards: it is adopted, the CA stays, and the key leaves the namespace.
	old := namespace(t, "certs-old", main.name, false)
	data, err := inject.ExecuteCerts(nil, inject.CertPlan{Action: inject.CertsCreate}, old, time.Now(), inject.DefaultCertPolicy)
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: old, Name: inject.LoopbackSecret}, Data: data})
	patch := []byte(`{"metadata":{"labels":{"` + inject.MarkerLabel + `":"` + inject.MarkerValue + `"}}}`)
	if err := env.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: old}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	moved := loopbackSecret(t, old, "the CA key taken out of the namespace", func(s *corev1.Secret) bool { _, in := s.Data[inject.CAKeyKey]; return !in })
	if string(moved.Data[inject.CABundleKey]) != string(data[inject.CABundleKey]) || !servesLoopback(moved) {
		t.Error("adopting the namespace's Secret changed the CA or broke the pair")
	}
	checkKeyKeptOut(t, old, moved)

	// A namespace that goes takes its kept certificates with it.
	if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: old}}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 30*time.Second, "the kept certificates of the deleted namespace "+old+" deleted", func() bool {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: inject.DefaultKeyNamespace, Name: inject.CAKeySecret(old)}, &corev1.Secret{})
		return apierrors.IsNotFound(err)
	})
}

// Kept certificates whose namespace went while no injector ran (written here as an injector that stopped before its
// namespace was deleted leaves them) are forgotten when a certificate controller starts: it looks at the namespace of
// every kept Secret. Those of a namespace that exists stay. The injector that started is the one that forgets: the
// running one never heard of the namespace.
func TestKeptCertificatesOfAGoneNamespaceForgotten(t *testing.T) {
	ctx := context.Background()
	live := namespace(t, "kept-live", main.name, true)
	loopbackSecret(t, live, "the loopback Secret", servesLoopback)
	gone := fmt.Sprintf("kept-gone-%d", nsCounter.Add(1))
	data, err := inject.ExecuteCerts(nil, inject.CertPlan{Action: inject.CertsCreate}, gone, time.Now(), inject.DefaultCertPolicy)
	if err != nil {
		t.Fatal(err)
	}
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: inject.DefaultKeyNamespace, Name: inject.CAKeySecret(gone),
		Labels: map[string]string{inject.ManagedByLabel: "capi-private"}}, Type: corev1.SecretTypeOpaque, Data: data})
	in, err := startInjector(ctx, "kept", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteRegistration(t, in); _ = in.Stop() })
	testwait.For(t, time.Minute, "the kept certificates of "+gone+" deleted", func() bool {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: inject.DefaultKeyNamespace, Name: inject.CAKeySecret(gone)}, &corev1.Secret{})
		return apierrors.IsNotFound(err)
	})
	if n := in.counter(t, `capi_private_inject_certificate_actions_total{action="forget"}`); n < 1 {
		t.Errorf("the starting injector counted %v forgets, want at least 1", n)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: inject.DefaultKeyNamespace, Name: inject.CAKeySecret(live)}, &corev1.Secret{}); err != nil {
		t.Fatalf("the kept certificates of the existing namespace %s: %v", live, err)
	}
}

// checkKeyKeptOut: s, ns's LoopbackSecret, holds no CA key; the injector's namespace holds the key of s's current CA.
func checkKeyKeptOut(t *testing.T, ns string, s *corev1.Secret) {
	t.Helper()
	if _, in := s.Data[inject.CAKeyKey]; in {
		t.Fatalf("%s's loopback Secret holds the CA's private key", ns)
	}
	key := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: inject.DefaultKeyNamespace, Name: inject.CAKeySecret(ns)}, key); err != nil {
		t.Fatalf("the CA key of %s: %v", ns, err)
	}
	if _, err := tls.X509KeyPair(firstPEM(s.Data[inject.CABundleKey]), key.Data[inject.CAKeyKey]); err != nil {
		t.Fatalf("the kept key is not the current CA's: %v", err)
	}
}

// firstPEM is the first PEM block of b (the current CA of a bundle).
func firstPEM(b []byte) []byte {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil
	}
	return pem.EncodeToMemory(block)
}

// touch changes an annotation of namespace ns, which makes the certificate controller look at it again.
func touch(t *testing.T, ns string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"capi-private-test/touched":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`)
	if err := env.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}
