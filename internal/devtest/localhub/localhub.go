// Package localhub starts a real kube-apiserver and etcd on loopback — the binaries hack/tools.sh builds from the
// Go module proxy — through controller-runtime's envtest. It is the one piece of test and dev machinery both
// products share: acm-cluster-sp's sphub and capi-private's test environment each build their hub on it.
//
// It knows nothing about either product: no CRDs, no seed content, no scheme beyond client-go's.
package localhub

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Pinned versions of the hub binaries; hack/tools.sh builds exactly these into DefaultBinDir.
const (
	KubernetesVersion = "v1.34.10"
	EtcdVersion       = "v3.6.16"
)

// DefaultBinDir is where hack/tools.sh puts the binaries unless KUBEBUILDER_ASSETS says otherwise.
func DefaultBinDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "acm-cluster-sp", "bin",
		fmt.Sprintf("k8s-%s-etcd-%s", strings.TrimPrefix(KubernetesVersion, "v"), strings.TrimPrefix(EtcdVersion, "v")))
}

// CheckBinaries reports the first of names missing from dir, with the command that builds it.
func CheckBinaries(dir string, names ...string) error {
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("local hub binary %s missing in %s: run `make tools` (builds kube-apiserver %s, kube-controller-manager, kubectl and etcd %s once, ~10 minutes)",
				b, dir, KubernetesVersion, EtcdVersion)
		}
	}
	return nil
}

// Options configure a local hub.
type Options struct {
	// BinDir holds kube-apiserver, etcd and kubectl. Default: DefaultBinDir.
	BinDir string
	// APIServerFlags are set on kube-apiserver in addition to envtest's defaults (a key replaces a default):
	// e.g. "token-auth-file", "audit-log-path", "enable-admission-plugins".
	APIServerFlags map[string][]string
	// StartTimeout bounds the start of etcd and kube-apiserver (default 90s: loaded 2-core machines are slow).
	StartTimeout time.Duration
	// Base, when set, is what etcd holds at the start (built once and cached; see Base). Default: an empty hub.
	Base *Base
}

// Hub is a running kube-apiserver + etcd.
type Hub struct {
	// Config is an admin (system:masters) rest.Config.
	Config *rest.Config
	// Env is the envtest environment (its ControlPlane gives the API server's URL, secure serving and users).
	Env *envtest.Environment

	certDir  string // kube-apiserver's certificates, kept across a restart
	etcdData string // etcd's data when it was copied from a Base (envtest removes only a directory it made)
}

// Start starts etcd and kube-apiserver on 127.0.0.1 with free ports.
func Start(opts Options) (*Hub, error) {
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	if err := CheckBinaries(opts.BinDir, "kube-apiserver", "etcd", "kubectl"); err != nil {
		return nil, err
	}
	if opts.Base == nil {
		return start(opts, "")
	}
	data, err := baseData(opts.BinDir, opts.Base)
	if err != nil {
		return nil, err
	}
	h, err := start(opts, data)
	if err != nil {
		_ = os.RemoveAll(data)
		return nil, err
	}
	h.etcdData = data
	return h, nil
}

// start starts a hub whose etcd keeps its data in etcdData (the caller removes it), or in a directory envtest makes
// and removes when etcdData is "".
func start(opts Options, etcdData string) (*Hub, error) {
	bin := opts.BinDir
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	ReapOrphans()
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: opts.StartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if etcdData != "" {
		env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdData}
	}
	// A directory of our own (envtest replaces one it made itself on every start): the serving certificate, and
	// so the clients' CA, survive StopAPIServer/StartAPIServer.
	certDir, err := os.MkdirTemp("", apiserverDirPrefix)
	if err != nil {
		return nil, err
	}
	env.ControlPlane.GetAPIServer().CertDir = certDir
	if len(opts.APIServerFlags) > 0 {
		args := env.ControlPlane.GetAPIServer().Configure()
		for k, v := range opts.APIServerFlags {
			args.Set(k, v...)
		}
	}
	var cfg *rest.Config
	err = withHubGC(func() (err error) { cfg, err = env.Start(); return err })
	if err != nil {
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", bin, err)
	}
	return &Hub{Config: cfg, Env: env, certDir: certDir}, nil
}

