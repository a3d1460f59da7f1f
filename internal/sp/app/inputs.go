package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dcm-sp/acm-cluster-sp/internal/sp/clusters"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/config"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/hub"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/status"
	"github.com/dcm-sp/acm-cluster-sp/internal/sp/versions"
)

// inputs are what New reads before it builds anything: the hub's client configuration and the files the
// configuration names (each checked now, so a mistake stops the start with the key that is wrong).
type inputs struct {
	restCfg    *rest.Config
	hubMetrics *hub.Metrics // instruments restCfg's transport
	// infraCfg and infraKubeconfig are the KubeVirt infrastructure cluster's (kubevirtInfraCluster; nil: none).
	infraCfg        *rest.Config
	infraKubeconfig []byte
	matrix          versions.Matrix
	sshKey          string
	// interval is the health refresh and hub discovery period; hubStaleAfter the hub health check's threshold.
	interval, hubStaleAfter time.Duration
	vocabulary              status.Vocabulary // statusVocabulary with its words
}

// readInputs reads the hub's client configuration (restCfg, or cfg.HubKubeconfig, or the in-cluster service
// account) with its rate limits and metrics, and the files the configuration names.
func readInputs(cfg *config.Config, o Options) (*inputs, error) {
	in := &inputs{restCfg: o.RestConfig, interval: o.HealthInterval}
	var err error
	if in.vocabulary, err = cfg.Vocabulary(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if in.restCfg == nil {
		if in.restCfg, err = loadRestConfig(cfg.HubKubeconfig); err != nil {
			return nil, err
		}
	}
	in.restCfg = rest.CopyConfig(in.restCfg)
	if in.restCfg.QPS == 0 {
		in.restCfg.QPS, in.restCfg.Burst = float32(cfg.HubQPS), cfg.HubBurst
		if cfg.HubQPS == 0 {
			in.restCfg.QPS = -1 // client-go: no rate limiter
		}
	}
	in.hubMetrics = hub.NewMetrics()
	in.hubMetrics.Instrument(in.restCfg)
	if cfg.KubevirtInfraCluster != "" {
		if in.infraKubeconfig, err = os.ReadFile(cfg.KubevirtInfraCluster); err != nil {
			return nil, kubeconfigError("kubevirtInfraCluster", cfg.KubevirtInfraCluster, err)
		}
		if in.infraCfg, err = clientcmd.RESTConfigFromKubeConfig(in.infraKubeconfig); err != nil {
			return nil, kubeconfigError("kubevirtInfraCluster", cfg.KubevirtInfraCluster, err)
		}
	}
	if in.matrix, err = loadMatrix(cfg.VersionMatrixFile); err != nil {
		return nil, err
	}
	if cfg.SSHPublicKeyFile != "" {
		data, err := os.ReadFile(cfg.SSHPublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("config: sshPublicKeyFile: %w", err)
		}
		in.sshKey = strings.TrimSpace(string(data))
	}
	if in.interval == 0 {
		in.interval = 10 * time.Second
	}
	// The hub health check's threshold: without an answer from the hub's API server for longer, the SP's view of
	// the clusters is not current (health says so, and the dcm-2026 vocabulary reports them UNAVAILABLE).
	in.hubStaleAfter = o.HubStaleAfter
	if in.hubStaleAfter == 0 {
		in.hubStaleAfter = 3*in.interval + 5*time.Second
	}
	return in, nil
}

func loadRestConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("config: hubKubeconfig is empty and no in-cluster service account is available: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, kubeconfigError("hubKubeconfig", kubeconfig, err)
	}
	return cfg, nil
}

// kubeconfigError reports an unusable kubeconfig file without the parser's text, which can quote the file's
// content (credentials must never reach an error message or a log line).
func kubeconfigError(key, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("config: %s: cannot read %s: %v", key, path, errors.Unwrap(err))
	}
	return fmt.Errorf("config: %s: %s is not a valid kubeconfig", key, path)
}

func loadMatrix(file string) (versions.Matrix, error) {
	if file == "" {
		return versions.DefaultMatrix(), nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return versions.Matrix{}, fmt.Errorf("config: versionMatrixFile: %w", err)
	}
	overrides, err := versions.ParseMatrixFile(data)
	if err != nil {
		return versions.Matrix{}, fmt.Errorf("config: versionMatrixFile %s: %w", file, err)
	}
	m, err := versions.NewMatrix(overrides)
	if err != nil {
		return versions.Matrix{}, fmt.Errorf("config: versionMatrixFile %s: %w", file, err)
	}
	return m, nil
}

// pullSecretSource returns where each cluster's pull secret comes from: the configured file (checked now, re-read at
// each create so a rotated file is picked up) or the named Secret in the namespace (read at each create). There is
// deliberately no inline value: it would sit in the process's command line, environment and pod spec.
func pullSecretSource(cfg *config.Config, h *hub.Hub) (func(context.Context) ([]byte, error), error) {
	switch {
	case cfg.PullSecretFile != "":
		read := func() ([]byte, error) {
			data, err := os.ReadFile(cfg.PullSecretFile)
			if err != nil {
				return nil, fmt.Errorf("pullSecretFile: %w", err)
			}
			if err := clusters.CheckPullSecret(data); err != nil {
				return nil, fmt.Errorf("pullSecretFile %s: %w", cfg.PullSecretFile, err)
			}
			return data, nil
		}
		if _, err := read(); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		return func(context.Context) ([]byte, error) { return read() }, nil
	case cfg.PullSecretName != "":
		return func(ctx context.Context) ([]byte, error) {
			var s corev1.Secret
			if err := h.Client.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.PullSecretName}, &s); err != nil {
				return nil, fmt.Errorf("pull secret %s/%s: %w", cfg.Namespace, cfg.PullSecretName, err)
			}
			data := s.Data[corev1.DockerConfigJsonKey]
			if err := clusters.CheckPullSecret(data); err != nil {
				return nil, fmt.Errorf("pull secret %s/%s: %w", cfg.Namespace, cfg.PullSecretName, err)
			}
			return data, nil
		}, nil
	}
	return func(context.Context) ([]byte, error) {
		return nil, errors.New("no pull secret configured (pullSecretFile or pullSecretName)")
	}, nil
}
