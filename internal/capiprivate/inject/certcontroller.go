package inject

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// ManagedByLabel, with the value ManagedBy, marks the Secrets the injector writes (and the start-up look lists).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "capi-private"
)

// DefaultResync bounds the time between two checks of a namespace's Secret.
const DefaultResync = 10 * time.Minute

// CertController keeps LoopbackSecret current in every namespace whose Pods are injected: those labelled
// MarkerLabel=MarkerValue and the hosted control plane namespaces whose route is Proxied. It creates it, renews the
// serving certificate, rotates the CA and repairs a Secret someone broke (PlanCerts decides). A Secret is never
// deleted: Pods injected earlier may still mount it after the namespace's route changed.
//
// The CA's private key never sits in the namespace (whoever may read Secrets there could sign certificates its
// clients trust). A namespace's certificates live in CAKeySecret(namespace) in KeyNamespace, the injector's own:
// PlanCerts decides from that Secret alone, read past the cache, and a change is written there first, alone and
// optimistically; the namespace's LoopbackSecret is its Projection, written on a later look. A LoopbackSecret
// written before the keys moved is adopted (KeptData) and loses its key.
type CertController struct {
	Client client.Client
	// Keys reads the kept Secrets past the cache (which holds only LoopbackSecrets); KeyNamespace holds them.
	Keys         client.Reader
	KeyNamespace string
	Routes       Router
	Policy       CertPolicy
	// Now is the clock (default time.Now); Resync the longest wait between checks (default DefaultResync).
	Now     func() time.Time
	Resync  time.Duration
	Actions *prometheus.CounterVec
}

// NewCertActions registers capi_private_inject_certificate_actions_total{action} with reg.
func NewCertActions(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_private_inject_certificate_actions_total",
		Help: "Changes the injector made to namespaces' loopback CA Secrets, by action.",
	}, []string{"action"})
	return c, reg.Register(c)
}

// Reconcile implements reconcile.Reconciler for a Namespace.
func (r *CertController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: req.Name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, r.forget(ctx, req.Name)
		}
		return reconcile.Result{}, err
	}
	if ns.DeletionTimestamp != nil {
		return reconcile.Result{}, r.forget(ctx, ns.Name)
	}
	if ns.Labels[MarkerLabel] != MarkerValue {
		route, err := r.Routes.Route(ctx, ns.Name)
		if err != nil {
			return reconcile.Result{}, err
		}
		switch route.Route {
		case Direct:
			return reconcile.Result{}, nil
		case Unknown: // a HostedCluster's change (its classification) enqueues the namespace again
			return reconcile.Result{RequeueAfter: time.Minute}, nil
		}
	}
	now := r.now()
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: LoopbackSecret}, secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	exists := err == nil
	kept := &corev1.Secret{}
	err = r.Keys.Get(ctx, types.NamespacedName{Namespace: r.KeyNamespace, Name: CAKeySecret(ns.Name)}, kept)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	keptExists := err == nil
	data, adopted := KeptData(kept.Data, keptExists, secret.Data)
	plan := PlanCerts(data, now, r.Policy)
	if plan.Action != CertsCurrent || !keptExists {
		// The kept Secret changes first and alone; the next look projects it into the namespace.
		out, err := ExecuteCerts(data, plan, ns.Name, now, r.Policy) // data itself when current (an adoption)
		if err != nil {
			return reconcile.Result{}, err
		}
		if err := r.writeKept(ctx, ns.Name, kept, keptExists, out); err != nil {
			return reconcile.Result{}, err
		}
		action := string(plan.Action)
		if adopted && plan.Action == CertsCurrent {
			action, plan.Reason = "adopt", "the namespace's Secret held its CA key: the CA is kept, the key leaves the namespace"
		}
		r.count(action)
		ctrl.LoggerFrom(ctx).Info("loopback certificates written", "namespace", ns.Name, "action", action, "reason", plan.Reason)
		return reconcile.Result{Requeue: true}, nil
	}
	if want := Projection(data); !exists || !maps.EqualFunc(secret.Data, want, bytes.Equal) {
		if err := r.write(ctx, ns.Name, secret, exists, want); err != nil {
			return reconcile.Result{}, err
		}
		r.count("project")
		ctrl.LoggerFrom(ctx).Info("loopback Secret written from the kept certificates", "namespace", ns.Name)
	}
	return reconcile.Result{RequeueAfter: min(max(plan.Next.Sub(now), time.Second), r.resync())}, nil
}

// forget deletes the kept certificates of a namespace that is gone or going: nothing will trust its CA again.
func (r *CertController) forget(ctx context.Context, namespace string) error {
	kept := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.KeyNamespace, Name: CAKeySecret(namespace)}}
	if err := r.Client.Delete(ctx, kept); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting %s/%s: %w", kept.Namespace, kept.Name, err)
	}
	r.count("forget")
	ctrl.LoggerFrom(ctx).Info("kept loopback certificates deleted with their namespace", "namespace", namespace)
	return nil
}

