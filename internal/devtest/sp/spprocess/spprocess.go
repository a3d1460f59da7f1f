// Package spprocess runs acm-cluster-sp as a child process for the benchmarks and the chaos suite: it copies the
// process's log to a writer and learns the address it serves on from its "serving" log line. Test-only.
package spprocess

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// Process is a running SP.
type Process struct {
	Cmd  *exec.Cmd
	URL  string        // http://<address it serves on>
	Done chan struct{} // closed once the process has exited and its log is copied
}

// Start runs `bin serve` with env, copies each log line to logw, and returns once the process logs that it serves
// (its address), exits, or within passes (then it is killed).
func Start(bin string, env []string, logw io.Writer, within time.Duration) (*Process, error) {
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, Done: make(chan struct{})}
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logw.Write(append(line, '\n'))
			var l struct{ Msg, Address string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "serving" && l.Address != "" {
				select {
				case addr <- l.Address:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { _ = cmd.Wait(); _ = pw.Close(); <-copied; close(p.Done) }()
	select {
	case a := <-addr:
		p.URL = "http://" + a
		return p, nil
	case <-p.Done:
		return nil, fmt.Errorf("%s exited at start", bin)
	case <-time.After(within):
		_ = cmd.Process.Kill()
		<-p.Done
		return nil, fmt.Errorf("%s did not serve within %v", bin, within)
	}
}
