// Package sphub runs a real local hub for tests and for `acm-cluster-sp dev`: etcd and kube-apiserver (built from
// the Go module proxy by hack/tools.sh, started through controller-runtime's envtest) on loopback,
// kube-controller-manager's garbage collector and namespace controller, the real
// HyperShift/Hive/ACM/Agent/KubeVirt CRDs and those of what deploy/ ships (PrometheusRule, ServiceMonitor,
// PodMonitor, cert-manager Certificate and Issuer) (embedded from crds/, installed by server-side apply), realistic seed
// content (ClusterImageSets, the HyperShift operator's ConfigMap and Deployment, an InfraEnv and Agents), and an
// embedded NATS server with JetStream.
//
// Nothing here is a fake: every object goes through the API server's schema and CEL validation. Everything listens
// on 127.0.0.1 only, on free ports.
package sphub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/devtest/localhub"
)

// Pinned versions of the hub binaries; hack/tools.sh builds exactly these into BinDir.
const (
	KubernetesVersion = localhub.KubernetesVersion
	EtcdVersion       = localhub.EtcdVersion
)

// Options configure a hub.
type Options struct {
	// BinDir holds kube-apiserver, etcd and kubectl. Default: $KUBEBUILDER_ASSETS, else the tools cache.
	BinDir string
	// StateDir receives the kubeconfig and the NATS store. Default: a new temporary directory, removed on Stop.
	StateDir string
	// Seed installs the demo content of Seed (ClusterImageSets, operator, InfraEnv, Agents).
	Seed SeedOptions
	// NoSeed skips all seed content except the CRDs (tests that want an empty hub).
	NoSeed bool
	// NoNATS skips the embedded NATS server.
	NoNATS bool
	// Log receives progress lines; nil discards.
	Log *slog.Logger
}

// Hub is a running local hub.
type Hub struct {
	// Config is an admin rest.Config for the API server.
	Config *rest.Config
	// Client is an admin client with the product's scheme.
	Client client.Client
	// KubeconfigPath is a kubeconfig file for the admin user (usable with kubectl).
	KubeconfigPath string
	// NATS is the embedded NATS server (nil with NoNATS); NATSURL its client URL.
	NATS    *natsserver.Server
	NATSURL string
	// StateDir is where the kubeconfig and NATS data live.
	StateDir string

	local       *localhub.Hub
	kcm         *localhub.ControllerManager
	acm         *acmWebhook
	removeState bool
	log         *slog.Logger
}

// DefaultBinDir is where hack/tools.sh puts the binaries unless KUBEBUILDER_ASSETS says otherwise.
func DefaultBinDir() string { return localhub.DefaultBinDir() }

// Start starts etcd, kube-apiserver and NATS, installs the CRDs and seeds the hub.
func Start(ctx context.Context, opts Options) (_ *Hub, err error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bin := opts.BinDir
	if bin == "" {
		bin = DefaultBinDir()
	}
	if err := localhub.CheckBinaries(bin, "kube-apiserver", "etcd", "kubectl", "kube-controller-manager"); err != nil {
		return nil, err
	}
	h := &Hub{log: log, StateDir: opts.StateDir}
	if h.StateDir == "" {
		if h.StateDir, err = os.MkdirTemp("", "acm-cluster-sp-hub-"); err != nil {
			return nil, err
		}
		h.removeState = true
	} else if err := os.MkdirAll(h.StateDir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = h.Stop()
		}
	}()

	began := time.Now()
	base, err := crdBase()
	if err != nil {
		return nil, err
	}
	if h.local, err = localhub.Start(localhub.Options{BinDir: bin, Base: base}); err != nil {
		return nil, err
	}
	h.Config = h.local.Config
	h.Config.QPS, h.Config.Burst = 500, 1000
	log.Info("local hub: kube-apiserver up", "url", h.Config.Host, "took", time.Since(began).Round(time.Millisecond))

	if h.Client, err = client.New(h.Config, client.Options{Scheme: Scheme()}); err != nil {
		return nil, err
	}
	if err = h.writeKubeconfig(); err != nil {
		return nil, err
	}
	log.Info("local hub: CRDs established (the hub's base)", "count", len(crdFiles()))
	// The real garbage collector (ownerReferences) and namespace controller, as every hub runs them; started after
	// the CRDs so its first discovery sees them.
	kc, err := os.ReadFile(h.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	if h.kcm, err = localhub.StartControllerManager(localhub.ControllerManagerOptions{
		BinDir: bin, Kubeconfig: kc, Controllers: []string{"garbage-collector-controller", "namespace-controller"},
		// kube-controller-manager's default 20 calls/s let the garbage collector fall minutes behind a churn of
		// thousands of clusters (each owns Secrets and a NodePool); a hub's is tuned up too.
		Flags: map[string][]string{"kube-api-qps": {"500"}, "kube-api-burst": {"1000"}},
	}); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	if !opts.NoSeed {
		if err = Seed(ctx, h.Client, opts.Seed); err != nil {
			return nil, fmt.Errorf("seeding the hub: %w", err)
		}
		log.Info("local hub: seeded", "namespace", opts.Seed.withDefaults().Namespace, "agentNamespace", opts.Seed.withDefaults().AgentNamespace)
	}
	if !opts.NoSeed {
		if h.acm, err = startACMWebhook(ctx, h.Config, h.StateDir); err != nil {
			return nil, err
		}
	}
	if !opts.NoNATS {
		if h.NATS, err = StartNATS(ctx, filepath.Join(h.StateDir, "nats")); err != nil {
			return nil, err
		}
		h.NATSURL = h.NATS.ClientURL()
		log.Info("local hub: NATS JetStream up", "url", h.NATSURL, "stream", StatusStream)
	}
	return h, nil
}

// StopAPIServer stops kube-apiserver (etcd, NATS and the controller manager keep running).
func (h *Hub) StopAPIServer() error { return h.local.StopAPIServer() }

// StartAPIServer starts kube-apiserver again on the same address, certificates and etcd.
func (h *Hub) StartAPIServer() error { return h.local.StartAPIServer() }

// CPUTime is the CPU time kube-apiserver and etcd have used since they started (localhub.Hub.CPUTime).
func (h *Hub) CPUTime() (apiserver, etcd time.Duration, err error) { return h.local.CPUTime() }

func (h *Hub) writeKubeconfig() error {
	kc, _, err := h.local.AddUser("admin", "system:masters")
	if err != nil {
		return err
	}
	h.KubeconfigPath = filepath.Join(h.StateDir, "kubeconfig")
	return os.WriteFile(h.KubeconfigPath, kc, 0o600)
}

// Stop stops NATS, kube-apiserver and etcd and removes a temporary state directory.
func (h *Hub) Stop() error {
	var errs []error
	if h.NATS != nil {
		h.NATS.Shutdown()
		h.NATS.WaitForShutdown()
	}
	h.acm.close()
	if h.kcm != nil {
		if err := h.kcm.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := h.local.Stop(); err != nil {
		errs = append(errs, err)
	}
	if h.removeState && h.StateDir != "" {
		errs = append(errs, os.RemoveAll(h.StateDir))
	}
	return errors.Join(errs...)
}