func (r *CertController) count(action string) {
	if r.Actions != nil {
		r.Actions.WithLabelValues(action).Inc()
	}
}

// KeptData is what a namespace's certificates are planned from: its kept Secret's data when there is one (the
// one truth: the namespace's Secret only projects it). With none kept yet, a namespace Secret that still holds its CA
// key — written before the keys left the namespaces — is adopted (adopted true), so the CA its clients trust stays;
// otherwise there is nothing (PlanCerts creates a CA).
func KeptData(kept map[string][]byte, keptExists bool, namespaced map[string][]byte) (data map[string][]byte, adopted bool) {
	if keptExists {
		return kept, false
	}
	if _, ok := namespaced[CAKeyKey]; ok {
		return maps.Clone(namespaced), true
	}
	return nil, false
}

// Projection is the namespace's LoopbackSecret data for kept: everything but the CA's private key.
func Projection(kept map[string][]byte) map[string][]byte {
	out := maps.Clone(kept)
	delete(out, CAKeyKey)
	return out
}

// CAKeySecret is the name of the Secret, in the injector's own namespace, that keeps namespace's loopback
// certificates with the CA's private key: the one truth the namespace's LoopbackSecret projects.
func CAKeySecret(namespace string) string { return LoopbackSecret + "-ca." + namespace }

// KeptFor is the namespace whose certificates the Secret named name keeps (false: not a CAKeySecret name).
func KeptFor(name string) (string, bool) {
	ns, ok := strings.CutPrefix(name, LoopbackSecret+"-ca.")
	return ns, ok && ns != ""
}

// keptNamespaces is a source of the controller: when the controller starts (on the replica that wins the election),
// every namespace with kept certificates gets a look. One that went while no injector ran is then forgotten as any
// gone namespace is (Reconcile decides), instead of its CA key staying in the injector's namespace forever. Only the
// kept Secrets' names are read (a metadata list, labelled as the injector writes them); a failed list is retried.
func (r *CertController) keptNamespaces(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
			if err := r.Keys.List(ctx, list, client.InNamespace(r.KeyNamespace), client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "listing the kept loopback certificates (retrying)", "namespace", r.KeyNamespace)
				return false, nil
			}
			for _, s := range list.Items {
				if ns, ok := KeptFor(s.Name); ok {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: ns}})
				}
			}
			return true, nil
		})
	}()
	return nil
}

// writeKept writes a namespace's kept Secret (created on the first write; an update is optimistic: it carries the
// resourceVersion read, so a writer that read an older one loses and looks again).
func (r *CertController) writeKept(ctx context.Context, namespace string, secret *corev1.Secret, exists bool, data map[string][]byte) error {
	if !exists {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.KeyNamespace, Name: CAKeySecret(namespace), Labels: map[string]string{ManagedByLabel: ManagedBy}},
			Type:       corev1.SecretTypeOpaque, Data: data,
		}
		if err := r.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("creating %s/%s: %w", r.KeyNamespace, s.Name, err)
		}
		return nil
	}
	secret.Data = data
	if err := r.Client.Update(ctx, secret); err != nil {
		return fmt.Errorf("updating %s/%s: %w", r.KeyNamespace, secret.Name, err)
	}
	return nil
}

func (r *CertController) write(ctx context.Context, namespace string, secret *corev1.Secret, exists bool, data map[string][]byte) error {
	if !exists {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: LoopbackSecret, Labels: map[string]string{ManagedByLabel: ManagedBy}},
			Type:       corev1.SecretTypeOpaque, Data: data,
		}
		if err := r.Client.Create(ctx, s); err != nil {
			return fmt.Errorf("creating %s/%s: %w", namespace, LoopbackSecret, err)
		}
		return nil
	}
	secret.Data = data
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[ManagedByLabel] = ManagedBy
	if err := r.Client.Update(ctx, secret); err != nil { // resourceVersion precondition: a concurrent writer wins
		return fmt.Errorf("updating %s/%s: %w", namespace, LoopbackSecret, err)
	}
	return nil
}

func (r *CertController) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *CertController) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return DefaultResync
}

// SetupWithManager watches marked and hosted control plane Namespaces, their LoopbackSecrets and the HostedClusters
// that decide their routes (the manager's cache must hold them: see CacheOptions).
func (r *CertController) SetupWithManager(mgr ctrl.Manager) error {
	candidate := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetLabels()[MarkerLabel] == MarkerValue || o.GetLabels()[HostedControlPlaneLabel] == "true"
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("capi-private-loopback-certs").
		For(&corev1.Namespace{}, builder.WithPredicates(candidate)).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if o.GetName() != LoopbackSecret {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
		})).
		WatchesMetadata(HostedClusterMeta(), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: plan.ControlPlaneNamespace(o.GetNamespace(), o.GetName())}}}
		})).
		WatchesRawSource(source.Func(r.keptNamespaces)).
		Complete(r)
}
