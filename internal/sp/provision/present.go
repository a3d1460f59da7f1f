package provision

import (
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// observed is whether the SP's view of the hub is current now.
func (s *Service) observed() status.Observation {
	if s.cfg.Observed == nil {
		return status.Observation{}
	}
	return s.cfg.Observed()
}

// present puts a resource's status into the configured vocabulary, as the API answers it. What the API derives from
// a cached build stays valid (the vocabulary is fixed) unless the hub is not observed: that status is the moment's,
// so the resource loses its build number (it is encoded afresh) — and, UNAVAILABLE, it carries no kubeconfig (which
// could not be read anyway).
func (s *Service) present(c *clusters.Cluster) {
	o := s.observed()
	st, msg := s.cfg.Vocabulary.Present(status.Result{Status: c.Status, Message: c.StatusMessage, Why: c.Why}, o)
	if o.Lost && st == status.Unavailable {
		c.Build, c.Kubeconfig = 0, clusters.SecretRef{}
	}
	c.Status, c.StatusMessage = st, msg
}

// Report is a cluster's status as the status events carry it: Map's decision in the configured vocabulary — the
// same words GET and LIST answer — and what the cluster produced.
func (s *Service) Report(v clusters.View, r status.Result) status.Report {
	st, msg := s.cfg.Vocabulary.Present(r, s.observed())
	return status.Report{Status: st, Message: msg, Output: clusters.Output(v)}
}
