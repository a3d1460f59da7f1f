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
	var killed []int
	eachProcess(func(pid int, cmdline string) bool {
		if orphanedHubProcess(pid, cmdline) && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
		return true
	})
	return killed
}

// eachProcess calls f with the PID and the command line (arguments separated by NUL) of every process /proc lists,
// until f returns false.
func eachProcess(f func(pid int, cmdline string) bool) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		if !f(pid, string(cmdline)) {
			return
		}
	}
}

// binaryOf is the base name of a command line's program.
func binaryOf(cmdline string) string {
	prog, _, _ := strings.Cut(cmdline, "\x00")
	return filepath.Base(prog)
}

// orphanedHubProcess reports whether pid, running cmdline, is a hub binary started with a local hub's directories
// whose parent is init.
func orphanedHubProcess(pid int, cmdline string) bool {
	if !isHubBinary(binaryOf(cmdline)) || !mentionsHubDir(cmdline) {
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
	fields := statFields(stat)
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// statFields are the fields of a /proc/<pid>/stat line after the command name, which is in parentheses and may hold
// spaces: the first is the state (the line's third field). nil when the line has no command name.
func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}
