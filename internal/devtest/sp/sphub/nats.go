package sphub

import (
	"context"
	"fmt"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StatusStream is the JetStream stream dev mode creates for status events: DCM's own subject space (dcm.*, which
// SPM consumes) plus the design's per-instance subjects (dcm.providers.>).
const StatusStream = "dcm-status"

// StatusSubjects are the subjects StatusStream captures.
var StatusSubjects = []string{"dcm.*", "dcm.providers.>"}

// NATSOptions configure the embedded NATS server.
type NATSOptions struct {
	StoreDir string // JetStream storage
	Port     int    // 0: a free port; a fixed port lets a test restart the server at the same URL
	NoStream bool   // do not create StatusStream
}

// StartNATS starts an embedded NATS server with JetStream on 127.0.0.1 and creates StatusStream.
func StartNATS(ctx context.Context, storeDir string) (*natsserver.Server, error) {
	return StartNATSWith(ctx, NATSOptions{StoreDir: storeDir})
}

// StartNATSWith starts an embedded NATS server with explicit options.
func StartNATSWith(ctx context.Context, o NATSOptions) (*natsserver.Server, error) {
	port := o.Port
	if port == 0 {
		port = -1
	}
	s, err := natsserver.NewServer(&natsserver.Options{
		ServerName: "acm-cluster-sp-devhub",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("nats server did not become ready on 127.0.0.1:%d", o.Port)
	}
	if !o.NoStream {
		if err := EnsureStatusStream(ctx, s.ClientURL()); err != nil {
			s.Shutdown()
			return nil, err
		}
	}
	return s, nil
}

// EnsureStatusStream creates (or updates) StatusStream on the server at url, as SPM does at its start; opts carry
// credentials for servers that require them.
func EnsureStatusStream(ctx context.Context, url string, opts ...nats.Option) error {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: StatusStream, Subjects: StatusSubjects})
	if err != nil {
		return fmt.Errorf("creating stream %s: %w", StatusStream, err)
	}
	return nil
}
