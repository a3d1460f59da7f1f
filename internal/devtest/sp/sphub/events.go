package sphub

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EventReader consumes status CloudEvents from the status stream with a plain JetStream consumer and parses them
// with the CloudEvents SDK — what a DCM-side consumer does. Tests use it.
type EventReader struct {
	nc   *nats.Conn
	cons jetstream.Consumer
}

// NewEventReader reads, from the beginning of StatusStream, the messages on subject (wildcards allowed); opts
// carry credentials for servers that require them.
func NewEventReader(ctx context.Context, url, subject string, opts ...nats.Option) (*EventReader, error) {
	return newEventReader(ctx, url, subject, jetstream.DeliverAllPolicy, opts)
}

// NewEventTail reads only the messages on subject stored after it was opened: a latency measurement must not wait
// while a reader replays the stream's history.
func NewEventTail(ctx context.Context, url, subject string, opts ...nats.Option) (*EventReader, error) {
	return newEventReader(ctx, url, subject, jetstream.DeliverNewPolicy, opts)
}

func newEventReader(ctx context.Context, url, subject string, from jetstream.DeliverPolicy, opts []nats.Option) (*EventReader, error) {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, StatusStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: from})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &EventReader{nc: nc, cons: cons}, nil
}

// Next returns the next event, waiting up to wait; ok is false when none arrived.
func (r *EventReader) Next(wait time.Duration) (ev cloudevents.Event, ok bool, err error) {
	msg, err := r.cons.Next(jetstream.FetchMaxWait(wait))
	if err != nil {
		return ev, false, nil
	}
	ev = cloudevents.NewEvent()
	if err := json.Unmarshal(msg.Data(), &ev); err != nil {
		return ev, false, fmt.Errorf("not a CloudEvent: %w: %s", err, msg.Data())
	}
	return ev, true, nil
}

// Close closes the connection.
func (r *EventReader) Close() { r.nc.Close() }
