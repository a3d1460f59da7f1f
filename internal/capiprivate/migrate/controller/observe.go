package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/capiprivate/migrate/plan"
)

// PrivateCRDLabel marks capi-private's CRDs (value "true").
const PrivateCRDLabel = "hypershift.openshift.io/private-capi"

// apiView is what discovery says about the API server: the catalog of the Cluster API kinds, and the
// DependentKinds it serves (at their preferred versions).
type apiView struct {
	catalog    plan.Catalog
	dependents []schema.GroupVersionKind
	// incomplete lists the group versions discovery could not list ("" when none).
	incomplete string
}

// discover reads the API: every served resource (one aggregated discovery request) and the names of the CRDs
// labelled as capi-private's. A discovery that fails for some groups is not an error: it is reported as
// incomplete, and the state machine waits rather than act on what it cannot see.
func (m *Migrator) discover(ctx context.Context) (apiView, error) {
	groupList, lists, err := m.disc.ServerGroupsAndResources()
	var v apiView
	if err != nil {
		var failed *discovery.ErrGroupDiscoveryFailed
		if !errors.As(err, &failed) {
			return v, fmt.Errorf("discovery: %w", err)
		}
		var gvs []string
		for gv := range failed.Groups {
			gvs = append(gvs, gv.String())
		}
		sort.Strings(gvs)
		v.incomplete = strings.Join(gvs, ", ")
	}
	private, err := m.privateCRDNames(ctx)
	if err != nil {
		return v, err
	}
	preferred := map[string]string{}
	for _, g := range groupList {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	crds := map[string]*plan.CRD{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		if !m.opts.Mapping.IsStandard(gv.Group) && !m.opts.Mapping.IsPrivate(gv.Group) {
			if p, ok := preferred[gv.Group]; !ok || p == gv.Version {
				v.dependents = append(v.dependents, dependentKinds(gv, l.APIResources)...)
			}
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !r.Namespaced {
				continue
			}
			name := r.Name + "." + gv.Group
			c := crds[name]
			if c == nil {
				c = &plan.CRD{Name: name, Group: gv.Group, Kind: r.Kind, Plural: r.Name, Namespaced: true,
					Private: private[name], Established: true}
				crds[name] = c
			}
			c.Served = append(c.Served, gv.Version)
		}
	}
	all := make([]plan.CRD, 0, len(crds))
	for _, c := range crds {
		all = append(all, *c)
	}
	v.catalog = plan.NewCatalog(all, m.opts.Mapping)
	return v, nil
}

// dependentKinds are the DependentKinds among gv's resources (subresources aside).
func dependentKinds(gv schema.GroupVersion, resources []metav1.APIResource) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, r := range resources {
		if !strings.Contains(r.Name, "/") && slices.Contains(DependentKinds, schema.GroupKind{Group: gv.Group, Kind: r.Kind}) {
			out = append(out, gv.WithKind(r.Kind))
		}
	}
	return out
}

// privateCRDNames are the names of the CRDs labelled PrivateCRDLabel=true (metadata only: CRDs are large).
func (m *Migrator) privateCRDNames(ctx context.Context) (map[string]bool, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
	if err := m.c.List(ctx, list, client.MatchingLabels{PrivateCRDLabel: "true"}); err != nil {
		return nil, fmt.Errorf("listing the private CRDs: %w", err)
	}
	out := map[string]bool{}
	for _, c := range list.Items {
		out[c.Name] = true
	}
	return out, nil
}

// graph is what observe read of a hosted cluster's CAPI objects.
type graph struct {
	namespace    string
	api          apiView
	old, private []unstructured.Unstructured
	// unmovable counts the objects of unmovable kinds by "group/Kind"; unmovableObjs are those objects.
	unmovable     map[string]int
	unmovableObjs []unstructured.Unstructured
	id            plan.Identity
}

// list lists kind gvk in namespace (nothing when its CRD is gone).
func (m *Migrator) list(ctx context.Context, namespace string, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := m.c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return list.Items, nil
}

