package clusters

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/inventory"
	"github.com/dcm-sp/acm-cluster-sp/internal/meta"
)

// reserveAgents picks `need` Agents that meet the worker minimums (D13) and labels them with the instance id, with
// optimistic concurrency: an Agent taken meanwhile by another request is skipped for the next eligible one. It
// returns the function that releases the Agents this call labelled (rollback).
func (s *Service) reserveAgents(ctx context.Context, id string, spec *Spec, need int) (func(context.Context), error) {
	names, err := s.hub.InfraEnvNames(ctx)
	if err != nil {
		return nil, unprocessable("platform baremetal is not available: %v", err)
	}
	if !slices.Contains(names, spec.InfraEnv) {
		return nil, unprocessable("InfraEnv %s not found in namespace %s", spec.InfraEnv, s.hub.AgentNamespace())
	}
	agents, err := s.hub.Agents(ctx)
	if err != nil {
		return nil, internal(err, "reading Agents")
	}
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
	eligible := inventory.Eligible(agents, req)
	if len(eligible) < need {
		return nil, unprocessable("%s", inventory.Shortfall(agents, req, need))
	}
	var labelled []string
	release := func(ctx context.Context) {
		for _, name := range labelled {
			if err := s.releaseAgent(ctx, name, id); err != nil {
				s.log.Error("releasing Agent reservation", "agent", name, "id", id, "error", err)
			}
		}
	}
	reserved := 0
	for _, a := range eligible {
		if reserved == need {
			break
		}
		if a.Labels[meta.LabelInstanceID] == id {
			reserved++ // already ours (a retried create)
			continue
		}
		ok, err := s.claimAgent(ctx, a.Name, id, req)
		if err != nil {
			release(context.WithoutCancel(ctx))
			return nil, internal(err, "reserving Agent %s", a.Name)
		}
		if ok {
			labelled = append(labelled, a.Name)
			reserved++
		}
	}
	if reserved < need {
		release(context.WithoutCancel(ctx))
		fresh, _ := s.hub.Agents(ctx)
		return nil, unprocessable("%s", inventory.Shortfall(fresh, req, need))
	}
	return release, nil
}

// claimAgent labels one Agent for the instance if it is still eligible, retrying on update conflicts.
func (s *Service) claimAgent(ctx context.Context, name, id string, req inventory.Requirements) (bool, error) {
	for attempt := 0; attempt < 5; attempt++ {
		u := agentObject()
		if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: s.hub.AgentNamespace(), Name: name}, u); err != nil {
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
		u.SetLabels(l)
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[meta.AnnotationReservedAt] = time.Now().UTC().Format(time.RFC3339)
		u.SetAnnotations(ann)
		err := s.hub.Client.Update(ctx, u) // carries resourceVersion: optimistic concurrency
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
	}
	return false, fmt.Errorf("agent %s kept changing", name)
}

// releaseAgent removes the instance's reservation label from one Agent (only if it is this instance's).
func (s *Service) releaseAgent(ctx context.Context, name, id string) error {
	for attempt := 0; attempt < 5; attempt++ {
		u := agentObject()
		if err := s.hub.Client.Get(ctx, client.ObjectKey{Namespace: s.hub.AgentNamespace(), Name: name}, u); err != nil {
			return client.IgnoreNotFound(err)
		}
		l := u.GetLabels()
		if l[meta.LabelInstanceID] != id {
			return nil
		}
		delete(l, meta.LabelInstanceID)
		u.SetLabels(l)
		ann := u.GetAnnotations()
		delete(ann, meta.AnnotationReservedAt)
		u.SetAnnotations(ann)
		err := s.hub.Client.Update(ctx, u)
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("agent %s kept changing", name)
}

// ReleaseAgents removes the instance's reservation from every Agent that carries it (after the cluster is gone).
func (s *Service) ReleaseAgents(ctx context.Context, id string) error {
	if s.hub.AgentNamespace() == "" || !s.hub.Watching("agents") {
		return nil
	}
	agents, err := s.hub.Agents(ctx)
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

func agentObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hub.AgentGVK)
	return u
}
