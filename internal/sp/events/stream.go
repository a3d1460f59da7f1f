package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
)

// The JetStream stream that stores the status events: finding it, creating it (CreateStream), its health.

// streamState is what the publisher last learned about the stream that stores its subjects.
type streamState struct {
	known   bool      // a publish or a probe has answered
	name    string    // the stream capturing the subjects ("" = none)
	checked time.Time // when
	ensured time.Time // last CreateStream attempt
	err     string    // why the last CreateStream attempt failed
}

// StreamName is the stream the publisher creates with CreateStream: acm-cluster-sp-<providerName>.
func (p *Publisher) StreamName() string {
	return "acm-cluster-sp-" + strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, p.o.ProviderName)
}

// subjects is the subject filter covering every instance's events.
func (p *Publisher) subjects() string { return p.o.Naming.SubjectFor(p.o.ProviderName, "*") }

// probeStream asks JetStream which stream captures the subjects ("" when none) and records the answer.
func (p *Publisher) probeStream(ctx context.Context) (string, error) {
	jsp := p.js.Load()
	if jsp == nil {
		return "", errors.New("NATS not connected yet")
	}
	name, err := (*jsp).StreamNameBySubject(ctx, p.subjects())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		name, err = "", nil
	}
	if err != nil {
		return "", err
	}
	p.setStream(name)
	return name, nil
}

func (p *Publisher) setStream(name string) {
	p.mu.Lock()
	was := p.stream
	p.stream.known, p.stream.name, p.stream.checked = true, name, time.Now()
	p.mu.Unlock()
	switch {
	case name == "" && (!was.known || was.name != ""):
		p.log.Error("no JetStream stream captures the status subjects: statuses are held, not delivered, until one does (create one, or set statusCreateStream)",
			"subjects", p.subjects())
	case name != "" && was.known && was.name == "":
		p.log.Info("a JetStream stream captures the status subjects again; delivering what was held", "stream", name)
		go p.retryNow()
	}
}

// ensureStreamEvery bounds how often a missing stream is created again.
const ensureStreamEvery = 10 * time.Second

// ensureStream creates or updates the publisher's own stream for its subjects, unless another stream captures them.
func (p *Publisher) ensureStream(ctx context.Context) {
	jsp := p.js.Load()
	p.mu.Lock()
	if jsp == nil || time.Since(p.stream.ensured) < ensureStreamEvery {
		p.mu.Unlock()
		return
	}
	p.stream.ensured = time.Now()
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	failed := func(err error) {
		msg := redact.Cause(err)
		p.mu.Lock()
		p.stream.err = msg
		p.mu.Unlock()
		p.log.Error("cannot create the status stream", "stream", p.StreamName(), "error", msg)
	}
	name, err := p.probeStream(ctx)
	if err != nil {
		failed(err)
		return
	}
	if name != "" && name != p.StreamName() {
		return // another stream (DCM's) stores them
	}
	_, err = (*jsp).CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        p.StreamName(),
		Description: "Status events of acm-cluster-sp provider " + p.o.ProviderName + " (created by the SP: statusCreateStream)",
		Subjects:    []string{p.subjects()},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      p.o.StreamMaxAge,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		failed(err)
		return
	}
	p.mu.Lock()
	p.stream.err = ""
	p.mu.Unlock()
	if name == "" {
		p.log.Info("created the status stream", "stream", p.StreamName(), "subjects", p.subjects(), "maxAge", p.o.StreamMaxAge.String())
	}
	p.setStream(p.StreamName())
}

// StreamHealth is the `events` health check: whether a JetStream stream stores the status events. It asks the
// server when connected and otherwise reports what it last learned. It names subjects and streams, never a URL.
func (p *Publisher) StreamHealth(ctx context.Context) (bool, string) {
	if ok, _ := p.Connected(); ok {
		if _, err := p.probeStream(ctx); err != nil {
			return false, "cannot ask JetStream which stream stores the status events: " + redact.Cause(err)
		}
	}
	p.mu.Lock()
	st := p.stream
	p.mu.Unlock()
	suffix := ""
	if ok, _ := p.Connected(); !ok {
		if !st.known {
			return true, "not checked yet: NATS not connected (see the nats check)"
		}
		suffix = " (last known: NATS not connected)"
	}
	if st.name != "" {
		return true, fmt.Sprintf("stream %s stores %s%s", st.name, p.subjects(), suffix)
	}
	msg := fmt.Sprintf("no JetStream stream captures %s: %.0f status(es) held, not delivered%s; create a stream for it or set statusCreateStream",
		p.subjects(), p.pendingCount(), suffix)
	if st.err != "" {
		msg += "; creating stream " + p.StreamName() + " failed: " + st.err
	}
	return false, msg
}

func (p *Publisher) noStreamGauge() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stream.known && p.stream.name == "" {
		return 1
	}
	return 0
}