// readGraph lists the moved kinds in both group sets and, when withUnmovable, the objects of unmovable kinds.
func (m *Migrator) readGraph(ctx context.Context, namespace string, api apiView, s plan.State, withUnmovable bool) (graph, error) {
	g := graph{namespace: namespace, api: api, unmovable: map[string]int{}}
	for _, k := range api.catalog.Moved {
		old, err := m.list(ctx, namespace, k.Standard)
		if err != nil {
			return g, err
		}
		private, err := m.list(ctx, namespace, k.Private)
		if err != nil {
			return g, err
		}
		g.old, g.private = append(g.old, old...), append(g.private, private...)
	}
	if withUnmovable {
		for _, u := range api.catalog.Unmovable {
			objs, err := m.list(ctx, namespace, u.Standard)
			if err != nil {
				return g, err
			}
			g.unmovable[u.Standard.Group+"/"+u.Standard.Kind] += len(objs)
			g.unmovableObjs = append(g.unmovableObjs, objs...)
		}
	}
	g.id = m.copier.Identify(g.old, g.private, s.ID, s.LeftoverRuns)
	return g, nil
}

// idleState reports whether Step decides for s from its annotations alone (nothing to observe).
func idleState(s plan.State) bool {
	return !s.InRun() && (!s.Legacy || s.Failed != "" || s.PrivateTypes || s.Deleting)
}

// observe gathers the plan.Observation of one HostedCluster; the expensive parts only in the phases that use them.
func (m *Migrator) observe(ctx context.Context, hc *hyperv1.HostedCluster, s plan.State) (plan.Observation, graph, error) {
	ns := ControlPlaneNamespace(hc)
	o := plan.Observation{NewID: m.opts.NewID()}
	if idleState(s) {
		o.Now = m.opts.Now()
		return o, graph{}, nil
	}
	api, err := m.discover(ctx)
	if err != nil {
		return o, graph{}, err
	}
	o.DiscoveryIncomplete = api.incomplete
	checks := s.Phase == plan.PhaseNone || s.Phase == plan.PhaseQuiescing || s.Phase == plan.PhaseVerifying
	g, err := m.readGraph(ctx, ns, api, s, checks)
	if err != nil {
		return o, g, err
	}
	o.WebhookHealthy = m.webhookHealthy(ctx)
	w, err := m.opts.Switcher.Observe(ctx, ns)
	if err != nil {
		return o, g, err
	}
	observeWorkloads(&o, g, w)
	if checks {
		o.Blocks = m.blocks(g, w, s, string(hc.Spec.Platform.Type))
		o.Fingerprint = plan.Fingerprint(append(slices.Clone(g.old), g.unmovableObjs...)) + "/" + w.Fingerprint
	}
	observeCounts(&o, g)
	if err := m.observePhase(ctx, &o, g, w, s); err != nil {
		return o, g, err
	}
	// The observation's time is when everything is read: Step decides at that time, and a phase it enters starts
	// then. A look that takes long (reads through the proxy timing out on a loaded hub) must not spend the
	// deadline of the phase it enters before the phase is entered.
	o.Now = m.opts.Now()
	return o, g, nil
}

func observeWorkloads(o *plan.Observation, g graph, w Workloads) {
	if cl := clusterOf(g.old); cl != nil {
		o.LegacyClusterPaused = paused(cl)
	} else {
		o.LegacyClusterPaused = true
	}
	if pc := clusterOf(g.private); pc != nil {
		o.PrivateClusterExists, o.PrivateClusterPaused = true, paused(pc)
	}
	o.LegacyScaledDown, o.LegacyPods = w.LegacyScaledDown, w.LegacyPods
	o.Switched, o.WorkloadsAvailable = w.Switched, w.Available
	o.UninjectedPods, o.StalePods = w.UninjectedPods, w.StalePods
	o.ProxiedReplicas, o.ProxiedPods = w.ProxiedReplicas, w.ProxiedPods
	o.LegacyRestored = w.Restored && (clusterOf(g.old) == nil || !paused(clusterOf(g.old)))
}

