package app

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testlog"
	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/testpki"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/events"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// Every configuration key reaches its consumer: the configuration below sets each key to a value different from
// its default, and the table checks the component that must use it. A key without an entry fails the test, so a
// new key cannot be left unwired (resyncPeriod once was).
func TestEveryConfigKeyReachesItsConsumer(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string { return testpki.WriteFile(t, dir, name, []byte(content)) }
	hubKubeconfig := filepath.Join(dir, "hub.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: testHub.Config.Host, CertificateAuthorityData: testHub.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: testHub.Config.CertData, ClientKeyData: testHub.Config.KeyData}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "admin"}
	kc.CurrentContext = "hub"
	if err := clientcmd.WriteToFile(*kc, hubKubeconfig); err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "keys")
	serving, client := ca.Serving(t, "sp"), ca.Client(t, "sp")
	infra := write("infra.kubeconfig", string(mustRead(t, hubKubeconfig)))

	cfg := config.Defaults()
	cfg.HubKubeconfig = hubKubeconfig
	cfg.Namespace = "keys-ns"
	cfg.DefaultPlatform = string(clusters.BareMetal)
	cfg.EnabledPlatforms = []string{string(clusters.BareMetal)}
	cfg.KubevirtInfraCluster, cfg.KubevirtInfraNamespace = infra, "vms"
	cfg.DefaultInfraEnvName, cfg.AgentNamespace = "keys-infraenv", "keys-agents"
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.LogLevel, cfg.LogFormat = "warn", "json"
	cfg.RequestTimeout, cfg.ShutdownTimeout = 7*time.Second, 9*time.Second
	cfg.Auth, cfg.AuthAnonymous, cfg.AuthAPIGroup = config.AuthKubernetes, true, "keys.example.com"
	cfg.APIAudiences, cfg.AllowPlaintextCredentials, cfg.AcceptHubTokens, cfg.AllowPlainHTTP = []string{"keys-audience"}, true, true, true
	cfg.ClientCAFile = write("client-ca.crt", string(ca.CertPEM))
	cfg.TLSCertFile, cfg.TLSKeyFile = write("tls.crt", string(serving.CertPEM)), write("tls.key", string(serving.KeyPEM))
	cfg.HubQPS, cfg.HubBurst = 123, 456
	cfg.ProviderName, cfg.DisplayName = "keys-sp", "Keys SP"
	cfg.APIHost, cfg.RegistrationURL, cfg.ProviderID = "https://keys.example.com:8443", "https://spm.example.com/api/v1alpha1", "keys-id"
	cfg.RegistrationTokenFile, cfg.RegistrationCAFile = write("reg.token", "tok"), write("reg-ca.crt", string(ca.CertPEM))
	cfg.NATSURL = "nats://127.0.0.1:1"
	cfg.NATSCredsFile, cfg.NATSUser, cfg.NATSPasswordFile = write("sp.creds", "x"), "keys-user", write("nats.pw", "pw")
	cfg.NATSCAFile, cfg.NATSCertFile, cfg.NATSKeyFile = write("nats-ca.crt", string(ca.CertPEM)), write("nats.crt", string(client.CertPEM)), write("nats.key", string(client.KeyPEM))
	cfg.StatusPreset, cfg.StatusSubject, cfg.StatusType, cfg.StatusSource = "spm", "keys.{instanceId}", "keys.type", "keys/{providerName}"
	cfg.StatusDebounce, cfg.StatusSettle, cfg.ResyncPeriod = 3*time.Second, 333*time.Millisecond, 7*time.Minute
	cfg.StatusCreateStream, cfg.StatusStreamMaxAge = true, 5*time.Hour
	cfg.LeaderElection, cfg.LeaderElectionNamespace, cfg.LeaseDuration = true, "keys-leases", 21*time.Second
	cfg.VersionMatrixFile = write("matrix.yaml", "\"4.22\": \"1.35\"\n")
	cfg.PullSecretFile = write("pull.json", `{"auths":{"keys.example.com":{"auth":"eDp5"}}}`)
	cfg.SSHPublicKeyFile = write("id.pub", "ssh-ed25519 AAAAkeys keys@example.com\n")
	cfg.BaseDomain, cfg.ManageACMObjects = "keys.example.com", false
	cfg.ControlPlaneAvailabilityPolicy, cfg.DefaultWorkerCount, cfg.HypershiftNamespace = "SingleReplica", 5, "keys-hypershift"
	cfg.DegradedGracePeriod, cfg.ProvisioningTimeoutKubevirt, cfg.ProvisioningTimeoutBaremetal = 16*time.Minute, 46*time.Minute, 121*time.Minute
	cfg.OperationTimeoutKubevirt, cfg.OperationTimeoutBaremetal, cfg.UpdatingStatus = 91*time.Minute, 181*time.Minute, "PROGRESSING"
	// The per-platform keys' entries for the test-only platform (the older keys set the others'; one platform takes
	// one of the two).
	cfg.ProvisioningTimeoutPerPlatform = config.Durations{string(examplePlatform): 47 * time.Minute}
	cfg.OperationTimeoutPerPlatform = config.Durations{string(examplePlatform): 92 * time.Minute}
	cfg.StatusVocabulary, cfg.ActiveStatus, cfg.ProblemTypes, cfg.DeleteKeyRetention = "dcm-2026", "RUNNING", "uris", 3*time.Hour
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := New(&cfg, Options{}) // RestConfig from hubKubeconfig
	if err != nil {
		t.Fatal(err)
	}
	svc, pub, reg, guard, opts := a.Service.Settings(), a.Publisher.Options(), a.Registrar.Options(), a.Guard.Options(), a.Hub.Options()
	lease, leaseDuration := a.leader.Lease()
	eq := func(key string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s: the consumer has %v, want %v", key, got, want)
		}
	}
	checks := map[string]func(){
		"hubKubeconfig": func() { eq("hubKubeconfig", a.Hub.Config().Host, testHub.Config.Host) },
		"hubQPS":        func() { eq("hubQPS", a.Hub.Config().QPS, float32(123)) },
		"hubBurst":      func() { eq("hubBurst", a.Hub.Config().Burst, 456) },
		"namespace": func() {
			eq("namespace", a.Hub.Namespace()+"|"+svc.Spec.Namespace+"|"+guard.Namespace, "keys-ns|keys-ns|keys-ns")
		},
		"defaultPlatform": func() { eq("defaultPlatform", svc.Spec.DefaultPlatform, "baremetal") },
		"enabledPlatforms": func() {
			_, _, msg := a.Platforms.State(context.Background(), clusters.KubeVirt)
			eq("enabledPlatforms", msg, "not in enabledPlatforms")
		},
		"kubevirtInfraCluster":   func() { eq("kubevirtInfraCluster", string(svc.InfraKubeconfig), string(mustRead(t, infra))) },
		"kubevirtInfraNamespace": func() { eq("kubevirtInfraNamespace", svc.InfraNamespace, "vms") },
		"defaultInfraEnvName":    func() { eq("defaultInfraEnvName", svc.Spec.DefaultInfraEnv, "keys-infraenv") },
		"agentNamespace": func() {
			eq("agentNamespace", a.Hub.AgentNamespace()+"|"+svc.Spec.AgentNamespace, "keys-agents|keys-agents")
		},
		"listenAddress": func() {
			if err := a.Listen(); err != nil || !strings.HasPrefix(a.Addr(), "127.0.0.1:") {
				t.Errorf("listenAddress: %v %s", err, a.Addr())
			}
		},
		"logLevel":  func() { checkLogger(t, cfg.LogLevel, cfg.LogFormat) },
		"logFormat": func() { checkLogger(t, cfg.LogLevel, cfg.LogFormat) },
		"requestTimeout": func() {
			eq("requestTimeout", a.server.RequestTimeout(), 7*time.Second)
			eq("requestTimeout (hub client)", opts.RequestTimeout, 7*time.Second)
		},
		// Its effect: TestShutdownWithinBudget.
		"shutdownTimeout":      func() { eq("shutdownTimeout", a.Config.ShutdownTimeout, 9*time.Second) },
		"auth":                 func() { eq("auth", a.Guard.Mode(), "kubernetes") },
		"allowUnauthenticated": func() { checkUnauthenticatedWarning(t) },
		"authAnonymous":        func() { eq("authAnonymous", guard.Anonymous, true) },
		"authAPIGroup":         func() { eq("authAPIGroup", guard.APIGroup, "keys.example.com") },
		"clientCAFile":         func() { eq("clientCAFile", a.Guard.ClientCA() != nil, true) },
		"tlsCertFile":          func() { eq("tlsCertFile", a.Config.TLS(), true) }, // served: TestServingCertificateReload
		"tlsKeyFile":           func() { eq("tlsKeyFile", a.Config.TLSKeyFile, cfg.TLSKeyFile) },
		"providerName": func() {
			eq("providerName", opts.Provider+"|"+svc.Provider+"|"+pub.ProviderName+"|"+reg.Name+"|"+lease, "keys-sp|keys-sp|keys-sp|keys-sp|keys-leases/keys-sp-leader")
		},
		"displayName":     func() { eq("displayName", reg.DisplayName, "Keys SP") },
		"apiHost":         func() { eq("apiHost", reg.Endpoint, "https://keys.example.com:8443/api/v1alpha1/clusters") },
		"registrationURL": func() { eq("registrationURL", reg.RegistryURL, cfg.RegistrationURL) },
		"providerID":      func() { eq("providerID", reg.ProviderID, "keys-id") },
		// Sent as the bearer token, verified with the CA, never forwarded elsewhere: registration.TestClientCredentials.
		"registrationTokenFile": func() { eq("registrationTokenFile", reg.HTTPClient.Transport != http.DefaultTransport, true) },
		"registrationCAFile":    func() { eq("registrationCAFile", reg.HTTPClient.CheckRedirect != nil, true) },
		"natsURL":               func() { eq("natsURL", pub.URL, cfg.NATSURL) },
		"natsCredsFile":         func() { eq("natsCredsFile", pub.Credentials.CredsFile, cfg.NATSCredsFile) },
		"natsNkeySeedFile":      func() { checkNkeyReaches(t) },
		"natsUser":              func() { eq("natsUser", pub.Credentials.User, "keys-user") },
		"natsPasswordFile":      func() { eq("natsPasswordFile", pub.Credentials.PasswordFile, cfg.NATSPasswordFile) },
		"natsCAFile":            func() { eq("natsCAFile", pub.Credentials.CAFile, cfg.NATSCAFile) },
		"natsCertFile":          func() { eq("natsCertFile", pub.Credentials.CertFile, cfg.NATSCertFile) },
		"natsKeyFile":           func() { eq("natsKeyFile", pub.Credentials.KeyFile, cfg.NATSKeyFile) },
		"statusPreset":          func() { checkStatusPreset(t) },
		"statusSubject":         func() { eq("statusSubject", pub.Naming.SubjectFor("keys-sp", "i"), "keys.i") },
		"statusType":            func() { eq("statusType", pub.Naming.Type, "keys.type") },
		"statusSource":          func() { eq("statusSource", pub.Naming.Source, "keys/{providerName}") },
		"statusDebounce":        func() { eq("statusDebounce", pub.Debounce, 3*time.Second) },
		// Its effect: events.TestSettleCoalescesABurst.
		"statusSettle": func() { eq("statusSettle", pub.Settle, 333*time.Millisecond) },
		// The stream it creates: events.TestCreateStream.
		"statusCreateStream": func() { eq("statusCreateStream", pub.CreateStream, true) },
		"statusStreamMaxAge": func() { eq("statusStreamMaxAge", pub.StreamMaxAge, 5*time.Hour) },
		"resyncPeriod":       func() { eq("resyncPeriod", a.Reconciler.ResyncPeriod(), 7*time.Minute) },
		"leaderElection":     func() { eq("leaderElection", lease != "", true) },
		"leaderElectionNamespace": func() {
			eq("leaderElectionNamespace", strings.HasPrefix(lease, "keys-leases/"), true)
		},
		"leaseDuration": func() { eq("leaseDuration", leaseDuration, 21*time.Second) },
		"versionMatrixFile": func() {
			k, ok := svc.Matrix.KubernetesFor(versions.Minor{Major: 4, Minor: 22})
			eq("versionMatrixFile", k.String()+"|"+map[bool]string{true: "ok"}[ok], "1.35|ok")
		},
		"pullSecretFile": func() {
			data, err := svc.PullSecret(context.Background())
			eq("pullSecretFile", string(data)+errString(err), `{"auths":{"keys.example.com":{"auth":"eDp5"}}}`)
		},
		"pullSecretName":   func() { checkPullSecretName(t) },
		"sshPublicKeyFile": func() { eq("sshPublicKeyFile", svc.SSHPublicKey, "ssh-ed25519 AAAAkeys keys@example.com") },
		"baseDomain":       func() { eq("baseDomain", svc.Spec.BaseDomain, "keys.example.com") },
		"manageACMObjects": func() { eq("manageACMObjects", svc.ManageACMObjects, false) },
		"controlPlaneAvailabilityPolicy": func() {
			eq("controlPlaneAvailabilityPolicy", string(svc.ControlPlaneAvailabilityPolicy), "SingleReplica")
		},
		"defaultWorkerCount":  func() { eq("defaultWorkerCount", svc.DefaultWorkerCount, int32(5)) },
		"hypershiftNamespace": func() { eq("hypershiftNamespace", opts.HypershiftNamespace, "keys-hypershift") },
		"degradedGracePeriod": func() { eq("degradedGracePeriod", svc.Status.DegradedGracePeriod, 16*time.Minute) },
		"provisioningTimeoutKubevirt": func() {
			eq("provisioningTimeoutKubevirt", svc.Status.ProvisioningTimeouts[clusters.KubeVirt], 46*time.Minute)
		},
		"provisioningTimeoutBaremetal": func() {
			eq("provisioningTimeoutBaremetal", svc.Status.ProvisioningTimeouts[clusters.BareMetal], 121*time.Minute)
		},
		"provisioningTimeouts": func() {
			eq("provisioningTimeouts", svc.Status.ProvisioningTimeouts[examplePlatform], 47*time.Minute)
		},
		"operationTimeouts":         func() { eq("operationTimeouts", svc.OperationTimeouts[examplePlatform], 92*time.Minute) },
		"operationTimeoutKubevirt":  func() { eq("operationTimeoutKubevirt", svc.OperationTimeouts[clusters.KubeVirt], 91*time.Minute) },
		"operationTimeoutBaremetal": func() { eq("operationTimeoutBaremetal", svc.OperationTimeouts[clusters.BareMetal], 181*time.Minute) },
		// The seed's word for UPDATING in its events (dcm-2026 never reports UPDATING): TestUpdatingStatusOnTheWire.
		"updatingStatus": func() {
			seed := cfg
			seed.StatusVocabulary = status.VocabularySeed
			b, err := New(&seed, Options{})
			if err != nil {
				t.Fatal(err)
			}
			eq("updatingStatus", b.Publisher.Options().Vocabulary, status.Vocabulary(status.Seed{UpdatingInEvents: status.Progressing}))
			eq("updatingStatus", pub.Vocabulary, svc.Vocabulary)
		},
		// Their effect end to end: TestDCM2026Vocabulary, TestAgentCreateReplayDelete.
		"statusVocabulary":   func() { eq("statusVocabulary", svc.Vocabulary.Name(), "dcm-2026") },
		"activeStatus":       func() { eq("activeStatus", svc.Vocabulary, status.Vocabulary(status.DCM2026{Active: status.Running})) },
		"problemTypes":       func() { eq("problemTypes", a.server.ProblemTypeURIs(), true) },
		"deleteKeyRetention": func() { eq("deleteKeyRetention", svc.DeleteKeyRetention, 3*time.Hour) },

		// Tokens of that audience accepted: TestAuthAudiences.
		"apiAudiences": func() { eq("apiAudiences", strings.Join(guard.APIAudiences, ","), "keys-audience") },
		// Tokens for the hub accepted beside them: TestAuthAudiences.
		"acceptHubTokens": func() { eq("acceptHubTokens", guard.AcceptHubTokens, true) },
		// What it permits: config.TestPlainHTTPRule.
		"allowPlainHTTP": func() {
			plain := cfg
			plain.ListenAddress, plain.TLSCertFile, plain.TLSKeyFile = ":8080", "", ""
			allowed := plain.Validate() == nil
			plain.AllowPlainHTTP = false
			eq("allowPlainHTTP", allowed && plain.Validate() != nil, true)
		},
		// What it permits: config.TestCredentialsNeedTLS.
		"allowPlaintextCredentials": func() {
			plain := cfg
			plain.NATSURL, plain.NATSCAFile, plain.NATSCertFile, plain.NATSKeyFile = "nats://nats.keys.example.com:4222", "", "", ""
			allowed := plain.Validate() == nil
			plain.AllowPlaintextCredentials = false
			eq("allowPlaintextCredentials", allowed && plain.Validate() != nil, true)
		},
	}
	for _, k := range config.Keys() {
		check, ok := checks[k[0]]
		if !ok {
			t.Errorf("configuration key %s has no check that it reaches its consumer", k[0])
			continue
		}
		check()
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return " error: " + err.Error()
}

