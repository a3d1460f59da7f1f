// Package httpapi serves the REST API: the OpenAPI document's routes (generated chi strict server in apigen),
// request validation with kin-openapi, RFC 7807 problem+json for every error, health and probe endpoints, and
// metrics. Handlers are small functions that call internal/sp/clusters and translate domain types to wire types.
package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/httpapi/apigen"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/operation"
	"github.com/dcm-sp/acm-cluster-sp/pkg/api"
)

// Health answers the health endpoints (internal/sp/health provides it).
type Health interface {
	// Report returns the current health (never blocking on the hub).
	Report() api.Health
	// Ready reports whether the service should receive traffic (/readyz).
	Ready() bool
}

// Clusters is the domain service the API calls (provision.Writer and provision.Reader).
type Clusters interface {
	// Create provisions a cluster; id is ?id= and key the Idempotency-Key ("" when absent).
	Create(ctx context.Context, id, key string, body []byte) (c *clusters.Cluster, created bool, err error)
	// Get and List answer clusters shared with the caches: the API only reads them.
	Get(ctx context.Context, id string) (*clusters.Cluster, error)
	List(ctx context.Context, pageSize *int, pageToken string) ([]*clusters.Cluster, string, error)
	// Delete starts deleting a cluster; key is the Idempotency-Key ("" when absent).
	Delete(ctx context.Context, id, key string) error
	// Update applies a merge patch of {"spec": …} (day-2); ifMatch is the If-Match header ("" when absent).
	Update(ctx context.Context, id string, body []byte, ifMatch string) (*clusters.Cluster, error)
	// Kubeconfig reads the admin kubeconfig of a cluster Get returned.
	Kubeconfig(ctx context.Context, c *clusters.Cluster) ([]byte, error)
}

// Server implements the generated StrictServerInterface.
type Server struct {
	svc    Clusters
	health Health
	guard  Guard
	log    *slog.Logger
	audits *slog.Logger // one line per kubeconfig disclosure, create and delete
	// requestTimeout is every API request's deadline (hub calls included).
	requestTimeout time.Duration
	// problemURIs: problem documents carry RFC 9457 type URIs instead of codes.
	problemURIs bool
	encodings   *encodingCache
	// unclassified gives an error without a domain kind its kind (Options.Unclassified).
	unclassified func(error) *clusters.Error
}

var _ apigen.StrictServerInterface = (*Server)(nil)

// Options are NewServer's optional settings.
type Options struct {
	Log            *slog.Logger
	RequestTimeout time.Duration // default 20s
	// ProblemTypeURIs makes problem documents carry RFC 9457 type URIs (https://dcm-project.github.io/problems/…)
	// instead of codes (configuration problemTypes).
	ProblemTypeURIs bool
	// Unclassified gives an error that reached the API without a domain kind (a failure of the hub the service did
	// not classify where it happened) its kind and message: the application passes hubapi.Failure, which knows the API
	// server's errors, so that this package knows only the domain's. Default: an internal error.
	Unclassified func(error) *clusters.Error
}

// NewServer returns the API server.
func NewServer(svc Clusters, health Health, guard Guard, o Options) *Server {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 20 * time.Second
	}
	if o.Unclassified == nil {
		o.Unclassified = func(err error) *clusters.Error {
			return &clusters.Error{Kind: clusters.KindInternal, Message: "the request failed", Err: err}
		}
	}
	return &Server{svc: svc, health: health, guard: guard, log: log, audits: log.With("log", "audit"), requestTimeout: o.RequestTimeout,
		problemURIs: o.ProblemTypeURIs, encodings: newEncodingCache(), unclassified: o.Unclassified}
}

// RequestTimeout is every API request's deadline.
func (s *Server) RequestTimeout() time.Duration { return s.requestTimeout }

// ProblemTypeURIs reports whether problem documents carry RFC 9457 type URIs.
func (s *Server) ProblemTypeURIs() bool { return s.problemURIs }

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
	key := deref(req.Params.IdempotencyKey)
	c, created, err := s.svc.Create(ctx, id, key, body)
	if key != "" && (err == nil && !created || errors.Is(err, clusters.ErrInstanceKnown)) {
		if err := s.mayRead(ctx, createdID(id, key)); err != nil {
			s.audit(ctx, "create", createdID(id, key), keyed(key, "result", "refused", "reason", "forbidden")...)
			return nil, err
		}
	}
	if err != nil {
		s.audit(ctx, "create", id, keyed(key, "result", "refused", "reason", clusters.KindOf(err).String())...)
		return nil, err
	}
	s.audit(ctx, "create", c.ID, keyed(key, "result", map[bool]string{true: "created", false: "replayed"}[created])...)
	out, disclosed, err := s.withKubeconfig(ctx, c)
	if err != nil {
		return nil, err
	}
	location := "/api/v1alpha1/" + c.Path()
	if created {
		return noStore[apigen.CreateCluster201JSONResponse]{apigen.CreateCluster201JSONResponse{Body: out, Headers: apigen.CreateCluster201ResponseHeaders{Location: location}}, disclosed}, nil
	}
	return noStore[apigen.CreateCluster200JSONResponse]{apigen.CreateCluster200JSONResponse{Body: out, Headers: apigen.CreateCluster200ResponseHeaders{Location: location}}, disclosed}, nil
}

