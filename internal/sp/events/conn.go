package events

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/redact"
)

// The connection to NATS: credentials, dialling, its state for the health check, closing.

// Credentials are how the publisher proves itself to NATS, through nats.go's own options. Files are read when a
// connection is made, so rotated credentials are picked up at the next reconnect.
type Credentials struct {
	CredsFile    string // user JWT + NKey seed (.creds)
	NkeySeedFile string
	User         string // with PasswordFile
	PasswordFile string
	CAFile       string // server verification (TLS)
	CertFile     string // client certificate (mutual TLS), with KeyFile
	KeyFile      string
}

// natsOptions turns the credentials into nats.go options.
func (c Credentials) natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("natsNkeySeedFile %s: not a valid NKey seed file", c.NkeySeedFile)
		}
		opts = append(opts, o)
	}
	if c.User != "" {
		if _, err := readSecretFile(c.PasswordFile); err != nil {
			return nil, fmt.Errorf("natsPasswordFile: %w", err)
		}
		user, file := c.User, c.PasswordFile
		opts = append(opts, nats.UserInfoHandler(func() (string, string) {
			pw, _ := readSecretFile(file)
			return user, pw
		}))
	}
	if c.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.CAFile))
	}
	if c.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.CertFile, c.KeyFile))
	}
	return opts, nil
}

// readSecretFile reads a one-line secret; errors name the file, never its content.
func readSecretFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s", path)
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}

// Connect dials NATS without blocking: an unreachable server is retried in the background, forever. Once
// connected, a later call does nothing (a term's Start connects when Run has not).
func (p *Publisher) Connect() error {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.conn.Load() != nil {
		return nil
	}
	creds, err := p.o.Credentials.natsOptions()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(p.o.URL, append(creds,
		nats.Name("acm-cluster-sp/"+p.o.ProviderName),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectBufSize(-1), // fail publishes fast while disconnected; they are retried from the pending state
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close/Drain
				p.log.Warn("NATS disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			p.log.Info("NATS reconnected", "url", c.ConnectedUrlRedacted())
			p.retryNow()
		}),
		nats.ConnectHandler(func(c *nats.Conn) {
			p.log.Info("NATS connected", "url", c.ConnectedUrlRedacted())
			p.retryNow()
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			p.log.Warn("NATS error", "error", err)
		}),
	)...)
	if err != nil {
		return fmt.Errorf("NATS %s: %w", redact.URL(p.o.URL), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	p.conn.Store(nc)
	p.js.Store(&js)
	return nil
}

// Connected reports the NATS connection state for the health check, which answers unauthenticated callers: it
// names no URL, host or credential.
func (p *Publisher) Connected() (bool, string) {
	nc := p.conn.Load()
	if nc == nil {
		return false, "not connected"
	}
	if nc.IsConnected() {
		return true, "connected"
	}
	msg := strings.ToLower(nc.Status().String())
	if err := nc.LastError(); err != nil {
		msg += ": " + redact.Cause(err)
	}
	return false, msg
}

// Close closes the NATS connection (process shutdown). Every publish waited for its ack, so nothing is buffered.
func (p *Publisher) Close() {
	if nc := p.conn.Load(); nc != nil {
		nc.Close()
	}
}
