package localhub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ControllerManagerOptions configure a kube-controller-manager.
type ControllerManagerOptions struct {
	// BinDir holds kube-controller-manager. Default: DefaultBinDir.
	BinDir string
	// Kubeconfig is the content of the kubeconfig file it talks to kube-apiserver with.
	Kubeconfig []byte
	// Controllers is the --controllers list, e.g. garbage-collector-controller,namespace-controller.
	Controllers []string
	// Flags are extra flags (name without dashes → values); a key replaces a default.
	Flags map[string][]string
	// Output receives its log (stdout and stderr); nil keeps the last 64 KiB for Stop's error.
	Output io.Writer
}

// ControllerManager is a running kube-controller-manager process.
type ControllerManager struct {
	cmd  *exec.Cmd
	dir  string
	tail *tailBuffer
	done chan struct{}
	err  error // the process's exit, once done is closed
	once sync.Once
}

// StartControllerManager starts kube-controller-manager with the given controllers and kubeconfig, without
// leader election and without serving anything (--secure-port=0), so it opens no listener at all. It returns once
// the process runs; whether its controllers work is for the caller to observe on the API server.
func StartControllerManager(opts ControllerManagerOptions) (*ControllerManager, error) {
	bin := opts.BinDir
	if bin == "" {
		bin = DefaultBinDir()
	}
	if err := CheckBinaries(bin, "kube-controller-manager"); err != nil {
		return nil, err
	}
	if len(opts.Kubeconfig) == 0 || len(opts.Controllers) == 0 {
		return nil, errors.New("kube-controller-manager needs a kubeconfig and controllers")
	}
	dir, err := os.MkdirTemp("", kcmDirPrefix)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, opts.Kubeconfig, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	flags := map[string][]string{
		"kubeconfig":   {kubeconfig},
		"controllers":  {strings.Join(opts.Controllers, ",")},
		"leader-elect": {"false"},
		"secure-port":  {"0"},
	}
	for k, v := range opts.Flags {
		flags[k] = v
	}
	var args []string
	for _, k := range slices.Sorted(maps.Keys(flags)) {
		for _, v := range flags[k] {
			args = append(args, "--"+k+"="+v)
		}
	}
	cm := &ControllerManager{dir: dir, tail: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cm.cmd = exec.Command(filepath.Join(bin, "kube-controller-manager"), args...)
	out := io.Writer(cm.tail)
	if opts.Output != nil {
		out = io.MultiWriter(cm.tail, opts.Output)
	}
	cm.cmd.Stdout, cm.cmd.Stderr = out, out
	if err := withHubGC(cm.cmd.Start); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	go func() {
		cm.err = cm.cmd.Wait()
		close(cm.done)
	}()
	return cm, nil
}

// PID is the process id.
func (cm *ControllerManager) PID() int { return cm.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (cm *ControllerManager) Exited() <-chan struct{} { return cm.done }

// Log returns the last 64 KiB of its output.
func (cm *ControllerManager) Log() string { return cm.tail.String() }

// Stop terminates the process (SIGTERM, then SIGKILL after 10s), waits for it and removes its files. It returns
// an error only if the process had exited by itself before Stop.
func (cm *ControllerManager) Stop() error {
	if cm == nil {
		return nil
	}
	var err error
	cm.once.Do(func() {
		select {
		case <-cm.done:
			err = fmt.Errorf("kube-controller-manager exited early: %v\n%s", cm.err, cm.tail.String())
		default:
			_ = cm.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-cm.done:
			case <-time.After(10 * time.Second):
				_ = cm.cmd.Process.Kill()
				<-cm.done
			}
		}
		_ = os.RemoveAll(cm.dir)
	})
	return err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if extra := t.buf.Len() - t.max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