// hubGOGC is the garbage collector target of the hub's processes (etcd, kube-apiserver, kube-controller-manager):
// a test hub trades memory for CPU. Tests on a 2-core machine are CPU-bound, and at Go's default (100) a test hub's
// kube-apiserver spends a fifth to a quarter of its CPU collecting garbage (profiles of a capihub start: 26 %; under
// the migrate package's load: 18 %); at 400, a tenth (start: 10 %), for a few hundred MB more per hub.
const hubGOGC = "400"

// withHubGC runs start — the start of a hub process, which inherits this process's environment — with
// GOGC=hubGOGC in the environment, and restores the environment after, so that what the tests start later (an SP
// process whose memory a benchmark reports) runs with Go's default. A GOGC the user set is left as it is.
func withHubGC(start func() error) error {
	if _, set := os.LookupEnv("GOGC"); set {
		return start()
	}
	_ = os.Setenv("GOGC", hubGOGC)
	defer func() { _ = os.Unsetenv("GOGC") }()
	return start()
}

// StopAPIServer kills kube-apiserver alone (SIGKILL; etcd keeps running): the hub's API is gone at once, as when
// its process or node dies. (A SIGTERM drains for longer than envtest waits.)
func (h *Hub) StopAPIServer() error {
	pid, err := h.apiServerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
	}
	return h.Env.ControlPlane.APIServer.Stop() // reaps it
}

// apiServerPID finds this hub's kube-apiserver: the process whose arguments name its certificate directory.
func (h *Hub) apiServerPID() (int, error) { return findProcess("kube-apiserver", h.certDir) }

// findProcess finds the process of the binary named base whose arguments contain marker (a directory of this hub).
func findProcess(base, marker string) (int, error) {
	found := 0
	eachProcess(func(pid int, cmdline string) bool {
		if binaryOf(cmdline) == base && strings.Contains(cmdline, marker) {
			found = pid
		}
		return found == 0
	})
	if found == 0 {
		return 0, fmt.Errorf("no %s process with %s in its arguments", base, marker)
	}
	return found, nil
}

// CPUTime is the CPU time (user and system) this hub's kube-apiserver and etcd have used since they started: what
// a benchmark charges to the hub for a step (the difference of two readings).
func (h *Hub) CPUTime() (apiserver, etcd time.Duration, err error) {
	pid, err := h.apiServerPID()
	if err == nil {
		apiserver, err = ProcessCPU(pid)
	}
	if err != nil {
		return 0, 0, err
	}
	if pid, err = findProcess("etcd", h.Env.ControlPlane.Etcd.DataDir); err == nil {
		etcd, err = ProcessCPU(pid)
	}
	return apiserver, etcd, err
}

// clockTicks is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on Linux).
const clockTicks = 100

// ProcessCPU is the CPU time (user and system) process pid has used, from /proc/<pid>/stat.
func ProcessCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// utime and stime are the line's fields 14 and 15.
	f := statFields(string(stat))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// StartAPIServer starts kube-apiserver again on the same port, certificates and etcd.
func (h *Hub) StartAPIServer() error { return withHubGC(h.Env.ControlPlane.APIServer.Start) }

// AddUser adds a user authenticated by a client certificate and returns its kubeconfig file content.
func (h *Hub) AddUser(name string, groups ...string) ([]byte, *rest.Config, error) {
	u, err := h.Env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("creating user %s: %w", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, nil, err
	}
	return kc, u.Config(), nil
}

// Stop stops kube-apiserver and etcd.
func (h *Hub) Stop() error {
	if h == nil || h.Env == nil || h.Env.ControlPlane.APIServer == nil {
		return nil
	}
	err := h.Env.Stop()
	_ = os.RemoveAll(h.certDir)
	if h.etcdData != "" {
		_ = os.RemoveAll(h.etcdData)
	}
	return err
}
