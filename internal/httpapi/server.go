// Package httpapi serves the REST API: the OpenAPI document's routes (generated chi strict server in apigen),
// request validation with kin-openapi, RFC 7807 problem+json for every error, health and probe endpoints, and
// metrics. Handlers are small functions that call internal/clusters and translate domain types to wire types.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/dcm-sp/acm-cluster-sp/internal/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/httpapi/apigen"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// Health answers the health endpoints (internal/health provides it).
type Health interface {
	// Report returns the current health (never blocking on the hub).
	Report() api.Health
	// Ready reports whether the service should receive traffic (/readyz).
	Ready() bool
}

// Server implements the generated StrictServerInterface.
type Server struct {
	svc    *clusters.Service
	health Health
	log    *slog.Logger
}

var _ apigen.StrictServerInterface = (*Server)(nil)

// NewServer returns the API server.
func NewServer(svc *clusters.Service, health Health, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{svc: svc, health: health, log: log}
}

type requestKey struct{}

// requestFrom returns the HTTP request a strict handler serves (put in the context by withRequest).
func requestFrom(ctx context.Context) *http.Request {
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	return r
}

// CreateCluster handles POST /api/v1alpha1/clusters.
func (s *Server) CreateCluster(ctx context.Context, req apigen.CreateClusterRequestObject) (apigen.CreateClusterResponseObject, error) {
	id := ""
	if req.Params.Id != nil {
		id = *req.Params.Id
	}
	var body []byte
	if req.Body != nil {
		body = *req.Body
	}
	c, created, err := s.svc.Create(ctx, id, body)
	if err != nil {
		return nil, err
	}
	out := s.toAPI(ctx, c)
	if created {
		return apigen.CreateCluster201JSONResponse(out), nil
	}
	return apigen.CreateCluster200JSONResponse(out), nil
}

// ListClusters handles GET /api/v1alpha1/clusters.
func (s *Server) ListClusters(ctx context.Context, req apigen.ListClustersRequestObject) (apigen.ListClustersResponseObject, error) {
	var size *int
	if req.Params.MaxPageSize != nil {
		n := int(*req.Params.MaxPageSize)
		size = &n
	}
	token := ""
	if req.Params.PageToken != nil {
		token = *req.Params.PageToken
	}
	list, next, err := s.svc.List(ctx, size, token)
	if err != nil {
		return nil, err
	}
	out := api.ClusterList{Results: make([]api.Cluster, len(list))}
	for i := range list {
		out.Results[i] = s.toAPI(ctx, &list[i])
	}
	if next != "" {
		out.NextPageToken = &next
	}
	return apigen.ListClusters200JSONResponse(out), nil
}

// GetCluster handles GET /api/v1alpha1/clusters/{clusterId}.
func (s *Server) GetCluster(ctx context.Context, req apigen.GetClusterRequestObject) (apigen.GetClusterResponseObject, error) {
	c, err := s.svc.Get(ctx, req.ClusterId)
	if err != nil {
		return nil, err
	}
	return apigen.GetCluster200JSONResponse(s.toAPI(ctx, c)), nil
}

// DeleteCluster handles DELETE /api/v1alpha1/clusters/{clusterId}.
func (s *Server) DeleteCluster(ctx context.Context, req apigen.DeleteClusterRequestObject) (apigen.DeleteClusterResponseObject, error) {
	if err := s.svc.Delete(ctx, req.ClusterId); err != nil {
		return nil, err
	}
	return apigen.DeleteCluster204Response{}, nil
}

// GetHealth handles GET /api/v1alpha1/health.
func (s *Server) GetHealth(context.Context, apigen.GetHealthRequestObject) (apigen.GetHealthResponseObject, error) {
	return apigen.GetHealth200JSONResponse{HealthJSONResponse: apigen.HealthJSONResponse(s.health.Report())}, nil
}

// GetClustersHealth handles GET /api/v1alpha1/clusters/health (the path DCM polls).
func (s *Server) GetClustersHealth(context.Context, apigen.GetClustersHealthRequestObject) (apigen.GetClustersHealthResponseObject, error) {
	return apigen.GetClustersHealth200JSONResponse{HealthJSONResponse: apigen.HealthJSONResponse(s.health.Report())}, nil
}

// GetRootHealth handles GET /health.
func (s *Server) GetRootHealth(context.Context, apigen.GetRootHealthRequestObject) (apigen.GetRootHealthResponseObject, error) {
	return apigen.GetRootHealth200JSONResponse{HealthJSONResponse: apigen.HealthJSONResponse(s.health.Report())}, nil
}

// toAPI converts the domain resource to the wire type, and audits every response that carries a kubeconfig.
func (s *Server) toAPI(ctx context.Context, c *clusters.Cluster) api.Cluster {
	out := api.Cluster{
		Id: c.ID, Path: c.Path(), Spec: c.Spec,
		Status: api.ClusterStatus(c.Status), StatusMessage: c.StatusMessage,
		Platform: api.ClusterPlatform(c.Platform), ProvisioningType: api.Hypershift,
		Version: c.Version, OpenshiftVersion: c.OpenShiftVersion,
		ApiEndpoint: c.APIEndpoint, ConsoleUrl: c.ConsoleURL, Kubeconfig: c.KubeconfigBase64(),
		Nodes: api.NodeCounts{
			ControlPlane: api.NodeCount{Ready: c.ControlPlane.Ready, Total: c.ControlPlane.Total},
			Workers:      api.NodeCount{Ready: c.Workers.Ready, Total: c.Workers.Total},
		},
		Namespace: c.Namespace, CreateTime: c.CreateTime, UpdateTime: c.UpdateTime,
	}
	if out.Kubeconfig != "" {
		if r := requestFrom(ctx); r != nil {
			s.log.Info("audit: kubeconfig served", "id", c.ID, "remote", r.RemoteAddr, "userAgent", r.UserAgent(), "method", r.Method, "path", r.URL.Path)
		}
	}
	return out
}