// blocks are the preconditions that do not hold: the platform, the standard objects', the kinds the migrator
// cannot move, private objects that are no twin of this cluster, and workloads running through the proxy before
// the switch.
func (m *Migrator) blocks(g graph, w Workloads, s plan.State, platform string) []plan.Block {
	out := append(plan.PlatformBlocks(platform), plan.Preconditions(g.old, s.InRun())...)
	out = append(out, g.api.catalog.UnmovableBlocks(g.unmovable)...)
	for _, st := range g.id.Strays {
		out = append(out, plan.Block{Class: plan.ClassStrayPrivateObject, Object: st, Detail: "no migrated-from-uid of this cluster's objects"})
	}
	if w.Marked || w.InjectedPods > 0 {
		out = append(out, plan.Block{Class: plan.ClassProxiedWhileLegacy, Object: "Pods",
			Detail: fmt.Sprintf("namespace marked for injection %v, %d pods with the proxy", w.Marked, w.InjectedPods)})
	}
	return out
}

// observeCounts counts the old objects this run copied (plan.Twinned), the twins and the leftovers, present or
// being deleted.
func observeCounts(o *plan.Observation, g graph) {
	old := plan.Twinned(g.old, g.id.Twins)
	for i := range old {
		if old[i].GetDeletionTimestamp() != nil {
			o.OldDeleting++
		} else {
			o.OldObjects++
		}
	}
	deleting := map[types.UID]bool{}
	for i := range g.private {
		if g.private[i].GetDeletionTimestamp() != nil {
			deleting[g.private[i].GetUID()] = true
		}
	}
	for _, r := range g.id.Twins {
		if deleting[r.UID] {
			o.TwinsDeleting++
		} else {
			o.Twins++
		}
	}
	for i := range g.id.LeftoverObjects {
		if g.id.LeftoverObjects[i].GetDeletionTimestamp() != nil {
			o.LeftoversDeleting++
		} else {
			o.Leftovers++
		}
	}
}

// observePhase fills what only some phases read: missing twins, dependents to re-point, verification, the reads
// through the proxy, health.
func (m *Migrator) observePhase(ctx context.Context, o *plan.Observation, g graph, w Workloads, s plan.State) error {
	complete := g.api.incomplete == ""
	var err error
	switch s.Phase {
	case plan.PhaseCopying:
		o.MissingTwins = m.missingTwins(g, s.ID)
		if complete && o.Leftovers > 0 {
			o.LeftoverDependents, err = m.countDependents(ctx, g, g.id.Leftovers.Invert(g.old))
		}
	case plan.PhaseRepointing, plan.PhaseVerifying:
		if complete {
			o.PendingRepoints, err = m.countDependents(ctx, g, uidMapOf(g.old))
		}
		if s.Phase == plan.PhaseVerifying {
			o.MissingTwins = m.missingTwins(g, s.ID)
			o.VerifyProblems = m.copier.Verify(g.old, g.private, g.id.Twins, s.ID)
		}
	case plan.PhaseSwitching:
		if o.Switched && o.WorkloadsAvailable {
			o.ProxyProblem = m.proxyProblem(ctx, g)
		}
	case plan.PhaseResuming:
		o.BornObjects = g.id.Strays
		o.Unhealthy = unhealthy(g, w)
	case plan.PhaseRollingBack:
		if complete {
			o.TwinDependents, err = m.countDependents(ctx, g, g.id.Twins.Invert(g.old))
		}
	}
	return err
}

// uidMapOf maps every object's UID (the map's values are unused: countDependents reads only the keys).
func uidMapOf(objs []unstructured.Unstructured) plan.UIDMap {
	out := plan.UIDMap{}
	for i := range objs {
		out[objs[i].GetUID()] = plan.RefOf(&objs[i])
	}
	return out
}

// missingTwins counts the old objects without a complete twin of run id: none, or one whose status or
// managedFields are not written yet.
func (m *Migrator) missingTwins(g graph, id string) int {
	byUID := map[types.UID]*unstructured.Unstructured{}
	for i := range g.private {
		byUID[g.private[i].GetUID()] = &g.private[i]
	}
	n := 0
	for i := range g.old {
		old := &g.old[i]
		tw := byUID[g.id.Twins[old.GetUID()].UID]
		if tw == nil {
			n++
			continue
		}
		want, err := m.copier.Twin(old, g.id.Twins, id)
		if err != nil || plan.StatusPending(old, tw) || plan.ManagedFieldsPending(tw, want.Object.GetManagedFields()) {
			n++
		}
	}
	return n
}

