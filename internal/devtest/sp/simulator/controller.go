package simulator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
)

// Simulator is the controller that applies Step's plans to the hub.
type Simulator struct {
	Client   client.Client
	Timeline Timeline
	Now      func() time.Time // defaults to time.Now
	Log      *slog.Logger
	// OlderOperatorNamespaces, Observe: see Options.
	OlderOperatorNamespaces []string
	Observe                 func(hc types.NamespacedName, p Plan)
}

// SetupWithManager registers the simulator with a controller-runtime manager: it reconciles HostedClusters and is
// woken by their NodePools.
func (s *Simulator) SetupWithManager(mgr ctrl.Manager) error {
	if s.Client == nil {
		s.Client = mgr.GetClient()
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("hypershift-simulator").
		For(&hyperv1.HostedCluster{}).
		Watches(&hyperv1.NodePool{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			np := o.(*hyperv1.NodePool)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: np.Namespace, Name: np.Spec.ClusterName}}}
		})).
		// The Agent provider watches Agents: one reserved for a cluster later is bound when it appears.
		Watches(agentWatch(), handler.EnqueueRequestsFromMapFunc(s.clustersOfAgent)).
		// Any failed reconcile is retried within a second: the default limiter backs off per key up to 1,000 s,
		// and a loaded test machine's timeouts and throttling (not only conflicts, handled below) could then leave
		// a cluster's simulated operator idle for longer than any test waits.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4,
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, time.Second)}).
		Complete(s)
}

func agentWatch() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("agent-install.openshift.io/v1beta1")
	u.SetKind("Agent")
	return u
}

// clustersOfAgent maps an Agent reserved for an instance (its dcm-instance-id label) to that instance's
// HostedClusters.
func (s *Simulator) clustersOfAgent(ctx context.Context, o client.Object) []reconcile.Request {
	id := o.GetLabels()[meta.LabelInstanceID]
	if id == "" {
		return nil
	}
	var list hyperv1.HostedClusterList
	if err := s.Client.List(ctx, &list, client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, hc := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: hc.Namespace, Name: hc.Name}})
	}
	return out
}

