package events

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/sp/sphub"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
)

// startSecuredNATS runs an embedded JetStream server that requires what configure sets up, creates the status
// stream with the given client options, and returns its URL.
func startSecuredNATS(t *testing.T, configure func(*natsserver.Options), client ...nats.Option) string {
	t.Helper()
	o := &natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
	if testing.Verbose() {
		o.NoLog = false
	}
	configure(o)
	s, err := natsserver.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	if !o.NoLog {
		s.ConfigureLogger()
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS not ready")
	}
	if err := sphub.EnsureStatusStream(context.Background(), s.ClientURL(), client...); err != nil {
		t.Fatal(err)
	}
	return s.ClientURL()
}

// publishesWith shows a publisher with these credentials delivers (JetStream ack) and that the server refuses a
// publisher without them.
func publishesWith(t *testing.T, url string, creds Credentials, reader ...nats.Option) {
	t.Helper()
	p := startPublisher(t, Options{URL: url, Credentials: creds})
	p.Report("inst-auth", status.Report{Status: status.Ready, Message: "ready"})
	waitTrue(t, func() bool { return p.Delivered("inst-auth", status.Ready) })
	evs := consume(t, url, "dcm.providers.test-sp.cluster.instances.inst-auth.status", 1, 5*time.Second, reader...)
	if len(evs) != 1 || data(t, evs[0]).Status != "READY" {
		t.Fatalf("events %v", evs)
	}
	if ok, msg := p.Connected(); !ok || msg != "connected" {
		t.Fatalf("Connected() = %v %q", ok, msg)
	}

	anon := New(Options{URL: url, ProviderName: "anon", Naming: Presets["design"]})
	if err := anon.Connect(); err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	waitTrue(t, func() bool {
		ok, msg := anon.Connected()
		return !ok && (strings.Contains(msg, "credentials rejected") || strings.Contains(msg, "TLS"))
	})
}

func TestNATSNkeySeedFile(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := testpki.WriteFile(t, t.TempDir(), "user.nk", seed)
	opt, err := nats.NkeyOptionFromSeed(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	url := startSecuredNATS(t, func(o *natsserver.Options) { o.Nkeys = []*natsserver.NkeyUser{{Nkey: pub}} }, opt)
	publishesWith(t, url, Credentials{NkeySeedFile: seedFile}, opt)
}

func TestNATSUserPasswordFile(t *testing.T) {
	pwFile := testpki.WriteFile(t, t.TempDir(), "password", []byte("s3cret-pw\n"))
	url := startSecuredNATS(t, func(o *natsserver.Options) {
		o.Users = []*natsserver.User{{Username: "sp", Password: "s3cret-pw"}}
	}, nats.UserInfo("sp", "s3cret-pw"))
	publishesWith(t, url, Credentials{User: "sp", PasswordFile: pwFile}, nats.UserInfo("sp", "s3cret-pw"))
}

// A .creds file (user JWT + seed) against a server in operator mode, as NGS/Synadia and decentralized deployments
// run it.
func TestNATSCredsFile(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	oclaims, _ := jwt.DecodeOperatorClaims(ojwt)
	newAccount := func(jetStream bool) (string, string, nkeys.KeyPair) {
		akp, _ := nkeys.CreateAccount()
		apub, _ := akp.PublicKey()
		ac := jwt.NewAccountClaims(apub)
		if jetStream {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		ajwt, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		return apub, ajwt, akp
	}
	sysPub, sysJWT, _ := newAccount(false)
	apub, ajwt, akp := newAccount(true)
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := testpki.WriteFile(t, t.TempDir(), "sp.creds", creds)
	url := startSecuredNATS(t, func(o *natsserver.Options) {
		resolver := &natsserver.MemAccResolver{}
		_ = resolver.Store(apub, ajwt)
		_ = resolver.Store(sysPub, sysJWT)
		o.TrustedOperators = []*jwt.OperatorClaims{oclaims}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	}, nats.UserCredentials(credsFile))
	publishesWith(t, url, Credentials{CredsFile: credsFile}, nats.UserCredentials(credsFile))
}

// Mutual TLS: the server verifies the SP's client certificate, the SP verifies the server with natsCAFile.
func TestNATSMutualTLS(t *testing.T) {
	ca := testpki.NewCA(t, "nats-ca")
	dir := t.TempDir()
	caFile := testpki.WriteFile(t, dir, "ca.crt", ca.CertPEM)
	client := ca.Client(t, "sp")
	certFile := testpki.WriteFile(t, dir, "client.crt", client.CertPEM)
	keyFile := testpki.WriteFile(t, dir, "client.key", client.KeyPEM)
	server := ca.Serving(t, "nats")
	url := startSecuredNATS(t, func(o *natsserver.Options) {
		o.TLS, o.TLSVerify = true, true
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{server.TLS(t)},
			ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	}, nats.RootCAs(caFile), nats.ClientCert(certFile, keyFile))
	publishesWith(t, url, Credentials{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, nats.RootCAs(caFile), nats.ClientCert(certFile, keyFile))
}

// A password in natsURL never shows in the health message or in an error, whatever state the connection is in.
func TestNATSURLPasswordNeverShown(t *testing.T) {
	url := startSecuredNATS(t, func(o *natsserver.Options) {
		o.Users = []*natsserver.User{{Username: "sp", Password: "hunter2-pw"}}
	}, nats.UserInfo("sp", "hunter2-pw"))
	withPassword := strings.Replace(url, "nats://", "nats://sp:hunter2-pw@", 1)
	wrong := strings.Replace(url, "nats://", "nats://sp:wrong-pw@", 1)
	for _, u := range []string{withPassword, wrong} {
		p := New(Options{URL: u, ProviderName: "sp", Naming: Presets["design"]})
		if err := p.Connect(); err != nil {
			if strings.Contains(err.Error(), "-pw") {
				t.Fatalf("error shows the password: %v", err)
			}
			continue
		}
		waitTrue(t, func() bool { _, msg := p.Connected(); return msg != "not connected" })
		if _, msg := p.Connected(); strings.Contains(msg, "-pw") || strings.Contains(msg, "127.0.0.1") {
			t.Fatalf("health message %q shows the URL", msg)
		}
		p.Close()
	}
}