// checkLogger: logLevel and logFormat are consumed by the commands' NewLogger.
func checkLogger(t *testing.T, level, format string) {
	t.Helper()
	var buf bytes.Buffer
	log := NewLogger(level, format, &buf)
	log.Info("dropped")
	log.Warn("kept")
	out := buf.String()
	if strings.Contains(out, "dropped") || !strings.HasPrefix(out, `{"time"`) || !strings.Contains(out, `"msg":"kept"`) {
		t.Errorf("logLevel %s / logFormat %s not applied: %s", level, format, out)
	}
}

// checkUnauthenticatedWarning: allowUnauthenticated lets auth none serve on every interface, loudly.
func checkUnauthenticatedWarning(t *testing.T) {
	t.Helper()
	cfg := config.Defaults()
	cfg.Auth, cfg.ListenAddress, cfg.AllowPlainHTTP = config.AuthNone, ":0", true
	if err := cfg.Validate(); err == nil {
		t.Error("allowUnauthenticated: auth none on every interface accepted without it")
	}
	cfg.AllowUnauthenticated = true
	if err := cfg.Validate(); err != nil {
		t.Errorf("allowUnauthenticated: %v", err)
	}
	var buf testlog.Buffer
	a := &App{Config: &cfg, log: slog.New(slog.NewTextHandler(&buf, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.warnIfUnauthenticated(ctx)
	if !strings.Contains(buf.String(), "UNAUTHENTICATED") {
		t.Errorf("allowUnauthenticated: no warning: %q", buf.String())
	}
}

// checkNkeyReaches: natsNkeySeedFile (exclusive with natsCredsFile) reaches the publisher.
func checkNkeyReaches(t *testing.T) {
	t.Helper()
	cfg := testConfig("restricted")
	cfg.NATSURL, cfg.NATSNkeySeedFile = "nats://127.0.0.1:1", testpki.WriteFile(t, t.TempDir(), "seed.nk", []byte("SUAxx"))
	a, err := New(&cfg, Options{RestConfig: testHub.Config})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Publisher.Options().Credentials.NkeySeedFile; got != cfg.NATSNkeySeedFile {
		t.Errorf("natsNkeySeedFile: %q", got)
	}
	var _ events.Credentials = a.Publisher.Options().Credentials
}

// checkPullSecretName: pullSecretName (exclusive with pullSecretFile) is read from the namespace at each create.
func checkPullSecretName(t *testing.T) {
	t.Helper()
	cfg := testConfig("restricted")
	cfg.PullSecretFile, cfg.PullSecretName = "", "no-such-pull-secret"
	a, err := New(&cfg, Options{RestConfig: testHub.Config})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Service.Settings().PullSecret(context.Background()); err == nil || !strings.Contains(err.Error(), "restricted/no-such-pull-secret") {
		t.Errorf("pullSecretName: %v", err)
	}
}

// checkStatusPreset: statusPreset alone (no per-field override) picks the naming.
func checkStatusPreset(t *testing.T) {
	t.Helper()
	cfg := testConfig("restricted")
	cfg.NATSURL, cfg.StatusPreset = "nats://127.0.0.1:1", "spm"
	a, err := New(&cfg, Options{RestConfig: testHub.Config})
	if err != nil {
		t.Fatal(err)
	}
	if n := a.Publisher.Options().Naming; n != events.Presets["spm"] {
		t.Errorf("statusPreset spm: %+v", n)
	}
}