// Reconcile observes one HostedCluster, asks Step what to do and does it.
func (s *Simulator) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var hc hyperv1.HostedCluster
	if err := s.Client.Get(ctx, req.NamespacedName, &hc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, s.releaseOrphanedNodePools(ctx, req.NamespacedName)
		}
		return reconcile.Result{}, err
	}
	var npList hyperv1.NodePoolList
	if err := s.Client.List(ctx, &npList, client.InNamespace(hc.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	var nps []*hyperv1.NodePool
	for i := range npList.Items {
		if npList.Items[i].Spec.ClusterName == hc.Name {
			nps = append(nps, &npList.Items[i])
		}
	}
	agents, err := s.agents(ctx, &hc, nps)
	if err != nil {
		return reconcile.Result{}, err
	}
	plan := Step(Observed{HC: &hc, NodePools: nps, Agents: agents, Now: s.Now()}, s.Timeline)
	if err := s.apply(ctx, &hc, nps, plan); err != nil {
		if errors.Is(err, errNamespaceTerminating) {
			return reconcile.Result{RequeueAfter: 250 * time.Millisecond}, nil // the namespace controller empties it
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Retry soon, at a fixed pace: Requeue would back off exponentially per key (to minutes after a run
			// of conflicts with the SP's own writes during day-2 operations), stalling the simulated operator.
			return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
		}
		return reconcile.Result{}, err
	}
	if s.Observe != nil {
		s.Observe(req.NamespacedName, plan)
	}
	return reconcile.Result{RequeueAfter: plan.RequeueAfter}, nil
}

// releaseOrphanedNodePools plays HyperShift's NodePool controller for NodePools whose HostedCluster is gone: one
// being deleted (by the garbage collector: the HostedCluster owned it) loses its finalizer, as the real controller
// removes it once the NodePool's machines are gone — a NodePool the HostedCluster's deletion did not see (created
// moments before it) is not held forever.
func (s *Simulator) releaseOrphanedNodePools(ctx context.Context, hc types.NamespacedName) error {
	var list hyperv1.NodePoolList
	if err := s.Client.List(ctx, &list, client.InNamespace(hc.Namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		np := &list.Items[i]
		if np.Spec.ClusterName != hc.Name || np.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(np, meta.FinalizerHyperShift) {
			continue
		}
		before := np.DeepCopy()
		controllerutil.RemoveFinalizer(np, meta.FinalizerHyperShift)
		if err := s.Client.Patch(ctx, np, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// agents lists the Agents the cluster's NodePools select (Agent platform only).
func (s *Simulator) agents(ctx context.Context, hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool) ([]inventory.Agent, error) {
	if hc.Spec.Platform.Type != hyperv1.AgentPlatform || hc.Spec.Platform.Agent == nil {
		return nil, nil
	}
	var list unstructured.UnstructuredList
	list.SetAPIVersion("agent-install.openshift.io/v1beta1")
	list.SetKind("AgentList")
	if err := s.Client.List(ctx, &list, client.InNamespace(hc.Spec.Platform.Agent.AgentNamespace)); err != nil {
		return nil, err
	}
	var out []inventory.Agent
	for i := range list.Items {
		a := inventory.FromUnstructured(&list.Items[i])
		if a.ClusterDeploymentName == hc.Name {
			out = append(out, a) // bound to us, whatever the selector says now
			continue
		}
		for _, np := range nps {
			if np.Spec.Platform.Agent == nil || np.Spec.Platform.Agent.AgentLabelSelector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(np.Spec.Platform.Agent.AgentLabelSelector)
			if err == nil && sel.Matches(labels.Set(a.Labels)) {
				out = append(out, a)
				break
			}
		}
	}
	return out, nil
}

func (s *Simulator) apply(ctx context.Context, hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool, p Plan) error {
	if p.Delete != nil {
		return s.applyDelete(ctx, hc, nps, p.Delete)
	}
	if p.Start || !p.Restart.IsZero() || p.SetBaseDomain != "" {
		before := hc.DeepCopy()
		if p.Start {
			controllerutil.AddFinalizer(hc, meta.FinalizerHyperShift)
			if hc.Annotations == nil {
				hc.Annotations = map[string]string{}
			}
			if _, ok := hc.Annotations[AnnotationStarted]; !ok {
				hc.Annotations[AnnotationStarted] = s.Now().UTC().Format(time.RFC3339Nano)
			}
		}
		if !p.Restart.IsZero() {
			hc.Annotations[AnnotationStarted] = p.Restart.UTC().Format(time.RFC3339Nano)
			s.Log.Info("simulator: a late pass; the clock is set back to the phase it writes", "namespace", hc.Namespace, "name", hc.Name)
		}
		if p.SetBaseDomain != "" {
			hc.Spec.DNS.BaseDomain = p.SetBaseDomain
		}
		if err := s.Client.Patch(ctx, hc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		if p.Start {
			s.Log.Info("simulator: adopted HostedCluster", "namespace", hc.Namespace, "name", hc.Name, "fail", hc.Annotations[AnnotationFail])
		}
	}
	if err := s.ensureControlPlaneNamespace(ctx, hc); err != nil {
		return err
	}
	for _, name := range p.NPFinalize {
		for _, np := range nps {
			if np.Name == name {
				before := np.DeepCopy()
				controllerutil.AddFinalizer(np, meta.FinalizerHyperShift)
				if err := s.Client.Patch(ctx, np, client.MergeFrom(before)); err != nil {
					return err
				}
			}
		}
	}
	for _, name := range p.NPRelease {
		for _, np := range nps {
			if np.Name == name {
				before := np.DeepCopy()
				controllerutil.RemoveFinalizer(np, meta.FinalizerHyperShift)
				if err := s.Client.Patch(ctx, np, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
	}
	if p.Kubeconfig {
		if err := s.ensureOperatorSecrets(ctx, hc); err != nil {
			return err
		}
	}
	for _, name := range p.BindAgents {
		if err := s.setAgentBinding(ctx, hc, name, true); err != nil {
			return err
		}
	}
	for _, name := range p.UnbindAgents {
		if err := s.setAgentBinding(ctx, hc, name, false); err != nil {
			return err
		}
	}
	// A transition's record is written before the status that acts on it and removed only after the status that
	// ends it: a write that fails in between leaves the record of a transition still running, never a running
	// transition without its record.
	if p.HCTransition != "" && p.HCTransition != "-" {
		if err := annotate(ctx, s.Client, hc, AnnotationUpgrade, p.HCTransition); err != nil {
			return err
		}
	}
	for _, np := range nps {
		if tr := p.NPTransitions[np.Name]; tr != "" && tr != "-" {
			if err := annotate(ctx, s.Client, np, AnnotationRollout, tr); err != nil {
				return err
			}
		}
		if t := p.NPTemplates[np.Name]; t != "" && p.NPTransitions[np.Name] != "-" {
			if err := annotate(ctx, s.Client, np, AnnotationTemplate, t); err != nil {
				return err
			}
		}
	}
	// The NodePools' status before the HostedCluster's: a step that falls behind the timeline (a loaded machine)
	// can decide the last worker's join and the rollout's completion at once, and HyperShift's rollout completes
	// only after the workers are in (the console and ingress operators run on them), so the NodePool is Ready
	// before the HostedCluster is Completed, never the other way round.
	for _, np := range nps {
		if st, ok := p.NPStatus[np.Name]; ok {
			np.Status = st
			if err := s.Client.Status().Update(ctx, np); err != nil {
				return err
			}
		}
	}
	if p.HCStatus != nil {
		hc.Status = *p.HCStatus
		if err := s.Client.Status().Update(ctx, hc); err != nil {
			return err
		}
	}
	for _, np := range nps {
		if p.NPTransitions[np.Name] != "-" {
			continue
		}
		if t := p.NPTemplates[np.Name]; t != "" { // the template a rollout applied is recorded as it ends
			if err := annotate(ctx, s.Client, np, AnnotationTemplate, t); err != nil {
				return err
			}
		}
		if err := annotate(ctx, s.Client, np, AnnotationRollout, "-"); err != nil {
			return err
		}
	}
	if p.HCTransition == "-" {
		if err := annotate(ctx, s.Client, hc, AnnotationUpgrade, "-"); err != nil {
			return err
		}
	}
	return s.playACM(ctx, hc, p.JoinACM)
}

// kubeVersionOf is the Kubernetes version an OpenShift release ships (4.y → 1.(y+13), as from 4.14 / 1.27 on),
// with a fixed patch: what the klusterlet would report.
func kubeVersionOf(ocp string) string {
	y, ok := minorOf(ocp)
	if !ok {
		return "v1.30.7"
	}
	return fmt.Sprintf("v1.%d.7", y+13)
}

// annotate sets (or, for "-", removes) one annotation of the simulator's own bookkeeping, in place (obj gets the
// new resourceVersion for the status update that follows).
func annotate(ctx context.Context, c client.Client, obj client.Object, key, value string) error {
	before := obj.DeepCopyObject().(client.Object)
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	if value == "-" {
		if _, ok := a[key]; !ok {
			return nil
		}
		delete(a, key)
	} else {
		a[key] = value
	}
	obj.SetAnnotations(a)
	return c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// playACM does what ACM would for the SP's ManagedCluster: create the cluster namespace when it registers, and
// report it joined, with the console URL claim, once the cluster is installed.
func (s *Simulator) playACM(ctx context.Context, hc *hyperv1.HostedCluster, joined bool) error {
	var mc clusterv1.ManagedCluster
	if err := s.Client.Get(ctx, client.ObjectKey{Name: hc.Name}, &mc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if mc.DeletionTimestamp != nil {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Labels: map[string]string{"cluster.open-cluster-management.io/managedCluster": mc.Name}}}
	if err := s.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if !joined {
		return nil
	}
	kube := kubeVersionOf(completedVersion(&hc.Status))
	if apimeta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionJoined) {
		if mc.Status.Version.Kubernetes == kube {
			return nil
		}
		// The klusterlet reports the new version once the control plane completed an upgrade.
		mc.Status.Version.Kubernetes = kube
		for i := range mc.Status.ClusterClaims {
			if mc.Status.ClusterClaims[i].Name == "kubeversion.open-cluster-management.io" {
				mc.Status.ClusterClaims[i].Value = kube
			}
		}
		return s.Client.Status().Update(ctx, &mc)
	}
	now := metav1.NewTime(s.Now())
	for _, c := range []metav1.Condition{
		{Type: clusterv1.ManagedClusterConditionHubAccepted, Status: metav1.ConditionTrue, Reason: "HubClusterAdminAccepted", Message: "Accepted by hub cluster admin", LastTransitionTime: now},
		{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "ManagedClusterJoined", Message: "Managed cluster joined", LastTransitionTime: now},
		{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue, Reason: "ManagedClusterAvailable", Message: "Managed cluster is available", LastTransitionTime: now},
	} {
		apimeta.SetStatusCondition(&mc.Status.Conditions, c)
	}
	domain := hc.Spec.DNS.BaseDomain
	mc.Status.ClusterClaims = []clusterv1.ManagedClusterClaim{
		{Name: "consoleurl.cluster.open-cluster-management.io", Value: fmt.Sprintf("https://console-openshift-console.apps.%s.%s", hc.Name, domain)},
		{Name: "kubeversion.open-cluster-management.io", Value: kube},
		{Name: "id.openshift.io", Value: string(hc.UID)},
	}
	mc.Status.Version = clusterv1.ManagedClusterVersion{Kubernetes: kube}
	return s.Client.Status().Update(ctx, &mc)
}

func (s *Simulator) applyDelete(ctx context.Context, hc *hyperv1.HostedCluster, nps []*hyperv1.NodePool, d *DeletePlan) error {
	if d.MarkStart {
		before := hc.DeepCopy()
		if hc.Annotations == nil {
			hc.Annotations = map[string]string{}
		}
		hc.Annotations[AnnotationDeleting] = s.Now().UTC().Format(time.RFC3339Nano)
		if err := s.Client.Patch(ctx, hc, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if d.DeleteNodePools {
		for _, np := range nps {
			if np.DeletionTimestamp == nil {
				if err := s.Client.Delete(ctx, np); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
	}
	for _, name := range d.ReleaseNodePools {
		for _, np := range nps {
			if np.Name == name {
				before := np.DeepCopy()
				controllerutil.RemoveFinalizer(np, meta.FinalizerHyperShift)
				if err := s.Client.Patch(ctx, np, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
					return err
				}
			}
		}
	}
	for _, name := range d.UnbindAgents {
		if err := s.setAgentBinding(ctx, hc, name, false); err != nil {
			return err
		}
	}
	if d.CloudResourcesClean {
		apimeta.SetStatusCondition(&hc.Status.Conditions, metav1.Condition{Type: string(hyperv1.CloudResourcesDestroyed), Status: metav1.ConditionTrue, Reason: "AsExpected", Message: "All guest resources destroyed", LastTransitionTime: metav1.NewTime(s.Now())})
		if err := s.Client.Status().Update(ctx, hc); err != nil {
			return err
		}
	}
	if d.DeleteSecrets {
		if err := s.deleteControlPlaneNamespace(ctx, hc); err != nil {
			return err
		}
		for _, name := range []string{adminKubeconfigName(hc), kubeadminPasswordName(hc)} {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: name}}
			if err := s.Client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if err := s.removeClusterNamespace(ctx, hc.Name); err != nil {
			return err
		}
	}
	if d.RemoveHCFinalizer {
		before := hc.DeepCopy()
		controllerutil.RemoveFinalizer(hc, meta.FinalizerHyperShift)
		if err := s.Client.Patch(ctx, hc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
			return err
		}
		s.Log.Info("simulator: HostedCluster destroyed", "namespace", hc.Namespace, "name", hc.Name)
	}
	return nil
}

// removeClusterNamespace deletes ACM's namespace of a cluster, as ACM does once the ManagedCluster is gone; the
// hub's namespace controller (kube-controller-manager, on the local hub too) empties and removes it.
func (s *Simulator) removeClusterNamespace(ctx context.Context, name string) error {
	var ns corev1.Namespace
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ns.Labels["cluster.open-cluster-management.io/managedCluster"] != name || ns.DeletionTimestamp != nil {
		return nil // not a namespace the simulated ACM created, or already going
	}
	return client.IgnoreNotFound(s.Client.Delete(ctx, &ns))
}

// setAgentBinding binds an Agent to the cluster (spec.clusterDeploymentName and Bound=True), as the CAPI Agent
// provider does, or releases it.
func (s *Simulator) setAgentBinding(ctx context.Context, hc *hyperv1.HostedCluster, name string, bind bool) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("agent-install.openshift.io/v1beta1")
	u.SetKind("Agent")
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: hc.Spec.Platform.Agent.AgentNamespace, Name: name}, u); err != nil {
		return client.IgnoreNotFound(err)
	}
	if bind {
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"name": hc.Name, "namespace": hc.Namespace + "-" + hc.Name}, "spec", "clusterDeploymentName")
	} else {
		unstructured.RemoveNestedField(u.Object, "spec", "clusterDeploymentName")
	}
	if err := s.Client.Update(ctx, u); err != nil {
		return err
	}
	status, reason := "False", "Unbound"
	if bind {
		status, reason = "True", "Bound"
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	found := false
	for i, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Bound" {
			m["status"], m["reason"] = status, reason
			m["lastTransitionTime"] = s.Now().UTC().Format(time.RFC3339)
			conds[i], found = m, true
		}
	}
	if !found {
		conds = append(conds, map[string]any{"type": "Bound", "status": status, "reason": reason, "lastTransitionTime": s.Now().UTC().Format(time.RFC3339)})
	}
	_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
	return s.Client.Status().Update(ctx, u)
}

// ensureOperatorSecrets creates the admin kubeconfig and kubeadmin password Secrets as the operator does when the
// control plane becomes available (OperatorSecrets).
func (s *Simulator) ensureOperatorSecrets(ctx context.Context, hc *hyperv1.HostedCluster) error {
	var existing corev1.Secret
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: adminKubeconfigName(hc)}, &existing)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	kubeconfig, err := adminKubeconfig(hc)
	if err != nil {
		return err
	}
	for _, sec := range OperatorSecrets(hc, kubeconfig, randomString(23), !slices.Contains(s.OlderOperatorNamespaces, hc.Namespace)) {
		if err := s.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// adminKubeconfig builds a syntactically valid kubeconfig for the hosted cluster's endpoint, with a freshly
// generated CA and a token, like the one the operator writes.
func adminKubeconfig(hc *hyperv1.HostedCluster) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "root-ca", Organization: []string{"openshift"}}, key)
	if err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://%s:6443", endpointHost(hc))
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "sha256~" + randomString(43)}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "admin"
	return clientcmd.Write(*cfg)
}

func randomString(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
