package events

import (
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// CloudEvent naming and building: the subject, type and source of each status event, and its payload.

// Naming is the subject, type and source templates ({providerName}, {instanceId}).
type Naming struct{ Subject, Type, Source string }

// Presets: "design" is the design document's naming; "spm" is what today's DCM registry consumes.
var Presets = map[string]Naming{
	"design": {Subject: "dcm.providers.{providerName}.cluster.instances.{instanceId}.status", Type: "dcm.providers.{providerName}.status.update", Source: "{providerName}"},
	"spm":    {Subject: "dcm.cluster", Type: "dcm.status.cluster", Source: "dcm/providers/{providerName}"},
}

// ResolveNaming applies per-field overrides to a preset.
func ResolveNaming(preset string, override Naming) (Naming, error) {
	n, ok := Presets[preset]
	if !ok {
		return Naming{}, fmt.Errorf("unknown status preset %q (design, spm)", preset)
	}
	if override.Subject != "" {
		n.Subject = override.Subject
	}
	if override.Type != "" {
		n.Type = override.Type
	}
	if override.Source != "" {
		n.Source = override.Source
	}
	return n, nil
}

// SubjectFor is the NATS subject of an instance's events under these names ("*" as id gives the wildcard subject).
func (n Naming) SubjectFor(provider, id string) string { return expand(n.Subject, provider, id) }

func expand(tmpl, provider, id string) string {
	return strings.NewReplacer("{providerName}", provider, "{instanceId}", id).Replace(tmpl)
}

// Data is the CloudEvent payload: the instance id, the status and its message (what SPM stores), and what the
// cluster produced (output_spec: its endpoints once known, never a secret), which DCM's control plane reads.
type Data struct {
	ID         string         `json:"id"`
	Status     string         `json:"status"`
	Message    string         `json:"message"`
	OutputSpec *status.Output `json:"output_spec,omitempty"`
}

// Event builds the CloudEvent of one status.
func (p *Publisher) Event(id string, r status.Report) (cloudevents.Event, string, error) {
	st := r.Status
	subject := p.o.Naming.SubjectFor(p.o.ProviderName, id)
	ev := cloudevents.NewEvent(cloudevents.VersionV1)
	ev.SetID(uuid.NewString())
	ev.SetSource(expand(p.o.Naming.Source, p.o.ProviderName, id))
	ev.SetType(expand(p.o.Naming.Type, p.o.ProviderName, id))
	ev.SetSubject(subject)
	ev.SetTime(time.Now().UTC())
	if p.o.Vocabulary != nil {
		st = p.o.Vocabulary.EventStatus(st)
	}
	d := Data{ID: id, Status: string(st), Message: r.Message}
	if !r.Output.Empty() {
		d.OutputSpec = &r.Output
	}
	if err := ev.SetData(cloudevents.ApplicationJSON, d); err != nil {
		return ev, "", err
	}
	return ev, subject, ev.Validate()
}