// keyed prepends a request's Idempotency-Key to audit attributes (when it has one).
func keyed(key string, attrs ...any) []any {
	if key == "" {
		return attrs
	}
	return append([]any{"idempotencyKey", key}, attrs...)
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
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
	// The body of api.ClusterList, written from each cluster's cached encoding as it is (no copy into one buffer).
	page := listPage{items: make([][]byte, len(list))}
	for i := range list {
		doc, err := s.listEncoding(list[i])
		if err != nil {
			return nil, err
		}
		page.items[i] = *doc
	}
	if next != "" {
		if page.token, err = json.Marshal(next); err != nil {
			return nil, err
		}
	}
	return page, nil
}

// listEncoding is a cluster's JSON as LIST shows it (and as GET shows a cluster without kubeconfig): the encoding
// of its build, made and kept on first use.
func (s *Server) listEncoding(c *clusters.Cluster) (*cachedJSON, error) {
	if doc := s.encodings.get(c.ID, c.Build); doc != nil {
		return doc, nil
	}
	out := toAPI(c)
	if c.HasKubeconfig() {
		// LIST never carries kubeconfigs: a page of 100 cluster-admin credentials is too much in one answer.
		out.Kubeconfig = nil
		out.KubeconfigOmitted = ptr(api.ClusterKubeconfigOmittedList)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return s.encodings.put(c.ID, c.Build, b), nil
}

// listPage is a page of a LIST, answered as api.ClusterList's JSON written piece by piece: the cached encodings of
// its items are shared and never copied.
type listPage struct {
	token []byte   // the next page's token, encoded; nil on the last page
	items [][]byte // the clusters' encodings
}

// VisitListClustersResponse implements apigen.ListClustersResponseObject.
func (p listPage) VisitListClustersResponse(w http.ResponseWriter) error {
	n := len(openBrace) + len(results) + len(listEnd)
	if p.token != nil {
		n += len(nextToken) + len(p.token) + len(comma)
	}
	for i, item := range p.items {
		n += len(item)
		if i > 0 {
			n++
		}
	}
	w.Header()["Content-Type"] = jsonContentType
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	var bw errWriter
	bw.w = w
	bw.write(openBrace)
	if p.token != nil {
		bw.write(nextToken)
		bw.write(p.token)
		bw.write(comma)
	}
	bw.write(results)
	for i, item := range p.items {
		if i > 0 {
			bw.write(comma)
		}
		bw.write(item)
	}
	bw.write(listEnd)
	return bw.err
}

// The pieces of a LIST page around its items (package-level, so writing them does not allocate).
var (
	openBrace = []byte{'{'}
	comma     = []byte{','}
	nextToken = []byte(`"next_page_token":`)
	results   = []byte(`"results":[`)
	listEnd   = []byte("]}\n")
)

// errWriter writes until the first error, and keeps it.
type errWriter struct {
	w   http.ResponseWriter
	err error
}

func (e *errWriter) write(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// cachedJSON is a cached encoding answered as it is, with the newline encoding/json ends a document with (written
// after it: the cached bytes are shared and never copied).
type cachedJSON []byte

var newline = []byte{'\n'}

// jsonContentType is the Content-Type header's value of a JSON answer, shared by every answer that sets it (net/http
// only reads a header's values).
var jsonContentType = []string{"application/json"}

// VisitGetClusterResponse implements apigen.GetClusterResponseObject.
func (r cachedJSON) VisitGetClusterResponse(w http.ResponseWriter) error {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(r); err != nil {
		return err
	}
	_, err := w.Write(newline)
	return err
}

// GetCluster handles GET /api/v1alpha1/clusters/{clusterId}.
func (s *Server) GetCluster(ctx context.Context, req apigen.GetClusterRequestObject) (apigen.GetClusterResponseObject, error) {
	c, err := s.svc.Get(ctx, req.ClusterId)
	if err != nil {
		return nil, err
	}
	if !c.HasKubeconfig() {
		doc, err := s.listEncoding(c) // the same document: nothing to withhold or disclose
		if err != nil {
			return nil, err
		}
		return doc, nil
	}
	out, disclosed, err := s.withKubeconfig(ctx, c)
	if err != nil {
		return nil, err
	}
	return noStore[apigen.GetCluster200JSONResponse]{apigen.GetCluster200JSONResponse{Body: out, Headers: apigen.GetCluster200ResponseHeaders{ETag: c.ETag}}, disclosed}, nil
}

// UpdateCluster handles PATCH /api/v1alpha1/clusters/{clusterId} (day-2: scale, upgrade, resize).
func (s *Server) UpdateCluster(ctx context.Context, req apigen.UpdateClusterRequestObject) (apigen.UpdateClusterResponseObject, error) {
	var body []byte
	if req.Body != nil {
		body = *req.Body
	}
	ifMatch := ""
	if req.Params.IfMatch != nil {
		ifMatch = *req.Params.IfMatch
	}
	c, err := s.svc.Update(ctx, req.ClusterId, body, ifMatch)
	if err != nil {
		s.audit(ctx, "update", req.ClusterId, "result", "refused", "reason", clusters.KindOf(err).String())
		return nil, err
	}
	result := "unchanged"
	if c.Operation != nil && c.Operation.Open() {
		result = "accepted " + c.Operation.Describe()
	}
	s.audit(ctx, "update", c.ID, "result", result)
	out, disclosed, err := s.withKubeconfig(ctx, c)
	if err != nil {
		return nil, err
	}
	return noStore[apigen.UpdateCluster200JSONResponse]{apigen.UpdateCluster200JSONResponse{Body: out, Headers: apigen.UpdateCluster200ResponseHeaders{ETag: c.ETag}}, disclosed}, nil
}

// DeleteCluster handles DELETE /api/v1alpha1/clusters/{clusterId}.
func (s *Server) DeleteCluster(ctx context.Context, req apigen.DeleteClusterRequestObject) (apigen.DeleteClusterResponseObject, error) {
	key := deref(req.Params.IdempotencyKey)
	if err := s.svc.Delete(ctx, req.ClusterId, key); err != nil {
		s.audit(ctx, "delete", req.ClusterId, keyed(key, "result", "refused", "reason", clusters.KindOf(err).String())...)
		return nil, err
	}
	s.audit(ctx, "delete", req.ClusterId, keyed(key, "result", "accepted")...)
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

// withKubeconfig converts a cluster for one caller: its admin kubeconfig is included only when the caller may
// get clusters/kubeconfig for this id, and every disclosure is audited. disclosed tells the response to forbid
// caching.
func (s *Server) withKubeconfig(ctx context.Context, c *clusters.Cluster) (api.Cluster, bool, error) {
	out := toAPI(c)
	if !c.HasKubeconfig() {
		return out, false, nil
	}
	if ok, why := s.kubeconfigVerdict(ctx, c.ID); !ok {
		out.Kubeconfig = nil
		out.KubeconfigOmitted = ptr(api.ClusterKubeconfigOmitted(why))
		return out, false, nil
	}
	data, err := s.svc.Kubeconfig(ctx, c)
	if err != nil {
		return out, false, err
	}
	kc := base64.StdEncoding.EncodeToString(data)
	out.Kubeconfig = &kc
	s.audit(ctx, "kubeconfig", c.ID)
	return out, true, nil
}

// toAPI converts the domain resource to the wire type; kubeconfig is "" (withKubeconfig fills it in for callers
// allowed to see it).
func toAPI(c *clusters.Cluster) api.Cluster {
	kc := ""
	return api.Cluster{
		Id: c.ID, Path: c.Path(), Spec: c.Spec,
		Status: api.ClusterStatus(c.Status), StatusMessage: c.StatusMessage,
		Platform: string(c.Platform), ProvisioningType: api.Hypershift,
		Version: c.Version, OpenshiftVersion: c.OpenShiftVersion,
		ApiEndpoint: c.APIEndpoint, ConsoleUrl: c.ConsoleURL, Kubeconfig: &kc,
		Nodes: api.NodeCounts{
			ControlPlane: api.NodeCount{Ready: c.ControlPlane.Ready, Total: c.ControlPlane.Total},
			Workers:      api.NodeCount{Ready: c.Workers.Ready, Total: c.Workers.Total},
		},
		Namespace: c.Namespace, CreateTime: c.CreateTime, UpdateTime: c.UpdateTime,
		CurrentOperation: operationAPI(c.Operation),
	}
}

func operationAPI(op *operation.Record) *api.Operation {
	if op == nil {
		return nil
	}
	out := &api.Operation{Kind: api.OperationKind(op.Kind), From: op.From, To: op.To, Phase: api.OperationPhase(op.Phase),
		Message: op.Message, StartTime: op.StartedAt}
	if !op.EndedAt.IsZero() {
		out.EndTime = &op.EndedAt
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// noStore wraps a strict-server response so that one carrying a kubeconfig is sent with Cache-Control: no-store.
type noStore[R any] struct {
	resp  R
	apply bool
}

func (n noStore[R]) header(w http.ResponseWriter) {
	if n.apply {
		w.Header().Set("Cache-Control", "no-store")
	}
}

// VisitCreateClusterResponse implements apigen.CreateClusterResponseObject.
func (n noStore[R]) VisitCreateClusterResponse(w http.ResponseWriter) error {
	n.header(w)
	return any(n.resp).(apigen.CreateClusterResponseObject).VisitCreateClusterResponse(w)
}

// VisitUpdateClusterResponse implements apigen.UpdateClusterResponseObject.
func (n noStore[R]) VisitUpdateClusterResponse(w http.ResponseWriter) error {
	n.header(w)
	return any(n.resp).(apigen.UpdateClusterResponseObject).VisitUpdateClusterResponse(w)
}

// VisitGetClusterResponse implements apigen.GetClusterResponseObject.
func (n noStore[R]) VisitGetClusterResponse(w http.ResponseWriter) error {
	n.header(w)
	return any(n.resp).(apigen.GetClusterResponseObject).VisitGetClusterResponse(w)
}
