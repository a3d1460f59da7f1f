package provision

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hubapi"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/meta"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/platform"
)

// agentsOf reports whether the platform's workers are Agents the SP reserves (its table entry says so).
func agentsOf(n clusters.Platform) bool {
	p, _ := platform.Lookup(n)
	return p.Agents
}

// requirements are the Agent minimums of a bare-metal spec (docs/hypershift-objects.md).
func requirements(id string, spec *clusters.Spec) inventory.Requirements {
	req := inventory.Requirements{InstanceID: id, InfraEnv: spec.InfraEnv, Labels: spec.AgentLabels}
	if spec.Workers.CPU != nil {
		req.CPUs = *spec.Workers.CPU
	}
	if spec.Workers.Memory != nil {
		req.MemoryBytes = spec.Workers.Memory.Value()
	}
	if spec.Workers.Storage != nil {
		req.DiskBytes = spec.Workers.Storage.Value()
	}
	return req
}

// ReserveAgents completes the instance's reservation to need Agents, labelling eligible ones with its id (and this
// provider), with optimistic concurrency: an Agent taken meanwhile is skipped for the next eligible one. Agents
// already carrying the id (an earlier attempt, another replica) count and are never released by this call's
// rollback: ch records only the Agents this call labelled.
func (s *Converger) ReserveAgents(ctx context.Context, id string, spec *clusters.Spec, need int, ch *changes) error {
	agents, err := s.catalog.Agents(ctx)
	if err != nil {
		return hubapi.Failure(err, "reading Agents")
	}
	have := 0
	for _, a := range agents {
		if a.Labels[meta.LabelInstanceID] == id {
			have++
		}
	}
	if have >= need {
		return nil
	}
	// The cache may not show this instance's latest claims yet (a previous reconcile's, moments ago): count them
	// on the API server before claiming more.
	if have, err = s.reservedOnHub(ctx, id); err != nil {
		return hubapi.Failure(err, "reading Agents")
	}
	if have >= need {
		return nil
	}
	req := requirements(id, spec)
	for _, a := range inventory.Eligible(agents, req) {
		if have == need {
			break
		}
		if a.Labels[meta.LabelInstanceID] == id {
			continue // counted above
		}
		ok, err := s.claimAgent(ctx, a.Name, id, req)
		if err != nil {
			return hubapi.Failure(err, "reserving Agent %s", a.Name)
		}
		if ok {
			have++
			if ch != nil {
				ch.agents = append(ch.agents, a.Name)
			}
		}
	}
	if have < need {
		fresh, _ := s.catalog.Agents(ctx)
		return clusters.Unprocessable("%s", inventory.Shortfall(fresh, req, need))
	}
	return nil
}

// reservedOnHub counts the Agents carrying the instance's id on the API server.
func (s *Converger) reservedOnHub(ctx context.Context, id string) (int, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(hubapi.AgentGVK.GroupVersion().WithKind("AgentList"))
	if err := s.client.List(ctx, &list, client.InNamespace(s.site.AgentNamespace()), client.MatchingLabels{meta.LabelInstanceID: id}); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

// claimAgent labels one Agent for the instance if it is still eligible, retrying on update conflicts.
func (s *Converger) claimAgent(ctx context.Context, name, id string, req inventory.Requirements) (bool, error) {
	for attempt := 0; attempt < 5; attempt++ {
		u := agentObject()
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.site.AgentNamespace(), Name: name}, u); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		if len(inventory.Eligible([]inventory.Agent{inventory.FromUnstructured(u)}, req)) == 0 {
			return false, nil // taken or changed since the cache was read
		}
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[meta.LabelInstanceID] = id
		l[meta.LabelProvider] = s.cfg.Provider
		u.SetLabels(l)
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[meta.AnnotationReservedAt] = s.now().UTC().Format(time.RFC3339)
		u.SetAnnotations(ann)
		err := s.client.Update(ctx, u) // carries resourceVersion: optimistic concurrency
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
	}
	return false, fmt.Errorf("agent %s kept changing", name)
}

// releaseAgent removes the instance's reservation from one Agent (only if it is this instance's).
func (s *deps) releaseAgent(ctx context.Context, name, id string) error {
	for attempt := 0; attempt < 5; attempt++ {
		u := agentObject()
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.site.AgentNamespace(), Name: name}, u); err != nil {
			return client.IgnoreNotFound(err)
		}
		l := u.GetLabels()
		if l[meta.LabelInstanceID] != id {
			return nil
		}
		delete(l, meta.LabelInstanceID)
		delete(l, meta.LabelProvider)
		u.SetLabels(l)
		ann := u.GetAnnotations()
		delete(ann, meta.AnnotationReservedAt)
		u.SetAnnotations(ann)
		err := s.client.Update(ctx, u)
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("agent %s kept changing", name)
}

// ReleaseAgents removes the instance's reservation from every Agent that carries it (after the cluster is gone).
func (s *Converger) ReleaseAgents(ctx context.Context, id string) error {
	if s.site.AgentNamespace() == "" || !s.site.Watching("agents") {
		return nil
	}
	agents, err := s.catalog.Agents(ctx)
	if err != nil {
		return err
	}
	for _, a := range agents {
		if a.Labels[meta.LabelInstanceID] == id {
			if err := s.releaseAgent(ctx, a.Name, id); err != nil {
				return fmt.Errorf("agent %s: %w", a.Name, err)
			}
		}
	}
	return nil
}

// sweepAgents releases this provider's reservations of instances without a HostedCluster, once older than grace.
func (s *Converger) sweepAgents(ctx context.Context, known func(string) bool, now time.Time, grace time.Duration) {
	if s.site.AgentNamespace() == "" || !s.site.Watching("agents") {
		return
	}
	agents, err := s.catalog.Agents(ctx)
	if err != nil {
		s.log.Warn("orphan sweep: listing Agents", "error", err)
		return
	}
	for _, a := range agents {
		id := a.Labels[meta.LabelInstanceID]
		if id == "" || !meta.Ours(s.cfg.Provider, a.Labels) || known(id) {
			continue
		}
		if at, err := time.Parse(time.RFC3339, a.Annotations[meta.AnnotationReservedAt]); err == nil && now.Sub(at) < grace {
			continue
		}
		if err := s.releaseAgent(ctx, a.Name, id); err != nil {
			s.log.Warn("orphan sweep: releasing Agent", "agent", a.Name, "error", err)
		} else {
			s.log.Info("orphan sweep: released the Agent of an instance without HostedCluster", "agent", a.Name, "id", id)
		}
	}
}

func agentObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hubapi.AgentGVK)
	return u
}
