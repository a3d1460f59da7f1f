package sphub

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Registry is a loopback stand-in for DCM's Service Provider Manager registry, following the semantics of the
// pinned SPM (docs/dcm.md): POST /api/v1alpha1/providers validates snake_case fields (400 text/plain,
// as SPM's validator answers), is idempotent by name (201 first, 200 after, same id), and answers 409
// problem+json when the name exists under another id or ?id= belongs to another name. GET lists providers.
// Tests inject failures with FailNext.
//
// StartAgentRegistry starts it as an Environment Agent's provider registration instead (environment-agent
// 8e638b2): the same body and name semantics, but one provider per service type — a second provider of a
// service type gets 409 "service type 'cluster' is already served by provider 'x'" (type CONFLICT) — and
// problem+json 422 for invalid fields.
type Registry struct {
	srv   *http.Server
	URL   string // base URL including /api/v1alpha1
	agent bool

	mu        sync.Mutex
	providers map[string]*Provider // by name
	requests  []Provider
	answered  []Registration
	failCode  int
	failLeft  int
}

// Provider is a registered provider as the stand-in stores it.
type Provider struct {
	ID            string         `json:"id"`
	Name          string         `json:"name"`
	ServiceType   string         `json:"service_type"`
	SchemaVersion string         `json:"schema_version"`
	Endpoint      string         `json:"endpoint"`
	DisplayName   string         `json:"display_name,omitempty"`
	Operations    []string       `json:"operations,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
	Status        string         `json:"status,omitempty"`
	CreateTime    time.Time      `json:"create_time"`
	UpdateTime    time.Time      `json:"update_time"`
}

// Registration is a registration the stand-in accepted: its status code (201 created, 200 updated) and the
// provider as stored then.
type Registration struct {
	Code     int
	Provider Provider
}

// StartRegistry serves the SPM stand-in on addr (e.g. "127.0.0.1:0").
func StartRegistry(addr string) (*Registry, error) { return startRegistry(addr, false) }

// StartAgentRegistry serves the Environment Agent stand-in on addr.
func StartAgentRegistry(addr string) (*Registry, error) { return startRegistry(addr, true) }

func startRegistry(addr string, agent bool) (*Registry, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &Registry{providers: map[string]*Provider{}, agent: agent}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1alpha1/providers", r.create)
	mux.HandleFunc("GET /api/v1alpha1/providers", r.list)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	r.URL = "http://" + l.Addr().String() + "/api/v1alpha1"
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

// Close stops the stand-in.
func (r *Registry) Close() { _ = r.srv.Close() }

// FailNext makes the next n registrations answer code.
func (r *Registry) FailNext(n, code int) {
	r.mu.Lock()
	r.failLeft, r.failCode = n, code
	r.mu.Unlock()
}

// Requests returns every well-formed registration body received, in order.
func (r *Registry) Requests() []Provider {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Provider(nil), r.requests...)
}

// Registrations returns every accepted registration, in order: what each answer said, where Get shows only the
// latest.
func (r *Registry) Registrations() []Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Registration(nil), r.answered...)
}

// Get returns a registered provider by name.
func (r *Registry) Get(name string) (Provider, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.providers[name]
	if !ok {
		return Provider{}, false
	}
	return *p, true
}

// Remove unregisters a provider by name.
func (r *Registry) Remove(name string) {
	r.mu.Lock()
	delete(r.providers, name)
	r.mu.Unlock()
}

// Put registers a provider directly (tests set up conflicts with it).
func (r *Registry) Put(p Provider) {
	r.mu.Lock()
	r.providers[p.Name] = &p
	r.mu.Unlock()
}

var (
	idPattern     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	schemaPattern = regexp.MustCompile(`^v[0-9]+(alpha|beta)?[0-9]*$`)
)

func (r *Registry) create(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.failLeft > 0 {
		r.failLeft--
		code := r.failCode
		r.mu.Unlock()
		http.Error(w, http.StatusText(code), code)
		return
	}
	r.mu.Unlock()

	var raw map[string]any
	if err := json.NewDecoder(req.Body).Decode(&raw); err != nil {
		http.Error(w, "request body has an error: "+err.Error(), http.StatusBadRequest)
		return
	}
	for _, f := range []string{"name", "endpoint", "service_type", "schema_version"} {
		if s, ok := raw[f].(string); !ok || s == "" {
			if r.agent {
				r.problem(w, http.StatusUnprocessableEntity, fmt.Sprintf("invalid %s: must not be empty", f))
				return
			}
			http.Error(w, fmt.Sprintf("request body has an error: doesn't match schema: property %q is missing", f), http.StatusBadRequest)
			return
		}
	}
	data, _ := json.Marshal(raw)
	var p Provider
	_ = json.Unmarshal(data, &p)
	if !schemaPattern.MatchString(p.SchemaVersion) {
		http.Error(w, "request body has an error: schema_version does not match the pattern", http.StatusBadRequest)
		return
	}
	id := req.URL.Query().Get("id")
	if id != "" && !idPattern.MatchString(id) {
		http.Error(w, "parameter \"id\" does not match the pattern", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, p)
	now := time.Now().UTC()
	if existing, ok := r.providers[p.Name]; ok {
		if id != "" && id != existing.ID {
			r.problem(w, http.StatusConflict, fmt.Sprintf("provider %q exists with id %s", p.Name, existing.ID))
			return
		}
		p.ID, p.CreateTime, p.UpdateTime, p.Status = existing.ID, existing.CreateTime, now, "updated"
		r.providers[p.Name] = &p
		r.answered = append(r.answered, Registration{http.StatusOK, p})
		writeJSON(w, http.StatusOK, p)
		return
	}
	if r.agent {
		for _, other := range r.providers {
			if other.ServiceType == p.ServiceType {
				r.problem(w, http.StatusConflict, fmt.Sprintf("service type '%s' is already served by provider '%s'", p.ServiceType, other.Name))
				return
			}
		}
	}
	if id != "" {
		for _, other := range r.providers {
			if other.ID == id {
				r.problem(w, http.StatusConflict, fmt.Sprintf("id %s is used by provider %q", id, other.Name))
				return
			}
		}
	} else {
		id = uuid.NewString()
	}
	p.ID, p.CreateTime, p.UpdateTime, p.Status = id, now, now, "registered"
	r.providers[p.Name] = &p
	r.answered = append(r.answered, Registration{http.StatusCreated, p})
	writeJSON(w, http.StatusCreated, p)
}

func (r *Registry) list(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	out := make([]Provider, 0, len(r.providers))
	for _, p := range r.providers {
		out = append(out, *p)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, map[string]any{"providers": out})
}

// problem answers problem+json as the registry does: SPM {"type":"conflict","title":"Resource conflict"}, the
// agent {"type":"CONFLICT","title":"Conflict"} (422: UNPROCESSABLE_ENTITY, "Validation Failed").
func (r *Registry) problem(w http.ResponseWriter, code int, detail string) {
	typ, title := "conflict", "Resource conflict"
	switch {
	case r.agent && code == http.StatusConflict:
		typ, title = "CONFLICT", "Conflict"
	case r.agent:
		typ, title = "UNPROCESSABLE_ENTITY", "Validation Failed"
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": typ, "title": title, "status": code, "detail": detail})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
