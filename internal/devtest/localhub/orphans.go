package localhub

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// hubBinaries are the processes a local hub runs.
var hubBinaries = []string{"kube-apiserver", "etcd", "kube-controller-manager"}

// The prefixes of the temporary directories this package makes for a hub's processes.
const (
	apiserverDirPrefix = "localhub-apiserver-" // kube-apiserver's certificates
	kcmDirPrefix       = "localhub-kcm-"       // kube-controller-manager's
	etcdDirPrefix      = "localhub-etcd-"      // etcd's data, copied from a prepared base
)

// hubDirs are the temporary directories only local hubs pass their processes: this package's and envtest's data
// directories.
var hubDirs = []string{apiserverDirPrefix, kcmDirPrefix, etcdDirPrefix, "k8s_test_framework_"}

// ReapOrphans kills the hub processes a dead test binary or dev command left behind: a kube-apiserver, etcd or
// kube-controller-manager started with a local hub's directories whose parent is gone (it was reparented to
// init). A test binary ended by go test's -timeout exits without running its deferred stops, and its hub would
// keep both cores busy for the rest of the run, slowing every package after it. Start calls it; it returns the
// PIDs it killed.
func ReapOrphans() []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var killed []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if orphanedHubProcess(pid) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// orphanedHubProcess reports whether pid is a hub binary started with a local hub's directories whose parent is
// init.
func orphanedHubProcess(pid int) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	if !isHubBinary(filepath.Base(args[0])) || !mentionsHubDir(string(cmdline)) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	return parentPID(string(stat)) == 1
}

func isHubBinary(name string) bool { return slices.Contains(hubBinaries, name) }

func mentionsHubDir(cmdline string) bool {
	return slices.ContainsFunc(hubDirs, func(d string) bool { return strings.Contains(cmdline, string(filepath.Separator)+d) })
}

// parentPID reads the parent's PID from /proc/<pid>/stat: "pid (comm) state ppid …", where comm may hold spaces
// and parentheses (so the fields are counted after the last ')').
func parentPID(stat string) int {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}