func clusterOf(objs []unstructured.Unstructured) *unstructured.Unstructured {
	for i := range objs {
		if objs[i].GetKind() == "Cluster" {
			return &objs[i]
		}
	}
	return nil
}

func paused(o *unstructured.Unstructured) bool {
	p, _, _ := unstructured.NestedBool(o.Object, "spec", "paused")
	return p
}

// DependentKinds are the kinds, outside the renamed groups, whose objects the migrator re-points from an old CAPI
// object to its twin: those Cluster API, HyperShift and the providers whose group capi-private does not rename give
// ownerReferences to CAPI objects in a hosted control plane namespace — Secrets and ConfigMaps (a provider's
// bootstrap data, a Cluster's kubeconfig), the HostedControlPlane (Cluster API's Cluster controller owns its control
// plane object), and CAP-Agent's AgentCluster, AgentMachines and AgentMachineTemplates (its group is its own: they
// stay, owned by the twins). Each is listed at the version the API server prefers; one not served is skipped. The
// install grants list and patch on exactly these (DependentRules). An object of another kind owned by an old object
// is not seen: deleting the old objects with propagationPolicy Orphan (remove) makes the garbage collector drop that
// ownerReference and keeps the object.
var DependentKinds = []schema.GroupKind{
	{Kind: "Secret"},
	{Kind: "ConfigMap"},
	{Group: hyperv1.GroupVersion.Group, Kind: "HostedControlPlane"},
	{Group: AgentGroup, Kind: "AgentCluster"},
	{Group: AgentGroup, Kind: "AgentMachine"},
	{Group: AgentGroup, Kind: "AgentMachineTemplate"},
}

// AgentGroup is CAP-Agent's API group, which capi-private does not rename.
const AgentGroup = "capi-provider.agent-install.openshift.io"

// DependentRules are the permissions re-pointing needs on DependentKinds: list, and patch and delete (kube-apiserver's
// OwnerReferencesPermissionEnforcement lets only who may delete an object change its ownerReferences; the migrator
// deletes none of them).
func DependentRules() []rbacv1.PolicyRule {
	verbs := []string{"list", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: verbs},
		{APIGroups: []string{hyperv1.GroupVersion.Group}, Resources: []string{"hostedcontrolplanes"}, Verbs: verbs},
		{APIGroups: []string{AgentGroup}, Resources: []string{"agentclusters", "agentmachines", "agentmachinetemplates"}, Verbs: verbs},
	}
}

// dependent is an object of a DependentKind with an ownerReference to one of a set of UIDs.
type dependent struct {
	obj *metav1.PartialObjectMetadata
}

// countDependents counts the dependents of to's keys.
func (m *Migrator) countDependents(ctx context.Context, g graph, to plan.UIDMap) (int, error) {
	deps, err := m.dependents(ctx, g, to)
	return len(deps), err
}

// dependents lists the DependentKinds the look's discovery found served, in the hosted control plane namespace
// (metadata only, at their preferred versions), and returns the objects with an ownerReference naming a key of to.
// Cluster-scoped objects cannot have namespaced owners. While discovery is incomplete it refuses (the callers check
// g.api.incomplete and wait): the catalog of the kinds to move may be missing one.
func (m *Migrator) dependents(ctx context.Context, g graph, to plan.UIDMap) ([]dependent, error) {
	if len(to) == 0 {
		return nil, nil
	}
	if g.api.incomplete != "" {
		return nil, fmt.Errorf("discovery incomplete (%s): not looking for dependents", g.api.incomplete)
	}
	var out []dependent
	for _, gvk := range g.api.dependents {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := m.c.List(ctx, list, client.InNamespace(g.namespace)); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue // its CRD just went away
			}
			return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			if plan.NamesAny(list.Items[i].OwnerReferences, to) {
				it := list.Items[i]
				it.SetGroupVersionKind(gvk)
				out = append(out, dependent{obj: &it})
			}
		}
	}
	return out, nil
}
